// The Tensor Memory ops and training steps, timed. Op benchmarks run the
// forward with autograd recording, then the op's own backward for given
// output gradients (the tape node's backward function: every input gradient
// the op can give, no loss ops around it), as bench/peer/*.py does with
// torch.autograd.backward(outputs, grads). Shapes (Cx = C, as in the model):
//   convlstm3d_cell      B=128, C=16, 6^3   and   B=128, C=32, 8^3
//   grid_sample          5-D, trilinear, border, align_corners: one point per
//                        batch item read from [B, C, D, H, W] (the memory read)
//   gaussian_splat       content [B, C], mu [B, 3], sigma [B] -> [B, C, D, H, W]
//   attention            fused causal scaled_dot_product_attention, B=1, H=4,
//                        Dh=64, T = 1024 and 4096, and its peak memory
//   selective_scan       u, delta [B, T, E], A [E, N], Bm, Cm [B, T, N], D [E],
//                        h0 [B, E, N]: the mqar frontier's ssm layer (B=64,
//                        T=96, E=64, N=32) and a Mamba-sized one (B=8,
//                        T=1024, E=256, N=16); gradients of y and h_out
//   memory layer         one Tensor Memory layer over 24 tokens, forward+backward,
//                        for grids 4^3 ... 12^3 and chunks 1 ... 8 (scaling)
//   coord-binding step   tmem train coord-binding (W=20, s=0.05, batch 128):
//                        the tensor and base models, ms per training step
//   gather, index_select a [256, 1024] gathered along dim 1 by an index
//                        [256, K]; K rows of a [1024, 256]; forward only
//
//   OMP_WAIT_POLICY=passive OMP_NUM_THREADS=2 build-perf/bench/bench_memory
#include <benchmark/benchmark.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "bench_util.h"
#include "tmem/core/allocator.h"
#include "tmem/core/autograd.h"
#include "tmem/models/trainer.h"
#include "tmem/nn/tensor_memory.h"
#include "tmem/ops/ops.h"

