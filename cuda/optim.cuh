// The per-element arithmetic of the optimizer and clip_grad_norm_ kernels
// (cuda/optim.cu), shared with the host build of the kernels
// (tests/host_kernels_optim.cpp; cuda/hd.h). float32 parameters, scalars as
// ops/device_kernels.h AdamWScalars and SgdScalars describe them; the
// formulas are nn/optim.cpp's (PyTorch's).
#pragma once
#include <cmath>
#include <cstdint>

#include "tmem/cuda/hd.h"

namespace tmem::cuda {

/// AdamW's update of element k of p, m and v, given its gradient gk; c1 and
/// c2 are 1 - beta1 and 1 - beta2 computed in double (as PyTorch's alpha).
TMEM_HD void adamw_update(float* p, float* m, float* v, float gk, int64_t k, float b1, float c1, float b2, float c2,
                          float decay, float step_size, float bc2_sqrt, float eps) {
  p[k] *= decay;
  m[k] = b1 * m[k] + c1 * gk;
  v[k] = b2 * v[k] + c2 * gk * gk;
  const float denom = std::sqrt(v[k]) / bc2_sqrt + eps;
  p[k] -= step_size * m[k] / denom;
}

/// SGD's update of element k of p (and of buf, when not null).
TMEM_HD void sgd_update(float* p, float* buf, float gk, int64_t k, float lr, float momentum, float wd,
                        bool first) {
  float d = gk + wd * p[k];
  if (buf) {
    buf[k] = first ? d : momentum * buf[k] + d;
    d = buf[k];
  }
  p[k] -= lr * d;
}

/// The larger of two magnitudes m and a (both >= 0 or NaN), NaN when either
/// is NaN: abs_max's step and its combination of partial results.
TMEM_HD float max_magnitude(float m, float a) { return (a > m || a != a) ? a : m; }

/// One term of sum_squares: (x / scale)^2 in float64.
TMEM_HD double scaled_square(float x, double scale) {
  const double v = static_cast<double>(x) / scale;
  return v * v;
}

}  // namespace tmem::cuda
