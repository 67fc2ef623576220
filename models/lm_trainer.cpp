#include "tmem/models/lm_trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "tmem/core/device_backend.h"
#include "tmem/models/scheduled_adamw.h"
#include "tmem/ops/loss.h"
#include "tmem/ops/shape.h"

namespace tmem::models {

using nlohmann::json;

int64_t lm_train_steps(const LMTrainConfig& c) {
  check<ValueError>(c.steps >= 0 && c.tokens >= 0 && (c.steps > 0 || c.tokens > 0),
                    "train_lm: expected steps > 0 or a token budget > 0, but got steps ", c.steps, " tokens ",
                    c.tokens);
  if (c.steps > 0) return c.steps;
  const int64_t per_step = c.batch * c.model.seq;
  check<ValueError>(per_step > 0 && c.tokens >= per_step, "train_lm: a budget of ", c.tokens,
                    " tokens buys no step of batch ", c.batch, " x seq ", c.model.seq);
  return c.tokens / per_step;
}

json lm_config_to_json(const LMTrainConfig& c) {
  const auto& m = c.model;
  return {{"method", m.method}, {"vocab", m.vocab}, {"dim", m.dim}, {"layers", m.layers}, {"heads", m.heads},
          {"seq", m.seq}, {"window", m.window}, {"dropout", m.dropout},
          {"mem_channels", m.memory.channels}, {"mem_grid", {m.memory.D, m.memory.H, m.memory.W}},
          {"chunk", m.memory.chunk}, {"sigma_scale", m.memory.sigma_scale},
          {"gamma_init", m.memory.gamma_init}, {"batch", c.batch}, {"steps", lm_train_steps(c)},
          {"tokens", c.tokens}, {"lr", c.lr}, {"min_lr", c.min_lr}, {"warmup", c.warmup},
          {"weight_decay", c.weight_decay}, {"clip", c.clip}, {"seed", c.seed}, {"eval_batch", c.eval_batch},
          {"mlp_hidden", lm_backbone_config(m).mlp_hidden}, {"device", c.device}};
}

LMTrainResult train_lm(const LMTrainConfig& cfg, const std::vector<int64_t>& train,
                       const std::vector<int64_t>& valid, const std::vector<int64_t>& test,
                       const std::function<void(const LMTrainProgress&)>& progress) {
  const int64_t steps = lm_train_steps(cfg);
  check<ValueError>(cfg.batch >= 1 && cfg.eval_batch >= 1, "train_lm: expected batch, eval_batch >= 1, but got ",
                    cfg.batch, ", ", cfg.eval_batch);
  const Device device = parse_device(cfg.device);
  if (!device.is_cpu()) device_backend(device, "train");  // a clear error before any work
  Generator gen(cfg.seed);
  TransformerLM model(cfg.model, gen);
  model.to(device);
  StreamSegments segs(train, cfg.batch, cfg.model.seq);
  ScheduledAdamW opt(model.parameters(), {steps, cfg.lr, cfg.min_lr, cfg.warmup, cfg.weight_decay, cfg.clip});

  LMTrainResult res;
  res.parameters = model.num_parameters();
  model.train();
  BackboneState state;
  const auto t0 = std::chrono::steady_clock::now();
  int64_t seen = 0;
  for (int64_t step = 0; step < steps; ++step) {
    const int64_t i = step % segs.count();
    if (i == 0) state = BackboneState();
    auto [in, tg] = segs.segment(i, device);
    Tensor logits = model.forward(in, state);
    Tensor loss = cross_entropy(reshape(logits, {-1, cfg.model.vocab}), reshape(tg, {-1}));
    loss.backward();
    state.detach();
    const double lr = opt.step(step);
    const double loss_v = loss.item();
    res.losses.push_back(loss_v);
    seen += in.numel();
    if (progress) {
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      progress({"train", step + 1, steps, loss_v, lr, static_cast<double>(seen) / std::max(secs, 1e-9), secs});
    }
  }
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  res.tokens_per_second = static_cast<double>(seen) / std::max(res.seconds, 1e-9);
  res.skipped_steps = opt.skipped_steps();
  auto evaluate = [&](const std::string& phase, const std::vector<int64_t>& stream) {
    if (stream.empty()) return PerplexityResult{};
    const auto e0 = std::chrono::steady_clock::now();
    const double per_segment = static_cast<double>(cfg.eval_batch * cfg.model.seq);
    auto report = [&](const PerplexityResult& so_far, int64_t done, int64_t total) {
      if (!progress) return;
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - e0).count();
      progress({phase, done, total, so_far.nll(), 0.0, per_segment * done / std::max(secs, 1e-9), secs});
    };
    return evaluate_perplexity(model, stream, cfg.eval_batch, report);
  };
  res.valid = evaluate("valid", valid);
  res.test = evaluate("test", test);
  for (const auto& blk : model.backbone->blocks())
    if (blk->memory) res.gates.push_back(1.0 / (1.0 + std::exp(-blk->memory->gamma.item())));
  return res;
}

}  // namespace tmem::models
