#include "tmem/models/scheduled_adamw.h"

#include <algorithm>

namespace tmem::models {

namespace {

const ScheduleConfig& checked(const ScheduleConfig& c) {
  check<ValueError>(c.steps >= 1 && c.warmup >= 0 && c.min_lr >= 0 && c.min_lr <= c.lr && c.weight_decay >= 0 &&
                        c.clip > 0,
                    "ScheduledAdamW: expected steps >= 1, warmup >= 0, 0 <= min_lr <= lr, weight_decay >= 0 and "
                    "clip > 0, but got steps ", c.steps, " warmup ", c.warmup, " lr ", c.lr, " min_lr ", c.min_lr,
                    " weight_decay ", c.weight_decay, " clip ", c.clip);
  return c;
}

}  // namespace

ScheduledAdamW::ScheduledAdamW(const std::vector<Tensor>& params, const ScheduleConfig& cfg)
    : cfg_(checked(cfg)),
      params_(params),
      opt_(nn::weight_decay_groups(params, cfg.weight_decay), cfg.lr, 0.9, cfg.beta2, 1e-8) {
  cfg_.warmup = std::min(cfg.warmup, cfg.steps - 1);
}

void ScheduledAdamW::load_state_dict(const std::map<std::string, Tensor>& state, int64_t skipped_steps) {
  opt_.load_state_dict(state);
  skipped_ = skipped_steps;
}

double ScheduledAdamW::step(int64_t step) {
  const double lr = nn::warmup_cosine_lr(step, cfg_.warmup, cfg_.steps, cfg_.lr, cfg_.min_lr);
  opt_.set_lr(lr);
  bool finite = true;
  try {
    nn::clip_grad_norm_(params_, cfg_.clip);
  } catch (const ValueError&) {  // a non-finite gradient norm: the gradients are untouched, skip the step
    if (!cfg_.skip_nonfinite) throw;
    finite = false;
    ++skipped_;
  }
  if (finite) opt_.step();
  opt_.zero_grad();
  return lr;
}

}  // namespace tmem::models
