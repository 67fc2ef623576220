#include "tmem/models/trainer.h"

#include <omp.h>

#include <charconv>
#include <chrono>
#include <cmath>
#include <deque>
#include <filesystem>
#include <cstdio>
#include <limits>

#include "tmem/core/autograd.h"
#include "tmem/core/device_backend.h"
#include "tmem/core/json_dump.h"
#include "tmem/core/safetensors.h"
#include "tmem/dist/ddp.h"
#include "tmem/dist/sampler.h"
#include "tmem/models/diagnostic.h"
#include "tmem/nn/optim.h"
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
  return {{"task", c.task}, {"W", t.W}, {"noise", t.noise}, {"queries", t.queries}, {"T", t.T},
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
          {"stop_accuracy", c.stop_accuracy}};
}

namespace {

// An integer config value: a JSON integer (1.9 is not truncated to 1).
int64_t int_value(const std::string& key, const json& v) {
  constexpr uint64_t kMax = std::numeric_limits<int64_t>::max();
  check<ValueError>(v.is_number_integer() && (!v.is_number_unsigned() || v.get<uint64_t>() <= kMax),
                    "config: key \"", key, "\" expects an integer, but got ", printable(v.dump()));
  return v.get<int64_t>();
}

// A real config value: a JSON number (true is not 1.0).
double real_value(const std::string& key, const json& v) {
  check<ValueError>(v.is_number(), "config: key \"", key, "\" expects a number, but got ", printable(v.dump()));
  return v.get<double>();
}

// A seed: a JSON integer >= 0 (-1 does not wrap to 2^64 - 1).
uint64_t seed_value(const std::string& key, const json& v) {
  check<ValueError>(v.is_number_unsigned(), "config: key \"", key, "\" expects an integer >= 0, but got ",
                    printable(v.dump()));
  return v.get<uint64_t>();
}

}  // namespace

