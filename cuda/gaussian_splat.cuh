// The arithmetic of the gaussian_splat kernels (cuda/gaussian_splat.cu): the
// forward per element, the backward as row programs (cuda/rows.cuh), built
// for the device by nvcc and for the host by g++ (cuda/hd.h), so
// tests/host_kernels_spatial.cpp runs it without a GPU.
// Shapes as SplatArgs (ops/device_kernels.h): content [B, C], mu
// [B, 3] (x, y, z), sigma [B], volume [B, C, D, H, W], S = D H W voxels,
// contiguous float32. Formulas and gradients: ops/gaussian_splat.h; the
// float32 operations follow ops/gaussian_splat.cpp's CPU kernel (the
// Gaussian is the product of one factor per axis).
#pragma once
#include <cmath>
#include <cstdint>

#include "tmem/cuda/hd.h"
#include "tmem/cuda/rows.cuh"
#include "tmem/ops/device_kernels.h"

namespace tmem::cuda {

/// The Gaussian's denominator is 2 sigma^2 + kSplatEps.
inline constexpr double kSplatEps = 1e-6;

/// Cell centre i of linspace(-1, 1, n) (computed in double, as the CPU
/// kernel); the single cell of n = 1 sits at 0.
TMEM_HD float splat_centre(int64_t i, int64_t n) {
  return static_cast<float>(n == 1 ? 0.0 : -1.0 + 2.0 * static_cast<double>(i) / static_cast<double>(n - 1));
}

/// One batch item's scale: den = 2 sigma^2 + eps and, with truncation, the
/// squared radius r2 = (truncate sigma)^2.
struct SplatScale {
  float den;
  float r2;
  bool truncated;
};

TMEM_HD SplatScale splat_scale(float s, double truncate) {
  SplatScale sc;
  sc.den = 2.0f * s * s + static_cast<float>(kSplatEps);
  sc.truncated = truncate > 0;
  sc.r2 = sc.truncated ? static_cast<float>(truncate) * s * static_cast<float>(truncate) * s : 0.0f;
  return sc;
}

/// The factor of axis distance d: exp(-d^2 / den), 0 when d alone leaves the
/// truncation ball.
TMEM_HD float splat_factor(float d, const SplatScale& sc) {
  return sc.truncated && d * d > sc.r2 ? 0.0f : std::exp(-(d * d) / sc.den);
}

/// The weight G[b, v] of voxel v = (z H + y) W + x for the batch item whose
/// mu starts at mu, and its offsets d = p(v) - mu (x, y, z).
TMEM_HD float splat_weight(const SplatArgs& a, const float* mu, const SplatScale& sc, int64_t v, float d[3]) {
  const int64_t x = v % a.W, y = (v / a.W) % a.H, z = v / (a.W * a.H);
  d[0] = splat_centre(x, a.W) - mu[0];
  d[1] = splat_centre(y, a.H) - mu[1];
  d[2] = splat_centre(z, a.D) - mu[2];
  const float zy = splat_factor(d[2], sc) * splat_factor(d[1], sc);
  const float ex = splat_factor(d[0], sc);
  if (!sc.truncated) return zy * ex;
  const float rem = sc.r2 - d[2] * d[2] - d[1] * d[1];
  if (rem < 0.0f) return 0.0f;
  return d[0] * d[0] > rem ? 0.0f : zy * ex;
}

/// Volume element i of [B, C, S].
TMEM_HD void splat_forward_one(const SplatArgs& a, const float* content, const float* mu, const float* sigma,
                               float* vol, int64_t i) {
  const int64_t S = a.D * a.H * a.W, bc = i / S, b = bc / a.C;
  float d[3];
  const float G = splat_weight(a, mu + 3 * b, splat_scale(sigma[b], a.truncate), i % S, d);
  vol[i] = G * content[bc];
}

/// Row program (cuda/rows.cuh) of gcontent: row j of [B, C] is the sum over
/// voxels v of gvol[j, v] times the weight G[b, v], accumulated in float.
struct SplatContentRows {
  SplatArgs a;
  const float* mu;
  const float* sigma;
  const float* gvol;
  float* gcontent;

  template <class Reduce>
  TMEM_HD void operator()(int64_t j, int64_t first, int64_t step, Reduce reduce) const {
    const int64_t S = a.D * a.H * a.W, b = j / a.C;
    const SplatScale sc = splat_scale(sigma[b], a.truncate);
    const float* g = gvol + j * S;
    float d[3];
    float acc = 0.0f;
    for (int64_t v = first; v < S; v += step) acc += g[v] * splat_weight(a, mu + 3 * b, sc, v, d);
    acc = reduce(acc, SumOp{});
    if (first == 0) gcontent[j] = acc;
  }
};

/// Row program of gmu[b, :] and gsigma[b] (either may be null), row b over
/// the voxels v: with M[v] = G[v] sum_c gvol[b, c, v] content[b, c],
/// dL/dmu_a = (2 / den) sum_v M[v] d_a(v) and dL/dsigma = (4 sigma / den^2)
/// sum_v M[v] |d(v)|^2, the sums in double as the CPU kernel's.
struct SplatGeometryRows {
  SplatArgs a;
  const float* content;
  const float* mu;
  const float* sigma;
  const float* gvol;
  float* gmu;
  float* gsigma;

  template <class Reduce>
  TMEM_HD void operator()(int64_t b, int64_t first, int64_t step, Reduce reduce) const {
    const int64_t S = a.D * a.H * a.W;
    const float s = sigma[b];
    const SplatScale sc = splat_scale(s, a.truncate);
    double sx = 0, sy = 0, sz = 0, s2 = 0;
    for (int64_t v = first; v < S; v += step) {
      float r = 0.0f;
      for (int64_t c = 0; c < a.C; ++c) r += gvol[(b * a.C + c) * S + v] * content[b * a.C + c];
      float d[3];
      const double m = static_cast<double>(r * splat_weight(a, mu + 3 * b, sc, v, d));
      sx += d[0] * m;
      sy += d[1] * m;
      sz += d[2] * m;
      s2 += (static_cast<double>(d[0]) * d[0] + static_cast<double>(d[1]) * d[1] +
             static_cast<double>(d[2]) * d[2]) * m;
    }
    sx = reduce(sx, SumOp{});
    sy = reduce(sy, SumOp{});
    sz = reduce(sz, SumOp{});
    s2 = reduce(s2, SumOp{});
    if (first != 0) return;
    if (gmu) {
      const double k = 2.0 / static_cast<double>(sc.den);
      gmu[3 * b + 0] = static_cast<float>(k * sx);
      gmu[3 * b + 1] = static_cast<float>(k * sy);
      gmu[3 * b + 2] = static_cast<float>(k * sz);
    }
    // 4 s / den^2, divided twice so a huge den cannot overflow den^2.
    if (gsigma) gsigma[b] = static_cast<float>(4.0 * s / sc.den / sc.den * s2);
  }
};

}  // namespace tmem::cuda
