#include "tmem/models/train_loop.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <string_view>

#include <fmt/format.h>

#include "tmem/core/json_dump.h"
#include "tmem/core/safetensors.h"
#include "tmem/dist/ddp.h"

namespace tmem::models {

using nlohmann::json;

namespace {

std::atomic<bool> g_stop_requested{false};

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

void check_options(const LoopConfig& cfg, const std::string& ckpt) {
  const CheckpointOptions& f = cfg.files;
  check<ValueError>(cfg.steps >= 0, "train: expected steps >= 0, but got ", cfg.steps);
  check<ValueError>(!f.resume || !f.run_dir.empty(), "train: --resume needs a run directory");
  check<ValueError>(f.dump_every >= 1 && f.checkpoint_every >= 0, "train: expected dump_every >= 1 and ",
                    "checkpoint_every >= 0, but got ", f.dump_every, " and ", f.checkpoint_every);
  check<ValueError>(cfg.stop_metric >= 0 && cfg.stop_metric <= 1, "train: expected stop_accuracy in [0, 1], but got ",
                    cfg.stop_metric);
  check<ValueError>(cfg.window >= 1, "train: expected a metric window >= 1, but got ", cfg.window);
  check<ValueError>(cfg.batch >= 1, "train: expected a batch >= 1, but got ", cfg.batch);
  if (ckpt.empty() || f.dump_grads.empty()) return;
  // The same file however it is spelled ("dir/./checkpoint.safetensors", a symlink).
  std::error_code ec1, ec2;
  const auto dump_path = std::filesystem::weakly_canonical(f.dump_grads, ec1);
  const auto ckpt_path = std::filesystem::weakly_canonical(ckpt, ec2);
  check<ValueError>(ec1 || ec2 ? f.dump_grads != ckpt : dump_path != ckpt_path, "train: the gradient dump ",
                    printable(f.dump_grads), " is the checkpoint ", ckpt,
                    ", which it would overwrite; dump to another file");
}

// The training metric of the last `window` steps as (hits, total) pairs.
struct MetricWindow {
  size_t window;
  std::deque<std::pair<double, double>> steps;
  void add(double hits, double total) {
    steps.emplace_back(hits, total);
    if (steps.size() > window) steps.pop_front();
  }
  std::pair<double, double> sums() const {
    double h = 0, n = 0;
    for (const auto& [a, b] : steps) h += a, n += b;
    return {h, n};
  }
  double mean() const {
    const auto [h, n] = sums();
    return n > 0 ? h / n : 0.0;
  }
};

// Whether a config key says where a run computes rather than what it
// computes: left out of config_differences and check_ranks_agree, so a run
// continues on another device and ranks may each have a GPU of their own.
bool is_placement_key(std::string_view key) { return key == "device"; }

}  // namespace

std::string config_differences(const json& saved, const json& now, const json& defaults, const std::string& except) {
  std::string diff;
  for (const auto& [key, v] : now.items()) {
    if (key == except || is_placement_key(key)) continue;
    const bool same = saved.contains(key) ? saved[key] == v : defaults.contains(key) && defaults[key] == v;
    if (!same)
      diff += "\n  " + key + ": saved " +
              (saved.contains(key) ? printable(saved[key].dump()) : std::string("(missing)")) + ", now " +
              printable(v.dump());
  }
  return diff;
}

void request_stop() noexcept { g_stop_requested.store(true); }

void check_ranks_agree(const json& mine, const std::string& what) {
  const int world = dist::world_size();
  if (!dist::is_initialized() || world < 2) return;
  json flat = mine.flatten();  // keys are JSON pointers: "/config/device"
  for (auto it = flat.begin(); it != flat.end();) {
    const std::string& key = it.key();
    if (is_placement_key(std::string_view(key).substr(key.rfind('/') + 1))) it = flat.erase(it);
    else ++it;
  }
  const std::string text = flat.dump();
  uint64_t h = 14695981039346656037ull;  // FNV-1a, 64 bit
  for (const char c : text) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  const std::vector<int64_t> hashes = dist::all_gather(tensor_int({static_cast<int64_t>(h)}, {1})).to_int_vector();
  int r = 1;
  while (r < world && hashes[r] == hashes[0]) ++r;
  if (r == world) return;
  // Every rank learns rank 0's and rank r's options, so all throw one message.
  const auto options_of = [&](int root) {
    Tensor n = tensor_int({static_cast<int64_t>(text.size())}, {1});
    dist::broadcast(n, root);
    std::vector<int64_t> bytes(static_cast<size_t>(n.to_int_vector()[0]));
    if (dist::rank() == root)
      for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<unsigned char>(text[i]);
    Tensor b = tensor_int(bytes, {static_cast<int64_t>(bytes.size())});
    dist::broadcast(b, root);
    std::string s;
    for (const int64_t c : b.to_int_vector()) s += static_cast<char>(c);
    return parse_json(s, what + ": the options of rank " + std::to_string(root));
  };
  const json first = options_of(0), other = options_of(r);
  std::string diff;
  const auto add = [&](const std::string& key) {
    const auto value = [&](const json& j) { return j.contains(key) ? printable(j[key].dump()) : "(missing)"; };
    diff += (diff.empty() ? " " : "; ") + key + ": rank 0 " + value(first) + ", rank " + std::to_string(r) + " " +
            value(other);
  };
  for (const auto& [key, v] : first.items())
    if (!other.contains(key) || other[key] != v) add(key);
  for (const auto& [key, v] : other.items())
    if (!first.contains(key)) add(key);
  throw ValueError(what + ": rank " + std::to_string(r) + " of " + std::to_string(world) +
                   " was started with other options than rank 0 (every rank must be given the same):" + diff);
}

LoopResult train_loop(nn::Module& model, const LoopConfig& cfg, const LoopHooks& hooks) {
  const CheckpointOptions& files = cfg.files;
  const std::string ckpt = files.run_dir.empty() ? "" : files.run_dir + "/" + kCheckpointFile;
  check_options(cfg, ckpt);
  const int world = dist::world_size();
  const bool data_parallel = cfg.data_parallel && dist::is_initialized() && world > 1;
  const bool writer = dist::rank() == 0;  // the rank that writes checkpoints and dumps and reports progress
  ScheduleConfig sched = cfg.optim;
  sched.steps = std::max<int64_t>(cfg.steps, 1);
  std::vector<Tensor> params = model.parameters();
  ScheduledAdamW opt(params, sched);

  LoopResult res;
  MetricWindow recent{static_cast<size_t>(cfg.window), {}};
  double seconds_before = 0;  // training time of the invocations before a resume
  if (!files.run_dir.empty() && writer) std::filesystem::create_directories(files.run_dir);
  std::error_code ec;  // a checkpoint that cannot be looked at (a link loop) counts: loading it names why
  const bool have_checkpoint = files.resume && (std::filesystem::exists(ckpt, ec) || ec);
  if (data_parallel) {
    Tensor seen = tensor_int({have_checkpoint}, {1});
    dist::all_reduce(seen);
    check<ValueError>(seen.to_int_vector()[0] % world == 0, "train: --resume with ", world, " ranks reads ", ckpt,
                      " on every rank, but only some see it; keep the run directory on a file system they share");
  }
  if (have_checkpoint) {
    SafetensorsFile f = load_safetensors(ckpt);
    if (!f.checksummed && writer)
      fmt::print(stderr, "warning: {} carries no checksum ({}): it was written by a tmem from before checksums, by "
                 "another tool, or the key was removed, so damage to it cannot be detected; it resumes unchecked\n",
                 ckpt, kChecksumKey);
    std::map<std::string, Tensor> model_state, opt_state, extra;
    for (auto& [k, t] : f.tensors) {
      if (k.rfind("model.", 0) == 0) model_state[k.substr(6)] = t;
      else if (k.rfind("optim.", 0) == 0) opt_state[k.substr(6)] = t;
      else if (k.rfind("extra.", 0) == 0) extra[k.substr(6)] = t;
    }
    const CheckpointMeta meta(ckpt, f.metadata);
    // A checkpoint continues only the run that wrote it: every key of its
    // config but the step count (a run may be extended) must match.
    const std::string diff = config_differences(meta.parsed("config"), cfg.config, cfg.config_defaults, "steps");
    check<ValueError>(diff.empty(), "train: cannot resume from ", ckpt, ": it was written with another config:", diff);
    // Parallel sums add in an order that depends on the thread count: say so
    // when it changed, as the losses then differ in the last bits.
    if (meta.has("threads") && meta.text("threads") != std::to_string(omp_get_max_threads()))
      fmt::print(stderr,
                 "warning: {} was written with {} threads and resumes with {}: the losses can differ from an "
                 "uninterrupted run in the last bits\n", ckpt, printable(meta.text("threads")), omp_get_max_threads());
    res.start_step = meta.integer("step", 0, std::numeric_limits<int64_t>::max());
    const int64_t skipped = meta.has("skipped_steps") ? meta.integer("skipped_steps", 0, res.start_step) : 0;
    try {
      model.load_state_dict(model_state);
      opt.load_state_dict(opt_state, skipped);
      if (hooks.load_state) hooks.load_state(extra);
    } catch (const Error& e) {
      throw IOError("train: checkpoint " + ckpt + " does not fit the model: " + e.what());
    }
    // Non-finite steps are skipped, so a checkpoint tmem wrote holds finite
    // weights: a NaN there would train and evaluate NaN logits silently.
    for (const auto& [name, t] : model_state) {
      if (!is_floating(t.dtype())) continue;
      const std::vector<double> v = t.to_vector();
      const auto bad = std::find_if(v.begin(), v.end(), [](double x) { return !std::isfinite(x); });
      if (bad != v.end())
        throw IOError(fmt::format("train: cannot resume from {}: model.{} holds {} at element {}, and tmem saves only "
                                  "finite weights", ckpt, name, *bad, bad - v.begin()));
    }
    for (const auto& [key, gen] : hooks.generators) {
      try {
        gen->set_state(meta.text(key));
      } catch (const ValueError& e) {
        meta.fail(key, std::string("is malformed (") + e.what() + ")");
      }
    }
    check<ValueError>(res.start_step <= cfg.steps, "train: cannot resume from ", ckpt, ": it is at step ",
                      res.start_step, ", past the ", cfg.steps, " steps asked for");
    const json hits = meta.parsed("recent_hits"), losses = meta.parsed("losses");
    const json curve = meta.parsed("accuracy_curve");
    if (!hits.is_array() || hits.size() > recent.window || hits.size() > static_cast<size_t>(res.start_step))
      meta.fail("recent_hits", "is not a list of at most min(" + std::to_string(cfg.window) +
                                   ", step) [hits, total] pairs");
    for (const json& h : hits) {
      const bool pair = h.is_array() && h.size() == 2;
      const bool ok = cfg.counts ? pair && h[0].is_number_unsigned() && h[1].is_number_unsigned() &&
                                       h[0].get<uint64_t>() <= h[1].get<uint64_t>()
                                 : pair && h[0].is_number() && h[1].is_number() && h[1].get<double>() >= 0;
      if (!ok) meta.fail("recent_hits", "holds " + printable(h.dump()) + ", not a [hits, total] pair, hits <= total");
      recent.add(h[0].get<double>(), h[1].get<double>());
    }
    if (!losses.is_array() || losses.size() != static_cast<size_t>(res.start_step))
      meta.fail("losses", "does not hold one loss per step before step " + std::to_string(res.start_step));
    for (const json& l : losses) {
      if (!l.is_number()) meta.fail("losses", "holds " + printable(l.dump()) + ", not a number");
      res.losses.push_back(l.get<double>());
    }
    // Checkpoints from before the per-step metrics were kept have NaN there.
    if (meta.has("metrics")) {
      const json metrics = meta.parsed("metrics");
      if (!metrics.is_array() || metrics.size() != static_cast<size_t>(res.start_step))
        meta.fail("metrics", "does not hold one metric per step before step " + std::to_string(res.start_step));
      try {
        for (const json& m : metrics) res.metrics.push_back(number_from_json(m));
      } catch (const IOError&) {
        meta.fail("metrics", "holds an entry that is not a number");
      }
    } else {
      res.metrics.assign(static_cast<size_t>(res.start_step), std::numeric_limits<double>::quiet_NaN());
    }
    if (!curve.is_array()) meta.fail("accuracy_curve", "is not a list");
    for (const json& pt : curve) {
      if (!pt.is_array() || pt.size() != 2 || !pt[0].is_number_integer() || !pt[1].is_number())
        meta.fail("accuracy_curve", "holds " + printable(pt.dump()) + ", not a [step, accuracy] pair");
      res.curve.emplace_back(pt[0].get<int64_t>(), pt[1].get<double>());
    }
    // Training time before the resume; checkpoints from before tmem recorded
    // it count from the resume.
    if (meta.has("seconds")) seconds_before = meta.real("seconds", 0);
    if (meta.has("stopped_at")) res.stopped_at = meta.integer("stopped_at", -1, res.start_step);
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto seconds_since_start = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  // Called on every rank: the trainer's state may be gathered over the
  // ranks (a collective); rank 0 writes.
  auto save_checkpoint = [&](int64_t step) {
    std::map<std::string, Tensor> all;
    if (hooks.save_state)
      for (auto& [k, t] : hooks.save_state()) all["extra." + k] = t;
    if (!writer) return;
    for (auto& [k, t] : model.state_dict()) all["model." + k] = t;
    for (auto& [k, t] : opt.state_dict()) all["optim." + k] = t;
    json window = json::array(), metrics = json::array();
    for (const auto& [h, n] : recent.steps)
      window.push_back(cfg.counts ? json{static_cast<int64_t>(h), static_cast<int64_t>(n)} : json{h, n});
    for (double m : res.metrics) metrics.push_back(number_to_json(m));
    StringMap meta = {{"model", cfg.model_name},
                      {"step", std::to_string(step)},
                      {"recent_hits", window.dump()},
                      {"config", cfg.config.dump()},
                      {"losses", json(res.losses).dump()},
                      {"metrics", metrics.dump()},
                      {"accuracy_curve", json(res.curve).dump()},
                      {"seconds", std::to_string(seconds_before + seconds_since_start())},
                      {"stopped_at", std::to_string(res.stopped_at)},
                      {"skipped_steps", std::to_string(opt.skipped_steps())},
                      {"threads", std::to_string(omp_get_max_threads())}};
    for (const auto& [key, gen] : hooks.generators) meta[key] = gen->state();
    save_safetensors(ckpt, all, meta);
  };

  std::unique_ptr<GradDumpWriter> dump;
  if (!files.dump_grads.empty() && writer) dump = std::make_unique<GradDumpWriter>(files.dump_grads, res.start_step);
  if (data_parallel)
    check_ranks_agree({{"config", cfg.config}, {"steps", cfg.steps}, {"start_step", res.start_step},
                       {"checkpoint_every", ckpt.empty() ? 0 : files.checkpoint_every}, {"window", cfg.window},
                       {"stop_metric", cfg.stop_metric}},
                      "train");
  std::unique_ptr<dist::DistributedDataParallel> ddp;
  if (data_parallel) ddp = std::make_unique<dist::DistributedDataParallel>(model);
  const auto named = model.named_parameters();
  model.train();
  bool ranks_stop = false;  // a data-parallel loop stops when any rank was asked to, after the step all agreed on
  for (int64_t step = res.start_step; step < cfg.steps && res.stopped_at < 0; ++step) {
    if (data_parallel ? ranks_stop : g_stop_requested.load()) {
      g_stop_requested.store(false);
      if (!ckpt.empty() && step > res.start_step) save_checkpoint(step);
      throw Interrupted(fmt::format(
          "interrupted after step {} of {}{}", step, cfg.steps,
          ckpt.empty() ? " (this run keeps no checkpoint)"
          : step > res.start_step
              ? fmt::format("; the checkpoint {} holds it: run the same command with --resume (and the same --name) "
                            "to continue from there", ckpt)
              : "; run the same command with --resume (and the same --name) to continue"));
    }
    const bool dump_step = dump && (step % files.dump_every == 0 || step + 1 == cfg.steps);
    std::optional<nn::TensorMemoryProbe> probe;  // records the memory internals of a dumped step
    if (dump_step) probe.emplace();
    StepOutput out = hooks.step(step);
    out.loss.backward();
    if (ddp) ddp->synchronize();
    double loss_v = out.loss.item();
    double rows = static_cast<double>(out.rows);
    if (data_parallel) {
      Tensor l = tensor({loss_v}, {1}, DType::Float64);
      dist::all_reduce(l, dist::ReduceOp::Mean);
      loss_v = l.item();
      Tensor h = tensor({out.hits, out.total, rows, g_stop_requested.load() ? 1.0 : 0.0}, {4}, DType::Float64);
      dist::all_reduce(h);
      const std::vector<double> sums = h.to_vector();
      out.hits = sums[0];
      out.total = sums[1];
      rows = sums[2];
      ranks_stop = sums[3] > 0;
    }
    check<ValueError>(rows == static_cast<double>(cfg.batch), "train: step ", step, " trained ", rows,
                      " rows of a batch of ", cfg.batch, data_parallel ? " over " + std::to_string(world) + " ranks" : "",
                      "; each process must train its share of the batch (dist::BatchShard)");
    if (dump_step) {
      std::vector<std::pair<std::string, Tensor>> grads;  // parameters without a gradient are named in "no_grad"
      for (auto& [n, p] : named) grads.emplace_back(n, p.grad());
      dump->write_step(step, loss_v, grads, files.dump_values, hooks.probe ? hooks.probe(*probe) : json::object());
    }
    const double lr = opt.step(step);
    res.losses.push_back(loss_v);
    res.metrics.push_back(out.total > 0 ? out.hits / out.total : std::numeric_limits<double>::quiet_NaN());
    recent.add(out.hits, out.total);
    if ((step + 1) % cfg.window == 0) res.curve.emplace_back(step + 1, recent.mean());
    if (cfg.stop_metric > 0 && recent.steps.size() == recent.window) {
      const auto [h, n] = recent.sums();
      if (n > 0 && h >= cfg.stop_metric * n) res.stopped_at = step + 1;
    }
    if (!ckpt.empty() && files.checkpoint_every > 0 && (step + 1) % files.checkpoint_every == 0)
      save_checkpoint(step + 1);
    // Nothing is printed once a stop is pending, until the checkpoint is
    // saved: under mpirun's Ctrl-C, mpirun stops reading the ranks' output
    // (a terminal's progress line every step), so a print could block until
    // its SIGKILL a second later.
    const bool stop_pending = data_parallel ? ranks_stop : g_stop_requested.load();
    if (hooks.progress && writer && !stop_pending) {
      const double secs = seconds_since_start();
      hooks.progress({step + 1, cfg.steps, loss_v, recent.mean(), lr, secs,
                      static_cast<double>(step + 1 - res.start_step) / std::max(secs, 1e-9), res.start_step});
    }
  }
  res.seconds = seconds_before + seconds_since_start();
  if (data_parallel) dist::check_replicas_match(model, "train");
  if (!ckpt.empty()) save_checkpoint(res.stopped_at >= 0 ? res.stopped_at : cfg.steps);
  res.recent_metric = recent.mean();
  res.skipped_steps = opt.skipped_steps();
  return res;
}

}  // namespace tmem::models
