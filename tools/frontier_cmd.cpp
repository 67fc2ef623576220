#include "tmem/tools/frontier_cmd.h"

#include <unistd.h>

#include <algorithm>
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
#include "tmem/models/train_loop.h"
#include "tmem/models/trainer.h"
#include "tmem/tools/progress.h"
#include "tmem/tools/run_recorder.h"
#include "tmem/tools/train_cmd.h"

namespace tmem::tools {

namespace {

using nlohmann::json;

// One state size of a method: its label and how it sets the model config.
struct StateSize {
  std::string label;
  std::function<void(models::BackboneConfig&)> apply;
};

// The state sizes of each method, smallest first; the middle one picks the
// learning rate. Each bounded method spans about 500 to 30,000 floats at
// d = 64 and 2 layers (rmt stops at 8,192: 128 memory tokens already make a
// segment 17 times longer).
std::vector<StateSize> sizes_of(models::BackboneMethod method) {
  using enum models::BackboneMethod;
  auto knob = [](const std::string& prefix, std::vector<int64_t> values, int64_t models::BackboneConfig::*field) {
    std::vector<StateSize> v;
    for (int64_t x : values) v.push_back({prefix + std::to_string(x), [=](models::BackboneConfig& b) { b.*field = x; }});
    return v;
  };
  if (method == xl) return knob("M", {4, 32, 200}, &models::BackboneConfig::cache_len);
  if (method == linear) return knob("f", {4, 32, 200}, &models::BackboneConfig::linear_features);
  if (method == ssm) return knob("N", {4, 32, 200}, &models::BackboneConfig::ssm_state);
  if (method == rmt) return knob("R", {8, 32, 128}, &models::BackboneConfig::memory_tokens);
  if (method == tensor) {
    std::vector<StateSize> v;
    for (const auto& cg : {std::pair<int64_t, int64_t>{2, 4}, {16, 4}, {16, 8}}) {
      const int64_t c = cg.first, g = cg.second;  // named: the lambda captures them
      v.push_back({"C" + std::to_string(c) + "_" + std::to_string(g) + "^3", [=](models::BackboneConfig& b) {
                     b.memory.channels = c;
                     b.memory.D = b.memory.H = b.memory.W = g;
                   }});
    }
    return v;
  }
  return {{"-", [](models::BackboneConfig&) {}}};
}

struct FrontierArgs {
  std::string task;
  std::vector<models::BackboneMethod> methods = models::segmented_methods();
  std::vector<double> lrs{3e-4, 1e-3, 3e-3};
  std::vector<uint64_t> seeds{42, 43, 44};
  bool all_seeds = false, report_only = false;
  std::string vs;              // P or G: accuracy against that task parameter at the middle sizes
  std::vector<int64_t> values;  // its values
  std::vector<std::string> with;  // NAME=LABEL: other runs of the task reported beside this one
  int threads = 0;
  std::string name;
  models::TrainConfig cfg;
  DebugArgs debug;
};

std::string lr_str(double lr) { return fmt::format("{:g}", lr); }

// The floats a cell's method carries across segments (full: the KV cache of
// the whole input, 2 d T per layer).
int64_t floats_of(const models::TrainConfig& c) {
  auto task = models::make_task(c.task, c.task_cfg);
  if (c.model.method == models::BackboneMethod::full) return 2 * c.model.dim * task->seq_len() * c.model.layers;
  return models::state_floats(models::backbone_config_for(*task, c.model));
}

// The config of one cell: the run's options (base, its task set) with the
// cell's method, state size, learning rate and seed.
models::TrainConfig cell_config(const models::TrainConfig& base, models::BackboneMethod method, size_t size, double lr,
                                uint64_t seed) {
  models::TrainConfig c = base;
  c.model.method = method;
  sizes_of(method)[size].apply(c.model);
  c.lr = lr;
  c.seed = seed;
  return c;
}

std::string cell_name(models::BackboneMethod method, const std::string& size, double lr, uint64_t seed) {
  std::string s = size;
  std::replace(s.begin(), s.end(), '^', 'p');
  return to_string(method) + (s == "-" ? "" : "_" + s) + "_lr" + lr_str(lr) + "_seed" + std::to_string(seed);
}

// One cell of the grid: a method at one of its sizes (sizes_of), a learning
// rate and a seed.
struct CellKey {
  models::BackboneMethod method{};
  size_t size = 0;
  double lr = 0;
  uint64_t seed = 0;
};

std::string cell_name(const CellKey& k) { return cell_name(k.method, sizes_of(k.method)[k.size].label, k.lr, k.seed); }

// The directory of a --vs cell: its frontier cell's name and the sweep's
// parameter and value ("rmt_R32_lr0.0003_seed42_P32").
std::string vs_cell_name(const std::string& cell, const std::string& vs, int64_t value) {
  return cell + "_" + vs + std::to_string(value);
}

// Whether a cell directory is a --vs cell's (its name ends in _P<n> or
// _G<n>; a frontier cell's ends in _seed<n>).
bool is_vs_cell_name(const std::string& dir) {
  const std::string last = dir.substr(dir.rfind('_') + 1);
  return last.size() > 1 && (last[0] == 'P' || last[0] == 'G') &&
         std::all_of(last.begin() + 1, last.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
}

// The cells of method's grid in training order: first its learning rates at
// the middle size and the first seed (one per --lr), then, once `lr` is
// chosen among them (0: not yet, and the list ends there), the later seeds
// at the middle size (the equal-state comparison) before the other sizes at
// the first seed, the largest of which costs the most; --all-seeds adds the
// later seeds at the other sizes.
std::vector<CellKey> grid_of(const FrontierArgs& a, models::BackboneMethod method, double lr) {
  const size_t sizes = sizes_of(method).size(), middle = sizes / 2;
  std::vector<CellKey> cells;
  for (double r : a.lrs) cells.push_back({method, middle, r, a.seeds[0]});
  if (lr <= 0) return cells;
  for (size_t s = 1; s < a.seeds.size(); ++s) cells.push_back({method, middle, lr, a.seeds[s]});
  for (size_t i = 0; i < sizes; ++i)
    if (i != middle) cells.push_back({method, i, lr, a.seeds[0]});
  if (a.all_seeds)
    for (size_t s = 1; s < a.seeds.size(); ++s)
      for (size_t i = 0; i < sizes; ++i)
        if (i != middle) cells.push_back({method, i, lr, a.seeds[s]});
  return cells;
}

// Why the finished cell j in directory `dir` cannot be one of a frontier's
// cells ("" when it can): a method, size or learning rate no frontier
// trains, values out of their ranges, or a directory name other than the one
// its method, size, lr and seed give (a copied cell would count as a second
// seed, an edited lr would pick the learning rate).
std::string cell_fault(const json& j, const std::string& dir) {
  const std::vector<models::BackboneMethod>& known = models::segmented_methods();
  const auto method = std::find_if(known.begin(), known.end(),
                                   [&j](models::BackboneMethod m) { return to_string(m) == j["method"]; });
  if (method == known.end()) return fmt::format("method {} is not one of the frontier's", j["method"].dump());
  const auto sizes = sizes_of(*method);
  if (std::none_of(sizes.begin(), sizes.end(), [&j](const StateSize& z) { return z.label == j["size"]; }))
    return fmt::format("size {} is not one of {}'s", j["size"].dump(), to_string(*method));
  const double lr = j["lr"].get<double>(), acc = j["eval_accuracy"].get<double>(), sec = j["seconds"].get<double>();
  if (!(std::isfinite(lr) && lr > 0)) return fmt::format("lr {} is not a positive number", lr);
  if (!(acc >= 0 && acc <= 1)) return fmt::format("eval_accuracy {} is outside [0, 1]", acc);
  const double observed = j.value("eval_accuracy_observed", 0.0);
  if (!(observed >= 0 && observed <= 1)) return fmt::format("eval_accuracy_observed {} is outside [0, 1]", observed);
  if (!(std::isfinite(sec) && sec >= 0)) return fmt::format("seconds {} is not a time", sec);
  if (j.value("state_floats", int64_t{0}) < 0 || j["stopped_at"].get<int64_t>() < -1)
    return "state_floats or stopped_at is negative";
  const std::string name = cell_name(*method, j["size"].get<std::string>(), lr, j["seed"].get<uint64_t>());
  if (dir != name) return fmt::format("its method, size, lr and seed make the cell {}, not {}", name, dir);
  const json& cfg = j["config"];
  if (cfg.value("method", json()) != j["method"] || cfg.value("lr", json()) != j["lr"] ||
      cfg.value("seed", json()) != j["seed"])
    return "its config's method, lr or seed is not the cell's";
  return "";
}

// The result.json of every directory under root (none when root does not
// exist): the directory's name, the file's path, and its JSON or, when it
// does not parse, why.
struct CellFile {
  std::string dir, path, error;
  json j;
};
std::vector<CellFile> cell_files(const std::string& root) {
  std::vector<CellFile> files;
  std::error_code ec;
  if (!std::filesystem::is_directory(root, ec)) return files;
  for (const auto& e : std::filesystem::directory_iterator(root)) {
    CellFile f{e.path().filename().string(), (e.path() / "result.json").string(), "", json()};
    if (!std::filesystem::exists(f.path, ec) && !ec) continue;  // a link loop is read, and named below
    try {
      f.j = read_json_file(f.path, "frontier: cell");
    } catch (const IOError& err) {
      f.error = err.what();
    }
    files.push_back(std::move(f));
  }
  return files;
}

// Every finished frontier cell under root (none when root does not exist)
// trained with the run's options `base` (its task set; what=: whose options
// they are, for the warning): its result.json with the keys the report
// reads, of their types and ranges (cell_fault), and a config that is
// base's at the cell's method, size, lr and seed, so a cell of another T,
// batch or backbone is not averaged with the others; any other result.json
// is left out with a warning naming it. The cells of --vs sweeps are left
// out (finished_vs_cell reads them).
std::vector<json> finished_cells(const std::string& root, const models::TrainConfig& base, const std::string& what) {
  std::vector<json> cells;
  for (const CellFile& file : cell_files(root)) {
    if (is_vs_cell_name(file.dir)) continue;
    const std::string& path = file.path;
    if (!file.error.empty()) {
      fmt::print(stderr, "warning: {} is not a finished frontier cell ({}): left out\n", path, file.error);
      continue;
    }
    const json& j = file.j;
    if (!j.is_object()) {
      fmt::print(stderr, "warning: {} is not a finished frontier cell (it holds a JSON {}, not an object): left out\n",
                 path, j.type_name());
      continue;
    }
    const auto is = [&j](const char* key, bool (json::*type)() const noexcept) {
      return j.contains(key) && (j[key].*type)();
    };
    const auto optional = [&j, &is](const char* key, bool (json::*type)() const noexcept) {
      return !j.contains(key) || is(key, type);
    };
    if (!(is("method", &json::is_string) && is("size", &json::is_string) && is("lr", &json::is_number) &&
          is("seed", &json::is_number_unsigned) && is("eval_accuracy", &json::is_number) &&
          is("final_loss", &json::is_number) && is("stopped_at", &json::is_number_integer) &&
          is("seconds", &json::is_number) && is("config", &json::is_object) &&
          optional("state_floats", &json::is_number_integer) &&
          optional("eval_accuracy_observed", &json::is_number))) {
      fmt::print(stderr, "warning: {} is not a finished frontier cell (a key is missing or of the wrong type): left out\n",
                 path);
      continue;
    }
    try {
      models::TrainConfig cfg;
      models::apply_config_json(cfg, j["config"]);
      check<ValueError>(j["config"].value("task", "") == base.task, "its config is of task \"",
                        j["config"].value("task", ""), "\", not ", base.task);
      const std::string fault = cell_fault(j, file.dir);
      check<ValueError>(fault.empty(), fault);
      check<ValueError>(j["stopped_at"].get<int64_t>() <= cfg.steps, "stopped_at ", j["stopped_at"].get<int64_t>(),
                        " is past its config's ", cfg.steps, " steps");
      const auto sizes = sizes_of(cfg.model.method);
      size_t size = 0;  // cell_fault found the cell's size among them
      while (sizes[size].label != j["size"]) ++size;
      const std::string diff = models::config_differences(
          j["config"],
          models::config_to_json(cell_config(base, cfg.model.method, size, j["lr"].get<double>(),
                                             j["seed"].get<uint64_t>())),
          models::default_config_json(), "");
      check<ValueError>(diff.empty(), "it was trained with other settings than ", what, ":", diff);
    } catch (const Error& err) {
      fmt::print(stderr, "warning: {} is not a cell of this frontier ({}): left out\n", path, err.what());
      continue;
    }
    cells.push_back(j);
  }
  return cells;
}

// The learning rate of `method`: the best eval accuracy (ties: the lower
// final loss) among its cells at the middle size and the first seed; 0 when
// none has finished.
double chosen_lr(const std::vector<json>& cells, models::BackboneMethod method, uint64_t seed) {
  const auto sizes = sizes_of(method);
  const std::string middle = sizes[sizes.size() / 2].label;
  const json* best = nullptr;
  for (const json& c : cells) {
    if (c["method"] != to_string(method) || c["size"] != middle || c["seed"].get<uint64_t>() != seed) continue;
    if (!best || c["eval_accuracy"].get<double>() > (*best)["eval_accuracy"].get<double>() ||
        (c["eval_accuracy"] == (*best)["eval_accuracy"] &&
         c["final_loss"].get<double>() < (*best)["final_loss"].get<double>()))
      best = &c;
  }
  return best ? (*best)["lr"].get<double>() : 0.0;
}

struct Row {
  models::BackboneMethod method{};
  std::string size;
  int64_t floats = 0;
  double lr = 0;
  std::vector<double> acc, observed, stopped, seconds;
  int64_t never = 0;  // seeds that never reached the stop accuracy
};

double mean_of(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m += x / static_cast<double>(v.size());
  return m;
}

double sd_of(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  const double m = mean_of(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return std::sqrt(s / static_cast<double>(v.size() - 1));
}

// A --with run: another frontier run of the task, its label, and the
// options its cells were trained with (its config.json's).
struct WithRun {
  std::string name, label;
  models::TrainConfig cfg;
};

// "NAME=LABEL" as a WithRun; throws ValueError unless both parts are given,
// NAME is a run name, and runs/NAME holds a frontier of `task` whose
// config.json records the options of its cells (a train run or another
// task's frontier has no cells to put beside this one's).
WithRun parse_with(const std::string& arg, const std::string& task) {
  const size_t eq = arg.find('=');
  check<ValueError>(eq != std::string::npos && eq > 0 && eq + 1 < arg.size(),
                    "frontier: --with expects NAME=LABEL (e.g. frontier-mqar-fb3=forget bias 3), but got \"", arg, "\"");
  WithRun w{arg.substr(0, eq), arg.substr(eq + 1), {}};
  std::string dir;
  try {
    dir = run_dir(w.name);
  } catch (const ValueError&) {
    throw ValueError("frontier: --with " + printable(arg) +
                     ": NAME must be a run name, a plain folder of runs/ (no '/', not '.' or '..')");
  }
  check<ValueError>(std::filesystem::is_directory(dir), "frontier: --with ", arg, ": there is no run ", dir);
  const std::string command = recorded_command(dir);
  check<ValueError>(command == "frontier " + task, "frontier: --with ", arg, ": ", dir, " is ",
                    command.empty() ? std::string("no run of tmem (it has no config.json)")
                                    : "a run of `tmem " + printable(command) + "`",
                    ", not a frontier of ", task);
  const json recorded = read_json_file(dir + "/config.json", "frontier --with");
  const json* cell = recorded.contains("config") && recorded["config"].is_object() && recorded["config"].contains("cell")
                         ? &recorded["config"]["cell"]
                         : nullptr;
  check<ValueError>(cell && cell->is_object(), "frontier: --with ", arg, ": ", dir,
                    "/config.json does not record its cells' options (no config.cell object)");
  models::apply_config_json(w.cfg, *cell);
  w.cfg.task = task;  // runs before 2026-12-05 recorded the default task there
  return w;
}

// A row per (method, size) with finished cells at the method's chosen rate
// (the learning rates go into lr_choice).
std::vector<Row> rows_of(const std::vector<json>& cells, uint64_t first_seed, json& lr_choice) {
  std::vector<Row> rows;
  for (const auto method : models::segmented_methods()) {
    const double lr = chosen_lr(cells, method, first_seed);
    if (lr == 0) continue;
    lr_choice[to_string(method)] = lr;
    for (const auto& size : sizes_of(method)) {
      Row r;
      r.method = method;
      r.size = size.label;
      r.lr = lr;
      for (const json& c : cells) {
        if (c["method"] != to_string(method) || c["size"] != size.label || c["lr"].get<double>() != lr) continue;
        // What the cell measured on its carried tensors (xl's cache holds at
        // most the input, so M 200 carries less than its nominal 2 d M);
        // the formula for cells without it (full's KV cache, none's 0).
        const int64_t carried = c.value("state_floats", int64_t{0});
        models::TrainConfig cfg;
        models::apply_config_json(cfg, c["config"]);
        r.floats = carried > 0 ? carried : floats_of(cfg);
        r.acc.push_back(c["eval_accuracy"].get<double>());
        if (c.contains("eval_accuracy_observed")) r.observed.push_back(c["eval_accuracy_observed"].get<double>());
        const int64_t stop = c["stopped_at"].get<int64_t>();
        if (stop >= 0) r.stopped.push_back(static_cast<double>(stop));
        else ++r.never;
        r.seconds.push_back(c["seconds"].get<double>());
      }
      if (!r.acc.empty()) rows.push_back(r);
    }
  }
  return rows;
}

// Prints the table rows (observed: map-recall's accuracy on observed cells
// too) and returns them as JSON.
json print_rows(const std::vector<Row>& rows, bool observed) {
  json table = json::array();
  for (const Row& r : rows) {
    const std::string steps = r.stopped.empty() ? "never"
                              : fmt::format("{:.0f} ({}/{})", mean_of(r.stopped), r.stopped.size(), r.acc.size());
    fmt::print("{:<7} {:<9} {:>8} {:>7} {:>8.1f} +- {:>4.1f} {:>5}", to_string(r.method), r.size,
               r.floats, lr_str(r.lr), 100 * mean_of(r.acc), 100 * sd_of(r.acc), r.acc.size());
    if (observed) fmt::print(" {:>10.1f}", r.observed.empty() ? 0.0 : 100 * mean_of(r.observed));
    fmt::print(" {:>14} {:>9.0f}\n", steps, mean_of(r.seconds));
    json row = {{"method", r.method}, {"size", r.size}, {"state_floats", r.floats}, {"lr", r.lr},
                {"accuracy_mean", mean_of(r.acc)}, {"accuracy_sd", sd_of(r.acc)}, {"accuracies", r.acc},
                {"stopped_at", r.stopped}, {"never_stopped", r.never}, {"seconds_mean", mean_of(r.seconds)}};
    if (observed) row["observed_accuracy_mean"] = mean_of(r.observed);
    table.push_back(row);
  }
  return table;
}

bool bounded(models::BackboneMethod m) {
  return m != models::BackboneMethod::none && m != models::BackboneMethod::full;
}

// The table, results.json and frontier.svg over every finished cell in root
// (so lanes that trained different methods into one run share one report),
// and the bounded methods of each --with run beside them, labelled.
void report(const FrontierArgs& a, RunRecorder& rec, const std::vector<WithRun>& with_runs) {
  const std::string& root = rec.dir();
  const std::vector<json> cells = finished_cells(root, a.cfg, "this command's options");
  // A report under other options than the run's would replace its
  // results.json (and config.json) with an empty table.
  if (cells.empty()) {
    const std::vector<CellFile> files = cell_files(root);
    const auto kept = std::count_if(files.begin(), files.end(), [](const CellFile& f) { return !is_vs_cell_name(f.dir); });
    check<ValueError>(kept == 0, "frontier: no cell in ", root, " (", kept, " there) is a finished cell of this "
                      "command's options (the warnings above say why); give the command the run's options");
  }
  const uint64_t first_seed = a.seeds.front();
  json lr_choice = json::object();
  const std::vector<Row> rows = rows_of(cells, first_seed, lr_choice);
  const bool observed = a.task == "map-recall";
  fmt::print("\n{} frontier (eval accuracy %, mean +- sd over seeds; steps to {:.0f}% train accuracy)\n",
             a.task, 100 * a.cfg.stop_accuracy);
  fmt::print("{:<7} {:<9} {:>8} {:>7} {:>15} {:>5}{} {:>14} {:>9}\n", "method", "size", "floats", "lr", "accuracy",
             "seeds", observed ? "   observed" : "", "steps to stop", "seconds");
  const json table = print_rows(rows, observed);
  json with = json::array();
  std::vector<std::pair<std::string, std::vector<Row>>> extra;  // label, bounded rows
  for (const WithRun& w : with_runs) {
    json w_lr = json::object();
    const std::vector<json> w_cells = finished_cells(run_dir(w.name), w.cfg, "its run's options (its config.json)");
    std::vector<Row> w_rows = rows_of(w_cells, first_seed, w_lr);
    std::erase_if(w_rows, [](const Row& r) { return !bounded(r.method); });
    fmt::print("{} ({}):\n", w.label, run_dir(w.name));
    with.push_back({{"run", w.name}, {"label", w.label}, {"lr_choice", w_lr}, {"table", print_rows(w_rows, observed)},
                    {"cells", w_cells}});
    extra.emplace_back(w.label, std::move(w_rows));
  }
  // The plot: accuracy against log10 state floats, a line per bounded
  // method (and per bounded method of each --with run); none (floor) and
  // full (ceiling) as horizontal lines.
  std::vector<PlotSeries> series;
  double lo = 1e300, hi = -1e300;
  auto span = [&lo, &hi](const std::vector<Row>& rs) {
    for (const Row& r : rs)
      if (bounded(r.method) && r.floats > 0)
        lo = std::min(lo, std::log10(static_cast<double>(r.floats))), hi = std::max(hi, std::log10(static_cast<double>(r.floats)));
  };
  span(rows);
  for (const auto& e : extra) span(e.second);
  auto add_series = [&](const std::vector<Row>& rs, const std::string& suffix) {
    for (const auto method : models::segmented_methods()) {
      PlotSeries s{to_string(method) + suffix, {}, {}};
      for (const Row& r : rs) {
        if (r.method != method) continue;
        if (!bounded(method)) {
          if (lo > hi) continue;
          s.label += method == models::BackboneMethod::none ? " (floor)" : " (ceiling)";
          s.x = {lo, hi};
          s.y = {100 * mean_of(r.acc), 100 * mean_of(r.acc)};
        } else {
          s.x.push_back(std::log10(static_cast<double>(r.floats)));
          s.y.push_back(100 * mean_of(r.acc));
        }
      }
      if (!s.x.empty()) series.push_back(s);
    }
  };
  add_series(rows, "");
  for (const auto& e : extra) add_series(e.second, " (" + e.first + ")");
  for (const PlotSeries& s : series)
    rec.add_curve("frontier", {a.task + ": accuracy vs state size at equal backbone",
                               "log10 floats of state carried across segments", "eval accuracy (%)"}, s);
  rec.draw();
  // The cells of this invocation's grid (its --methods, --lr, --seed) not
  // finished yet: what the lanes still have to train.
  std::vector<std::string> to_run;
  std::string waiting;  // methods whose learning rate is not chosen yet
  for (const auto method : a.methods) {
    std::vector<json> tried;
    for (const CellKey& k : grid_of(a, method, 0))
      for (const json& c : cells)
        if (c["cell"] == cell_name(k)) tried.push_back(c);
    const bool chosen = tried.size() == a.lrs.size();
    for (const CellKey& k : grid_of(a, method, chosen ? chosen_lr(tried, method, first_seed) : 0))
      if (std::none_of(cells.begin(), cells.end(), [&](const json& c) { return c["cell"] == cell_name(k); }))
        to_run.push_back(cell_name(k));
    if (!chosen) waiting += (waiting.empty() ? "" : ", ") + to_string(method);
  }
  if (to_run.empty())
    fmt::print("every cell of the grid is in ({} methods, {} learning rates, {} seeds)\n", a.methods.size(),
               a.lrs.size(), a.seeds.size());
  else
    fmt::print("to run: {} cell{}{}: {}\n", to_run.size(), to_run.size() == 1 ? "" : "s",
               waiting.empty() ? "" : ", then the grid of " + waiting + " at the chosen learning rate",
               fmt::join(to_run, ", "));
  json out = {{"task", a.task}, {"lr_choice", lr_choice}, {"table", table}, {"cells", cells}, {"to_run", to_run}};
  if (!with.empty()) out["with"] = with;
  rec.write_json("results.json", out);
  fmt::print("results written to {}/results.json{}\n", root, series.empty() ? "" : (" and " + root + "/frontier.svg"));
}

// The finished --vs cell `name` under root trained with config c, or
// nothing (a missing one is simply not finished; a torn one, or one of other
// settings, is named in a warning).
std::optional<json> finished_vs_cell(const std::string& root, const std::string& name, models::TrainConfig c) {
  c.run_dir = root + "/" + name;
  std::optional<json> j = cell_result(c, "left out");
  if (!j) return j;
  const std::string diff = result_differences(*j, c);
  if (diff.empty()) return j;
  fmt::print(stderr, "warning: {}/{} was trained with other settings than this command's options:{}: left out\n",
             c.run_dir, models::kResultFile, diff);
  return std::nullopt;
}

// Accuracy against the task parameter a.vs (P or G) for every method at its
// middle size, its chosen learning rate and the first seed; the cells at the
// frontier's own value are the frontier's. Trains the cells not finished
// yet, or with --report only tables the finished ones ("-" for the others,
// which it lists). Writes vs-<P|G>.json and .svg; cells: the frontier's
// finished cells, read once by run().
void run_vs(const FrontierArgs& a, const std::vector<json>& cells, RunRecorder& rec, bool tty) {
  const uint64_t seed = a.seeds.front();
  json rows = json::array();
  std::vector<PlotSeries> series;
  std::vector<std::string> to_run;  // --report: the sweep's cells not finished yet
  fmt::print("\n{} accuracy (%) against {}, middle state size, seed {}\n{:<7} {:<9}", a.task, a.vs,
             seed, "method", "size");
  for (int64_t v : a.values) fmt::print(" {:>7}", a.vs + "=" + std::to_string(v));
  fmt::print("\n");
  for (const auto method : a.methods) {
    const double lr = chosen_lr(cells, method, seed);
    const size_t middle = sizes_of(method).size() / 2;
    const std::string size = sizes_of(method)[middle].label;
    PlotSeries s{to_string(method), {}, {}};
    std::vector<double> accs;  // NaN: not finished (--report)
    for (int64_t v : a.values) {
      models::TrainConfig c = cell_config(a.cfg, method, middle, lr, seed);
      const int64_t own = a.vs == "P" ? c.task_cfg.P : c.task_cfg.G;
      set_sweep(c, a.vs, v);
      std::string name = cell_name(method, size, lr, seed);
      if (v != own) name = vs_cell_name(name, a.vs, v);
      c.resume = true;
      std::optional<json> j;
      if (a.report_only) {
        j = finished_vs_cell(rec.dir(), name, c);
        if (!j) to_run.push_back(name);
      } else {
        j = run_or_reuse(rec, name, c, to_string(method) + " " + size + " " + a.vs + "=" + std::to_string(v),
                         {{"cell", name}, {"method", method}, {"size", size}, {"lr", lr}, {"seed", seed},
                          {"vs", a.vs}, {"value", v}},
                         tty);
      }
      accs.push_back(j ? (*j)["eval_accuracy"].get<double>() : std::nan(""));
      if (!j) continue;
      s.x.push_back(static_cast<double>(v));
      s.y.push_back(100 * accs.back());
    }
    fmt::print("{:<7} {:<9}", to_string(method), size);
    json acc_json = json::array();
    for (double x : accs) {
      if (std::isnan(x)) fmt::print(" {:>7}", "-");
      else fmt::print(" {:>7.1f}", 100 * x);
      acc_json.push_back(std::isnan(x) ? json() : json(x));
    }
    fmt::print("\n");
    rows.push_back({{"method", method}, {"size", size}, {"lr", lr}, {a.vs, a.values}, {"accuracy", acc_json}});
    if (!s.x.empty()) series.push_back(s);
  }
  if (a.report_only) {
    if (to_run.empty()) fmt::print("every cell of the sweep is in\n");
    else fmt::print("to run: {} cell{}: {}\n", to_run.size(), to_run.size() == 1 ? "" : "s", fmt::join(to_run, ", "));
  }
  const std::string base = rec.dir() + "/vs-" + a.vs;
  for (const PlotSeries& s : series)
    rec.add_curve("vs-" + a.vs, {a.task + ": accuracy against " + a.vs + " (middle state sizes)", a.vs,
                                 "eval accuracy (%)"}, s);
  rec.draw();
  json out = {{"task", a.task}, {"vs", a.vs}, {"rows", rows}};
  if (a.report_only) out["to_run"] = to_run;
  rec.write_json("vs-" + a.vs + ".json", out);
  fmt::print("results written to {}.json and {}.svg\n", base, base);
}

// Refuses to train into root when a finished cell there is of another task
// (a run that lost its config.json would be taken over and its results.json
// replaced) or was trained with other settings than this command gives it
// (its method, size, lr and seed from the cell, a --vs cell's P or G from
// its value): lanes that share a run must not mix a --batch 4 cell into a
// table of --batch 64 ones. "steps" may differ for this command's methods,
// whose cells --resume extends (run_or_reuse checks each of them).
void check_run_agrees(const FrontierArgs& a, const std::string& root) {
  for (const CellFile& file : cell_files(root)) {
    const json& j = file.j;
    const std::string& path = file.path;
    if (!file.error.empty()) continue;  // not a cell; the report names it
    if (!j.is_object() || !j.contains("config") || !j["config"].is_object()) continue;
    const json& saved = j["config"];
    const std::string task = saved.value("task", json("")).is_string() ? saved.value("task", "") : "";
    check<ValueError>(task == a.task, "frontier: --name: ", root, " holds cells of task \"", printable(task), "\" (",
                      path, "), not ", a.task, "; give this run another --name");
    std::string diff;
    try {
      const auto method = models::parse_backbone_method(j.at("method").get<std::string>());
      const auto sizes = sizes_of(method);
      const std::string label = j.at("size").get<std::string>();
      size_t size = 0;
      while (size < sizes.size() && sizes[size].label != label) ++size;
      if (size == sizes.size()) continue;
      models::TrainConfig expected = cell_config(a.cfg, method, size, j.at("lr").get<double>(), j.at("seed").get<uint64_t>());
      if (j.contains("vs")) set_sweep(expected, j.at("vs").get<std::string>(), j.at("value").get<int64_t>());
      const bool extendable = std::find(a.methods.begin(), a.methods.end(), method) != a.methods.end();
      diff = models::config_differences(saved, models::config_to_json(expected), models::default_config_json(),
                                        extendable ? "steps" : "");
    } catch (const std::exception&) {
      continue;  // a cell of another shape or method; the report names it
    }
    check<ValueError>(diff.empty(), "frontier: ", root, " holds cells trained with other settings than this ",
                      "command gives them (every lane of a run takes the same options); ",
                      file.dir, ":", diff, "\n(give this command the run's options, or another --name)");
  }
}

int run(FrontierArgs& a) {
  if (a.threads > 0) set_num_threads(a.threads);
  check<ValueError>(a.task == "mqar" || a.task == "map-recall" || a.task == "coord-recall",
                    "frontier: expected task mqar, map-recall or coord-recall, but got \"", a.task, "\"");
  a.cfg.task = a.task;
  check<ValueError>(!a.lrs.empty() && !a.seeds.empty(), "frontier: --lr and --seed need at least one value");
  for (double lr : a.lrs)
    check<ValueError>(std::isfinite(lr) && lr > 0, "frontier: --lr values must be positive, but got ", lr);
  // W unset: coord-recall's 32, else TaskConfig's (unused there, but part of every cell's config).
  if (a.cfg.task_cfg.W == 0) a.cfg.task_cfg.W = a.task == "coord-recall" ? 32 : models::TaskConfig().W;
  check<ValueError>(a.values.empty() || !a.vs.empty(), "frontier: --values ", shape_str(a.values),
                    " needs --vs P or --vs G");
  // A bad or absent device fails before the run directory is made.
  if (const Device d = parse_device(a.cfg.device); !d.is_cpu()) device_backend(d, "frontier");
  if (a.name.empty()) a.name = "frontier-" + a.task;
  check<ValueError>(!a.report_only || std::filesystem::exists(run_dir(a.name)), "frontier --report: there is no run ",
                    run_dir(a.name), " to report (start it without --report)");
  // --vs is checked whole (below: its values and learning rates) before the
  // run directory is made.
  if (!a.vs.empty()) {
    check<ValueError>(a.vs == "P" || a.vs == "G", "frontier: --vs takes P or G, but got \"", a.vs, "\"");
    check<ValueError>(a.vs == "G" || a.task == "mqar", "frontier: --vs P is for mqar, but the task is ", a.task);
    check<ValueError>(a.vs == "P" || a.task != "map-recall",
                      "frontier: --vs G is for mqar and coord-recall, but the task is map-recall (it has no distractor "
                      "segments)");
    check<ValueError>(!a.values.empty(), "frontier: --vs needs --values");
    check<ValueError>(a.with.empty(), "frontier: --with adds runs to the frontier's table and plot, not to --vs ", a.vs);
  }
  std::vector<WithRun> with_runs;
  for (const std::string& w : a.with) {
    with_runs.push_back(parse_with(w, a.task));
    check<ValueError>(with_runs.back().name != a.name, "frontier: --with ", w, " names this run itself");
  }
  // Build every (method, size) model once, so a bad option fails before any training.
  for (const auto method : a.methods)
    for (size_t i = 0; i < sizes_of(method).size(); ++i) {
      models::TrainConfig c = cell_config(a.cfg, method, i, a.lrs[0], a.seeds[0]);
      auto task = models::make_task(c.task, c.task_cfg);
      Generator gen(0);
      models::DiagnosticModel check_model(*task, c.model, gen);
    }
  std::vector<json> vs_cells;  // the frontier's finished cells, whose learning rates --vs takes
  if (!a.vs.empty()) {
    for (int64_t v : a.values) {  // each --vs value makes a valid task
      models::TrainConfig c = cell_config(a.cfg, a.methods.front(), 0, a.lrs[0], a.seeds[0]);
      set_sweep(c, a.vs, v);
      models::make_task(c.task, c.task_cfg);
    }
    vs_cells = finished_cells(run_dir(a.name), a.cfg, "this command's options");
    for (const auto method : a.methods)
      check<ValueError>(chosen_lr(vs_cells, method, a.seeds.front()) > 0, "frontier: --vs needs the learning rate of ",
                        to_string(method), ": run `tmem frontier ", a.task, " --name ", a.name, " --methods ",
                        to_string(method), "` first");
  }
  if (!a.report_only) check_run_agrees(a, run_dir(a.name));
  RunRecorder rec(a.name, "frontier " + a.task,
                  {{"methods", a.methods}, {"lrs", a.lrs}, {"seeds", a.seeds}, {"all_seeds", a.all_seeds},
                   {"vs", a.vs}, {"values", a.values}, {"cell", models::config_to_json(a.cfg)}});
  const std::string& root = rec.dir();
  const bool tty = isatty(fileno(stdout));
  if (!a.vs.empty()) {
    run_vs(a, vs_cells, rec, tty);
    return 0;
  }
  if (!a.report_only) {
    fmt::print("tmem frontier {}: methods {}, learning rates {}, seeds {} ({}), up to {} steps, batch {}, "
               "{} threads -> {}\n",
               a.task, a.methods.size(), a.lrs.size(), a.seeds.size(),
               a.all_seeds ? "every size" : "later seeds at the middle size", a.cfg.steps,
               a.cfg.batch, get_num_threads(), root);
    auto train = [&](const CellKey& k) {
      models::TrainConfig c = cell_config(a.cfg, k.method, k.size, k.lr, k.seed);
      const std::string label = sizes_of(k.method)[k.size].label;
      const std::string name = cell_name(k);
      return run_or_reuse(rec, name, c,
                          to_string(k.method) + " " + label + " lr " + lr_str(k.lr) + " seed " + std::to_string(k.seed),
                          {{"cell", name}, {"method", k.method}, {"size", label}, {"lr", k.lr}, {"seed", k.seed}}, tty);
    };
    for (const auto method : a.methods) {
      std::vector<json> tried;
      for (const CellKey& k : grid_of(a, method, 0)) tried.push_back(train(k));
      const double lr = chosen_lr(tried, method, a.seeds[0]);
      fmt::print("{}: learning rate {} (best eval accuracy at {}, seed {})\n", to_string(method),
                 lr_str(lr), sizes_of(method)[sizes_of(method).size() / 2].label, a.seeds[0]);
      const std::vector<CellKey> grid = grid_of(a, method, lr);
      for (size_t i = a.lrs.size(); i < grid.size(); ++i) train(grid[i]);
    }
  }
  report(a, rec, with_runs);
  return 0;
}

}  // namespace

std::function<int()> add_frontier_command(CLI::App& app) {
  auto a = std::make_shared<FrontierArgs>();
  auto& c = a->cfg;
  c.steps = 4000;
  c.batch = 64;
  c.stop_accuracy = 0.99;
  c.checkpoint_every = 100;
  c.model.dim = 64;
  c.model.memory.chunk = 1;
  c.task_cfg.T = 64;
  c.task_cfg.W = 0;
  auto* f = app.add_subcommand("frontier", "Accuracy against state size at equal backbone: every segment-recurrent "
                                           "method (none, full, xl, linear, ssm, rmt, tensor) at 3 state sizes on "
                                           "mqar, map-recall or coord-recall");
  f->footer("Per method: the learning rate with the best eval accuracy at the middle state size and the first seed, "
            "then the later seeds at the middle size, then the first seed at the other sizes (--all-seeds: "
            "every seed). Cells train up to --steps, stopping once the training accuracy over 100 steps reaches "
            "--stop-accuracy. Lanes: run one process per method group into the same --name (e.g. --methods "
            "tensor --threads 1 next to --methods none,full,xl,linear,ssm,rmt --threads 1); each writes the table "
            "of every cell finished so far, and --report rewrites it. Measured time per mqar cell (4000 steps unless it "
            "stops at 99%) on one thread beside other jobs, 2026-12-01 to 12-03: none 4-95 min, full 10-43 min, "
            "xl M 32 17-146 min, linear f 32 10-87 min, ssm N 32 27-102 min (N 200 187 min), rmt R 32 78-101 min, "
            "tensor C 16 at 4^3 32-75 min; coord-recall's tensor C 16 at 4^3 86 min; its C 16 at 8^3 about 2 s of CPU a "
            "step (over 2 hours a cell; 2026-12-04, denormals flushed). Figures: docs/RESULTS.md.");
  f->add_option("task", a->task, "mqar, map-recall or coord-recall")->required();
  add_method_option(*f, "--methods", a->methods, models::parse_segmented_method, "Methods, comma-separated");
  f->add_option("--lr", a->lrs, "Learning rates to choose from, comma-separated")->delimiter(',')->capture_default_str()
      ->check(real_range(0, 10));
  f->add_option("--seed", a->seeds, "Seeds, comma-separated (the first picks the learning rate)")
      ->delimiter(',')->capture_default_str()->check(kNonNegative);
  f->add_flag("--all-seeds", a->all_seeds, "Run every seed at every size (default: later seeds at the middle size)");
  f->add_option("--steps", c.steps, "Most training steps per cell")->capture_default_str()->check(int_range(1, 1000000000));
  f->add_option("--batch", c.batch, "Batch size")->capture_default_str()->check(int_range(1, 65536));
  f->add_option("--stop-accuracy", c.stop_accuracy, "Stop a cell once its training accuracy over 100 steps reaches this")
      ->capture_default_str()->check(real_range(0, 1));
  f->add_option("--eval-batches", c.eval_batches, "Held-out batches for the accuracy")->capture_default_str()->check(int_range(1, 65536));
  f->add_option("--P", c.task_cfg.P, "mqar: key-value pairs")->capture_default_str()->check(int_range(1, 65536));
  f->add_option("--G", c.task_cfg.G, "mqar / coord-recall: distractor segments")->capture_default_str()->check(int_range(0, 65536));
  f->add_option("--T", c.task_cfg.T, "map-recall: observations")->capture_default_str()->check(int_range(1, 65536));
  f->add_option("--W", c.task_cfg.W, "coord-recall: written keys (default 32)")->check(int_range(1, 65536));
  f->add_option("--noise", c.task_cfg.noise, "coord-recall: query noise s")->capture_default_str()->check(real_range(0, 10));
  f->add_option("--memory-forget-bias", c.model.memory.forget_bias,
                "tensor: initial bias of the memory's forget gate (the method: 0); a variant, so give it its own --name")
      ->capture_default_str()->check(real_range(-20, 20));
  f->add_option("--threads", a->threads, "OpenMP threads (default: all cores)")->check(int_range(0, kMaxThreads));
  f->add_option("--device", c.device,
                "Train on cpu, cuda or cuda:<index> (a cell's device is recorded in its result.json; a cell finished "
                "or checkpointed on one device is reused or continued on another)")
      ->capture_default_str();
  f->add_option("--name", a->name, "Run name: results go to runs/<name>/ (default frontier-<task>)");
  f->add_flag("--resume", c.resume, "Reuse finished cells and continue the others from their checkpoints");
  f->add_option("--checkpoint-every", c.checkpoint_every, "Checkpoint every N steps")->capture_default_str()->check(int_range(0, 1000000000));
  f->add_flag("--report", a->report_only, "Train nothing: write the table and plot of the cells finished so far with this command's options (give the "
                "run's --steps, --batch and task options; a cell trained with others is named and left out), and list the "
                "cells of the grid (--methods, --lr, --seed) still to run");
  f->add_option("--vs", a->vs, "P (mqar) or G: accuracy against that task parameter for every method at its middle "
                               "size, chosen learning rate and first seed (needs the frontier's learning rates); "
                               "with --report, the table of the finished cells and the list of the others");
  f->add_option("--with", a->with,
                "Also table and plot the bounded methods of another frontier run of this task, labelled: NAME=LABEL "
                "(e.g. frontier-coord-recall-fb3=forget bias 3), its cells checked against the options its config.json "
                "records; repeatable");
  f->add_option("--values", a->values, "--vs values, comma-separated (e.g. 16,32,64,128)")->delimiter(',')
      ->check(int_range(0, 65536));
  add_debug_options(*f, a->debug);
  return [f, a]() {
    if (!*f) return -1;
    check_task_options(*f, a->task, {"--P", "--G", "--T", "--W", "--noise"});
    return run_with_debug(a->debug, [&] { return run(*a); });
  };
}

}  // namespace tmem::tools
