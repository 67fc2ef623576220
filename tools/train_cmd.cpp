#include "tmem/tools/train_cmd.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "tmem/core/device_backend.h"
#include "tmem/core/file_io.h"
#include "tmem/core/parallel.h"
#include "tmem/models/diagnostic.h"
#include "tmem/models/trainer.h"
#include "tmem/tools/progress.h"
#include "tmem/tools/run_recorder.h"

namespace tmem::tools {

namespace {

using nlohmann::json;

struct TrainArgs {
  std::string task;
  /// Empty until --method or a config names them: then base, tensor, or on
  /// the segmented tasks full, tensor (the ceiling and the memory).
  std::vector<models::BackboneMethod> methods;
  std::vector<int64_t> Ws, Ts, Ls{2}, Ps{64};  // Ws, Ts empty: the task's default
  std::vector<double> noises{0.05};
  std::vector<uint64_t> seeds{42};
  std::string config_file, name;
  int threads = 0;
  bool distributed = false;
  models::TrainConfig cfg;
  DebugArgs debug;
};


std::string noise_str(double s) { return fmt::format("{:g}", s); }

// The task parameter a sweep varies, and its values.
std::pair<std::string, std::vector<int64_t>> sweep_of(const TrainArgs& a) {
  auto or_default = [](const std::vector<int64_t>& v, int64_t d) { return v.empty() ? std::vector<int64_t>{d} : v; };
  if (a.task == "coord-binding") return {"W", or_default(a.Ws, 20)};
  if (a.task == "coord-recall") return {"W", or_default(a.Ws, 32)};
  if (a.task == "map-building") return {"T", or_default(a.Ts, 32)};
  if (a.task == "map-recall") return {"T", or_default(a.Ts, 64)};
  if (a.task == "mqar") return {"P", a.Ps};
  if (a.task == "occlusion" || a.task == "occlusion-visible") return {"L", a.Ls};
  return {"length", {a.cfg.task_cfg.length}};
}

}  // namespace

void set_sweep(models::TrainConfig& c, const std::string& name, int64_t v) {
  if (name == "W") c.task_cfg.W = v;
  else if (name == "T") c.task_cfg.T = v;
  else if (name == "L") c.task_cfg.L = v;
  else if (name == "P") c.task_cfg.P = v;
  else if (name == "G") c.task_cfg.G = v;
  else c.task_cfg.length = v;
}

std::optional<json> cell_result(const models::TrainConfig& c, const std::string& fate) {
  const std::string path = c.run_dir + "/" + models::kResultFile;
  std::error_code ec;  // set for a link loop: the read below names it
  if (!std::filesystem::exists(path, ec) && !ec) return std::nullopt;
  json j;
  try {
    j = read_json_file(path, "cell");
  } catch (const IOError& e) {
    fmt::print(stderr, "warning: {}: {}\n", e.what(), fate);
    return std::nullopt;
  }
  const auto is_pair = [](const json& pt) {
    return pt.is_array() && pt.size() == 2 && pt[0].is_number() && pt[1].is_number();
  };
  const auto all_of = [](const json& a, auto pred) { return a.is_array() && std::all_of(a.begin(), a.end(), pred); };
  // Every other key run_or_reuse writes, where present (older results lack
  // some): a fraction, a count, a number (a NaN loss is written as null).
  const auto fraction = [&](const char* k) {
    return !j.contains(k) || (j[k].is_number() && j[k].get<double>() >= 0 && j[k].get<double>() <= 1);
  };
  const auto count = [&](const char* k, int64_t lo) {
    return !j.contains(k) || (j[k].is_number_integer() && j[k].get<int64_t>() >= lo);
  };
  const auto number = [&](const char* k) { return !j.contains(k) || j[k].is_number() || j[k].is_null(); };
  const bool whole =
      j.is_object() && j.contains("config") && j["config"].is_object() && j.contains("eval_accuracy") &&
      fraction("eval_accuracy") && fraction("train_accuracy") && fraction("eval_accuracy_observed") &&
      fraction("eval_accuracy_memory_off") && count("parameters", 0) && count("resumed_from", 0) &&
      count("state_floats", 0) && count("stopped_at", -1) && number("seconds") && number("final_loss") &&
      (!j.contains("gates") || all_of(j["gates"], [](const json& g) { return g.is_number(); })) &&
      (!j.contains("train_accuracy_curve") || all_of(j["train_accuracy_curve"], is_pair));
  if (!whole) {
    fmt::print(stderr, "warning: {} is not a finished run's result (a key is missing, of the wrong type or out of "
               "range): {}\n", path, fate);
    return std::nullopt;
  }
  return j;
}

std::string result_differences(const json& result, const models::TrainConfig& c, const std::string& except) {
  return models::config_differences(result["config"], models::config_to_json(c), models::default_config_json(),
                                    except);
}

namespace {

using Methods = std::vector<models::BackboneMethod>;

// The methods of a run without --method: the ceiling and the memory on the
// segmented tasks, else the baseline and the memory.
Methods default_methods(const std::string& task) {
  using enum models::BackboneMethod;
  return models::is_segmented_task(task) ? Methods{full, tensor} : Methods{base, tensor};
}

// "a, b or c" (last = " or ").
std::string method_names(const Methods& ms, const std::string& last) {
  std::string s;
  for (size_t i = 0; i < ms.size(); ++i) s += (i == 0 ? "" : i + 1 == ms.size() ? last : ", ") + to_string(ms[i]);
  return s;
}

bool has(const Methods& ms, models::BackboneMethod m) { return std::find(ms.begin(), ms.end(), m) != ms.end(); }

// A --method the task cannot train is a usage error: the segmented tasks
// take models::segmented_methods(), the others every method but none, full
// and xl (the segmented comparison's own names).
void check_methods_of_task(const std::string& task, const Methods& methods) {
  using enum models::BackboneMethod;
  const Methods& segmented = models::segmented_methods();
  const Methods diagnostic = {base, base_wide, slots, tensor, linear, ssm, rmt};
  const bool is_segmented = models::is_segmented_task(task);
  for (const auto m : methods) {
    if (is_segmented && !has(segmented, m))
      throw CLI::ValidationError("--method", fmt::format("the segmented task {} takes {}, but got {}", task,
                                                         method_names(segmented, " or "), to_string(m)));
    if (!is_segmented && !has(diagnostic, m))
      throw CLI::ValidationError("--method", fmt::format("the {} task takes {}, but got {} (a method of the segmented "
                                                         "tasks mqar, map-recall and coord-recall)", task,
                                                         method_names(diagnostic, " or "), to_string(m)));
  }
}

// An option of a method none of the run's methods is (default_methods when
// none is given) is a usage error, as a task option the task does not read
// is (check_task_options): it would be ignored.
void check_method_options(const CLI::App& app, const std::string& task, Methods methods) {
  using enum models::BackboneMethod;
  if (methods.empty()) methods = default_methods(task);
  const std::vector<std::pair<std::string, Methods>> readers = {
      {"--xl-cache", {xl}}, {"--linear-features", {linear}}, {"--ssm-state", {ssm}}, {"--memory-tokens", {rmt}},
      {"--mem-channels", {tensor}}, {"--mem-grid", {tensor}}, {"--sigma-scale", {tensor}},
      {"--memory-forget-bias", {tensor}}, {"--chunk", {tensor, slots}}, {"--leaky-memory", {tensor, slots}}};
  for (const auto& reader : readers) {
    const Methods& readers_of = reader.second;
    if (app.count(reader.first) == 0) continue;
    if (std::none_of(methods.begin(), methods.end(), [&readers_of](models::BackboneMethod m) { return has(readers_of, m); }))
      throw CLI::ValidationError(reader.first, fmt::format("it sets {}, and the run's methods are {}, so the option "
                                                           "would be ignored", method_names(readers_of, " or "),
                                                           method_names(methods, " and ")));
  }
}

// The losses an earlier run of a cell wrote; empty, with a warning naming
// the file, when it is missing, torn or not an array of numbers (the cell
// then has no loss curve).
std::vector<double> earlier_losses(const std::string& run_dir) {
  const std::string path = run_dir + "/" + models::kLossesFile;
  try {
    const json j = read_json_file(path, "train: losses");
    if (j.is_array() && std::all_of(j.begin(), j.end(), [](const json& x) { return x.is_number(); }))
      return j.get<std::vector<double>>();
    fmt::print(stderr, "warning: {} is not an array of numbers: its cell has no loss curve\n", path);
  } catch (const IOError& e) {
    fmt::print(stderr, "warning: {}: its cell has no loss curve\n", e.what());
  }
  return {};
}

// Draws a cell's training loss and accuracy curves into the run's plots.
void draw_cell(RunRecorder& rec, const models::TrainConfig& c, const std::string& name, const std::vector<double>& losses,
               const json& curve) {
  rec.add_curve("loss", {c.task + ": training loss (moving average)", "step", "cross-entropy (nats)"},
                smoothed_curve(name, losses, [](size_t i) { return static_cast<double>(i + 1); }));
  PlotSeries acc{name, {}, {}};
  for (const json& pt : curve) {
    acc.x.push_back(pt.at(0).get<double>());
    acc.y.push_back(100 * pt.at(1).get<double>());
  }
  rec.add_curve("accuracy", {c.task + ": training accuracy over the last 100 steps", "step", "query accuracy (%)"},
                acc);
  rec.draw();
}

// "12.3 steps/s", or "4.2 s/step" below one step a second (tqdm's it/s and
// s/it), so that a slow run's rate does not print as 0.0.
std::string rate_text(double steps_per_second) {
  if (steps_per_second >= 1 || steps_per_second <= 0) return fmt::format("{:.1f} steps/s", steps_per_second);
  return fmt::format("{:.1f} s/step", 1 / steps_per_second);
}

}  // namespace

json run_or_reuse(RunRecorder& rec, const std::string& cell_dir, models::TrainConfig c, const std::string& label,
                  const json& id, bool tty, RunEta* eta) {
  const std::string name = id.begin().value().get<std::string>();
  c.run_dir = rec.path(cell_dir);
  std::error_code ec;  // a checkpoint that cannot be looked at (a link loop) counts: loading it names why
  const bool have_checkpoint = std::filesystem::exists(c.run_dir + "/" + models::kCheckpointFile, ec) || ec;
  if (c.resume) {
    if (auto prior = cell_result(c, "the cell runs again")) {
      const std::string diff = result_differences(*prior, c);
      if (diff.empty()) {
        fmt::print("{}: done earlier, eval accuracy {:.1f}% (from {}/result.json)\n", name,
                   100 * prior->at("eval_accuracy").get<double>(), c.run_dir);
        draw_cell(rec, c, name, earlier_losses(c.run_dir), prior->value("train_accuracy_curve", json::array()));
        if (eta) eta->finish(0, 0);
        prior->update(id);  // the cell's directory names it, whatever an edited file says
        return *prior;
      }
      // A finished run is not replaced under --resume, that would lose it:
      // only a longer run of the same config continues, from its checkpoint.
      const std::string others = result_differences(*prior, c, "steps");
      const json& saved = (*prior)["config"];
      const json steps = saved.is_object() ? saved.value("steps", json()) : json();
      const bool longer = steps.is_number_integer() && steps.get<int64_t>() < c.steps && have_checkpoint;
      check<ValueError>(others.empty() && longer, name, ": ", c.run_dir, "/", models::kResultFile,
                        " holds a finished run of another config:", others.empty() ? diff : others,
                        others.empty() && !have_checkpoint ? "\n(and no checkpoint to extend it from)" : "",
                        "\n(give this run another --name, or run without --resume to replace it)");
    }
    if (!have_checkpoint)
      fmt::print("note: no checkpoint in {}, {} starts from step 0\n", c.run_dir, name);
  } else if (have_checkpoint) {
    fmt::print("note: {} holds a checkpoint, which {} replaces from step 0 (--resume would continue it)\n",
               c.run_dir, name);
  }
  rec.record_config();
  ensure_writable_dir(c.run_dir);
  models::TrainResult r = models::train_diagnostic(c, [&](const models::TrainProgress& p) {
    print_progress_line(label, "step", p.step, p.steps,
                        fmt::format("loss {:.4f}  acc {:>5.1f}%  {}", p.loss, 100 * p.accuracy,
                                    rate_text(p.steps_per_second)),
                        p.seconds, tty, 10, eta, p.start);
  });
  if (eta) eta->finish(static_cast<int64_t>(r.losses.size()), r.seconds);
  fmt::print("{}: eval accuracy {:.1f}%", label, 100 * r.eval_accuracy);
  if (r.eval_accuracy_observed >= 0) fmt::print(" (observed cells {:.1f}%)", 100 * r.eval_accuracy_observed);
  for (size_t l = 0; l < r.gates.size(); ++l) fmt::print("{}{:.3f}", l ? " " : ", gates ", r.gates[l]);
  if (r.eval_accuracy_memory_off >= 0) fmt::print(", memory off {:.1f}%", 100 * r.eval_accuracy_memory_off);
  if (r.state_floats > 0) fmt::print(", state {} floats", r.state_floats);
  if (r.stopped_at >= 0) fmt::print(", stopped at step {}", r.stopped_at);
  fmt::print(", {} params, {:.1f} s\n", r.parameters, r.seconds);
  json j = id;
  j.update({{"config", models::config_to_json(c)}, {"eval_accuracy", r.eval_accuracy},
            {"train_accuracy", r.train_accuracy}, {"seconds", r.seconds}, {"parameters", r.parameters},
            {"final_loss", r.losses.empty() ? 0.0 : r.losses.back()}, {"resumed_from", r.start_step},
            {"gates", r.gates}, {"train_accuracy_curve", r.accuracy_curve}, {"state_floats", r.state_floats},
            {"stopped_at", r.stopped_at}});
  if (r.eval_accuracy_observed >= 0) j["eval_accuracy_observed"] = r.eval_accuracy_observed;
  if (r.eval_accuracy_memory_off >= 0) j["eval_accuracy_memory_off"] = r.eval_accuracy_memory_off;
  rec.write_json(cell_dir + "/" + models::kLossesFile, r.losses, -1);
  rec.write_json(cell_dir + "/" + models::kResultFile, j);
  draw_cell(rec, c, name, r.losses, j["train_accuracy_curve"]);
  return j;
}

namespace {

int run_cells(TrainArgs& a) {
  if (a.threads > 0) set_num_threads(a.threads);
  check_batch_splits(a.cfg.batch);  // before runs/<name> is made
  auto [sweep, values] = sweep_of(a);
  check<ValueError>(!values.empty(), "train: --", sweep, " needs at least one value");
  std::unique_ptr<models::Task> task;  // validates the name early, with the sweep's first value
  try {
    models::TrainConfig first = a.cfg;
    set_sweep(first, sweep, values.front());
    task = models::make_task(a.task, first.task_cfg);
  } catch (const ValueError& e) {
    if (std::string_view(e.what()).starts_with("unknown task"))
      throw ValueError(std::string(e.what()) + "; tmem train also trains brown, fashion-mnist and moving-fmnist");
    throw;
  }
  if (a.methods.empty()) a.methods = default_methods(a.task);
  const bool coord = a.task == "coord-binding" || a.task == "coord-recall";
  if (!coord) a.noises = {a.cfg.task_cfg.noise};
  // Build every cell's model once before training, so a bad option (grid 0,
  // heads that do not divide dim) fails now, not after earlier cells trained.
  for (const auto& method : a.methods)
    for (int64_t v : values) {
      models::TrainConfig c = a.cfg;
      c.task = a.task;
      c.model.method = method;
      set_sweep(c, sweep, v);
      models::resolve_task_defaults(c);
      if (c.model.dim % c.model.heads != 0)
        throw CLI::ValidationError("--heads", fmt::format("{} heads do not divide the model width {} ({}); choose a "
                                                          "divisor of it", c.model.heads, c.model.dim,
                                                          a.cfg.model.dim == 0 ? "the task's default --dim" : "--dim"));
      auto task = models::make_task(c.task, c.task_cfg);
      Generator gen(0);
      models::DiagnosticModel check_model(*task, c.model, gen);
    }
  const Device device = parse_device(a.cfg.device);
  if (!device.is_cpu()) device_backend(device, "train");  // before any directory is made
  check<ValueError>(!a.cfg.resume || !a.name.empty(), "train: --resume needs --name (the run to continue)");
  if (a.name.empty()) a.name = timestamped_name(a.task);
  models::TrainConfig base = a.cfg;
  base.task = a.task;
  RunRecorder rec(a.name, "train " + a.task,
                  {{"methods", a.methods}, {"sweep", sweep}, {"values", values}, {"noises", a.noises},
                   {"seeds", a.seeds}, {"cell", models::config_to_json(base)}});
  if (a.cfg.resume) rec.check_resume({"methods", "values", "noises", "seeds", "method", "seed", "steps"});
  const std::string& root = rec.dir();
  const bool tty = isatty(fileno(stdout));
  fmt::print("tmem train {}: methods {} x {} {} x noise {} x seeds {}, {} steps, batch {}, {} -> {}\n",
             a.task, a.methods.size(), sweep, values.size(), a.noises.size(), a.seeds.size(),
             a.cfg.steps, a.cfg.batch, threads_and_ranks(), root);
  json cells = json::array();
  // (eval accuracy, on observed cells) of every seed of a (method, noise, value)
  std::map<std::tuple<models::BackboneMethod, double, int64_t>, std::vector<std::pair<double, double>>> table;
  // eval accuracy with the memory gates at 0 of every seed of a (method, noise, value) with Tensor Memory
  std::map<std::tuple<models::BackboneMethod, double, int64_t>, std::vector<double>> memory_off;
  // The cells in the order they train; one kind per method and sweep value
  // (the noise and the seed do not change the cost of a step). Until a kind
  // is timed, a Tensor Memory step is taken to cost 7 of another method's
  // (measured 4.5-12; 7.7 in the README's main job on 2026-12-06).
  std::vector<RunEta::Part> parts;
  for (const auto& method : a.methods)
    for (size_t n = 0; n < a.noises.size(); ++n)
      for (int64_t v : values)
        for (size_t s = 0; s < a.seeds.size(); ++s)
          parts.push_back({to_string(method) + " " + std::to_string(v), a.cfg.steps,
                           method == models::BackboneMethod::tensor ? 7.0 : 1.0});
  RunEta eta(std::move(parts));
  for (const auto& method : a.methods)
    for (double noise : a.noises)
      for (int64_t v : values)
        for (uint64_t seed : a.seeds) {
          models::TrainConfig c = a.cfg;
          c.task = a.task;
          c.model.method = method;
          set_sweep(c, sweep, v);
          c.task_cfg.noise = noise;
          c.seed = seed;
          models::resolve_task_defaults(c);
          std::string tag = sweep + std::to_string(v) + (coord ? "_s" + noise_str(noise) : "");
          std::string cell = to_string(method) + "_" + tag + "_seed" + std::to_string(seed);
          if (!a.cfg.dump_grads.empty()) c.dump_grads = rec.path(cell + "/" + a.cfg.dump_grads);
          const std::string label = to_string(method) + " " + sweep + "=" + std::to_string(v) +
                                    (coord ? " s=" + noise_str(noise) : "") + " seed " + std::to_string(seed);
          const json j = run_or_reuse(rec, cell, c, label, {{"cell", cell}}, tty, &eta);
          table[{method, noise, v}].push_back(
              {j.at("eval_accuracy").get<double>(), j.value("eval_accuracy_observed", -1.0)});
          if (j.contains("eval_accuracy_memory_off"))
            memory_off[{method, noise, v}].push_back(j.at("eval_accuracy_memory_off").get<double>());
          cells.push_back(j);
        }
  const bool observed = a.task == "map-building" || a.task == "map-recall";
  fmt::print("\n{} accuracy (%; eval, mean over {} seed{}{}), {} steps\n", a.task, a.seeds.size(),
             a.seeds.size() == 1 ? "" : "s", observed ? "; all / observed cells" : "", a.cfg.steps);
  fmt::print("{:<12} {:<7}", "method", coord ? "noise" : "");
  for (int64_t v : values) fmt::print(" {:>13}", sweep + "=" + std::to_string(v));
  fmt::print("\n");
  auto mean = [](const std::vector<double>& xs) {
    double m = 0;
    for (double x : xs) m += x / xs.size();
    return m;
  };
  for (const auto& method : a.methods)
    for (double noise : a.noises) {
      fmt::print("{:<12} {:<7}", to_string(method), coord ? noise_str(noise).c_str() : "");
      for (int64_t v : values) {
        std::vector<double> acc, obs;
        for (const auto& [x, o] : table[{method, noise, v}]) acc.push_back(x), obs.push_back(o);
        fmt::print(" {:>13}", observed ? fmt::format("{:.1f} / {:.1f}", 100 * mean(acc), 100 * mean(obs))
                                       : fmt::format("{:.1f}", 100 * mean(acc)));
      }
      fmt::print("\n");
    }
  bool any_off = false;
  for (const auto& method : a.methods)
    for (double noise : a.noises) {
      bool has = false;
      for (int64_t v : values) has = has || memory_off.count({method, noise, v});
      if (!has) continue;
      any_off = true;
      fmt::print("{:<12} {:<7}", to_string(method) + " -mem", coord ? noise_str(noise).c_str() : "");
      for (int64_t v : values) {
        auto it = memory_off.find({method, noise, v});
        fmt::print(" {:>13}", it == memory_off.end() ? "-" : fmt::format("{:.1f}", 100 * mean(it->second)));
      }
      fmt::print("\n");
    }
  if (any_off) fmt::print("(-mem: the same models on the same eval batches with every memory gate sigmoid(gamma) set to 0)\n");
  if (a.cfg.resume) {
    const size_t ran = cells.size();
    cells = rec.with_earlier("results.json", "cells", {"cell"}, std::move(cells));
    // The kept cells' curves stay in the run's plots, drawn from their own
    // result.json and losses.json.
    for (size_t i = ran; i < cells.size(); ++i) {
      const json& name = cells[i]["cell"];
      if (!name.is_string() || !is_plain_name(name.get<std::string>())) continue;
      models::TrainConfig kept = base;
      kept.run_dir = rec.path(name.get<std::string>());
      if (auto prior = cell_result(kept, "its curves are left out of the plots"))
        draw_cell(rec, kept, name.get<std::string>(), earlier_losses(kept.run_dir),
                  prior->value("train_accuracy_curve", json::array()));
    }
  }
  json results = {{"task", a.task}, {"cells", cells}};
  rec.write_json("results.json", results);
  fmt::print("results written to {}/results.json\n", root);
  return 0;
}

// With --distributed or under a launcher (mpirun, srun): data-parallel over
// the ranks of the job (run_training).
int run(TrainArgs& a) {
  return run_training("train", a.distributed, a.debug, [&a] { return run_cells(a); });
}

}  // namespace

std::function<int()> add_train_command(CLI::App& app, int argc, char** argv) {
  auto a = std::make_shared<TrainArgs>();
  a->task = a->cfg.task;
  // --config values are defaults that explicit flags override (--config FILE
  // or --config=FILE).
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg != "--config" && !arg.starts_with("--config=")) continue;
    if (arg == "--config" && i + 1 == argc) break;  // CLI11 reports the missing value
    const std::string path = arg == "--config" ? argv[i + 1] : arg.substr(9);
    const json j = read_json_file(path, "train: config file");
    try {
      models::apply_config_json(a->cfg, j);
    } catch (const ValueError& e) {
      throw ValueError("train: config file " + path + ": " + e.what());
    }
    if (j.contains("task")) a->task = a->cfg.task;
    if (j.contains("method")) a->methods = {a->cfg.model.method};
    if (j.contains("W")) a->Ws = {a->cfg.task_cfg.W};
    if (j.contains("T")) a->Ts = {a->cfg.task_cfg.T};
    if (j.contains("P")) a->Ps = {a->cfg.task_cfg.P};
    if (j.contains("L")) a->Ls = {a->cfg.task_cfg.L};
    if (j.contains("noise")) a->noises = {a->cfg.task_cfg.noise};
    if (j.contains("seed")) a->seeds = {a->cfg.seed};
  }
  auto& c = a->cfg;
  auto* t = app.add_subcommand("train", "Train a diagnostic task: base / base_wide / slots / tensor side by side "
                                        "(the segmented mqar, map-recall, coord-recall: full / tensor, or any of "
                                        "none / full / xl / linear / ssm / rmt / tensor; `train brown`: the language models; `train fashion-mnist`: the ViTs; "
                                        "`train moving-fmnist`: the video models)");
  t->footer("Measured time per cell (2000 steps at batch 128): coord-binding on 2 idle cores, base ~35 s and "
            "tensor ~5 min; on one thread beside another job, map-building base 1-4 min and tensor 6-27 min "
            "(T = 16-64), occlusion base ~9 min and tensor ~13 min, no-harm base ~1 min and tensor ~8 min. "
            "base_wide takes 1.1-1.2x base's time, slots 1.2-3.3x. Figures: docs/RESULTS.md.");
  t->add_option("task", a->task, "Task: coord-binding, map-building, occlusion, occlusion-visible, no-harm, or "
                                 "the segmented mqar, map-recall, coord-recall (methods none, full, xl, linear, "
                                 "ssm, rmt, tensor; tmem frontier sweeps their state sizes); "
                                 "brown trains the language models (see tmem train brown --help), fashion-mnist "
                                 "the ViTs (tmem train fashion-mnist --help), moving-fmnist the video models "
                                 "(tmem train moving-fmnist --help)")
      ->required();
  t->add_option("--config", a->config_file, "JSON config (keys as in results.json's config; unknown keys are errors)");
  add_method_option(*t, "--method", a->methods, models::parse_backbone_method,
                    "Methods, comma-separated: base, base_wide, slots, tensor (default base,tensor; segmented tasks: "
                    "none, full, xl, linear, ssm, rmt, tensor, default full,tensor)");
  t->add_option("--W", a->Ws, "Write-token counts, comma-separated (default 20; coord-recall 32)")->delimiter(',')
      ->check(int_range(1, 65536));
  t->add_option("--T", a->Ts, "map-building / map-recall: observation counts, comma-separated (default 32; "
                              "map-recall 64)")->delimiter(',')->check(int_range(1, 65536));
  t->add_option("--P", a->Ps, "mqar: key-value pairs, comma-separated (multiples of 16)")->delimiter(',')
      ->capture_default_str()->check(int_range(1, 65536));
  t->add_option("--G", c.task_cfg.G, "mqar / coord-recall: distractor segments")->capture_default_str()
      ->check(int_range(0, 65536));
  t->add_option("--xl-cache", c.model.cache_len, "xl (segmented tasks): cached tokens per layer M")->capture_default_str()
      ->check(int_range(0, 65536));
  t->add_option("--linear-features", c.model.linear_features, "linear: feature dimension per head")->capture_default_str()
      ->check(int_range(1, 65536));
  t->add_option("--ssm-state", c.model.ssm_state, "ssm: state dimension N")->capture_default_str()
      ->check(int_range(1, 65536));
  t->add_option("--memory-tokens", c.model.memory_tokens, "rmt: memory tokens R")->capture_default_str()
      ->check(int_range(1, 65536));
  t->add_option("--stop-accuracy", c.stop_accuracy, "Stop when the training accuracy over the last 100 steps "
                                                    "reaches this (0: never)")->capture_default_str()
      ->check(real_range(0, 1));
  t->add_option("--L", a->Ls, "occlusion: hidden-frame counts, comma-separated")->delimiter(',')->capture_default_str()
      ->check(int_range(0, 65536));
  t->add_option("--length", c.task_cfg.length, "no-harm: sequence length")->capture_default_str()
      ->check(int_range(2, 65536));
  t->add_option("--queries", c.task_cfg.queries, "coord-binding: query tokens")->capture_default_str()
      ->check(int_range(1, 65536));
  t->add_option("--noise", a->noises, "Query noise levels s, comma-separated")->delimiter(',')->capture_default_str()
      ->check(real_range(0, 100));
  t->add_option("--seed", a->seeds, "Seeds, comma-separated")->delimiter(',')->capture_default_str()
      ->check(kNonNegative);
  t->add_option("--steps", c.steps, "Training steps")->capture_default_str()->check(int_range(0, 1000000000));
  t->add_option("--batch", c.batch, "Batch size")->capture_default_str()->check(int_range(1, 65536));
  t->add_option("--lr", c.lr, "AdamW learning rate")->capture_default_str()->check(real_range(0, 10));
  t->add_option("--weight-decay", c.weight_decay, "AdamW weight decay (matrices only; biases, gains and memory gates get none)")->capture_default_str()
      ->check(real_range(0, 10));
  t->add_option("--clip", c.clip, "Gradient-norm clip")->capture_default_str()->check(real_range(0, 1e9, true));
  t->add_option("--dim", c.model.dim,
                 "Model width d (0: the task's - 64 for coord-binding and no-harm, 96 for map-building and occlusion)")
      ->capture_default_str()->check(int_range(0, 65536));
  t->add_option("--layers", c.model.layers, "Transformer layers")->capture_default_str()->check(int_range(1, 1024));
  t->add_option("--heads", c.model.heads, "Attention heads")->capture_default_str()->check(int_range(1, 1024));
  t->add_option("--mem-channels", c.model.memory.channels, "Memory channels C")->capture_default_str()
      ->check(int_range(1, 4096));
  t->add_option_function<int64_t>(
      "--mem-grid", [&c](const int64_t& g) { c.model.memory.D = c.model.memory.H = c.model.memory.W = g; },
      "Memory grid size D = H = W (default 6)")->check(int_range(1, 256));
  t->add_option("--chunk", c.model.memory.chunk, "Tokens per memory step K (0: the task's default)")->capture_default_str()
      ->check(int_range(0, 65536));
  t->add_option("--sigma-scale", c.model.memory.sigma_scale, "Write width multiplier")->capture_default_str()
      ->check(real_range(1e-3, 1e3));
  t->add_option("--memory-forget-bias", c.model.memory.forget_bias,
                "Initial bias of the memory's ConvLSTM3D forget gate (the method: 0, f = 0.5 at the start)")
      ->capture_default_str()->check(real_range(-20, 20));
  t->add_flag("--leaky-memory", c.model.leaky_memory, "Ablation: thread one memory state through all layers (reference code; not causal)");
  t->add_option("--eval-batches", c.eval_batches, "Held-out batches for the final accuracy")->capture_default_str()
      ->check(int_range(1, 1000000));
  t->add_option("--threads", a->threads, "OpenMP threads (default: all cores)")->check(int_range(0, kMaxThreads));
  add_distributed_option(*t, a->distributed);
  t->add_option("--device", c.device, "Train on cpu, cuda or cuda:<index>")->capture_default_str();
  t->add_option("--name", a->name, "Run name: results go to runs/<name>/ (default: task-date-time)");
  add_checkpoint_options(*t, c, "Continue each cell from its checkpoint under runs/<name>/ (a cell whose "
                              "result.json has the same config is not run again)");
  add_debug_options(*t, a->debug);
  return [t, a]() {
    if (!*t) return -1;
    check_task_options(*t, a->task, {"--W", "--T", "--P", "--G", "--L", "--length", "--queries", "--noise"});
    check_methods_of_task(a->task, a->methods);
    check_method_options(*t, a->task, a->methods);
    return run(*a);
  };
}

