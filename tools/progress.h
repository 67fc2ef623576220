// Pieces shared by the training commands (tmem train brown, tmem train
// fashion-mnist, tmem train moving-fmnist, the diagnostic runs): time
// formatting, a text progress bar and progress line, curve smoothing for
// the SVG plots, default run names, and parsing then running a command.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "tmem/models/train_loop.h"

namespace tmem::tools {

/// Seconds as "m:ss", or "h:mm:ss" from one hour on; negative counts as 0.
std::string fmt_time(double seconds);

/// A bar of `width` characters, '#' for the done fraction of `total`, '.'
/// for the rest ("[" and "]" not included); total <= 0 counts as empty.
std::string progress_bar(int64_t done, int64_t total, int width = 20);

/// Moving average over `window` points (the first points average what
/// exists); window 0 counts as 1.
std::vector<double> moving_average(const std::vector<double>& v, size_t window);

class RunEta;

/// The seconds left after `done` of `total` steps, `seconds` having been
/// spent on the steps from `start` (where this invocation began: a resumed
/// run's first step) to `done`: the steps left at that time per step, or with
/// `run` (the run's parts, this one current) RunEta::seconds_left at it.
/// 0 while no step of this invocation is done.
double progress_eta(int64_t done, int64_t total, double seconds, int64_t start, const RunEta* run);

/// One progress line on stdout, "<label> [<bar>] <unit> <done>/<total>
/// <fields>  ETA <time>", the ETA progress_eta(done, total, seconds, start,
/// run), "~<time>" while run->guessed(). On a terminal (tty) the line is rewritten in place
/// ('\r', a newline only when done == total), at most every 0.1 s besides
/// the first step and the last; otherwise it is printed as its
/// own line only every total / lines-th step and at the end. The first line
/// after a resume (start > 0, done == start + 1) is preceded by
/// "<label>: resumed from its checkpoint at <unit> <start>/<total>".
void print_progress_line(const std::string& label, const std::string& unit, int64_t done, int64_t total,
                         const std::string& fields, double seconds, bool tty, int64_t lines,
                         const RunEta* run = nullptr, int64_t start = 0);

/// Ends the progress line a terminal shows while a part runs (print_progress_line
/// leaves it open), so that an error or a stop notice printed next on stderr
/// starts a line of its own: a newline on stderr; nothing when no line is open.
void end_progress_line();

/// The time left of a run that trains its parts one after the other (the
/// cells of `tmem train`, its methods on Fashion-MNIST and Moving
/// Fashion-MNIST, the variants of `tmem ablate`), for the progress
/// line's ETA. Each part has a kind (e.g. its method and sweep value) and a
/// number of steps; parts of one kind are taken to cost the same per step.
/// The rule: the current part's steps left at its measured time per step,
/// plus each later part's steps at the time per step of the finished parts
/// of its kind (their seconds over their steps), or, when none of its kind
/// has finished, at the current part's scaled by the ratio of their costs
/// (a prior: a part's expected time per step relative to others, 1 unless
/// its caller knows better). A part whose time per step is not known either
/// way (the current part before its first step) counts 0.
class RunEta {
 public:
  struct Part {
    std::string kind;
    int64_t steps;
    double cost = 1.0;  // expected time per step relative to the other parts' (> 0)
  };
  /// parts: the run's parts in training order; the first is current.
  explicit RunEta(std::vector<Part> parts) : parts_(std::move(parts)) {}
  /// Seconds left in the run while the current part has `steps_left` steps
  /// to go at `seconds_per_step` (<= 0: not measured yet).
  double seconds_left(int64_t steps_left, double seconds_per_step) const;
  /// Ends the current part, which trained `steps` steps in `seconds` (a part
  /// reused from an earlier run: 0 steps, so it sets no time per step), and
  /// makes the next one current. Throws ValueError when every part has
  /// finished already.
  void finish(int64_t steps, double seconds);
  /// Whether a later part is of a kind other than the current part's with
  /// no finished part to time it, so seconds_left counts it at the current
  /// part's time per step scaled by their costs: a guess (the progress line
  /// marks it "~"), since the true ratio varies (a tensor cell takes 4.5-12
  /// times a base cell's step).
  bool guessed() const;

