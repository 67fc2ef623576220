// The per-thread arithmetic of the grid_sample kernels (cuda/grid_sample.cu),
// built for the device by nvcc and for the host by g++ (cuda/hd.h), so
// tests/host_kernels_spatial.cpp runs it without a GPU. Shapes and options
// as GridSampleArgs (ops/device_kernels.h): input [N, C, size...],
// grid [N, P, K], output [N, C, P], contiguous float32. The coordinate
// mapping, padding and sentinel rules are ops/grid_sample.cpp's (PyTorch's
// GridSampler.h), in float32 with the CPU kernel's order of operations.
// Spatial axis a = 0..K-1 runs over the input's spatial dims in memory order
// ((D,) H, W) and reads grid coordinate K-1-a (x -> W, y -> H, z -> D).
#pragma once
#include <cmath>
#include <cstdint>

#include "tmem/cuda/hd.h"
#include "tmem/ops/device_kernels.h"

namespace tmem::cuda {

/// The out-of-bounds source index that replaces a non-finite or huge one.
inline constexpr float kGridOutside = -100.0f;
/// Source indices must lie strictly within +-2^62 to become int64.
inline constexpr float kGridIndexLimit = 4611686018427387904.0f;

/// Clips in to [0, size-1]; *g = d out / d in, 0 at and beyond either border.
/// NaN passes through with *g = 1.
TMEM_HD float grid_clip_set_grad(float in, int64_t size, float* g) {
  if (in <= 0.0f) {
    *g = 0.0f;
    return 0.0f;
  }
  const float hi = static_cast<float>(size - 1);
  if (in >= hi) {
    *g = 0.0f;
    return hi;
  }
  *g = 1.0f;
  return in;
}

/// Reflects a finite `in` by twice_low/2 and twice_high/2 (twice_low <
/// twice_high) until it lies between them; *g = +-1, the flips' sign. The
/// flip count's parity is computed in floating point.
TMEM_HD float grid_reflect_set_grad(float in, int64_t twice_low, int64_t twice_high, float* g) {
  const float lo = static_cast<float>(twice_low) / 2;
  const float span = static_cast<float>(twice_high - twice_low) / 2;
  in = in - lo;
  float sign = 1.0f;
  if (in < 0.0f) {
    sign = -1.0f;
    in = -in;
  }
  const float extra = std::fmod(in, span);
  const float flips = std::floor(in / span);
  if (std::fmod(flips, 2.0f) == 0.0f) {
    *g = sign;
    return extra + lo;
  }
  *g = -sign;
  return span - extra + lo;
}

/// The source index of normalised coordinate `coord` on an axis of `size`
/// cells and *g = d index / d coord (ops/grid_sample.cpp source_index). A
/// NaN coordinate, or an index that is non-finite before reflection or
/// beyond +-2^62 after padding, gives kGridOutside with *g = 0.
TMEM_HD float grid_source_index(float coord, int64_t size, int padding, bool align, float* g) {
  if (std::isnan(coord)) {
    *g = 0.0f;
    return kGridOutside;
  }
  float x;
  if (align) {
    if (size == 1) {
      // Every non-NaN coordinate reads index 0, except that zeros padding
      // treats |coord| > 1 as outside (ops/grid_sample.h).
      *g = 0.0f;
      if (padding == 0 && std::fabs(coord) > 1.0f) return kGridOutside;
      return 0.0f;
    }
    *g = static_cast<float>(size - 1) / 2;
    x = ((coord + 1) / 2) * static_cast<float>(size - 1);
  } else {
    *g = static_cast<float>(size) / 2;
    x = ((coord + 1) * static_cast<float>(size) - 1) / 2;
  }
  if (padding == 1) {
    float gc;
    x = grid_clip_set_grad(x, size, &gc);
    *g *= gc;
  } else if (padding == 2) {
    if (!std::isfinite(x)) {
      *g = 0.0f;
      return kGridOutside;
    }
    float gr, gc;
    x = align ? grid_reflect_set_grad(x, 0, 2 * (size - 1), &gr)
              : grid_reflect_set_grad(x, -1, 2 * size - 1, &gr);
    x = grid_clip_set_grad(x, size, &gc);
    *g *= gr * gc;
  }
  if (!(x > -kGridIndexLimit && x < kGridIndexLimit)) {
    *g = 0.0f;
    return kGridOutside;
  }
  return x;
}

/// The cells one output point reads: offsets within a channel plane,
/// weights and (bilinear, when asked) d weight / d source index per axis.
template <int K>
struct GridTaps {
  static constexpr int kMax = 1 << K;
  int count = 0;
  int64_t off[kMax];
  float w[kMax];
  float dw[kMax][K];
  float mult[K];  // d source index / d grid coordinate, per axis
};

/// Elements of one channel plane of the input.
TMEM_HD int64_t grid_plane(const GridSampleArgs& a) {
  int64_t s = 1;
  for (int k = 0; k < a.K; ++k) s *= a.size[k];
  return s;
}

/// Fills t for the point whose K coordinates (x, y(, z)) start at g
/// (ops/grid_sample.cpp taps_of); t.dw only when with_dw.
template <int K>
TMEM_HD void grid_taps(const float* g, const GridSampleArgs& a, bool with_dw, GridTaps<K>& t) {
  float src[K];
  int64_t stride[K];
  int64_t s = 1;
  for (int ax = K - 1; ax >= 0; --ax) {
    stride[ax] = s;
    s *= a.size[ax];
  }
  for (int ax = 0; ax < K; ++ax)
    src[ax] = grid_source_index(g[K - 1 - ax], a.size[ax], a.padding, a.align_corners, &t.mult[ax]);
  t.count = 0;
  if (a.nearest) {
    int64_t off = 0;
    for (int ax = 0; ax < K; ++ax) {
      const int64_t i = static_cast<int64_t>(std::nearbyint(src[ax]));
      if (i < 0 || i >= a.size[ax]) return;
      off += i * stride[ax];
    }
    t.off[0] = off;
    t.w[0] = 1.0f;
    t.count = 1;
    return;
  }
  int64_t i0[K];
  float f[K][2];  // f[ax][0]: weight of cell i0, f[ax][1]: of cell i0 + 1
  for (int ax = 0; ax < K; ++ax) {
    i0[ax] = static_cast<int64_t>(std::floor(src[ax]));
    f[ax][0] = static_cast<float>(i0[ax] + 1) - src[ax];
    f[ax][1] = src[ax] - static_cast<float>(i0[ax]);
  }
  // Corner b takes cell i0 + bit on axis ax, x being bit 0; weights multiply
  // x first, as PyTorch and the CPU kernel.
  for (int b = 0; b < GridTaps<K>::kMax; ++b) {
    bool inside = true;
    int64_t off = 0;
    int bit[K];
    for (int ax = 0; ax < K; ++ax) {
      bit[ax] = (b >> (K - 1 - ax)) & 1;
      const int64_t i = i0[ax] + bit[ax];
      inside = inside && i >= 0 && i < a.size[ax];
      off += i * stride[ax];
    }
    if (!inside) continue;
    float w = 1.0f;
    for (int ax = K - 1; ax >= 0; --ax) w *= f[ax][bit[ax]];
    if (with_dw)
      for (int ax = 0; ax < K; ++ax) {
        float d = bit[ax] ? 1.0f : -1.0f;
        for (int e = K - 1; e >= 0; --e)
          if (e != ax) d *= f[e][bit[e]];
        t.dw[t.count][ax] = d;
      }
    t.off[t.count] = off;
    t.w[t.count] = w;
    ++t.count;
  }
}

/// Output element i of out [N, C, P].
template <int K>
TMEM_HD void grid_sample_forward_one(const GridSampleArgs& a, const float* input, const float* grid, float* out,
                                     int64_t i) {
  const int64_t nc = i / a.P, p = i % a.P, n = nc / a.C;
  GridTaps<K> t;
  grid_taps<K>(grid + (n * a.P + p) * K, a, false, t);
  const float* x = input + nc * grid_plane(a);
  float acc = 0.0f;
  for (int k = 0; k < t.count; ++k) acc += x[t.off[k]] * t.w[k];
  out[i] = acc;
}

/// The input gradient of output element i of [N, C, P]: add(&ginput[...],
/// weight * gout[i]) for each cell the element read (atomicAdd on the
/// device, += on the host).
template <int K, class Add>
TMEM_HD void grid_sample_backward_input_one(const GridSampleArgs& a, const float* grid, const float* gout,
                                            float* ginput, int64_t i, Add add) {
  const int64_t nc = i / a.P, p = i % a.P, n = nc / a.C;
  GridTaps<K> t;
  grid_taps<K>(grid + (n * a.P + p) * K, a, false, t);
  float* gx = ginput + nc * grid_plane(a);
  const float gv = gout[i];
  for (int k = 0; k < t.count; ++k) add(gx + t.off[k], t.w[k] * gv);
}

/// The bilinear grid gradient of point j of [N, P]: ggrid[j, :] (written),
/// summed over the C channels.
template <int K>
TMEM_HD void grid_sample_backward_grid_one(const GridSampleArgs& a, const float* input, const float* grid,
                                           const float* gout, float* ggrid, int64_t j) {
  const int64_t n = j / a.P, p = j % a.P, plane = grid_plane(a);
  GridTaps<K> t;
  grid_taps<K>(grid + j * K, a, true, t);
  // u[k] = sum over channels of the input at tap k times the gradient.
  float u[GridTaps<K>::kMax] = {};
  for (int64_t c = 0; c < a.C; ++c) {
    const float gv = gout[(n * a.C + c) * a.P + p];
    const float* xc = input + (n * a.C + c) * plane;
    for (int k = 0; k < t.count; ++k) u[k] += xc[t.off[k]] * gv;
  }
  for (int ax = 0; ax < K; ++ax) {
    float gs = 0.0f;
    for (int k = 0; k < t.count; ++k) gs += u[k] * t.dw[k][ax];
    ggrid[j * K + K - 1 - ax] = t.mult[ax] * gs;
  }
}

}  // namespace tmem::cuda
