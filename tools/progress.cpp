#include "tmem/tools/progress.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <limits>
#include <memory>
#include <new>
#include <map>

#include <fmt/format.h>

#include "tmem/core/autograd.h"
#include "tmem/core/error.h"
#include "tmem/core/file_io.h"
#include "tmem/core/parallel.h"
#include "tmem/core/profiler.h"
#include "tmem/dist/dist.h"
#include "tmem/models/tasks.h"

namespace tmem::tools {

std::string fmt_time(double s) {
  const int t = static_cast<int>(std::lround(std::max(s, 0.0)));
  if (t >= 3600) return fmt::format("{}:{:02}:{:02}", t / 3600, t / 60 % 60, t % 60);
  return fmt::format("{}:{:02}", t / 60, t % 60);
}

std::string progress_bar(int64_t done, int64_t total, int width) {
  const int filled =
      total > 0 ? static_cast<int>(std::clamp<int64_t>(width * done / total, 0, width)) : 0;
  std::string bar(static_cast<size_t>(filled), '#');
  bar.append(static_cast<size_t>(width - filled), '.');
  return bar;
}

std::vector<double> moving_average(const std::vector<double>& v, size_t w) {
  w = std::max<size_t>(w, 1);
  std::vector<double> out(v.size());
  double acc = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    acc += v[i];
    if (i >= w) acc -= v[i - w];
    out[i] = acc / static_cast<double>(std::min(i + 1, w));
  }
  return out;
}

double progress_eta(int64_t done, int64_t total, double seconds, int64_t start, const RunEta* run) {
  const double per_step = done > start ? seconds / static_cast<double>(done - start) : 0;
  return run ? run->seconds_left(total - done, per_step) : per_step * static_cast<double>(total - done);
}

namespace {

bool progress_line_open = false;  // the last progress line went to a terminal without its newline

}  // namespace

void end_progress_line() {
  if (!progress_line_open) return;
  progress_line_open = false;
  std::fflush(stdout);
  fmt::print(stderr, "\n");  // on the stream of the message that follows, as mpirun forwards each on its own
}

void print_progress_line(const std::string& label, const std::string& unit, int64_t done, int64_t total,
                         const std::string& fields, double seconds, bool tty, int64_t lines, const RunEta* run,
                         int64_t start) {
  const bool last = done == total;
  if (start > 0 && done == start + 1) fmt::print("{}: resumed from its checkpoint at {} {}/{}\n", label, unit, start, total);
  const int64_t every = std::max<int64_t>(total / std::max<int64_t>(lines, 1), 1);
  if (!tty && !last && done % every != 0) return;
  // A terminal's line at most 10 times a second (and at the first and last
  // step): fast steps printed hundreds a second, which filled mpirun's
  // terminal buffer once it stopped reading on Ctrl-C, blocking rank 0
  // before it could save its checkpoint.
  static std::chrono::steady_clock::time_point shown;
  const auto now = std::chrono::steady_clock::now();
  if (tty && !last && done != start + 1 && now - shown < std::chrono::milliseconds(100)) return;
  shown = now;
  const double eta = progress_eta(done, total, seconds, start, run);
  fmt::print("{}{} [{}] {} {}/{}  {}  ETA {}{}{}", tty ? "\r" : "", label, progress_bar(done, total),
             unit, done, total, fields, run && run->guessed() ? "~" : "", fmt_time(eta), tty && !last ? "" : "\n");
  std::fflush(stdout);
  progress_line_open = tty && !last;
}

double RunEta::seconds_left(int64_t steps_left, double seconds_per_step) const {
  const double current = std::max(seconds_per_step, 0.0);
  double left = static_cast<double>(steps_left) * current;
  for (size_t i = current_ + 1; i < parts_.size(); ++i) {
    const auto it = done_.find(parts_[i].kind);
    const bool measured = it != done_.end() && it->second.first > 0;
    left += static_cast<double>(parts_[i].steps) *
            (measured ? it->second.second / static_cast<double>(it->second.first)
                      : current * parts_[i].cost / parts_[current_].cost);
  }
  return left;
}

