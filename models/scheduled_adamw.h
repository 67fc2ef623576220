// The optimisation step of every trainer (train_loop): AdamW with weight
// decay on matrices only, linear warmup + cosine decay (constant when
// min_lr == lr and warmup 0), gradient clipping, and skipping of steps with
// a non-finite gradient.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "tmem/nn/optim.h"

namespace tmem::models {

struct ScheduleConfig {
  int64_t steps = 1;                 // optimizer steps of the whole run
  double lr = 1e-3, min_lr = 1e-4;   // peak and final learning rate
  int64_t warmup = 100;              // linear warmup steps (capped at steps - 1)
  double weight_decay = 0.1, clip = 1.0;
  double beta2 = 0.95;               // AdamW's second-moment decay
  bool skip_nonfinite = true;        // false: a non-finite gradient norm throws (clip_grad_norm_'s ValueError)
};

/// AdamW (betas 0.9 and cfg.beta2, eps 1e-8) over `params` with weight decay on the
/// parameters of rank >= 2 (matrices, embeddings, positions) only, not on
/// biases, LayerNorm gains or memory gates (nn::weight_decay_groups); the learning rate of
/// nn::warmup_cosine_lr; nn::clip_grad_norm_ before each update.
class ScheduledAdamW {
 public:
  /// Throws ValueError for steps < 1, warmup < 0, rates outside
  /// 0 <= min_lr <= lr, weight_decay < 0 or clip <= 0.
  ScheduledAdamW(const std::vector<Tensor>& params, const ScheduleConfig& cfg);
  /// One update from the current gradients at step `step` (0-based): sets
  /// the scheduled rate, clips, updates, then clears every gradient. A step
  /// whose gradient norm is not finite leaves the parameters untouched and
  /// is counted in skipped_steps() (with skip_nonfinite; else it throws
  /// clip_grad_norm_'s ValueError). Returns the learning rate of the step.
  /// Throws ValueError for step < 0.
  double step(int64_t step);
  int64_t skipped_steps() const { return skipped_; }
  /// The AdamW state for checkpoints (nn::AdamW::state_dict).
  std::map<std::string, Tensor> state_dict() const { return opt_.state_dict(); }
  /// Restores a state_dict() and the count of steps skipped before it.
  /// Throws what nn::AdamW::load_state_dict throws.
  void load_state_dict(const std::map<std::string, Tensor>& state, int64_t skipped_steps);

 private:
  ScheduleConfig cfg_;
  std::vector<Tensor> params_;
  nn::AdamW opt_;
  int64_t skipped_ = 0;
};

}  // namespace tmem::models
