// Small pieces shared by the real-data trainers (ViT, video): wall-clock
// seconds and the mean of a training metric over the last n steps.
#pragma once
#include <algorithm>
#include <chrono>
#include <deque>

namespace tmem::models {

/// Seconds on the steady clock since t0.
inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// The mean of the last `window` values added (of all of them while there
/// are fewer); window 0 counts as 1.
class RecentMean {
 public:
  explicit RecentMean(size_t window) : window_(std::max<size_t>(window, 1)) {}
  /// Adds v and returns the mean of the last `window` values.
  double add(double v) {
    values_.push_back(v);
    sum_ += v;
    if (values_.size() > window_) {
      sum_ -= values_.front();
      values_.pop_front();
    }
    return mean();
  }
  /// The mean of the last `window` values (0 before the first).
  double mean() const { return values_.empty() ? 0.0 : sum_ / static_cast<double>(values_.size()); }

 private:
  size_t window_;
  std::deque<double> values_;
  double sum_ = 0;
};

}  // namespace tmem::models