bool RunEta::guessed() const {
  for (size_t i = current_ + 1; i < parts_.size(); ++i) {
    const auto it = done_.find(parts_[i].kind);
    if (parts_[i].kind != parts_[current_].kind && (it == done_.end() || it->second.first == 0)) return true;
  }
  return false;
}

void RunEta::finish(int64_t steps, double seconds) {
  check<ValueError>(current_ < parts_.size(), "RunEta::finish: all ", parts_.size(), " parts are finished");
  if (steps > 0) {
    auto& [s, t] = done_[parts_[current_].kind];
    s += steps;
    t += seconds;
  }
  ++current_;
}

bool is_plain_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find_first_of("/\\") == std::string::npos &&
         std::none_of(name.begin(), name.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; });
}

std::string run_dir(const std::string& name) {
  if (!is_plain_name(name))
    throw ValueError("--name: expected a plain directory name under runs/ (no '/' or control characters, not '.' or "
                     "'..'), but got \"" +
                     printable(name) + "\"");
  return "runs/" + name;
}

CLI::Validator file_in_run_dir(std::vector<std::string> reserved) {
  std::string names;
  for (const std::string& r : reserved) names += (names.empty() ? "" : ", ") + r;
  return CLI::Validator(
      [reserved, names](const std::string& v) -> std::string {
        if (!is_plain_name(v))
          return "expected a plain file name inside the run directory (no '/', not '.' or '..'), but got \"" +
                 printable(v) + "\"";
        if (std::find(reserved.begin(), reserved.end(), v) != reserved.end())
          return "\"" + v + "\" is a file the run writes itself (" + names + "); choose another name";
        return "";
      },
      "FILE");
}

namespace {

// The message for a value that is not a plain integer in [lo, hi] ("" when it is one).
std::string int_error(const std::string& v, int64_t lo, int64_t hi) {
  int64_t x = 0;
  const char* end = v.data() + v.size();
  const auto [p, ec] = std::from_chars(v.data(), end, x);
  const std::string range = "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  if (v.empty()) return "expected " + range + ", but got an empty value";
  if (ec == std::errc::result_out_of_range) return "expected " + range + ", but got " + printable(v) + " (too large)";
  if (ec != std::errc() || p != end) return "expected " + range + ", but got \"" + printable(v) + "\"";
  if (x < lo || x > hi) return "expected " + range + ", but got " + v;
  return "";
}

std::string real_error(const std::string& v, double lo, double hi, bool open = false) {
  const std::string range =
      std::isfinite(lo) && std::isfinite(hi)
          ? fmt::format("a finite number in {}{:g}, {:g}{}", open ? '(' : '[', lo, hi, open ? ')' : ']')
      : std::isfinite(lo) ? fmt::format("a finite number {} {:g}", open ? ">" : ">=", lo)
      : std::isfinite(hi) ? fmt::format("a finite number {} {:g}", open ? "<" : "<=", hi)
                          : std::string("a finite number");
  if (v.empty()) return "expected " + range + ", but got an empty value";
  double x = 0;
  const char* end = v.data() + v.size();
  const auto [p, ec] = std::from_chars(v.data(), end, x);
  if (ec != std::errc() || p != end || !std::isfinite(x))
    return "expected " + range + ", but got \"" + printable(v) + "\"";
  if (x < lo || x > hi || (open && (x == lo || x == hi))) return "expected " + range + ", but got " + v;
  return "";
}

}  // namespace

