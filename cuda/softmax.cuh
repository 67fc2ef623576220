// The arithmetic of the softmax, log_softmax and cross_entropy kernels
// (cuda/softmax.cu, cuda/loss.cu) as row programs (cuda/rows.cuh) and
// per-element functors, the formulas of ops/softmax.cpp and ops/loss.cpp.
// Shapes: rows [rows, len] contiguous (softmax: len = R, the softmax dim
// moved last; cross_entropy: [N, C]), float32 accumulated in float.
#pragma once
#include <cmath>
#include <cstdint>

#include "tmem/cuda/hd.h"
#include "tmem/cuda/rows.cuh"

namespace tmem::cuda {

/// One row of y = softmax(x) (log: log_softmax), max-subtracted: with m the
/// row max and s = sum_j exp(x_j - m), y_j = exp(x_j - m) / s, or
/// (x_j - m) - log s (x - m first, so a large common offset cancels exactly).
/// A row that is all -inf (fully masked) gives 0 (log: -inf); one holding
/// NaN gives NaN.
struct SoftmaxRows {
  bool log;
  const float* x;
  float* y;
  int64_t len;

  template <class Reduce>
  TMEM_HD void operator()(int64_t r, int64_t first, int64_t step, Reduce reduce) const {
    const float* xr = x + r * len;
    float* yr = y + r * len;
    float m = MaxOp::identity();
    for (int64_t j = first; j < len; j += step) m = MaxOp{}(m, xr[j]);
    m = reduce(m, MaxOp{});
    if (m == neg_inf()) {
      for (int64_t j = first; j < len; j += step) yr[j] = log ? neg_inf() : 0.0f;
      return;
    }
    float s = 0.0f;
    for (int64_t j = first; j < len; j += step) s += std::exp(xr[j] - m);
    s = reduce(s, SumOp{});
    if (log) {
      const float lse = std::log(s);
      for (int64_t j = first; j < len; j += step) yr[j] = (xr[j] - m) - lse;
    } else {
      const float inv = 1.0f / s;
      for (int64_t j = first; j < len; j += step) yr[j] = std::exp(xr[j] - m) * inv;
    }
  }
};

/// One row of the input gradient from the forward's output y and the output
/// gradient g: softmax gx_j = y_j (g_j - sum_k g_k y_k) (0 on a masked row,
/// where y = 0); log_softmax gx_j = g_j - exp(y_j) sum_k g_k, and 0 on a row
/// whose y is all -inf.
struct SoftmaxBackwardRows {
  bool log;
  const float* y;
  const float* g;
  float* gx;
  int64_t len;

  template <class Reduce>
  TMEM_HD void operator()(int64_t r, int64_t first, int64_t step, Reduce reduce) const {
    const float* yr = y + r * len;
    const float* gr = g + r * len;
    float* gxr = gx + r * len;
    if (!log) {
      float dot = 0.0f;
      for (int64_t j = first; j < len; j += step) dot += gr[j] * yr[j];
      dot = reduce(dot, SumOp{});
      for (int64_t j = first; j < len; j += step) gxr[j] = yr[j] * (gr[j] - dot);
      return;
    }
    float m = MaxOp::identity(), sg = 0.0f;
    for (int64_t j = first; j < len; j += step) {
      m = MaxOp{}(m, yr[j]);
      sg += gr[j];
    }
    m = reduce(m, MaxOp{});
    sg = reduce(sg, SumOp{});
    for (int64_t j = first; j < len; j += step)
      gxr[j] = m == neg_inf() ? 0.0f : gr[j] - std::exp(yr[j]) * sg;
  }
};

/// One sample of the cross-entropy forward from lsm = log_softmax(logits)
/// [N, C] (ops/loss.cpp): with t = target[n] and eps the label smoothing,
/// loss[n] = -(1 - eps) lsm[n, t] - eps sum_c lsm[n, c] / C, and 0 where
/// t == ignore_index. Targets are range-checked by ops/ before the launch.
struct CrossEntropyRows {
  const float* lsm;
  const int64_t* target;
  float* loss;
  int64_t classes;
  int64_t ignore_index;
  float eps;

  template <class Reduce>
  TMEM_HD void operator()(int64_t n, int64_t first, int64_t step, Reduce reduce) const {
    const int64_t t = target[n];
    if (t == ignore_index) {
      if (first == 0) loss[n] = 0.0f;
      return;
    }
    const float* row = lsm + n * classes;
    float s = 0.0f;
    if (eps > 0.0f) {
      for (int64_t c = first; c < classes; c += step) s += row[c];
      s = reduce(s, SumOp{});
    }
    if (first != 0) return;
    float v = -(1.0f - eps) * row[t];
    if (eps > 0.0f) v -= eps * s / static_cast<float>(classes);
    loss[n] = v;
  }
};

/// Element i = n C + c of the cross-entropy input gradient:
/// gx[n, c] = s (exp(lsm[n, c]) - eps / C) - s (1 - eps) [c == target[n]],
/// 0 on an ignored sample; s = g[n] / divisor (per_sample: reduction
/// "none") or g[0] / divisor ("sum": divisor 1; "mean": the number of
/// samples not ignored).
struct CrossEntropyGrad {
  const float* lsm;
  const int64_t* target;
  const float* g;
  float* gx;
  int64_t classes;
  int64_t ignore_index;
  float eps;
  bool per_sample;
  float divisor;

  TMEM_HD void operator()(int64_t i) const {
    const int64_t n = i / classes, c = i - n * classes;
    const int64_t t = target[n];
    if (t == ignore_index) {
      gx[i] = 0.0f;
      return;
    }
    const float s = (per_sample ? g[n] : g[0]) / divisor;
    float v = s * (std::exp(lsm[i]) - eps / static_cast<float>(classes));
    if (c == t) v -= s * (1.0f - eps);
    gx[i] = v;
  }
};

}  // namespace tmem::cuda
