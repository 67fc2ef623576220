// Shared by the benchmark programs: the clock the peak-FLOP figures assume.
#pragma once
#include <chrono>
#include <cstdint>
#include <cstdlib>

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

}  // namespace tmem::bench
