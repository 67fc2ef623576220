// Shared by the benchmark programs: the clock the peak-FLOP figures assume,
// and the random weights of the convlstm3d_cell benchmarks.
#pragma once
#include <chrono>
#include <cstdint>
#include <cstdlib>

#include "tmem/core/rng.h"
#include "tmem/ops/convlstm.h"

namespace tmem::bench {

/// The core clock in GHz: $TMEM_BENCH_GHZ if set, else measured once by
/// timing a chain of dependent integer adds (one per cycle on any x86 core
/// of the last decade), the best of five 0.1 s runs. On a shared machine a
/// run that loses its core reads low, hence the best of five.
inline double clock_ghz() {
  static const double ghz = [] {
    if (const char* env = std::getenv("TMEM_BENCH_GHZ")) return std::atof(env);
    double best = 0;
    for (int run = 0; run < 5; ++run) {
      const int64_t n = 50'000'000;
      int64_t x = 1, left = n;
      const auto t0 = std::chrono::steady_clock::now();
#if defined(__x86_64__)
      asm volatile(
          "1:\n\t"
          "add %0, %0\n\tadd %0, %0\n\tadd %0, %0\n\tadd %0, %0\n\t"
          "add %0, %0\n\tadd %0, %0\n\tadd %0, %0\n\tadd %0, %0\n\t"
          "dec %1\n\tjnz 1b"
          : "+r"(x), "+r"(left));
      const double adds = 8.0 * static_cast<double>(n);
#else
      for (int64_t i = 0; i < n; ++i) asm volatile("" : "+r"(x));
      const double adds = static_cast<double>(n);
#endif
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (adds / s / 1e9 > best) best = adds / s / 1e9;
    }
    return best;
  }();
  return ghz;
}

/// fp32 flop per cycle per core: AVX-512 with two FMA units (2 x 16 lanes x 2).
inline constexpr double kFlopPerCycleFp32 = 64.0;

/// convlstm3d_cell weights for C state channels (Cz = 2C inputs to the
/// depthwise stages), uniform in the ranges the cell benchmarks use, leaves
/// that require grad, on `device`.
inline ConvLSTM3DWeights random_cell_weights(int64_t C, Generator& gen, Device device = Device::cpu()) {
  auto leaf = [&](const Shape& s, double lo, double hi) {
    Tensor t = rand(s, lo, hi, DType::Float32, gen).to(device);
    t.requires_grad_();
    return t;
  };
  const int64_t Cz = 2 * C;
  return {leaf({Cz, 3}, -1, 1),  leaf({Cz, 3}, -1, 1),     leaf({Cz, 3}, -1, 1),       leaf({Cz}, -0.5, 0.5),
          leaf({Cz}, -0.5, 0.5), leaf({Cz}, -0.5, 0.5), leaf({4 * C, Cz}, -0.3, 0.3), leaf({4 * C}, -0.5, 0.5)};
}

}  // namespace tmem::bench
