// The `tmem` command-line program. Subcommands:
//   tmem ops     the op table: devices, differentiable inputs, gradcheck coverage
//   tmem train   train a diagnostic task (see tools/train_cmd.h)
//   tmem train brown   train the language models on the Brown corpus (tools/lm_cmd.h)
//   tmem train fashion-mnist   train the ViT family on Fashion-MNIST (tools/vit_cmd.h)
//   tmem train moving-fmnist   train the video models on Moving Fashion-MNIST (tools/video_cmd.h)
//   tmem ablate  the Tensor Memory ablations on coord-binding
//   tmem frontier  accuracy vs state size of the segment-recurrent methods (tools/frontier_cmd.h)
//   tmem grads summarize FILE / diff A B / plot FILE    read and draw gradient dumps
//   tmem bench   the benchmark suite next to its peers (see tools/bench_cmd.h)
//   tmem stream  a language model over a long stream: the memory it holds (tools/stream_cmd.h)
#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "tmem/core/parallel.h"
#include "tmem/dist/dist.h"
#include "tmem/models/train_loop.h"
#include "tmem/ops/ops.h"
#include "tmem/tools/bench_cmd.h"
#include "tmem/tools/frontier_cmd.h"
#include "tmem/tools/grads_plot.h"
#include "tmem/tools/lm_cmd.h"
#include "tmem/tools/progress.h"
#include "tmem/tools/stream_cmd.h"
#include "tmem/tools/video_cmd.h"
#include "tmem/tools/vit_cmd.h"
#include "tmem/tools/train_cmd.h"

namespace {

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ",") + x;
  return s.empty() ? "-" : s;
}

// Prints the op table, running each op's gradcheck cases (float64, small).
int run_ops(bool run_checks) {
  using namespace tmem;
  size_t width = 2;  // the op column fits the longest name
  for (int i = 0; i < static_cast<int>(OpId::Count); ++i) width = std::max(width, op_name(static_cast<OpId>(i)).size());
  auto row = [&](const auto& op, const auto& devices, const auto& inputs, const auto& cases, const auto& status) {
    fmt::print("{:<{}} {:<9} {:<44} {:<6} {}\n", op, width, devices, inputs, cases, status);
  };
  row("op", "devices", "differentiable inputs", "cases", run_checks ? "gradcheck" : "gradcheck covered");
  int failures = 0, missing = 0;
  for (int i = 0; i < static_cast<int>(OpId::Count); ++i) {
    OpId id = static_cast<OpId>(i);
    if (id == OpId::Custom) continue;  // the ops of programs, not of tmem
    const OpInfo* info = nullptr;
    for (const OpInfo& e : op_table())
      if (e.id == id) info = &e;
    if (!info) {
      row(op_name(id), "-", "-", "0", "no (not implemented)");
      ++missing;
      continue;
    }
    std::string status = info->cases.empty() ? "no" : "yes";
    if (run_checks && !info->cases.empty()) {
      int passed = 0;
      for (const OpCase& c : info->cases)
        passed += gradcheck(c.fn, c.inputs(), c.eps, c.atol, c.rtol).ok ? 1 : 0;
      status = passed == static_cast<int>(info->cases.size())
                   ? "yes (pass)"
                   : "FAIL (" + std::to_string(passed) + "/" + std::to_string(info->cases.size()) + ")";
      failures += passed != static_cast<int>(info->cases.size());
    }
    row(info->name(), join(info->devices), join(info->diff_inputs), info->cases.size(), status);
  }
  fmt::print("{} ops registered, {} missing, {}\n", op_table().size(), missing,
             run_checks ? fmt::format("{} failing gradcheck", failures) : "gradchecks not run (--no-check)");
  return failures || missing ? 1 : 0;
}

// Per-tensor gradient norms over the dumped steps; flags NaN/Inf and
// vanishing gradients. Returns 1 when any tensor was flagged.
// Runs f, turning a missing or mistyped field of a dump (a JSON library
// error) into an IOError naming the dumps.
template <class F>
auto with_dump_errors(const std::string& what, F f) {
  try {
    return f();
  } catch (const nlohmann::json::exception& e) {
    throw tmem::IOError(what + ": a step or tensor has a missing or mistyped field (" + e.what() + ")");
  }
}