CLI::Validator int_range(int64_t lo, int64_t hi) {
  return CLI::Validator([lo, hi](const std::string& v) { return int_error(v, lo, hi); },
                        "INT in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
}

CLI::Validator real_range(double lo, double hi, bool open) {
  return CLI::Validator([lo, hi, open](const std::string& v) { return real_error(v, lo, hi, open); },
                        fmt::format("in {}{:g}, {:g}{}", open ? '(' : '[', lo, hi, open ? ')' : ']'));
}

const CLI::Validator kPositive = int_range(1, std::numeric_limits<int64_t>::max());
const CLI::Validator kNonNegative = int_range(0, std::numeric_limits<int64_t>::max());

void check_every_option(CLI::App& app) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  for (CLI::Option* o : app.get_options()) {
    if (o->get_type_size() == 0) continue;  // a flag
    // The type as CLI11 names it, before the descriptions of the checks.
    const std::string full = o->get_type_name(), type = full.substr(0, full.find(':'));
    if (type == "INT" || type == "UINT") {
      const int64_t lo = type == "INT" ? -kMax - 1 : 0;
      o->check(CLI::Validator([lo](const std::string& v) { return int_error(v, lo, kMax); }, ""));
      // CLI11 converts with base 0, reading 010 as 8 and 0042 as 34: drop
      // leading zeros, so every integer is read in base 10 as int_error did.
      o->transform(CLI::Validator(
          [](std::string& v) {
            const size_t digits = v.find_first_not_of("+-");
            if (digits > 1 || digits == std::string::npos ||
                v.find_first_not_of("0123456789", digits) != std::string::npos)
              return std::string();  // not a plain integer: int_error names it as written
            const size_t first = std::min(v.find_first_not_of('0', digits), v.size() - 1);
            if (first > digits) v.erase(digits, first - digits);
            return std::string();
          },
          ""));
    }
    else if (type == "FLOAT")
      o->check(CLI::Validator([](const std::string& v) { return real_error(v, -HUGE_VAL, HUGE_VAL); }, ""));
    else
      o->check(CLI::Validator(
          [](const std::string& v) { return v.empty() ? std::string("expected a value, but got an empty one") : ""; },
          ""));
  }
  // A list naming a value twice would run the same cell twice (1e-3 and
  // 0.001 are one learning rate), and two numbers that agree to the 6
  // significant digits that name runs and cells ({:g}) would train into one
  // cell, the second overwriting the first.
  app.parse_complete_callback([&app] {
    for (const CLI::Option* o : app.get_options()) {
      if (o->get_type_size() == 0 || o->get_items_expected_max() <= 1) continue;
      const bool real = o->get_type_name().starts_with("FLOAT");
      std::map<std::string, std::string> seen;  // the value as cells name it -> the value as given
      for (const std::string& v : o->results()) {
        const double x = std::strtod(v.c_str(), nullptr);
        const auto [it, fresh] = seen.emplace(real ? fmt::format("{:g}", x) : v, v);
        if (fresh) continue;
        // The same bits, not ==, which the flushed denormals make true for 0 and 1e-320.
        const double earlier = std::strtod(it->second.c_str(), nullptr);
        if (!real || std::bit_cast<uint64_t>(earlier) == std::bit_cast<uint64_t>(x))
          throw CLI::ValidationError(o->get_name(), "the value \"" + printable(v) + "\" is given twice");
        throw CLI::ValidationError(o->get_name(), "the values \"" + printable(it->second) + "\" and \"" + printable(v) +
                                                      "\" agree to the 6 significant digits that name runs and cells (" +
                                                      it->first + "): give values that differ there");
      }
    }
  });
  for (CLI::App* sub : app.get_subcommands({})) check_every_option(*sub);
}

namespace {
std::string generated_name;  // the run name timestamped_name made, if any
}  // namespace

std::string timestamped_name(const std::string& prefix) {
  char buf[64];
  std::time_t now = std::time(nullptr);
  if (dist::is_initialized()) {
    Tensor t = tensor_int({static_cast<int64_t>(now)}, {1});
    dist::broadcast(t, 0);
    now = static_cast<std::time_t>(t.to_int_vector()[0]);
  }
  std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", std::localtime(&now));
  generated_name = prefix + "-" + buf;
  return generated_name;
}

std::string interrupted_message(const models::Interrupted& e) {
  if (generated_name.empty()) return e.what();
  return fmt::format("{}; this run's generated name is {}, so add --name {}", e.what(), generated_name, generated_name);
}

namespace {

// Says where a stopped run stopped and how to continue it; the exit status 130.
int report_interrupted(const models::Interrupted& e) {
  end_progress_line();
  fmt::print(stderr, "tmem: {}\n", interrupted_message(e));
  return 130;
}

}  // namespace

