// The arithmetic of the embedding kernels (cuda/embedding.cu), one functor
// call per element; the formulas of ops/embedding.cpp. Shapes: weight [V, D]
// contiguous, indices [K] int64 (range-checked by ops/ before the launch),
// out and g [K, D] contiguous.
#pragma once
#include <cstdint>

#include "tmem/cuda/hd.h"

namespace tmem::cuda {

/// Element i = k D + d of the forward gather: out[k, d] = weight[indices[k], d].
struct EmbeddingGather {
  const float* weight;
  const int64_t* indices;
  float* out;
  int64_t dim;

  TMEM_HD void operator()(int64_t i) const {
    const int64_t k = i / dim;
    out[i] = weight[indices[k] * dim + (i - k * dim)];
  }
};

/// Element i = k D + d of the backward scatter: gweight[indices[k], d] +=
/// g[k, d] through add(float* dst, float v), an atomic add on the device
/// (an index used twice adds both gradients) and += on the host.
template <class Add>
struct EmbeddingScatter {
  const int64_t* indices;
  const float* g;
  float* gweight;
  int64_t dim;
  Add add;

  TMEM_HD void operator()(int64_t i) const {
    const int64_t k = i / dim;
    add(gweight + indices[k] * dim + (i - k * dim), g[i]);
  }
};

}  // namespace tmem::cuda