int run_grads_summarize(const std::string& path) {
  using namespace tmem;
  auto steps = read_grad_dump(path);
  auto series = with_dump_errors(path, [&] { return summarize_grad_dump(steps, 1e-10, path); });
  fmt::print("{}: {} dumped steps, {} tensors\n", path, steps.size(), series.size());
  fmt::print("{:<40} {:>12} {:>12} {:>12} {:>12}  {}\n", "tensor", "norm first", "norm last", "norm min",
             "norm max", "flags");
  int flagged = 0;
  for (const GradSeries& g : series) {
    double lo = INFINITY, hi = -INFINITY;  // over the finite norms (NaN when there are none)
    for (double n : g.norms)
      if (std::isfinite(n)) lo = std::min(lo, n), hi = std::max(hi, n);
    if (lo > hi) lo = hi = NAN;
    std::string flags;
    if (g.nonfinite_norms) flags += "norm NaN/Inf x" + std::to_string(g.nonfinite_norms) + " ";
    if (g.nan) flags += "NaN x" + std::to_string(g.nan) + " ";
    if (g.inf) flags += "Inf x" + std::to_string(g.inf) + " ";
    if (g.vanishing) flags += "vanishing";
    flagged += !flags.empty();
    fmt::print("{:<40} {:>12.4e} {:>12.4e} {:>12.4e} {:>12.4e}  {}\n", g.name, g.norms.front(),
               g.norms.back(), lo, hi, flags.empty() ? "ok" : flags);
  }
  fmt::print("{} tensor{} flagged\n", flagged, flagged == 1 ? "" : "s");
  return flagged ? 1 : 0;
}

// The largest relative differences between two dumps (e.g. CPU vs CUDA);
// 1 when one is above rtol (as diff and cmp exit 1 when files differ).
int run_grads_diff(const std::string& a, const std::string& b, size_t top, double rtol) {
  using namespace tmem;
  auto dump_a = read_grad_dump(a);
  auto dump_b = read_grad_dump(b);
  // One row at least, the largest, which decides the exit status.
  auto diffs = with_dump_errors(a + " / " + b,
                                [&] { return diff_grad_dumps(dump_a, dump_b, std::max<size_t>(top, 1), a, b); });
  const double largest = diffs.empty() ? 0 : diffs.front().rel;
  if (diffs.size() > top) diffs.resize(top);
  fmt::print("A = {}, B = {}\n", a, b);
  fmt::print("{:<8} {:<40} {:<12} {:>14} {:>14} {:>12}\n", "step", "tensor", "field", "A", "B", "rel diff");
  for (const DumpDifference& d : diffs) {
    // A "missing in B" row has A's norm (or loss) and nothing for B.
    const std::string x = d.field == "missing in A" ? "absent" : fmt::format("{:.6e}", d.a);
    const std::string y = d.field == "missing in B" ? "absent" : fmt::format("{:.6e}", d.b);
    fmt::print("{:<8} {:<40} {:<12} {:>14} {:>14} {:>12.3e}{}\n", d.step, d.name, d.field, x, y, d.rel,
               d.note.empty() ? "" : "  " + d.note);
  }
  const bool differ = !(largest <= rtol);
  fmt::print("{}: the largest relative difference is {:.3e}, {} --rtol {:g}\n", differ ? "differ" : "agree", largest,
             differ ? "above" : "within", rtol);
  return differ ? 1 : 0;
}

}  // namespace

namespace {

// Whether this process prints the notice of a stop: the one process, or
// rank 0 of a job an MPI launcher started (its rank read from the launcher's
// environment, as the signal may come before dist::init).
bool g_stop_notice = true;

// The first Ctrl-C (or SIGTERM, as kill, timeout and job schedulers send, or
// SIGUSR1, which mpirun forwards to every rank) asks a training run to stop
// after its current step with its checkpoint saved (models::request_stop;
// the error then says how to continue); a second one, of any of the three,
// ends the process at once. (mpirun sends SIGTERM to the ranks still running
// when one has exited with the stop's status 130: by then every rank has
// saved and left MPI_Finalize's fence, so ending at once loses nothing.)
void stop_after_this_step(int sig) {
  tmem::models::request_stop();
  for (const int s : {SIGINT, SIGTERM, SIGUSR1}) std::signal(s, SIG_DFL);
  static constexpr char kInt[] = "\ntmem: stopping after this step (Ctrl-C again to quit at once)\n";
  static constexpr char kTerm[] = "\ntmem: stopping after this step on SIGTERM (send it again to quit at once)\n";
  static constexpr char kUsr1[] = "\ntmem: stopping after this step on SIGUSR1 (send it again to quit at once)\n";
  const char* text = sig == SIGTERM ? kTerm : sig == SIGUSR1 ? kUsr1 : kInt;
  const size_t size = (sig == SIGTERM ? sizeof kTerm : sig == SIGUSR1 ? sizeof kUsr1 : sizeof kInt) - 1;
  if (g_stop_notice) {
    [[maybe_unused]] const auto n = write(STDERR_FILENO, text, size);
  }
}

// The rank an MPI launcher gave this process (0 when none did).
std::string launcher_rank() {
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"})
    if (const char* v = std::getenv(var)) return v;
  return "0";
}

}  // namespace

