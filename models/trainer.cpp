#include "tmem/models/trainer.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "tmem/core/autograd.h"
#include "tmem/core/device_backend.h"
#include "tmem/core/json_dump.h"
#include "tmem/dist/dist.h"
#include "tmem/dist/sampler.h"
#include "tmem/models/diagnostic.h"
#include "tmem/ops/elementwise.h"
#include "tmem/ops/loss.h"
#include "tmem/ops/reduction.h"
#include "tmem/ops/shape.h"

namespace tmem::models {

using nlohmann::json;

void resolve_task_defaults(TrainConfig& c) {
  std::unique_ptr<Task> task = make_task(c.task, c.task_cfg);
  check<ValueError>(c.model.dim >= 0 && c.model.memory.chunk >= 0, "train: expected dim >= 0 and chunk >= 0 (0: the ",
                    "task's default), but got dim ", c.model.dim, " and chunk ", c.model.memory.chunk);
  if (c.model.dim == 0) c.model.dim = task->default_dim();
  if (c.model.memory.chunk == 0) c.model.memory.chunk = task->default_chunk();
}

json config_to_json(const TrainConfig& c) {
  const auto& m = c.model;
  const auto& t = c.task_cfg;
  json j = {{"task", c.task}, {"W", t.W}, {"noise", t.noise}, {"queries", t.queries}, {"T", t.T},
          {"L", t.L}, {"length", t.length}, {"P", t.P}, {"G", t.G},
          {"steps", c.steps}, {"batch", c.batch}, {"seed", c.seed}, {"lr", c.lr},
          {"weight_decay", c.weight_decay}, {"clip", c.clip}, {"eval_batches", c.eval_batches},
          {"method", m.method}, {"dim", m.dim}, {"layers", m.layers}, {"heads", m.heads},
          {"max_len", m.max_len}, {"dropout", m.dropout}, {"leaky_memory", m.leaky_memory},
          {"mem_channels", m.memory.channels}, {"mem_grid", {m.memory.D, m.memory.H, m.memory.W}},
          {"chunk", m.memory.chunk}, {"sigma_scale", m.memory.sigma_scale},
          {"gamma_init", m.memory.gamma_init}, {"mem_dropout", m.memory.dropout},
          {"shared_coords", m.memory.shared_coords}, {"hard_write", m.memory.hard_write},
          {"factorized", m.memory.factorized}, {"device", c.device}, {"cache_len", m.cache_len},
          {"linear_features", m.linear_features}, {"ssm_state", m.ssm_state}, {"memory_tokens", m.memory_tokens},
          {"stop_accuracy", c.stop_accuracy}, {"forget_bias", m.memory.forget_bias}};
  for (const auto& [key, methods] : method_config_keys())
    if (std::find(methods.begin(), methods.end(), m.method) == methods.end()) j.erase(key);
  return j;
}

const std::map<std::string, std::vector<BackboneMethod>>& method_config_keys() {
  using enum BackboneMethod;
  static const std::map<std::string, std::vector<BackboneMethod>> keys = [] {
    std::map<std::string, std::vector<BackboneMethod>> k;
    for (const char* key : {"mem_channels", "mem_grid", "sigma_scale", "gamma_init", "mem_dropout", "shared_coords",
                            "hard_write", "factorized", "forget_bias", "leaky_memory"})
      k[key] = {tensor};
    k["chunk"] = {tensor, slots};
    k["cache_len"] = {xl};
    k["linear_features"] = {linear};
    k["ssm_state"] = {ssm};
    k["memory_tokens"] = {rmt};
    return k;
  }();
  return keys;
}

json default_config_json() {
  json j = json::object();
  for (const auto& [key, methods] : method_config_keys())
    for (const BackboneMethod method : methods) {
      TrainConfig d;
      d.model.method = method;
      j.update(config_to_json(d));
    }
  j["method"] = TrainConfig{}.model.method;
  return j;
}

namespace {

// An integer config value: a JSON integer (1.9 is not truncated to 1) in
// [lo, hi], the range of the command-line option that sets it.
int64_t int_value(const std::string& key, const json& v, int64_t lo, int64_t hi) {
  constexpr uint64_t kMax = std::numeric_limits<int64_t>::max();
  check<ValueError>(v.is_number_integer() && (!v.is_number_unsigned() || v.get<uint64_t>() <= kMax),
                    "config: key \"", key, "\" expects an integer, but got ", printable(v.dump()));
  const int64_t x = v.get<int64_t>();
  check<ValueError>(x >= lo && x <= hi, "config: key \"", key, "\" expects an integer in [", lo, ", ", hi,
                    "], but got ", x);
  return x;
}

// A real config value: a JSON number (true is not 1.0) in [lo, hi] (open:
// in (lo, hi)), the range of the command-line option that sets it.
double real_value(const std::string& key, const json& v, double lo, double hi, bool open = false) {
  check<ValueError>(v.is_number(), "config: key \"", key, "\" expects a number, but got ", printable(v.dump()));
  const double x = v.get<double>();
  check<ValueError>(open ? x > lo && x < hi : x >= lo && x <= hi, "config: key \"", key, "\" expects a number in ",
                    open ? "(" : "[", lo, ", ", hi, open ? ")" : "]", ", but got ", printable(v.dump()));
  return x;
}

// A seed: a JSON integer >= 0 (-1 does not wrap to 2^64 - 1).
// The command line's --seed range, [0, 2^63 - 1].
uint64_t seed_value(const std::string& key, const json& v) {
  constexpr uint64_t kMax = std::numeric_limits<int64_t>::max();
  check<ValueError>(v.is_number_unsigned() && v.get<uint64_t>() <= kMax, "config: key \"", key,
                    "\" expects an integer in [0, ", kMax, "], but got ", printable(v.dump()));
  return v.get<uint64_t>();
}

}  // namespace

void apply_config_json(TrainConfig& c, const json& j) {
  check<ValueError>(j.is_object(), "config: expected a JSON object, but got ", printable(j.dump()));
  auto& m = c.model;
  for (const auto& [key, v] : j.items()) {
    try {
      if (key == "task") {
        const std::string task = v.get<std::string>();
        task_parameters(task);  // an unknown task is refused here, not dropped for the command line's
        c.task = task;
      } else if (key == "device") c.device = v.get<std::string>();
      else if (key == "W") c.task_cfg.W = int_value(key, v, 0, 65536);
      else if (key == "noise") c.task_cfg.noise = real_value(key, v, 0, 100);
      else if (key == "queries") c.task_cfg.queries = int_value(key, v, 1, 65536);
      else if (key == "T") c.task_cfg.T = int_value(key, v, 1, 65536);
      else if (key == "L") c.task_cfg.L = int_value(key, v, 0, 65536);
      else if (key == "length") c.task_cfg.length = int_value(key, v, 2, 65536);
      else if (key == "P") c.task_cfg.P = int_value(key, v, 1, 65536);
      else if (key == "G") c.task_cfg.G = int_value(key, v, 0, 65536);
      else if (key == "cache_len") m.cache_len = int_value(key, v, 0, 65536);
      else if (key == "linear_features") m.linear_features = int_value(key, v, 1, 65536);
      else if (key == "ssm_state") m.ssm_state = int_value(key, v, 1, 65536);
      else if (key == "memory_tokens") m.memory_tokens = int_value(key, v, 1, 65536);
      else if (key == "stop_accuracy") c.stop_accuracy = real_value(key, v, 0, 1);
      else if (key == "steps") c.steps = int_value(key, v, 0, 1000000000);
      else if (key == "batch") c.batch = int_value(key, v, 1, 65536);
      else if (key == "seed") c.seed = seed_value(key, v);
      else if (key == "lr") c.lr = real_value(key, v, 0, 10);
      else if (key == "weight_decay") c.weight_decay = real_value(key, v, 0, 10);
      else if (key == "clip") c.clip = real_value(key, v, 0, 1e9, true);
      else if (key == "eval_batches") c.eval_batches = int_value(key, v, 1, 1000000);
      else if (key == "method") m.method = v.get<BackboneMethod>();
      else if (key == "dim") m.dim = int_value(key, v, 0, 65536);
      else if (key == "layers") m.layers = int_value(key, v, 1, 1024);
      else if (key == "heads") m.heads = int_value(key, v, 1, 1024);
      else if (key == "max_len") m.max_len = int_value(key, v, 1, 1 << 20);
      else if (key == "dropout") m.dropout = real_value(key, v, 0, 1);
      else if (key == "leaky_memory") m.leaky_memory = v.get<bool>();
      else if (key == "mem_channels") m.memory.channels = int_value(key, v, 1, 4096);
      else if (key == "mem_grid") {
        check<ValueError>(v.is_array() && v.size() == 3, "config: mem_grid expects [D, H, W], got ",
                          printable(v.dump()));
        const int64_t g[3] = {int_value(key, v[0], 1, 256), int_value(key, v[1], 1, 256),
                              int_value(key, v[2], 1, 256)};
        m.memory.D = g[0], m.memory.H = g[1], m.memory.W = g[2];
      } else if (key == "chunk") m.memory.chunk = int_value(key, v, 0, 65536);
      else if (key == "sigma_scale") m.memory.sigma_scale = real_value(key, v, 1e-3, 1e3);
      else if (key == "gamma_init") m.memory.gamma_init = real_value(key, v, -20, 20);
      else if (key == "mem_dropout") m.memory.dropout = real_value(key, v, 0, 1);
      else if (key == "shared_coords") m.memory.shared_coords = v.get<bool>();
      else if (key == "hard_write") m.memory.hard_write = v.get<bool>();
      else if (key == "factorized") m.memory.factorized = v.get<bool>();
      else if (key == "forget_bias") m.memory.forget_bias = real_value(key, v, -20, 20);
      else throw ValueError("config: unknown key \"" + printable(key) + "\"");
    } catch (const json::exception& e) {
      throw ValueError("config: key \"" + key + "\" has a value of the wrong type (" + printable(v.dump()) + ")");
    }
  }
}

namespace {

// Accuracy counts: argmax of logits [B, T, V] against targets [B, T] where
// targets != -100 (and, with a mask, where the mask is non-zero).
struct Hits {
  int64_t hit = 0, total = 0, hit_obs = 0, total_obs = 0;
};

Hits query_hits(const Tensor& logits, const TaskBatch& batch) {
  std::vector<int64_t> pred = max(logits, -1).indices.to_int_vector(), t = batch.targets.to_int_vector();
  std::vector<int64_t> obs = batch.observed.defined() ? batch.observed.to_int_vector() : std::vector<int64_t>();
  Hits h;
  for (size_t i = 0; i < t.size(); ++i)
    if (t[i] != -100) {
      ++h.total;
      h.hit += pred[i] == t[i];
      if (!obs.empty() && obs[i]) {
        ++h.total_obs;
        h.hit_obs += pred[i] == t[i];
      }
    }
  return h;
}

// The batch's model inputs and targets on `d` (the observed mask, read only
// on the host by query_hits, stays on the CPU).
TaskBatch to_device(TaskBatch b, Device d) {
  if (d.is_cpu()) return b;
  for (Tensor* t : {&b.features, &b.ids, &b.targets})
    if (t->defined()) *t = t->to(d);
  return b;
}

// Cross entropy over the target positions (targets -100 carry none): the
// mean, or with divisor > 0 the sum divided by it (a rank's share of a batch
// whose targets are split over ranks).
Tensor loss_of(const Tensor& logits, const Tensor& targets, double divisor = 0) {
  const int64_t V = logits.shape().back();
  Tensor flat_logits = reshape(logits, {-1, V}), flat_targets = reshape(targets, {-1});
  if (divisor <= 0) return cross_entropy(flat_logits, flat_targets);
  return cross_entropy(flat_logits, flat_targets, -100, 0.0, "sum") / divisor;
}

// This rank's rows of every tensor of a batch.
TaskBatch rows_of(const TaskBatch& b, const dist::BatchShard& shard) {
  TaskBatch out;
  for (auto [dst, src] : {std::pair{&out.features, &b.features}, std::pair{&out.ids, &b.ids},
                          std::pair{&out.targets, &b.targets}, std::pair{&out.observed, &b.observed}})
    if (src->defined()) *dst = shard.take(*src);
  return out;
}


}  // namespace

TrainResult train_diagnostic(const TrainConfig& config,
                             const std::function<void(const TrainProgress&)>& progress) {
  TrainConfig cfg = config;
  resolve_task_defaults(cfg);
  std::unique_ptr<Task> task = make_task(cfg.task, cfg.task_cfg);
  check<ValueError>(cfg.steps >= 0 && cfg.batch > 0 && cfg.eval_batches > 0, "train: expected steps >= 0, batch > 0 and "
                    "eval_batches > 0, but got steps ", cfg.steps, ", batch ", cfg.batch, ", eval_batches ", cfg.eval_batches);
  // Data parallel when launched as several ranks (tmem::dist): every rank
  // draws the whole batch from the same generator and trains on its rows
  // (BatchShard), and DDP averages the gradients, so the run follows the
  // one-process run with the same batch.
  const dist::BatchShard shard(cfg.batch, "train: --batch");
  const bool data_parallel = shard.sharded();
  const int world = dist::world_size();
  Generator init_gen(cfg.seed), data_gen(cfg.seed + 1);
  const Device device = parse_device(cfg.device);
  if (!device.is_cpu()) device_backend(device, "train");  // a clear error before any work
  DiagnosticModel model(*task, cfg.model, init_gen);
  model.to(device);

  // AdamW (0.9, 0.999) at a constant rate; a non-finite gradient norm is an error.
  LoopConfig loop{cfg.steps, cfg.batch, {1, cfg.lr, cfg.lr, 0, cfg.weight_decay, cfg.clip, 0.999, false}, cfg,
                  config_to_json(cfg), "tmem::models::DiagnosticModel"};
  loop.config_defaults = default_config_json();
  loop.window = 100;
  loop.stop_metric = cfg.stop_accuracy;
  loop.data_parallel = data_parallel;
  LoopHooks hooks;
  hooks.generators = {{"data_rng", &data_gen}, {"model_rng", &init_gen}};
  hooks.step = [&](int64_t step) {
    TaskBatch whole = task->sample(cfg.batch, data_gen);
    TaskBatch batch = to_device(data_parallel ? rows_of(whole, shard) : whole, device);
    const dist::RankStream own_dropout(init_gen, step);  // data parallel: this rank's dropout masks
    Tensor logits = model.forward(batch);
    // Across ranks: each rank's summed loss over the whole batch's target
    // count / world, so that DDP's mean gradient is the whole batch's.
    double divisor = 0;
    if (data_parallel) {
      for (int64_t t : whole.targets.to_int_vector()) divisor += t != -100;
      divisor /= world;
    }
    const Hits hits = query_hits(logits, batch);
    return StepOutput{loss_of(logits, batch.targets, divisor), logits.size(0), static_cast<double>(hits.hit),
                      static_cast<double>(hits.total)};
  };
  hooks.probe = [&](const nn::TensorMemoryProbe& probe) {
    return json{{"memory", memory_internals(*model.backbone, probe)}};
  };
  if (progress)
    hooks.progress = [&](const LoopProgress& p) { progress({p.step, p.steps, p.loss, p.metric, p.steps_per_second, p.seconds, p.start}); };
  const LoopResult run = train_loop(model, loop, hooks);

  TrainResult res;
  res.parameters = model.num_parameters();
  res.losses = run.losses;
  res.accuracy_curve = run.curve;
  res.train_accuracy = run.recent_metric;
  res.seconds = run.seconds;
  res.start_step = run.start_step;
  res.stopped_at = run.stopped_at;

  model.eval();
  NoGradGuard no_grad;
  // Accuracy on eval_batches batches drawn from the seed's eval stream (the
  // same batches on every call).
  auto evaluate = [&] {
    Generator eval_gen(cfg.seed + 2);
    Hits total;
    for (int64_t e = 0; e < cfg.eval_batches; ++e) {
      TaskBatch batch = to_device(task->sample(cfg.batch, eval_gen), device);
      BackboneState state;
      Hits hh = query_hits(model.forward(batch, state), batch);
      res.state_floats = state.floats_per_sequence();
      total.hit += hh.hit, total.total += hh.total, total.hit_obs += hh.hit_obs, total.total_obs += hh.total_obs;
    }
    return total;
  };
  const Hits total = evaluate();
  res.eval_accuracy = total.total ? static_cast<double>(total.hit) / total.total : 0.0;
  if (total.total_obs) res.eval_accuracy_observed = static_cast<double>(total.hit_obs) / total.total_obs;
  res.gates = memory_gates(*model.backbone);
  if (!res.gates.empty()) {
    // The same batches with every memory gate at 0 (gamma = -inf): the
    // accuracy the model gets without its memory path.
    std::vector<std::pair<Tensor, double>> gammas;
    for (const auto& blk : model.backbone->blocks())
      if (blk->memory) gammas.emplace_back(blk->memory->gamma, blk->memory->gamma.item());
    for (auto& [g, v] : gammas) fill_data(g, -std::numeric_limits<double>::infinity());
    const Hits off = evaluate();
    for (auto& [g, v] : gammas) fill_data(g, v);
    res.eval_accuracy_memory_off = off.total ? static_cast<double>(off.hit) / off.total : 0.0;
  }
  return res;
}

}  // namespace tmem::models
