// The arithmetic of the layer_norm kernels (cuda/layer_norm.cu): row
// programs (cuda/rows.cuh) for the forward and the input gradient, and
// per-element functors for the weight and bias gradients; the formulas of
// ops/layer_norm.cpp. Shapes: x, y, g, gx [N, C] contiguous (N rows of C),
// weight, bias [C], mean, rstd [N]; float32 accumulated in float.
#pragma once
#include <cmath>
#include <cstdint>

#include "tmem/cuda/hd.h"
#include "tmem/cuda/rows.cuh"

namespace tmem::cuda {

/// The weight and bias gradients sum over the rows in chunks of this many
/// rows (one partial per chunk and column), then over the chunks.
inline constexpr int64_t kLayerNormChunkRows = 64;

/// One row of the forward, two passes: mu = mean(x), var = mean((x - mu)^2)
/// (biased), rstd = 1 / sqrt(var + eps), y = (x - mu) rstd w + b (w, b null:
/// 1 and 0); mean[r] = mu and rstd[r] = rstd are saved for backward. A row
/// whose sum or sum of squared deviations overflows (|x| around 1e19) is
/// measured again scaled by its largest |x| (or |x - mu|), as the CPU kernel;
/// one whose x - mu overflows gives NaN.
struct LayerNormRows {
  const float* x;
  const float* weight;
  const float* bias;
  float* y;
  float* mean;
  float* rstd;
  int64_t cols;
  float eps;

  template <class Reduce>
  TMEM_HD void operator()(int64_t r, int64_t first, int64_t step, Reduce reduce) const {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    const float n = static_cast<float>(cols);
    float s = 0.0f;
    for (int64_t j = first; j < cols; j += step) s += xr[j];
    float mu = reduce(s, SumOp{}) / n;
    if (!std::isfinite(mu)) {  // the same on every lane of the row: a reduced value
      float m = 0.0f;
      for (int64_t j = first; j < cols; j += step) m = MaxOp{}(m, std::fabs(xr[j]));
      m = reduce(m, MaxOp{});
      if (std::isfinite(m) && m > 0.0f) {
        float t = 0.0f;
        for (int64_t j = first; j < cols; j += step) t += xr[j] / m;
        mu = m * (reduce(t, SumOp{}) / n);
      }
    }
    float q = 0.0f;
    for (int64_t j = first; j < cols; j += step) q += (xr[j] - mu) * (xr[j] - mu);
    const float var = reduce(q, SumOp{}) / n;
    float rs = 1.0f / std::sqrt(var + eps);
    if (!std::isfinite(var) && std::isfinite(mu)) {
      float d = 0.0f;
      for (int64_t j = first; j < cols; j += step) d = MaxOp{}(d, std::fabs(xr[j] - mu));
      d = reduce(d, MaxOp{});
      if (std::isfinite(d)) {
        float z = 0.0f;
        for (int64_t j = first; j < cols; j += step) z += ((xr[j] - mu) / d) * ((xr[j] - mu) / d);
        rs = 1.0f / (d * std::sqrt(reduce(z, SumOp{}) / n + eps / d / d));
      } else {
        rs = d - d;  // NaN: x - mu itself overflows, there is no finite y
      }
    }
    for (int64_t j = first; j < cols; j += step) {
      float v = (xr[j] - mu) * rs;
      if (weight) v *= weight[j];
      if (bias) v += bias[j];
      yr[j] = v;
    }
    if (first == 0) {
      mean[r] = mu;
      rstd[r] = rs;
    }
  }
};

/// One row of the input gradient: xhat = (x - mu) rstd, dxhat = g w (w null:
/// g), gx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)).
struct LayerNormInputGradRows {
  const float* x;
  const float* g;
  const float* weight;
  const float* mean;
  const float* rstd;
  float* gx;
  int64_t cols;

  template <class Reduce>
  TMEM_HD void operator()(int64_t r, int64_t first, int64_t step, Reduce reduce) const {
    const float* xr = x + r * cols;
    const float* gr = g + r * cols;
    float* gxr = gx + r * cols;
    const float mu = mean[r], rs = rstd[r], n = static_cast<float>(cols);
    float a = 0.0f, c = 0.0f;
    for (int64_t j = first; j < cols; j += step) {
      const float dxh = weight ? gr[j] * weight[j] : gr[j];
      a += dxh;
      c += dxh * (xr[j] - mu) * rs;
    }
    const float ma = reduce(a, SumOp{}) / n, mc = reduce(c, SumOp{}) / n;
    for (int64_t j = first; j < cols; j += step) {
      const float dxh = weight ? gr[j] * weight[j] : gr[j];
      gxr[j] = rs * (dxh - ma - (xr[j] - mu) * rs * mc);
    }
  }
};

/// Element i = p C + c of the weight and bias gradients' partials over the
/// rows of chunk p (rows p K ... min(N, p K + K) - 1, K =
/// kLayerNormChunkRows): gweight[i] = sum g xhat, gbias[i] = sum g (either
/// null: not computed). With one chunk these are the gradients themselves.
struct LayerNormParamGradChunks {
  const float* x;
  const float* g;
  const float* mean;
  const float* rstd;
  float* gweight;
  float* gbias;
  int64_t rows;
  int64_t cols;

  TMEM_HD void operator()(int64_t i) const {
    const int64_t p = i / cols, c = i - p * cols;
    const int64_t end = (p + 1) * kLayerNormChunkRows < rows ? (p + 1) * kLayerNormChunkRows : rows;
    float sw = 0.0f, sb = 0.0f;
    for (int64_t r = p * kLayerNormChunkRows; r < end; ++r) {
      const float gv = g[r * cols + c];
      sw += gv * (x[r * cols + c] - mean[r]) * rstd[r];
      sb += gv;
    }
    if (gweight) gweight[i] = sw;
    if (gbias) gbias[i] = sb;
  }
};

/// Column c of out[C] = sum over the parts of part[parts, C] (the chunk
/// partials of LayerNormParamGradChunks).
struct ColumnSums {
  const float* part;
  float* out;
  int64_t parts;
  int64_t cols;

  TMEM_HD void operator()(int64_t c) const {
    float s = 0.0f;
    for (int64_t p = 0; p < parts; ++p) s += part[p * cols + c];
    out[c] = s;
  }
};

}  // namespace tmem::cuda