int main(int argc, char** argv) {
  // Line by line into a log file too (as into a terminal), so a run's first
  // line, naming its directory, comes before a later error or Ctrl-C message
  // on stderr, and a lane's log shows its progress as it happens.
  std::setvbuf(stdout, nullptr, _IOLBF, BUFSIZ);
  // Denormals only slow training down (tens of times in convlstm3d_cell's
  // backward on an 8^3 grid): every command flushes them (core/parallel.h).
  // On this thread only: the OpenMP threads, started once --threads is
  // known, inherit the mode.
  tmem::set_flush_denormal(true, false);
  // Under mpirun or srun only `tmem train` (the diagnostic tasks, brown,
  // fashion-mnist, moving-fmnist) is data-parallel; any other command would
  // run whole on every rank, writing the same files.
  if (tmem::dist::launched_distributed()) {
    const std::string cmd = argc > 1 ? argv[1] : "";
    if (cmd != "train") {
      fmt::print(stderr, "tmem: error: tmem {} runs on one process, but it was started as one of several ranks "
                 "(mpirun or srun); data-parallel training is `tmem train ...` only\n", tmem::printable(cmd));
      return 2;
    }
  }
  if (argc > 1) {
    const std::string cmd = argv[1];
    g_stop_notice = !tmem::dist::launched_distributed() || launcher_rank() == "0";
    if (cmd == "train" || cmd == "ablate" || cmd == "frontier")
      for (const int sig : {SIGINT, SIGTERM, SIGUSR1}) std::signal(sig, stop_after_this_step);
  }
  // `train brown`, `train fashion-mnist` and `train moving-fmnist` have flags
  // of their own (the language models, the ViTs, the video models), parsed there.
  if (argc > 2 && std::string(argv[1]) == "train" && std::string(argv[2]) == "brown")
    return tmem::tools::run_train_brown(argc - 2, argv + 2);
  if (argc > 2 && std::string(argv[1]) == "train" && std::string(argv[2]) == "fashion-mnist")
    return tmem::tools::run_train_fashion_mnist(argc - 2, argv + 2);
  if (argc > 2 && std::string(argv[1]) == "train" && std::string(argv[2]) == "moving-fmnist")
    return tmem::tools::run_train_moving_fmnist(argc - 2, argv + 2);
  CLI::App app{"tmem: tape autograd, CPU kernels and Tensor Memory models"};
  app.require_subcommand(1);
  bool run_checks = true;
  auto* ops = app.add_subcommand("ops", "Print the op table with gradcheck coverage");
  ops->add_flag("!--no-check", run_checks, "List coverage without running the gradchecks");
  auto* grads = app.add_subcommand("grads", "Read gradient dumps");
  grads->require_subcommand(1);
  std::string dump_a, dump_b;
  size_t top = 20;
  auto* summarize = grads->add_subcommand("summarize", "Per-tensor norms over time; flags NaN/Inf and vanishing gradients");
  summarize->add_option("file", dump_a, "Dump file")->required();
  auto* diff = grads->add_subcommand("diff", "Largest relative differences between two dumps");
  diff->add_option("a", dump_a, "First dump")->required();
  diff->add_option("b", dump_b, "Second dump")->required();
  diff->add_option("--top", top, "How many differences to print")->capture_default_str();
  double rtol = 0;
  diff->add_option("--rtol", rtol, "Exit 1 when a relative difference is above this (0: any difference)")
      ->capture_default_str()->check(tmem::tools::real_range(0, HUGE_VAL));
  std::string plot_out;
  auto* plot = grads->add_subcommand("plot", "Draw the per-tensor gradient norms (per layer, log scale, NaN/Inf "
                                             "steps marked) and the memory internals as one SVG");
  plot->add_option("file", dump_a, "Dump file")->required();
  plot->add_option("--out", plot_out, "The SVG to write (default: the dump's name with .svg)");
  if (argc > 1 && argv[1][0] != '-') {
    const std::string cmd = argv[1];
    if (cmd != "ops" && cmd != "train" && cmd != "ablate" && cmd != "frontier" && cmd != "grads" && cmd != "bench" &&
        cmd != "stream") {
      fmt::print(stderr, "tmem: error: unknown command \"{}\" (commands: train, ablate, frontier, grads, ops, bench, stream; see tmem --help)\n",
                 tmem::printable(cmd));
      return 2;
    }
  }
  std::function<int()> train, ablate, frontier, bench, stream;
  try {
    train = tmem::tools::add_train_command(app, argc, argv);
    ablate = tmem::tools::add_ablate_command(app);
    frontier = tmem::tools::add_frontier_command(app);
    bench = tmem::tools::add_bench_command(app);
    stream = tmem::tools::add_stream_command(app);
  } catch (const std::exception& e) {
    fmt::print(stderr, "tmem: error: {}\n", e.what());
    return 1;
  }
  return tmem::tools::parse_and_run(app, argc, argv, [&] {
    if (*ops) return run_ops(run_checks);
    if (*summarize) return run_grads_summarize(dump_a);
    if (*diff) return run_grads_diff(dump_a, dump_b, top, rtol);
    if (*plot) return tmem::tools::run_grads_plot(dump_a, plot_out);
    for (const auto& command : {train, ablate, frontier, bench, stream})
      if (int rc = command(); rc >= 0) return rc;
    return 0;
  });
}
