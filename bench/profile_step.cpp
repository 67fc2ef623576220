// The profiler's table for single training steps of `tmem train
// coord-binding` at the main job's settings (W=20, s=0.05, batch 128, the
// method's default model), next to the step times it explains
// (bench/RESULTS.md). A step is timed as bench_memory's BM_coord_binding_step
// times it, from one progress callback to the next; a profiler is started in
// the callback before each profiled step and stopped in the one after it.
//
//   build/bench/profile_step [--method tensor] [--warmup 3] [--plain 5] [--profiled 3] [--trace FILE]
//
// --warmup steps run first, then --plain steps without a profiler (their
// median is the step time without the profiler's cost), then --profiled
// steps, each under its own profiler: one line each (step time, the rows'
// sum), then the table of the profiled step with the median time, and its
// Chrome trace written to --trace.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <omp.h>

#include "tmem/core/profiler.h"
#include "tmem/models/trainer.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Profiled {
  double step_ms, rows_ms;
  std::string table;
  std::unique_ptr<tmem::profiler> prof;
};

}  // namespace

int main(int argc, char** argv) {
  using namespace tmem;
  std::string method = "tensor", trace;
  int64_t warmup = 3, plain = 5, profiled = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i];
    if (key == "--method") method = argv[i + 1];
    else if (key == "--warmup") warmup = std::atoll(argv[i + 1]);
    else if (key == "--plain") plain = std::atoll(argv[i + 1]);
    else if (key == "--profiled") profiled = std::atoll(argv[i + 1]);
    else if (key == "--trace") trace = argv[i + 1];
    else {
      fmt::print(stderr, "profile_step: unknown option {}\n", argv[i]);
      return 2;
    }
  }
  if (warmup < 0 || plain < 0 || profiled < 1) {
    fmt::print(stderr, "profile_step: expected --warmup >= 0, --plain >= 0, --profiled >= 1\n");
    return 2;
  }
  models::TrainConfig cfg;
  cfg.task = "coord-binding";
  cfg.model.method = models::parse_backbone_method(method);
  cfg.batch = 128;
  cfg.eval_batches = 1;
  cfg.steps = warmup + plain + profiled;
  std::vector<double> plain_ms;
  std::vector<Profiled> runs;
  std::unique_ptr<profiler> prof;
  auto last = Clock::now();
  models::train_diagnostic(cfg, [&](const models::TrainProgress& p) {
    const auto now = Clock::now();
    const double ms = std::chrono::duration<double, std::milli>(now - last).count();
    if (prof) {
      prof->stop();
      double rows = 0;
      for (const ProfileRow& r : prof->key_averages()) rows += r.total_ms();
      runs.push_back({ms, rows, prof->table(), std::move(prof)});
    } else if (p.step > warmup) {
      plain_ms.push_back(ms);
    }
    if (p.step >= warmup + plain && p.step < cfg.steps) prof = std::make_unique<profiler>();
    last = Clock::now();
  });
  fmt::print("coord-binding {}, batch 128, {} threads; {} warm-up steps\n", method, omp_get_max_threads(), warmup);
  if (!plain_ms.empty()) {
    std::vector<double> s = plain_ms;
    std::sort(s.begin(), s.end());
    fmt::print("without the profiler: median step {:.1f} ms over {} steps ({:.1f} - {:.1f})\n", s[s.size() / 2],
               s.size(), s.front(), s.back());
  }
  for (size_t i = 0; i < runs.size(); ++i)
    fmt::print("profiled step {}: {:.1f} ms, profiler wall {:.1f} ms, rows {:.1f} ms ({:.1f}% of the step)\n", i + 1,
               runs[i].step_ms, runs[i].prof->wall_ms(), runs[i].rows_ms, 100 * runs[i].rows_ms / runs[i].step_ms);
  std::vector<size_t> order(runs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return runs[a].step_ms < runs[b].step_ms; });
  Profiled& median = runs[order[order.size() / 2]];
  fmt::print("\nthe profiled step of median time ({:.1f} ms):\n{}", median.step_ms, median.table);
  if (!trace.empty()) {
    median.prof->export_chrome_trace(trace);
    fmt::print("trace written to {}\n", trace);
  }
  return 0;
}