void apply_config_json(TrainConfig& c, const json& j) {
  check<ValueError>(j.is_object(), "config: expected a JSON object, but got ", printable(j.dump()));
  auto& m = c.model;
  for (const auto& [key, v] : j.items()) {
    try {
      if (key == "task") c.task = v.get<std::string>();
      else if (key == "device") c.device = v.get<std::string>();
      else if (key == "W") c.task_cfg.W = int_value(key, v);
      else if (key == "noise") c.task_cfg.noise = real_value(key, v);
      else if (key == "queries") c.task_cfg.queries = int_value(key, v);
      else if (key == "T") c.task_cfg.T = int_value(key, v);
      else if (key == "L") c.task_cfg.L = int_value(key, v);
      else if (key == "length") c.task_cfg.length = int_value(key, v);
      else if (key == "P") c.task_cfg.P = int_value(key, v);
      else if (key == "G") c.task_cfg.G = int_value(key, v);
      else if (key == "cache_len") m.cache_len = int_value(key, v);
      else if (key == "linear_features") m.linear_features = int_value(key, v);
      else if (key == "ssm_state") m.ssm_state = int_value(key, v);
      else if (key == "memory_tokens") m.memory_tokens = int_value(key, v);
      else if (key == "stop_accuracy") c.stop_accuracy = real_value(key, v);
      else if (key == "steps") c.steps = int_value(key, v);
      else if (key == "batch") c.batch = int_value(key, v);
      else if (key == "seed") c.seed = seed_value(key, v);
      else if (key == "lr") c.lr = real_value(key, v);
      else if (key == "weight_decay") c.weight_decay = real_value(key, v);
      else if (key == "clip") c.clip = real_value(key, v);
      else if (key == "eval_batches") c.eval_batches = int_value(key, v);
      else if (key == "method") m.method = v.get<std::string>();
      else if (key == "dim") m.dim = int_value(key, v);
      else if (key == "layers") m.layers = int_value(key, v);
      else if (key == "heads") m.heads = int_value(key, v);
      else if (key == "max_len") m.max_len = int_value(key, v);
      else if (key == "dropout") m.dropout = real_value(key, v);
      else if (key == "leaky_memory") m.leaky_memory = v.get<bool>();
      else if (key == "mem_channels") m.memory.channels = int_value(key, v);
      else if (key == "mem_grid") {
        check<ValueError>(v.is_array() && v.size() == 3, "config: mem_grid expects [D, H, W], got ",
                          printable(v.dump()));
        const int64_t g[3] = {int_value(key, v[0]), int_value(key, v[1]), int_value(key, v[2])};
        m.memory.D = g[0], m.memory.H = g[1], m.memory.W = g[2];
      } else if (key == "chunk") m.memory.chunk = int_value(key, v);
      else if (key == "sigma_scale") m.memory.sigma_scale = real_value(key, v);
      else if (key == "gamma_init") m.memory.gamma_init = real_value(key, v);
      else if (key == "mem_dropout") m.memory.dropout = real_value(key, v);
      else if (key == "shared_coords") m.memory.shared_coords = v.get<bool>();
      else if (key == "hard_write") m.memory.hard_write = v.get<bool>();
      else if (key == "factorized") m.memory.factorized = v.get<bool>();
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

// The rows `rows` (int64 [b]) of every tensor of a batch.
TaskBatch rows_of(const TaskBatch& b, const Tensor& rows) {
  TaskBatch out;
  for (auto [dst, src] : {std::pair{&out.features, &b.features}, std::pair{&out.ids, &b.ids},
                          std::pair{&out.targets, &b.targets}, std::pair{&out.observed, &b.observed}})
    if (src->defined()) *dst = index_select(*src, 0, rows);
  return out;
}

// Memory-layer internals for gradient dumps.
json memory_internals(const DiagnosticModel& model) {
  json layers = json::array();
  for (size_t l = 0; l < model.backbone->blocks().size(); ++l) {
    const auto& mem = model.backbone->blocks()[l]->memory;
    if (!mem) continue;
    json j;
    j["layer"] = l;
    j["gate"] = 1.0 / (1.0 + std::exp(-mem->gamma.item()));
    j["write_sigma"] = tensor_summary("write_sigma", mem->last_sigma);
    j["read_coords"] = tensor_summary("read_coords", mem->last_mu_read);
    j["write_coords"] = tensor_summary("write_coords", mem->last_mu_write);
    layers.push_back(j);
  }
  return layers;
}

// The metadata entries of a checkpoint, read with every fault (a missing or
// malformed entry, a value out of range) an IOError naming the file and the
// entry, never a raw "stoll" or JSON library message.
class CheckpointMeta {
 public:
  CheckpointMeta(const std::string& path, const StringMap& meta) : path_(path), meta_(meta) {}

  bool has(const std::string& key) const { return meta_.count(key) > 0; }

  const std::string& text(const std::string& key) const {
    auto it = meta_.find(key);
    if (it == meta_.end()) fail(key, "is missing (written by an older tmem?), so it cannot be resumed");
    return it->second;
  }

  json parsed(const std::string& key) const {
    return parse_json(text(key), "train: checkpoint " + path_ + ": the \"" + key + "\" entry");
  }

  int64_t integer(const std::string& key, int64_t lo, int64_t hi) const {
    const std::string& v = text(key);
    int64_t x = 0;
    const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
    if (ec != std::errc() || p != v.data() + v.size() || x < lo || x > hi)
      fail(key, "is \"" + printable(v) + "\", expected an integer in [" + std::to_string(lo) + ", " +
                    std::to_string(hi) + "]");
    return x;
  }

  double real(const std::string& key, double lo) const {
    const std::string& v = text(key);
    double x = 0;
    const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
    if (ec != std::errc() || p != v.data() + v.size() || !std::isfinite(x) || x < lo)
      fail(key, "is \"" + printable(v) + "\", expected a finite number >= " + std::to_string(lo));
    return x;
  }

  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw IOError("train: checkpoint " + path_ + ": the \"" + key + "\" entry " + what);
  }

 private:
  const std::string& path_;
  const StringMap& meta_;
};

// A checkpoint continues only the run that wrote it: every key of its config
// but the step count (a run may be extended) must match.
void check_same_config(const std::string& path, const json& saved, const json& now) {
  std::string diff;
  for (const auto& [key, v] : now.items())
    if (key != "steps" && (!saved.contains(key) || saved[key] != v))
      diff += "\n  " + key + ": checkpoint " +
              (saved.contains(key) ? printable(saved[key].dump()) : std::string("(missing)")) + ", now " +
              printable(v.dump());
  check<ValueError>(diff.empty(), "train: cannot resume from ", path, ": it was written with another config:", diff);
}

}  // namespace

TrainResult train_diagnostic(const TrainConfig& config,
                             const std::function<void(const TrainProgress&)>& progress) {
  TrainConfig cfg = config;
  resolve_task_defaults(cfg);
  std::unique_ptr<Task> task = make_task(cfg.task, cfg.task_cfg);
  check<ValueError>(cfg.steps >= 0 && cfg.batch > 0, "train: expected steps >= 0 and batch > 0");
  check<ValueError>(!cfg.resume || !cfg.run_dir.empty(), "train: --resume needs a run directory");
  check<ValueError>(cfg.dump_every >= 1 && cfg.checkpoint_every >= 0, "train: expected dump_every >= 1 and ",
                    "checkpoint_every >= 0, but got ", cfg.dump_every, " and ", cfg.checkpoint_every);
  check<ValueError>(cfg.stop_accuracy >= 0 && cfg.stop_accuracy <= 1,
                    "train: expected stop_accuracy in [0, 1], but got ", cfg.stop_accuracy);
  // Data parallel when launched as several ranks (tmem::dist): every rank
  // draws the whole batch from the same generator and trains on its rows
  // (DistributedSampler's share), and DDP averages the gradients, so the run
  // follows the one-process run with the same batch.
  const int world = dist::world_size();
  const bool data_parallel = dist::is_initialized() && world > 1;
  check<ValueError>(!data_parallel || cfg.batch % world == 0, "train: batch ", cfg.batch,
                    " does not split evenly over ", world, " ranks");
  const bool writer = dist::rank() == 0;  // the rank that writes checkpoints and dumps and reports progress
  Generator init_gen(cfg.seed), data_gen(cfg.seed + 1);
  const Device device = parse_device(cfg.device);
  if (!device.is_cpu()) device_backend(device, "train");  // a clear error before any work
  DiagnosticModel model(*task, cfg.model, init_gen);
  model.to(device);
  std::vector<Tensor> params = model.parameters();
  nn::AdamW opt(nn::weight_decay_groups(params, cfg.weight_decay), cfg.lr, 0.9, 0.999, 1e-8);

  TrainResult res;
  double seconds_before = 0;  // training time of the invocations before a resume
  res.parameters = model.num_parameters();
  const std::string ckpt = cfg.run_dir.empty() ? "" : cfg.run_dir + "/" + kCheckpointFile;
  if (!ckpt.empty() && !cfg.dump_grads.empty()) {
    // The same file however it is spelled ("dir/./checkpoint.safetensors", a symlink).
    std::error_code ec1, ec2;
    const auto dump_path = std::filesystem::weakly_canonical(cfg.dump_grads, ec1);
    const auto ckpt_path = std::filesystem::weakly_canonical(ckpt, ec2);
    check<ValueError>(ec1 || ec2 ? cfg.dump_grads != ckpt : dump_path != ckpt_path, "train: the gradient dump ",
                      printable(cfg.dump_grads), " is the checkpoint ", ckpt,
                      ", which it would overwrite; dump to another file");
  }
  if (!cfg.run_dir.empty() && writer) std::filesystem::create_directories(cfg.run_dir);
  std::deque<std::pair<int64_t, int64_t>> recent;  // (hits, total) of the last 100 steps
  const bool have_checkpoint = cfg.resume && std::filesystem::exists(ckpt);
  if (data_parallel) {
    Tensor seen = tensor_int({have_checkpoint}, {1});
    dist::all_reduce(seen);
    check<ValueError>(seen.to_int_vector()[0] % world == 0, "train: --resume with ", world, " ranks reads ", ckpt,
                      " on every rank, but only some see it; keep the run directory on a file system they share");
  }
  if (have_checkpoint) {
    SafetensorsFile f = load_safetensors(ckpt);
    std::map<std::string, Tensor> model_state, opt_state;
    for (auto& [k, t] : f.tensors) {
      if (k.rfind("model.", 0) == 0) model_state[k.substr(6)] = t;
      else if (k.rfind("optim.", 0) == 0) opt_state[k.substr(6)] = t;
    }
    const CheckpointMeta meta(ckpt, f.metadata);
    check_same_config(ckpt, meta.parsed("config"), config_to_json(cfg));
    // Parallel sums add in an order that depends on the thread count: say so
    // when it changed, as the losses then differ in the last bits.
    if (meta.has("threads") && meta.text("threads") != std::to_string(omp_get_max_threads()))
      std::fprintf(stderr,
                   "warning: %s was written with %s threads and resumes with %d: the losses can differ from an "
                   "uninterrupted run in the last bits\n",
                   ckpt.c_str(), printable(meta.text("threads")).c_str(), omp_get_max_threads());
    try {
      model.load_state_dict(model_state);
      opt.load_state_dict(opt_state);
    } catch (const Error& e) {
      throw IOError("train: checkpoint " + ckpt + " does not fit the model: " + e.what());
    }
    for (auto [key, gen] : {std::pair{"data_rng", &data_gen}, std::pair{"model_rng", &init_gen}}) {
      try {
        gen->set_state(meta.text(key));
      } catch (const ValueError& e) {
        meta.fail(key, std::string("is malformed (") + e.what() + ")");
      }
    }
    res.start_step = meta.integer("step", 0, std::numeric_limits<int64_t>::max());
    check<ValueError>(res.start_step <= cfg.steps, "train: cannot resume from ", ckpt, ": it is at step ",
                      res.start_step, ", past the ", cfg.steps, " steps asked for");
    const json hits = meta.parsed("recent_hits"), losses = meta.parsed("losses");
    const json curve = meta.parsed("accuracy_curve");
    if (!hits.is_array() || hits.size() > 100 || hits.size() > static_cast<size_t>(res.start_step))
      meta.fail("recent_hits", "is not a list of at most min(100, step) [hits, total] pairs");
    for (const json& h : hits) {
      if (!h.is_array() || h.size() != 2 || !h[0].is_number_unsigned() || !h[1].is_number_unsigned() ||
          h[0].get<uint64_t>() > h[1].get<uint64_t>())
        meta.fail("recent_hits", "holds " + printable(h.dump()) + ", not a [hits, total] pair, hits <= total");
      recent.emplace_back(h[0].get<int64_t>(), h[1].get<int64_t>());
    }
    if (!losses.is_array() || losses.size() != static_cast<size_t>(res.start_step))
      meta.fail("losses", "does not hold one loss per step before step " + std::to_string(res.start_step));
    for (const json& l : losses) {
      if (!l.is_number()) meta.fail("losses", "holds " + printable(l.dump()) + ", not a number");
      res.losses.push_back(l.get<double>());
    }
    if (!curve.is_array()) meta.fail("accuracy_curve", "is not a list");
    for (const json& pt : curve) {
      if (!pt.is_array() || pt.size() != 2 || !pt[0].is_number_integer() || !pt[1].is_number())
        meta.fail("accuracy_curve", "holds " + printable(pt.dump()) + ", not a [step, accuracy] pair");
      res.accuracy_curve.emplace_back(pt[0].get<int64_t>(), pt[1].get<double>());
    }
    // Training time before the resume; checkpoints from before tmem recorded
    // it count from the resume.
    if (meta.has("seconds")) seconds_before = meta.real("seconds", 0);
    if (meta.has("stopped_at")) res.stopped_at = meta.integer("stopped_at", -1, res.start_step);
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto seconds_so_far = [&] {
    return seconds_before + std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  auto save_checkpoint = [&](int64_t step) {
    std::map<std::string, Tensor> all;
    for (auto& [k, t] : model.state_dict()) all["model." + k] = t;
    for (auto& [k, t] : opt.state_dict()) all["optim." + k] = t;
    json hits = json::array();
    for (auto& [h, n] : recent) hits.push_back({h, n});
    save_safetensors(ckpt, all, {{"model", "tmem::models::DiagnosticModel"}, {"step", std::to_string(step)},
                                 {"data_rng", data_gen.state()},
                                 {"model_rng", init_gen.state()},
                                 {"recent_hits", hits.dump()}, {"config", config_to_json(cfg).dump()},
                                 {"losses", json(res.losses).dump()},
                                 {"accuracy_curve", json(res.accuracy_curve).dump()},
                                 {"seconds", std::to_string(seconds_so_far())},
                                 {"stopped_at", std::to_string(res.stopped_at)},
                                 {"threads", std::to_string(omp_get_max_threads())}});
  };

  std::unique_ptr<GradDumpWriter> dump;
  if (!cfg.dump_grads.empty() && writer) dump = std::make_unique<GradDumpWriter>(cfg.dump_grads, res.start_step);
  std::unique_ptr<dist::DistributedDataParallel> ddp;
  Tensor my_rows;
  if (data_parallel) {
    ddp = std::make_unique<dist::DistributedDataParallel>(model);
    my_rows = tensor_int(dist::DistributedSampler(cfg.batch, world, dist::rank(), false).indices(),
                         {cfg.batch / world});
  }
  auto named = model.named_parameters();
  model.train();
  for (int64_t step = res.start_step; step < cfg.steps && res.stopped_at < 0; ++step) {
    TaskBatch whole = task->sample(cfg.batch, data_gen);
    TaskBatch batch = to_device(data_parallel ? rows_of(whole, my_rows) : whole, device);
    Tensor logits = model.forward(batch);
    // Across ranks: each rank's summed loss over the whole batch's target
    // count / world, so that DDP's mean gradient is the whole batch's.
    double divisor = 0;
    if (data_parallel) {
      for (int64_t t : whole.targets.to_int_vector()) divisor += t != -100;
      divisor /= world;
    }
    Tensor loss = loss_of(logits, batch.targets, divisor);
    loss.backward();
    if (ddp) ddp->synchronize();
    double loss_v = loss.item();
    if (data_parallel) {
      Tensor l = tensor({loss_v}, {1}, DType::Float64);
      dist::all_reduce(l, dist::ReduceOp::Mean);
      loss_v = l.item();
    }
    if (dump && (step % cfg.dump_every == 0 || step + 1 == cfg.steps)) {
      std::vector<std::pair<std::string, Tensor>> grads;  // parameters without a gradient are named in "no_grad"
      for (auto& [n, p] : named) grads.emplace_back(n, p.grad());
      dump->write_step(step, loss_v, grads, cfg.dump_values, {{"memory", memory_internals(model)}});
    }
    nn::clip_grad_norm_(params, cfg.clip);
    opt.step();
    opt.zero_grad();
    res.losses.push_back(loss_v);
    Hits hits = query_hits(logits, batch);
    if (data_parallel) {
      Tensor h = tensor_int({hits.hit, hits.total}, {2});
      dist::all_reduce(h);
      hits.hit = h.to_int_vector()[0];
      hits.total = h.to_int_vector()[1];
    }
    recent.emplace_back(hits.hit, hits.total);
    if (recent.size() > 100) recent.pop_front();
    if ((step + 1) % 100 == 0) {
      int64_t h = 0, n = 0;
      for (auto& [a, b] : recent) h += a, n += b;
      res.accuracy_curve.emplace_back(step + 1, n ? static_cast<double>(h) / n : 0.0);
    }
    if (cfg.stop_accuracy > 0 && recent.size() == 100) {
      int64_t h = 0, n = 0;
      for (auto& [a, b] : recent) h += a, n += b;
      if (n > 0 && static_cast<double>(h) >= cfg.stop_accuracy * static_cast<double>(n)) res.stopped_at = step + 1;
    }
    if (!ckpt.empty() && writer && cfg.checkpoint_every > 0 && (step + 1) % cfg.checkpoint_every == 0)
      save_checkpoint(step + 1);
    if (progress && writer) {
      int64_t h = 0, n = 0;
      for (auto& [a, b] : recent) h += a, n += b;
      double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      progress({step + 1, cfg.steps, loss_v, n ? static_cast<double>(h) / n : 0.0,
                static_cast<double>(step + 1 - res.start_step) / std::max(secs, 1e-9)});
    }
  }
  res.seconds = seconds_so_far();
  if (!ckpt.empty() && writer) save_checkpoint(res.stopped_at >= 0 ? res.stopped_at : cfg.steps);
  int64_t h = 0, n = 0;
  for (auto& [a, b] : recent) h += a, n += b;
  res.train_accuracy = n ? static_cast<double>(h) / n : 0.0;

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
