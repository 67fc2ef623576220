// tmem's CPU GEMM (ops/cpu/gemm.cpp) next to OpenBLAS cblas_sgemm, fp32,
// row-major, C = A B, at the shapes of the issue: M=N=K=1024,
// (4096x256)@(256x768) and (4096x768)@(768x256), on 1 and 2 threads.
//
// Counters: GFLOP/s (2MNK per call) and peak_frac, the fraction of
// 64 flop/cycle/core (AVX-512, two FMA units) at the clock from
// bench::clock_ghz() (measured, or $TMEM_BENCH_GHZ) times the threads.
//
//   build-perf/bench/bench_gemm                       # OpenBLAS as configured
//   env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE build-perf/bench/bench_gemm
//                                                     # OpenBLAS's AVX-512 kernels
#include <benchmark/benchmark.h>
#include <omp.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <vector>

#include "bench_util.h"
#include "tmem/ops/cpu/gemm.h"

#if TMEM_BENCH_OPENBLAS
#include <cblas.h>
#endif

namespace {

struct Operands {
  std::vector<float> a, b, c;
  Operands(int64_t M, int64_t N, int64_t K)
      : a(static_cast<size_t>(M * K)),
        b(static_cast<size_t>(K * N)),
        c(static_cast<size_t>(M * N)) {
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (float& v : a) v = u(rng);
    for (float& v : b) v = u(rng);
  }
};

// GFLOP/s over the timed loop and its fraction of the threads' peak.
void set_counters(benchmark::State& st, int64_t M, int64_t N, int64_t K, int threads,
                  double seconds) {
  const double flop = 2.0 * static_cast<double>(M) * static_cast<double>(N) *
                      static_cast<double>(K) * static_cast<double>(st.iterations());
  const double gflops = flop * 1e-9 / seconds;
  const double peak = tmem::bench::kFlopPerCycleFp32 * tmem::bench::clock_ghz() * threads;
  st.counters["GFLOP/s"] = gflops;
  st.counters["peak_frac"] = gflops / peak;
  st.counters["GHz"] = tmem::bench::clock_ghz();
}

// Args: M, N, K, threads.
void BM_tmem_sgemm(benchmark::State& st) {
  const int64_t M = st.range(0), N = st.range(1), K = st.range(2);
  const int threads = static_cast<int>(st.range(3));
  omp_set_num_threads(threads);
  Operands op(M, N, K);
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : st) {
    tmem::cpu::gemm<float>(M, N, K, op.a.data(), K, 1, op.b.data(), N, 1, op.c.data(), N, false,
                           true);
    benchmark::DoNotOptimize(op.c.data());
    benchmark::ClobberMemory();
  }
  set_counters(st, M, N, K, threads,
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

#if TMEM_BENCH_OPENBLAS
void BM_openblas_sgemm(benchmark::State& st) {
  const int64_t M = st.range(0), N = st.range(1), K = st.range(2);
  const int threads = static_cast<int>(st.range(3));
  openblas_set_num_threads(threads);
  Operands op(M, N, K);
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : st) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(M), static_cast<int>(N),
                static_cast<int>(K), 1.0f, op.a.data(), static_cast<int>(K), op.b.data(),
                static_cast<int>(N), 0.0f, op.c.data(), static_cast<int>(N));
    benchmark::DoNotOptimize(op.c.data());
    benchmark::ClobberMemory();
  }
  set_counters(st, M, N, K, threads,
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  st.SetLabel(openblas_get_corename());
}
#endif

}  // namespace

// Each shape runs tmem, then OpenBLAS, so the two see the same machine state.
int main(int argc, char** argv) {
  const int64_t shapes[][3] = {{1024, 1024, 1024}, {4096, 768, 256}, {4096, 256, 768}};
  for (int threads : {1, 2})
    for (const auto& s : shapes) {
      benchmark::RegisterBenchmark("tmem_sgemm", BM_tmem_sgemm)
          ->Args({s[0], s[1], s[2], threads})
          ->ArgNames({"M", "N", "K", "threads"})
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
#if TMEM_BENCH_OPENBLAS
      benchmark::RegisterBenchmark("openblas_sgemm", BM_openblas_sgemm)
          ->Args({s[0], s[1], s[2], threads})
          ->ArgNames({"M", "N", "K", "threads"})
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
#endif
    }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
