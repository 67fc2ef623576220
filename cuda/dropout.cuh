// The arithmetic of the dropout kernel (cuda/dropout.cu); the formula of
// ops/dropout.cpp. The mask itself is drawn on the host (ops/dropout.cpp).
// Shapes: x, mask, out [n] contiguous float32.
#pragma once
#include <cstdint>

#include "tmem/cuda/hd.h"

namespace tmem::cuda {

/// Element i of out = x * mask (the forward with x, the backward with g).
struct MaskProduct {
  const float* x;
  const float* mask;
  float* out;

  TMEM_HD void operator()(int64_t i) const { out[i] = x[i] * mask[i]; }
};

}  // namespace tmem::cuda
