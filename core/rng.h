// Seeded, reproducible random numbers. The engine is std::mt19937_64 (its
// output sequence is fixed by the C++ standard) and the distributions are
// written here, so a seed gives the same numbers on every platform.
#pragma once
#include <cstdint>
#include <random>
#include <string>

#include "tmem/core/tensor.h"

namespace tmem {

class Generator {
 public:
  explicit Generator(uint64_t seed = 0) : engine_(seed) {}
  void manual_seed(uint64_t seed) { engine_.seed(seed); has_spare_ = false; }
  /// Uniform double in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }
  /// Standard normal (Box-Muller).
  double normal();
  /// Uniform integer in [0, n). Throws ValueError for n <= 0.
  int64_t randint(int64_t n);
  uint64_t next_u64() { return engine_(); }
  /// The full generator state as text (for checkpoints): the engine's words
  /// in decimal, whether a normal is cached, and that normal's bit pattern
  /// (16 hex digits), so a restored generator continues bit for bit even
  /// after an odd number of normal() calls.
  std::string state() const;
  /// Restores a state() text (also the older form with a hexfloat normal).
  /// Throws ValueError on malformed text.
  void set_state(const std::string& s);

 private:
  std::mt19937_64 engine_;
  double spare_ = 0;
  bool has_spare_ = false;
};

/// The process-wide default generator (seed 0 until manual_seed).
Generator& default_generator();
/// Reseeds the default generator (PyTorch torch.manual_seed).
void manual_seed(uint64_t seed);

/// U[low, high) of the given shape.
Tensor rand(const Shape& shape, double low = 0.0, double high = 1.0, DType dtype = DType::Float32,
            Generator& gen = default_generator());
/// N(mean, std^2) of the given shape.
Tensor randn(const Shape& shape, double mean = 0.0, double std = 1.0,
             DType dtype = DType::Float32, Generator& gen = default_generator());
/// int64 uniform in [0, high) of the given shape.
Tensor randint(const Shape& shape, int64_t high, Generator& gen = default_generator());

}  // namespace tmem