void add_checkpoint_options(CLI::App& app, models::CheckpointOptions& o, const std::string& resume_help) {
  app.add_flag("--resume", o.resume, resume_help);
  app.add_option("--checkpoint-every", o.checkpoint_every, "Checkpoint every N steps (0: only at the end)")
      ->check(int_range(0, 1000000000));
  app.add_option("--dump-grads", o.dump_grads, "Write gradient dumps to FILE inside each run directory (a plain "
                                               "file name; --resume keeps the steps dumped before the checkpoint)")
      ->check(file_in_run_dir({models::kCheckpointFile, models::kResultFile, models::kLossesFile}));
  app.add_option("--dump-every", o.dump_every, "Dump every N steps")->capture_default_str()
      ->check(int_range(1, 1000000000));
  app.add_flag("--dump-values", o.dump_values, "Include every gradient value in the dumps");
}

void add_run_options(CLI::App& app, int& threads, std::string& name, std::string& data_dir,
                     const std::string& name_default, const std::string& data_help) {
  app.add_option("--threads", threads, "OpenMP threads (default: all cores)")->check(int_range(0, kMaxThreads));
  app.add_option("--name", name, "Run name: results go to runs/<name>/ (default: " + name_default + ")");
  app.add_option("--data-dir", data_dir, data_help)->capture_default_str();
}

void add_debug_options(CLI::App& app, DebugArgs& d, bool anomaly) {
  app.add_option("--profile", d.profile,
                 "Profile the run: print per-op forward/backward times, calls and MB allocated at the end, and "
                 "write a Chrome trace (open it in ui.perfetto.dev or chrome://tracing) to FILE");
  if (anomaly)
    app.add_flag("--detect-anomaly", d.detect_anomaly,
                 "Check every op's outputs for NaN and its gradients for NaN/Inf; the first one stops the run "
                 "with an error naming the op (slow)");
}

int run_with_debug(const DebugArgs& d, const std::function<int()>& run) {
  std::unique_ptr<profiler> prof;
  if (!d.profile.empty()) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (fs::is_directory(d.profile, ec))
      throw IOError("--profile: " + printable(d.profile) + " is a directory; expected a file name for the trace");
    const fs::path parent = fs::path(d.profile).parent_path();
    try {
      ensure_writable_dir(parent.empty() ? "." : parent.string());
    } catch (const IOError& e) {
      throw IOError("--profile: cannot write the trace " + printable(d.profile) + ": " + e.what());
    }
    prof = std::make_unique<profiler>();
  }
  const AnomalyModeGuard anomaly(d.detect_anomaly);
  const int status = run();
  if (prof) {
    prof->stop();
    fmt::print("\nprofile ({}):\n{}", d.profile, prof->table());
    prof->export_chrome_trace(d.profile);
    fmt::print("trace written to {} (open it in https://ui.perfetto.dev or chrome://tracing)\n", d.profile);
  }
  return status;
}

std::string threads_and_ranks() {
  std::string s = std::to_string(get_num_threads()) + " threads";
  if (dist::world_size() > 1) s += " x " + std::to_string(dist::world_size()) + " ranks";
  return s;
}

void add_distributed_option(CLI::App& app, bool& distributed) {
  app.add_flag("--distributed", distributed, "Train data-parallel over the ranks of an MPI job (launch with mpirun "
               "-np N or srun; detected without the flag too): the batch is split over the ranks, rank 0 prints "
               "and writes");
}

int run_training(const std::string& command, bool distributed, const DebugArgs& d, const std::function<int()>& run) {
  if (!distributed && !dist::launched_distributed()) return run_with_debug(d, run);
  const std::string why = dist::unavailable_reason();
  check<ValueError>(why.empty(), distributed ? "--distributed" : command + " (started by an MPI launcher)",
                    ": distributed training is unavailable: ", why);
  const dist::Session session;
  if (dist::world_size() == 1)
    fmt::print("note: {} --distributed was not started by mpirun or srun, so it trains on this one process\n",
               command);
  if (dist::rank() != 0 && !std::freopen("/dev/null", "w", stdout))
    dist::abort(command + ": cannot silence the output of rank " + std::to_string(dist::rank()));
  DebugArgs debug = d;
  if (!debug.profile.empty() && dist::rank() != 0) debug.profile += ".rank" + std::to_string(dist::rank());
  // A stop request ends every rank after the same step (models::train_loop):
  // not a failure of the job, so it is caught inside dist::run, and rank 0
  // says how to continue.
  return dist::run([&] {
    try {
      return run_with_debug(debug, run);
    } catch (const models::Interrupted& e) {
      return dist::rank() == 0 ? report_interrupted(e) : 130;
    } catch (const CLI::ParseError& e) {  // an option check: every rank refuses the same options
      return dist::rank() == 0 ? usage_error(e) : 2;
    } catch (...) {
      end_progress_line();  // dist::run prints the rank's failure next
      throw;
    }
  });
}

