#include "tmem/models/lm_trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "tmem/core/device_backend.h"
#include "tmem/dist/sampler.h"
#include "tmem/models/train_loop.h"
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
  const double tokens_per_step = static_cast<double>(cfg.batch * cfg.model.seq);
  // Data parallel over the ranks of a tmem::dist job: rank r trains streams
  // r, r + R, ... of the batch and carries their state.
  const dist::BatchShard shard(cfg.batch, "train_lm: batch");

  LoopConfig loop{steps, cfg.batch, {steps, cfg.lr, cfg.min_lr, cfg.warmup, cfg.weight_decay, cfg.clip}, cfg,
                  lm_config_to_json(cfg), "tmem::models::TransformerLM"};
  loop.data_parallel = shard.sharded();
  LoopHooks hooks;
  hooks.generators = {{"model_rng", &gen}};
  BackboneState state;  // carried from step to step, detached; reset at the start of each pass
  hooks.step = [&](int64_t step) {
    const int64_t i = step % segs.count();
    if (i == 0) state = BackboneState();
    auto [in, tg] = segs.segment(i, device);
    const dist::RankStream own_dropout(gen, step);  // data parallel: this rank's dropout masks
    const Tensor x = shard.take(in);
    Tensor logits = model.forward(x, state);
    state.detach();
    return StepOutput{cross_entropy(reshape(logits, {-1, cfg.model.vocab}), reshape(shard.take(tg), {-1})), x.size(0)};
  };
  // The checkpoint holds the whole batch's state (every rank's streams), as
  // one process's does: a run may resume on another number of ranks.
  hooks.save_state = [&] {
    std::map<std::string, Tensor> named = state.named_tensors();
    for (auto& [name, t] : named) t = shard.gather(t);
    return named;
  };
  hooks.load_state = [&](const std::map<std::string, Tensor>& named) {
    std::map<std::string, Tensor> mine;
    for (const auto& [name, t] : named) mine[name] = shard.take(t);
    state = BackboneState::from_named_tensors(mine, device);
  };
  hooks.probe = [&](const nn::TensorMemoryProbe& probe) {
    return json{{"memory", memory_internals(*model.backbone, probe)}};
  };
  if (progress)
    hooks.progress = [&](const LoopProgress& p) {
      progress({"train", p.step, p.steps, p.loss, p.lr, p.steps_per_second * tokens_per_step, p.seconds, p.start});
    };
  const LoopResult run = train_loop(model, loop, hooks);

  LMTrainResult res;
  res.parameters = model.num_parameters();
  res.losses = run.losses;
  res.seconds = run.seconds;
  res.tokens_per_second = tokens_per_step * static_cast<double>(run.losses.size()) / std::max(res.seconds, 1e-9);
  res.skipped_steps = run.skipped_steps;
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