namespace {

using namespace tmem;

// Runs the backward function of the node that made `out` for gradients
// `grads` of its outputs (no grad mode, as the engine runs it).
void node_backward(const Tensor& out, const std::vector<Tensor>& grads) {
  const std::shared_ptr<Node> node = out.impl().grad_fn;
  NoGradGuard no_grad;
  std::vector<Tensor> in_grads = node->backward(*node, grads);
  benchmark::DoNotOptimize(in_grads.data());
}

Tensor leaf(const Shape& s, double lo, double hi, Generator& gen) {
  Tensor t = rand(s, lo, hi, DType::Float32, gen);
  t.requires_grad_();
  return t;
}

// Args: C, grid edge (B = 128, Cx = C).
void BM_convlstm3d_cell(benchmark::State& st, bool backward) {
  const int64_t B = 128, C = st.range(0), G = st.range(1), Cz = 2 * C;
  Generator gen(1);
  Tensor x = leaf({B, C, G, G, G}, -1, 1, gen), h = leaf({B, C, G, G, G}, -1, 1, gen),
         c = leaf({B, C, G, G, G}, -1, 1, gen);
  const ConvLSTM3DWeights w = bench::random_cell_weights(C, gen);
  const Tensor gh = rand({B, C, G, G, G}, -1, 1, DType::Float32, gen);
  const Tensor gc = rand({B, C, G, G, G}, -1, 1, DType::Float32, gen);
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : st) {
    ConvLSTM3DState s = convlstm3d_cell(x, h, c, w);
    if (backward) node_backward(s.h, {gh, gc});
    benchmark::DoNotOptimize(s.h.raw_data());
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // Convolution flops only (gates and biases excluded): the pointwise
  // Cz -> 4C GEMM and three 3-tap depthwise passes per voxel; the backward
  // does each twice (input and weight gradients).
  const double V = static_cast<double>(G * G * G);
  const double fwd = 2.0 * static_cast<double>(B) * V * static_cast<double>(Cz) * (4.0 * C + 9.0);
  const double gflops = fwd * (backward ? 3.0 : 1.0) * static_cast<double>(st.iterations()) * 1e-9 / seconds;
  st.counters["GFLOP/s"] = gflops;
  st.counters["peak_frac"] = gflops / (bench::kFlopPerCycleFp32 * bench::clock_ghz() * omp_get_max_threads());
}

// Args: C, grid edge. One point per batch item, input and grid gradients.
void BM_grid_sample(benchmark::State& st, bool backward) {
  const int64_t B = 128, C = st.range(0), G = st.range(1);
  Generator gen(2);
  Tensor vol = leaf({B, C, G, G, G}, -1, 1, gen);
  Tensor grid = leaf({B, 1, 1, 1, 3}, -1, 1, gen);
  const Tensor gm = rand({B, C, 1, 1, 1}, -1, 1, DType::Float32, gen);
  for (auto _ : st) {
    Tensor m = grid_sample(vol, grid, GridSampleMode::Bilinear, GridSamplePadding::Border, true);
    if (backward) node_backward(m, {gm});
    benchmark::DoNotOptimize(m.raw_data());
  }
}

// Args: C, grid edge. Gradients for content, mu and sigma.
void BM_gaussian_splat(benchmark::State& st, bool backward) {
  const int64_t B = 128, C = st.range(0), G = st.range(1);
  Generator gen(3);
  Tensor content = leaf({B, C}, -1, 1, gen), mu = leaf({B, 3}, -0.9, 0.9, gen);
  Tensor sigma = leaf({B}, 0.1, 0.5, gen);
  const Tensor gv = rand({B, C, G, G, G}, -1, 1, DType::Float32, gen);
  for (auto _ : st) {
    Tensor v = gaussian_splat(content, mu, sigma, G, G, G);
    if (backward) node_backward(v, {gv});
    benchmark::DoNotOptimize(v.raw_data());
  }
}

// One Tensor Memory layer (d = 64, Cm = 16, batch 128) over N = 24 tokens
// from the zero state: forward, then backward of sum(out * g) into every
// parameter and x. Args: grid edge, chunk K (N / K memory steps).
void BM_memory_layer(benchmark::State& st) {
  const int64_t B = 128, N = 24, dim = 64, G = st.range(0), K = st.range(1);
  Generator gen(4);
  nn::TensorMemoryOptions opt;
  opt.D = opt.H = opt.W = G;
  opt.chunk = K;
  nn::TensorMemory layer(dim, opt, gen);
  Tensor x = leaf({B, N, dim}, -1, 1, gen);
  const Tensor g = rand({B, N, dim}, -1, 1, DType::Float32, gen);
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : st) {
    Tensor out = layer.forward(x, layer.initial_state(B)).out;
    sum(mul(out, g)).backward();
    layer.zero_grad();
    x.zero_grad();
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  st.counters["ms_per_memory_step"] =
      seconds * 1e3 / static_cast<double>(st.iterations() * ((N + K - 1) / K));
}

// Whole training steps of `tmem train coord-binding` (batch 128): one
// training run of warmup + timed steps before the loop; each benchmark
// iteration reports one timed step (manual time). Counter: the 2000-step
// minutes that this step time implies.
void BM_coord_binding_step(benchmark::State& st, const std::string& method) {
  constexpr int64_t kWarmup = 3;
  const int64_t timed = st.max_iterations;
  models::TrainConfig cfg;
  cfg.task = "coord-binding";
  cfg.model.method = models::parse_backbone_method(method);
  cfg.steps = kWarmup + timed;
  cfg.batch = 128;
  cfg.eval_batches = 1;
  std::vector<double> step_s;
  auto last = std::chrono::steady_clock::now();
  models::train_diagnostic(cfg, [&](const models::TrainProgress&) {
    const auto now = std::chrono::steady_clock::now();
    step_s.push_back(std::chrono::duration<double>(now - last).count());
    last = now;
  });
  std::vector<double> measured(step_s.begin() + kWarmup, step_s.end());
  size_t k = 0;
  for (auto _ : st) st.SetIterationTime(measured[k++ % measured.size()]);
  std::sort(measured.begin(), measured.end());
  const double median = measured[measured.size() / 2];
  st.counters["median_ms"] = median * 1e3;
  st.counters["min_for_2000_steps"] = median * 2000 / 60;
}

// Args: B, T, E, N. Forward, then every input gradient for given gradients
// of y and of the final state (as a segment-recurrent model chains calls).
void BM_selective_scan(benchmark::State& st) {
  const int64_t B = st.range(0), T = st.range(1), E = st.range(2), N = st.range(3);
  Generator gen(6);
  Tensor u = leaf({B, T, E}, -1, 1, gen), delta = leaf({B, T, E}, 0.01, 0.2, gen), A = leaf({E, N}, -2, -0.1, gen);
  Tensor Bm = leaf({B, T, N}, -1, 1, gen), Cm = leaf({B, T, N}, -1, 1, gen), D = leaf({E}, -1, 1, gen);
  Tensor h0 = leaf({B, E, N}, -1, 1, gen);
  const Tensor gy = rand({B, T, E}, -1, 1, DType::Float32, gen), gh = rand({B, E, N}, -1, 1, DType::Float32, gen);
  for (auto _ : st) {
    SelectiveScanResult r = selective_scan(u, delta, A, Bm, Cm, D, h0);
    node_backward(r.y, {gy, gh});
    benchmark::DoNotOptimize(r.y.raw_data());
  }
}

// Args: T. Causal attention, B = 1, H = 4, Dh = 64 (issue 19's shapes):
// forward and backward of the fused op; counters: the peak bytes allocated
// above the inputs (O(T), not O(T^2)) and GFLOP/s of the 4 T^2 Dh / 2
// multiply-adds forward and backward would do without recomputation.
void BM_attention(benchmark::State& st) {
  const int64_t B = 1, H = 4, T = st.range(0), Dh = 64;
  Generator gen(5);
  Tensor q = leaf({B, H, T, Dh}, -1, 1, gen), k = leaf({B, H, T, Dh}, -1, 1, gen), v = leaf({B, H, T, Dh}, -1, 1, gen);
  const Tensor g = rand({B, H, T, Dh}, -1, 1, DType::Float32, gen);
  const size_t before = cpu_allocator_stats().in_use;
  cpu_allocator_reset_peak();
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : st) {
    Tensor out = scaled_dot_product_attention(q, k, v, Tensor(), true);
    node_backward(out, {g});
    benchmark::DoNotOptimize(out.raw_data());
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double flops = 3.0 * 2.0 * 2.0 * static_cast<double>(B * H * Dh) * static_cast<double>(T * T) / 2.0;
  st.counters["GFLOP/s"] = flops * static_cast<double>(st.iterations()) * 1e-9 / seconds;
  st.counters["peak_MiB"] = static_cast<double>(cpu_allocator_stats().peak_in_use - before) / (1 << 20);
}

// gather along dim 1 of a [256, 1024] (requires grad, so the op records)
// with an index [256, K]: K = 1 picks one entry per row as a loss picks its
// label, K = 1024 reorders every row. Forward only: the indices are checked
// there, and the backward is a scatter of the same index.
void BM_gather(benchmark::State& st) {
  const int64_t R = 256, N = 1024, K = st.range(0);
  Generator gen(6);
  Tensor a = leaf({R, N}, -1, 1, gen);
  const Tensor index = randint({R, K}, N, gen);
  for (auto _ : st) {
    Tensor out = gather(a, 1, index);
    benchmark::DoNotOptimize(out.raw_data());
  }
}

// index_select of K rows of a [1024, 256] (requires grad), an embedding
// lookup; forward only, as BM_gather.
void BM_index_select(benchmark::State& st) {
  const int64_t N = 1024, D = 256, K = st.range(0);
  Generator gen(7);
  Tensor a = leaf({N, D}, -1, 1, gen);
  const Tensor index = randint({K}, N, gen);
  for (auto _ : st) {
    Tensor out = index_select(a, 0, index);
    benchmark::DoNotOptimize(out.raw_data());
  }
}

}  // namespace