namespace {

struct Variant {
  std::string name;
  std::function<void(nn::TensorMemoryOptions&)> apply;
};

const std::vector<Variant>& ablation_variants() {
  static const std::vector<Variant> v = {
      {"tensor (Gaussian, shared, factorized, 6^3, chunk 1)", [](auto&) {}},
      {"hard write", [](auto& o) { o.hard_write = true; }},
      {"separate coordinate heads", [](auto& o) { o.shared_coords = false; }},
      {"pointwise-only update", [](auto& o) { o.factorized = false; }},
      {"grid 4^3", [](auto& o) { o.D = o.H = o.W = 4; }},
      {"grid 8^3", [](auto& o) { o.D = o.H = o.W = 8; }},
      {"chunk 2", [](auto& o) { o.chunk = 2; }},
      {"chunk 4", [](auto& o) { o.chunk = 4; }},
  };
  return v;
}

}  // namespace

std::function<int()> add_ablate_command(CLI::App& app) {
  auto cfg = std::make_shared<models::TrainConfig>();
  auto name = std::make_shared<std::string>();
  auto only = std::make_shared<std::vector<int>>();
  auto threads = std::make_shared<int>(0);
  auto debug = std::make_shared<DebugArgs>();
  cfg->task_cfg.W = 20;
  cfg->task_cfg.noise = 0.05;
  cfg->model.method = models::BackboneMethod::tensor;
  cfg->model.memory.chunk = 1;
  auto* t = app.add_subcommand("ablate", "Tensor Memory ablations on coord-binding (W=20, s=0.05)");
  t->footer("Measured on one thread beside another job: 3-18 min per variant (chunk 4 the fastest, grid 8^3 "
            "the slowest), 55 min for seven of the eight. Figures: docs/RESULTS.md.");
  t->add_option("--steps", cfg->steps, "Training steps per variant")->capture_default_str()
      ->check(int_range(0, 1000000000));
  t->add_option("--batch", cfg->batch, "Batch size")->capture_default_str()->check(int_range(1, 65536));
  t->add_option("--seed", cfg->seed, "Seed")->capture_default_str()->check(kNonNegative);
  std::string listing;
  for (size_t i = 0; i < ablation_variants().size(); ++i)
    listing += (i ? "; " : "") + std::to_string(i) + " " + ablation_variants()[i].name;
  t->add_option("--variants", *only, "Run only these variants, comma-separated (default: all): " + listing)->delimiter(',');
  t->add_option("--threads", *threads, "OpenMP threads (default: all cores)")->check(int_range(0, kMaxThreads));
  t->add_option("--name", *name, "Run name: results go to runs/<name>/");
  t->add_flag("--resume", cfg->resume, "Continue each variant from its checkpoint under runs/<name>/ (a variant whose result.json has the same config is not run again)");
  t->add_option("--checkpoint-every", cfg->checkpoint_every, "Checkpoint every N steps (0: only at the end)")
      ->check(int_range(0, 1000000000));
  add_debug_options(*t, *debug);
  return [t, cfg, name, only, threads, debug]() -> int {
    if (!*t) return -1;
    return run_with_debug(*debug, [&] {
      if (*threads > 0) set_num_threads(*threads);
      const auto& variants = ablation_variants();
      std::vector<int> chosen = *only;
      if (chosen.empty())
        for (size_t i = 0; i < variants.size(); ++i) chosen.push_back(static_cast<int>(i));
      for (int i : chosen)
        if (i < 0 || i >= static_cast<int>(variants.size()))
          throw ValueError("ablate: variant " + std::to_string(i) + " does not exist (0-" +
                           std::to_string(variants.size() - 1) + ")");
      RunRecorder rec(name->empty() ? std::string("ablate") : *name, "ablate",
                      {{"variants", chosen}, {"cell", models::config_to_json(*cfg)}});
      if (cfg->resume) rec.check_resume({"variants", "steps"});
      const bool tty = isatty(fileno(stdout));
      json rows = json::array();
      std::vector<RunEta::Part> parts;
      for (int i : chosen) parts.push_back({variants[i].name, cfg->steps});
      RunEta eta(std::move(parts));
      for (int i : chosen) {
        models::TrainConfig c = *cfg;
        variants[i].apply(c.model.memory);
        models::resolve_task_defaults(c);
        rows.push_back(run_or_reuse(rec, "variant" + std::to_string(i), c, variants[i].name,
                                    {{"variant", variants[i].name}}, tty, &eta));
      }
      fmt::print("\ncoord-binding W=20 s=0.05 ablations, {} steps, seed {}\n", cfg->steps, cfg->seed);
      fmt::print("{:<52} {:>10} {:>10} {:>10} {:>9}\n", "variant", "accuracy", "memory off", "params", "seconds");
      for (const auto& row : rows)
        fmt::print("{:<52} {:>9.1f}% {:>9.1f}% {:>10} {:>9.1f}\n", row["variant"].get<std::string>(),
                   100 * row["eval_accuracy"].get<double>(), 100 * row["eval_accuracy_memory_off"].get<double>(),
                   row["parameters"].get<int64_t>(), row["seconds"].get<double>());
      fmt::print("(memory off: the same models on the same eval batches with every memory gate sigmoid(gamma) set to 0)\n");
      if (cfg->resume) rows = rec.with_earlier("results.json", "ablations", {"variant"}, std::move(rows));
      rec.write_json("results.json", {{"ablations", rows}});
      fmt::print("results written to {}/results.json\n", rec.dir());
      return 0;
    });
  };
}

}  // namespace tmem::tools
