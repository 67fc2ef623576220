// Wall-clock seconds for the trainers' evaluation progress.
#pragma once
#include <chrono>

namespace tmem::models {

/// Seconds on the steady clock since t0.
inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace tmem::models