BENCHMARK(BM_selective_scan)
    ->Args({64, 96, 64, 32})->Args({8, 1024, 256, 16})->ArgNames({"B", "T", "E", "N"})
    ->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_gather)->Arg(1)->Arg(1024)->ArgNames({"K"})->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_index_select)->Arg(64)->Arg(1024)->ArgNames({"K"})->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_attention)->Arg(1024)->Arg(4096)->ArgNames({"T"})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_convlstm3d_cell, forward, false)
    ->Args({16, 6})->Args({32, 8})->ArgNames({"C", "grid"})->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_convlstm3d_cell, forward_backward, true)
    ->Args({16, 6})->Args({32, 8})->ArgNames({"C", "grid"})->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_grid_sample, forward_backward, true)
    ->Args({16, 6})->Args({32, 8})->ArgNames({"C", "grid"})->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_gaussian_splat, forward_backward, true)
    ->Args({16, 6})->Args({32, 8})->ArgNames({"C", "grid"})->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK(BM_memory_layer)
    ->ArgsProduct({{4, 6, 8, 12}, {1}})->Args({6, 2})->Args({6, 4})->Args({6, 8})
    ->ArgNames({"grid", "chunk"})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_coord_binding_step, tensor, std::string("tensor"))
    ->Iterations(20)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_coord_binding_step, base, std::string("base"))
    ->Iterations(40)->UseManualTime()->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