void check_batch_splits(int64_t batch) {
  const int ranks = dist::world_size();
  if (batch % ranks != 0)
    throw CLI::ValidationError("--batch", fmt::format("the batch of {} does not split evenly over {} ranks; choose a "
                                                      "multiple of {}", batch, ranks, ranks));
}

void check_task_options(const CLI::App& app, const std::string& task, const std::vector<std::string>& options) {
  const std::vector<std::string>* read = nullptr;
  try {
    read = &models::task_parameters(task);
  } catch (const ValueError&) {
    return;
  }
  for (const std::string& opt : options) {
    const std::string field = opt.substr(2);
    if (app.count(opt) == 0 || std::find(read->begin(), read->end(), field) != read->end()) continue;
    std::string takes;
    for (const std::string& f : *read) takes += (takes.empty() ? "--" : ", --") + f;
    throw CLI::ValidationError(opt, fmt::format("the {} task does not read {}, so the option would be ignored (its "
                                                "parameters: {})", task, field, takes));
  }
}

void parse_command_line(CLI::App& app, int argc, char** argv) {
  const CLI::App* cur = &app;
  for (int i = 1; i < argc; ++i) {
    const std::string tok = argv[i];
    if (tok == "--") break;
    if (tok.rfind("--", 0) != 0) {
      const auto subs = cur->get_subcommands([&tok](const CLI::App* s) { return s->check_name(tok); });
      if (!subs.empty()) cur = subs.front();
      continue;
    }
    const size_t eq = tok.find('=');
    const CLI::Option* opt = nullptr;
    for (const CLI::App* a = cur; a && !opt; a = a->get_parent()) opt = a->get_option_no_throw(tok.substr(0, eq));
    if (!opt || opt->get_delimiter() != ',') continue;
    if (eq == std::string::npos && i + 1 == argc) break;
    const std::string list = eq == std::string::npos ? argv[i + 1] : tok.substr(eq + 1);
    if (list.empty() || list.front() == ',' || list.back() == ',' || list.find(",,") != std::string::npos)
      throw CLI::ValidationError(opt->get_name(), "the list \"" + printable(list) + "\" has an empty item");
  }
  app.parse(argc, argv);
}

int usage_error(const std::exception& e) {
  end_progress_line();
  fmt::print(stderr, "tmem: error: {}\nRun with --help for more information.\n", e.what());
  return 2;
}

int exit_on_parse_error(const CLI::App& app, const CLI::ParseError& e) {
  if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);
  return usage_error(e);
}

int parse_and_run(CLI::App& app, int argc, char** argv, const std::function<int()>& run) {
  check_every_option(app);
  try {
    parse_command_line(app, argc, argv);
  } catch (const CLI::ParseError& e) {
    return exit_on_parse_error(app, e);
  }
  try {
    return run();
  } catch (const CLI::ParseError& e) {  // an option check of the command itself
    return exit_on_parse_error(app, e);
  } catch (const models::Interrupted& e) {
    return report_interrupted(e);
  } catch (const std::exception& e) {
    end_progress_line();
    fmt::print(stderr, "tmem: error: {}\n", e.what());
    if (dynamic_cast<const OutOfMemoryError*>(&e) || dynamic_cast<const std::bad_alloc*>(&e))
      fmt::print(stderr, "(this run needs more memory than is free: lower --batch, or the model's sizes such as --dim, "
                         "--layers, --mem-grid or --mem-channels)\n");
    return 1;
  }
}

}  // namespace tmem::tools