 private:
  std::vector<Part> parts_;
  size_t current_ = 0;
  std::map<std::string, std::pair<int64_t, double>> done_;  // kind -> (steps, seconds) of its finished parts
};

/// "<prefix>-YYYYmmdd-HHMMSS" in local time: the default run name. In a
/// tmem::dist job it is rank 0's time on every rank (a collective), so the
/// ranks agree on the run directory. The name is remembered for
/// interrupted_message.
std::string timestamped_name(const std::string& prefix);

/// The line printed when a run stops on Ctrl-C: e's message and, when the
/// run's name was generated (timestamped_name: the user gave no --name),
/// that name as the --name to pass with --resume.
std::string interrupted_message(const models::Interrupted& e);

/// Whether `name` names an entry of one directory: not empty, ".", "..", and
/// without '/' or '\\', so a path built from it stays in that directory, and
/// without control characters (a newline would split the lines that name it).
bool is_plain_name(const std::string& name);

/// "runs/<name>", the directory of a run. Throws ValueError naming --name
/// unless name is a plain directory name (not empty, ".", "..", and without
/// '/' or '\\'), so a run never writes outside runs/.
std::string run_dir(const std::string& name);

/// CLI11 check of an option naming a file in a run's directory (--dump-grads):
/// a plain file name as run_dir wants for --name (no '/' or '\\', not empty,
/// "." or ".."), so the file stays inside runs/<name>/, and none of
/// `reserved`, the files the run writes itself (its checkpoint, results).
/// The message names the option (CLI11 prefixes it) and the value.
CLI::Validator file_in_run_dir(std::vector<std::string> reserved);

/// CLI11 check of an integer option: a plain base-10 integer in [lo, hi]. An
/// empty value, trailing text, a value that overflows and one outside the
/// range are parse errors whose message names the option (CLI11 prefixes it)
/// and the range.
CLI::Validator int_range(int64_t lo, int64_t hi);
/// CLI11 check of a real option: a finite decimal number in [lo, hi], or in
/// (lo, hi) when `open` (not empty, not nan or inf); the message names the
/// range.
CLI::Validator real_range(double lo, double hi, bool open = false);

/// CLI11 checks of integer options: at least 1, at least 0 (int_range).
extern const CLI::Validator kPositive;
extern const CLI::Validator kNonNegative;

/// Adds the checks every option of `app` and of its subcommands needs, so
/// none is forgotten: a value is never empty, an integer option's value is a
/// plain base-10 integer that fits (int_range over its type: no wrap of -1
/// into an unsigned, no saturation), a real option's value is finite, and a
/// list option (--method a,b) names no value twice. Call
/// it after the options are added; ranges of single options are added with
/// int_range / real_range where the option is declared.
void check_every_option(CLI::App& app);

/// Adds the list option `name` (e.g. --method) to app: comma-separated
/// method names, each parsed once by `parse` (e.g. models::parse_lm_method)
/// into `methods` when the option is given; a bad name is a parse error,
/// parse's message prefixed with the option. The initial `methods` are the
/// default the help shows.
template <class E>
CLI::Option* add_method_option(CLI::App& app, const std::string& name, std::vector<E>& methods,
                               E (*parse)(const std::string&), const std::string& help) {
  std::string defaults;
  for (const E m : methods) defaults += (defaults.empty() ? "" : ",") + to_string(m);
  return app
      .add_option_function<std::vector<std::string>>(
          name,
          [&methods, parse, name](const std::vector<std::string>& names) {
            methods.clear();
            for (const std::string& n : names) {
              try {
                methods.push_back(parse(n));
              } catch (const ValueError& e) {
                throw CLI::ValidationError(name, e.what());
              }
            }
          },
          help)
      ->delimiter(',')
      ->default_str(defaults.empty() ? "" : "[" + defaults + "]");
}

/// Adds the options every training command shares: --threads, --name (the
/// help names the default `name_default`, e.g. "brown-date-time") and
/// --data-dir with the help `data_help`.
void add_run_options(CLI::App& app, int& threads, std::string& name, std::string& data_dir,
                     const std::string& name_default, const std::string& data_help);

/// Adds the checkpoint and gradient-dump options of a training command:
/// --resume (help `resume_help`), --checkpoint-every N, --dump-grads FILE (a
/// plain file name inside each trained model's run directory, not one of the
/// files the run writes: file_in_run_dir), --dump-every N, --dump-values.
void add_checkpoint_options(CLI::App& app, models::CheckpointOptions& o, const std::string& resume_help);

/// The debugging options of the training commands.
struct DebugArgs {
  std::string profile;          // --profile FILE: the Chrome trace; empty: no profiler
  bool detect_anomaly = false;  // --detect-anomaly
};

/// Adds --profile FILE and, with `anomaly` (commands that backpropagate),
/// --detect-anomaly to app.
void add_debug_options(CLI::App& app, DebugArgs& d, bool anomaly = true);

/// Runs `run` as d asks: under anomaly mode (core/autograd.h: the first op
/// whose output has a NaN, or whose gradient a NaN or Inf, throws
/// ValueError naming it and its node) and
/// under a tmem::profiler (core/profiler.h), whose table is printed on
/// stdout when `run` returns and whose Chrome trace is written to
/// d.profile. The trace's directory is checked (made when missing) before
/// `run` starts; throws IOError naming the file when it cannot be written
/// there or is a directory. Returns run's status.
int run_with_debug(const DebugArgs& d, const std::function<int()>& run);

/// "<n> threads", and " x <R> ranks" in a job of several ranks: the workers
/// a training command's first line names.
std::string threads_and_ranks();

/// Adds --distributed (help: data-parallel over the ranks of an MPI job) to
/// a training command's app.
void add_distributed_option(CLI::App& app, bool& distributed);

/// Runs a training command's `run` under d (run_with_debug): in one process,
/// or, with `distributed` (--distributed) or when a launcher (mpirun, srun)
/// started the process, as one rank of a tmem::dist job (the trainers then
/// train data-parallel): it joins the job (dist::Session), silences stdout
/// on ranks > 0 (RunRecorder writes on rank 0 only), gives rank r > 0 the
/// profile FILE.rank<r>, and ends every rank with the failing rank's message
/// when one throws (dist::run). A CLI::ParseError from `run` (an option
/// check, the same on every rank) is a usage error instead: rank 0 prints
/// it (usage_error) and every rank returns 2. Throws ValueError naming
/// `command` and dist::unavailable_reason() when the build has no MPI.
int run_training(const std::string& command, bool distributed, const DebugArgs& d, const std::function<int()>& run);

/// Throws CLI::ValidationError (a usage error) naming --batch when a batch
/// of `batch` rows does not split evenly over the ranks of the job
/// (dist::world_size(); one process takes any batch).
void check_batch_splits(int64_t batch);

/// The --data-dir help of the Fashion-MNIST commands.
inline constexpr const char* kFashionMnistDirHelp =
    "The Fashion-MNIST IDX files (install the Debian package dataset-fashion-mnist, e.g. bash tools/setup.sh)";

/// Throws CLI::ValidationError (a usage error) for the first of `options` (task parameters such as
/// "--W", each named "--" + a TaskConfig field) given on app's command line
/// that `task` does not read (models::task_parameters), which it would
/// otherwise ignore; an unknown task is left to the command's own error.
void check_task_options(const CLI::App& app, const std::string& task, const std::vector<std::string>& options);

/// Parses argv into app, first refusing a comma list with an empty item
/// (--seed 1,,2 or --lr 1e-3, : CLI11 would drop it silently) with
/// CLI::ValidationError naming the option and the list. Throws
/// CLI::ParseError as app.parse does.
void parse_command_line(CLI::App& app, int argc, char** argv);

/// What a command line that CLI11 refused returns: --help and --version
/// print as CLI11 does and return 0; any other ParseError prints
/// "tmem: error: <CLI11's message>" and the --help hint on stderr and
/// returns 2, the status of a usage error (as Python's argparse), where
/// CLI11 would return its own code per error kind (105, 106, 109...).
int exit_on_parse_error(const CLI::App& app, const CLI::ParseError& e);

/// Prints "tmem: error: <e.what()>" and the --help hint on stderr and
/// returns 2, the status of a usage error.
int usage_error(const std::exception& e);

/// Parses argv into app (every option checked with check_every_option),
/// then runs `run`: a parse error or --help exits through
/// exit_on_parse_error; an exception from `run` prints
/// "tmem: error: <what>" on stderr (for an out-of-memory error, a line
/// naming the options that size the run after it) and returns 1; an
/// interrupted run prints how to resume it and returns 130.
int parse_and_run(CLI::App& app, int argc, char** argv, const std::function<int()>& run);

}  // namespace tmem::tools
