// The CUDA backend timed (issue 5's GPU check; tools/gpu_check.sh runs it):
//   1. the Tensor Memory kernels forward + backward at the memory shapes,
//      B = 128 with C = 16 at 6^3 and C = 32 at 8^3, as achieved memory
//      bandwidth and its fraction of the device's peak;
//   2. whole coord-binding training steps (W=20, s=0.05, batch 128) of the
//      tensor and base models, CUDA next to the CPU (all cores).
// A plain harness: warm-up runs, then the median of timed runs, each ended by
// a device synchronisation. Bytes are the least traffic each op needs (every
// tensor it must read or write once, the corner reads of a sampled point
// counted as 8 C values), so the fraction is a lower bound on efficiency.
//
//   build-gpu/bench/bench_cuda [--steps N]
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "tmem/core/autograd.h"
#include "tmem/core/device_backend.h"
#include "bench_util.h"
#include "tmem/cuda/runtime.h"
#include "tmem/models/trainer.h"
#include "tmem/ops/ops.h"

namespace {

using namespace tmem;
using Clock = std::chrono::steady_clock;

const Device kCuda = Device::cuda(0);

// Median milliseconds of f over `reps` runs after `warmup`, each synchronised.
double median_ms(const std::function<void()>& f, int reps = 30, int warmup = 5) {
  for (int i = 0; i < warmup; ++i) f();
  synchronize(kCuda);
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = Clock::now();
    f();
    synchronize(kCuda);
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

Tensor leaf(const Shape& s, double lo, double hi, Generator& gen) {
  Tensor t = rand(s, lo, hi, DType::Float32, gen).to(kCuda);
  t.requires_grad_();
  return t;
}

Tensor data(const Shape& s, Generator& gen) { return rand(s, -1, 1, DType::Float32, gen).to(kCuda); }

// Runs the backward of the node that made `out` for output gradients `grads`.
void node_backward(const Tensor& out, const std::vector<Tensor>& grads) {
  const std::shared_ptr<Node> node = out.impl().grad_fn;
  NoGradGuard no_grad;
  node->backward(*node, grads);
}

void report(const char* name, int64_t C, int64_t G, double ms, double bytes, double peak_gbs) {
  const double gbs = bytes / (ms * 1e-3) * 1e-9;
  fmt::print("{:<32} C={:<3} {}^3   {:9.3f} ms   {:8.1f} GB/s   {:5.1f}% of peak\n", name, C, G, ms, gbs,
             100.0 * gbs / peak_gbs);
}

void kernels(double peak_gbs) {
  const int64_t B = 128;
  for (auto [C, G] : {std::pair<int64_t, int64_t>{16, 6}, {32, 8}}) {
    Generator gen(1);
    const double V = static_cast<double>(G * G * G), BC = static_cast<double>(B * C), f = 4.0;
    {
      Tensor vol = leaf({B, C, G, G, G}, -1, 1, gen), grid = leaf({B, 1, 1, 1, 3}, -1, 1, gen);
      Tensor gm = data({B, C, 1, 1, 1}, gen);
      const double ms = median_ms([&] {
        Tensor m = grid_sample(vol, grid, GridSampleMode::Bilinear, GridSamplePadding::Border, true);
        node_backward(m, {gm});
      });
      // dense input gradient written once; 8 corners read forward and backward; out and its gradient
      report("grid_sample fwd+bwd", C, G, ms, f * (BC * V + 2 * 8 * BC + 2 * BC), peak_gbs);
    }
    {
      Tensor content = leaf({B, C}, -1, 1, gen), mu = leaf({B, 3}, -0.9, 0.9, gen);
      Tensor sigma = leaf({B}, 0.1, 0.5, gen);
      Tensor gv = data({B, C, G, G, G}, gen);
      const double ms = median_ms([&] {
        Tensor v = gaussian_splat(content, mu, sigma, G, G, G);
        node_backward(v, {gv});
      });
      // the volume written forward and its gradient read backward
      report("gaussian_splat fwd+bwd", C, G, ms, f * (2 * BC * V), peak_gbs);
    }
    {
      Tensor x = leaf({B, C, G, G, G}, -1, 1, gen), h = leaf({B, C, G, G, G}, -1, 1, gen),
             c = leaf({B, C, G, G, G}, -1, 1, gen);
      const ConvLSTM3DWeights w = bench::random_cell_weights(C, gen, kCuda);
      Tensor gh = data({B, C, G, G, G}, gen), gc = data({B, C, G, G, G}, gen);
      const double fwd_ms = median_ms([&] { convlstm3d_cell(x, h, c, w); });
      const double ms = median_ms([&] {
        ConvLSTM3DState s = convlstm3d_cell(x, h, c, w);
        node_backward(s.h, {gh, gc});
      });
      // forward: x, h, c read, h', c' written; backward: the 5 read again with
      // gh, gc (7), gx, gh, gc written
      report("convlstm3d_cell fwd", C, G, fwd_ms, f * 5 * BC * V, peak_gbs);
      report("convlstm3d_cell fwd+bwd", C, G, ms, f * (5 + 10) * BC * V, peak_gbs);
    }
  }
}

// Median ms per coord-binding training step on `device` (after 3 warm-up steps).
double step_ms(const std::string& method, const std::string& device, int64_t steps) {
  models::TrainConfig cfg;
  cfg.model.method = models::parse_backbone_method(method);
  cfg.steps = 3 + steps;
  cfg.eval_batches = 1;
  cfg.device = device;
  std::vector<double> ms;
  auto last = Clock::now();
  models::train_diagnostic(cfg, [&](const models::TrainProgress&) {
    const auto now = Clock::now();
    ms.push_back(std::chrono::duration<double, std::milli>(now - last).count());
    last = now;
  });
  std::vector<double> timed(ms.begin() + 3, ms.end());
  std::sort(timed.begin(), timed.end());
  return timed[timed.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int64_t steps = 20;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--steps") == 0) steps = std::max<int64_t>(1, std::atoll(argv[i + 1]));
  if (cuda::device_count() == 0) {
    fmt::print("bench_cuda: SKIPPED: no CUDA device on this machine\n");
    return 0;
  }
  const double peak = cuda::memory_bandwidth_gbs(0);
  fmt::print("device: {}, peak memory bandwidth {:.0f} GB/s\n\n", cuda::device_name(0), peak);
  kernels(peak);
  fmt::print("\ncoord-binding training step (batch 128, W=20, median of {} steps)\n", steps);
  for (const char* method : {"tensor", "base"}) {
    const double gpu = step_ms(method, "cuda", steps), cpu = step_ms(method, "cpu", std::min<int64_t>(steps, 10));
    fmt::print("{:<8} cuda {:8.2f} ms   cpu {:8.2f} ms   cuda speedup {:6.2f}x\n", method, gpu, cpu, cpu / gpu);
  }
  return 0;
}
