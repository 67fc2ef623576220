// grid_sample's CPU kernels (ops/kernel_list.h TMEM_GRID_SAMPLE_KERNELS):
// the coordinate mapping and the forward and backward loops. The spatial rank
// K (2 or 3) is a template parameter; axis a = 0..K-1 runs over the input's
// spatial dims in memory order ((D,) H, W), so axis a reads grid coordinate
// K-1-a (x -> W, y -> H, z -> D). Each output point handles all C channels,
// so the coordinate work is done once per point.
#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "tmem/ops/cpu/kernels.h"
#include "tmem/ops/cpu/scratch.h"
#include "tmem/ops/grid_sample.h"

namespace tmem::cpu {

namespace {

// The out-of-bounds source index that replaces a non-finite or huge one
// (PyTorch's safe_downgrade_to_int_range uses the same value).
template <class T>
constexpr T kOutside = T(-100);
// Source indices must lie strictly within +-2^62 to be converted to int64
// (floor + 1 cannot overflow, and the bounds check precedes any offset).
template <class T>
constexpr T kIndexLimit = T(4611686018427387904.0);

// Clips to [0, S-1]; *g = d out / d in, 0 at and beyond either border (the
// borders count as outside, as PyTorch's clip_coordinates_set_grad). NaN
// compares false both ways and passes through with *g = 1.
template <class T>
T clip_set_grad(T in, int64_t size, T* g) {
  if (in <= T(0)) {
    *g = T(0);
    return T(0);
  }
  const T hi = static_cast<T>(size - 1);
  if (in >= hi) {
    *g = T(0);
    return hi;
  }
  *g = T(1);
  return in;
}

// Reflects `in` by the bounds twice_low/2 and twice_high/2 until it lies
// between them (PyTorch's reflect_coordinates_set_grad). The flip count's
// parity is computed in floating point, so a huge finite value needs no int
// conversion; +-Inf and NaN give NaN (later replaced by the sentinel).
template <class T>
T reflect_set_grad(T in, int64_t twice_low, int64_t twice_high, T* g) {
  if (twice_low == twice_high) {
    *g = T(0);
    return T(0);
  }
  if (!std::isfinite(in)) {
    *g = T(0);
    return std::numeric_limits<T>::quiet_NaN();
  }
  const T lo = static_cast<T>(twice_low) / 2;
  const T span = static_cast<T>(twice_high - twice_low) / 2;
  in = in - lo;
  T sign = T(1);
  if (in < T(0)) {
    sign = T(-1);
    in = -in;
  }
  const T extra = std::fmod(in, span);
  const T flips = std::floor(in / span);
  if (std::fmod(flips, T(2)) == T(0)) {
    *g = sign;
    return extra + lo;
  }
  *g = -sign;
  return span - extra + lo;
}

// The source index of normalised coordinate `coord` on an axis of `size`
// cells, and *g = d index / d coord (grid_sampler_compute_source_index_set_grad
// plus the sentinel and the size-1 rule documented in grid_sample.h).
template <class T>
T source_index(T coord, int64_t size, GridSamplePadding pad, bool align, T* g) {
  if (std::isnan(coord)) {
    *g = T(0);
    return kOutside<T>;
  }
  T x;
  if (align) {
    if (size == 1) {
      // PyTorch computes ((coord + 1) / 2) * 0: index 0 for every finite
      // coordinate (NaN for +-Inf), and border and reflection keep 0. Here
      // every non-NaN coordinate reads index 0 (border clips +-Inf to the
      // single cell), except that zeros padding treats |coord| > 1 as outside.
      *g = T(0);
      if (pad == GridSamplePadding::Zeros && std::abs(coord) > T(1)) return kOutside<T>;
      return T(0);
    }
    *g = static_cast<T>(size - 1) / 2;
    x = ((coord + 1) / 2) * static_cast<T>(size - 1);
  } else {
    *g = static_cast<T>(size) / 2;
    x = ((coord + 1) * static_cast<T>(size) - 1) / 2;
  }
  if (pad == GridSamplePadding::Border) {
    T gc;
    x = clip_set_grad(x, size, &gc);
    *g *= gc;
  } else if (pad == GridSamplePadding::Reflection) {
    T gr, gc;
    x = align ? reflect_set_grad(x, 0, 2 * (size - 1), &gr)
              : reflect_set_grad(x, -1, 2 * size - 1, &gr);
    x = clip_set_grad(x, size, &gc);
    *g *= gr * gc;
  }
  if (!(x > -kIndexLimit<T> && x < kIndexLimit<T>)) {
    *g = T(0);
    return kOutside<T>;
  }
  return x;
}

// Sizes of one call, in elements.
template <int K>
struct Geometry {
  int64_t N = 0, C = 0;
  std::array<int64_t, K> size{};    // input spatial sizes ((D,) H, W)
  std::array<int64_t, K> stride{};  // their strides within one channel plane
  int64_t plane = 1;                // prod(size)
  int64_t P = 1;                    // output points per sample
};

struct Options {
  GridSampleMode mode;
  GridSamplePadding pad;
  bool align;
};

// The cells one output point reads: offsets within a channel plane, weights,
// and (bilinear) d weight / d source index per axis.
template <class T, int K>
struct Taps {
  static constexpr int kMax = 1 << K;
  int count = 0;
  std::array<int64_t, kMax> off{};
  std::array<T, kMax> w{};
  std::array<std::array<T, K>, kMax> dw{};
  std::array<T, K> mult{};  // d source index / d grid coordinate, per axis
};

// Fills `t` for the point whose K grid coordinates (x, y, z order) start at g;
// the weights' derivatives t.dw only when kDw (the grid gradient needs them).
template <class T, int K, bool kDw = true>
void taps_of(const T* g, const Geometry<K>& geo, const Options& o, Taps<T, K>& t) {
  std::array<T, K> src;
  for (int a = 0; a < K; ++a)
    src[a] = source_index(g[K - 1 - a], geo.size[a], o.pad, o.align, &t.mult[a]);
  t.count = 0;
  if (o.mode == GridSampleMode::Nearest) {
    int64_t off = 0;
    for (int a = 0; a < K; ++a) {
      const int64_t i = static_cast<int64_t>(std::nearbyint(src[a]));
      if (i < 0 || i >= geo.size[a]) return;
      off += i * geo.stride[a];
    }
    t.off[0] = off;
    t.w[0] = T(1);
    t.count = 1;
    return;
  }
  std::array<int64_t, K> i0;
  std::array<std::array<T, 2>, K> f;  // f[a][0]: weight of cell i0, f[a][1]: of cell i0 + 1
  for (int a = 0; a < K; ++a) {
    i0[a] = static_cast<int64_t>(std::floor(src[a]));
    f[a][0] = static_cast<T>(i0[a] + 1) - src[a];
    f[a][1] = src[a] - static_cast<T>(i0[a]);
  }
  // Corner b takes cell i0 + bit on axis a, x being bit 0 (PyTorch's nw, ne,
  // sw, se, then top before bottom); weights multiply x first, as PyTorch.
  for (int b = 0; b < Taps<T, K>::kMax; ++b) {
    bool inside = true;
    int64_t off = 0;
    std::array<int, K> bit;
    for (int a = 0; a < K; ++a) {
      bit[a] = (b >> (K - 1 - a)) & 1;
      const int64_t i = i0[a] + bit[a];
      inside = inside && i >= 0 && i < geo.size[a];
      off += i * geo.stride[a];
    }
    if (!inside) continue;
    T w = T(1);
    for (int a = K - 1; a >= 0; --a) w *= f[a][bit[a]];
    if constexpr (kDw) {
      std::array<T, K> dw;
      for (int a = 0; a < K; ++a) {
        T d = bit[a] ? T(1) : T(-1);
        for (int e = K - 1; e >= 0; --e)
          if (e != a) d *= f[e][bit[e]];
        dw[a] = d;
      }
      t.dw[t.count] = dw;
    }
    t.off[t.count] = off;
    t.w[t.count] = w;
    ++t.count;
  }
}

// Work estimate (multiply-adds) deciding whether threads are worth starting.
template <int K>
int64_t work_of(const Geometry<K>& geo) {
  return geo.N * geo.P * std::max<int64_t>(geo.C, 1) * (int64_t{1} << K);
}

// Threads start only for work of this many multiply-adds (or elements of
// input gradient to clear): waking a sleeping OpenMP thread (the passive
// wait policy that a shared machine needs) costs tens of microseconds, about
// as much as reading one point per sample of a [128, 32, 8, 8, 8] volume.
constexpr int64_t kSpawnWork = int64_t{1} << 21;

template <class T, int K>
void forward_kernel(const Geometry<K>& geo, const Options& o, const T* in, const T* grid, T* out) {
  const int64_t N = geo.N, C = geo.C, P = geo.P, plane = geo.plane;
  const int64_t total = N * P;
#pragma omp parallel for schedule(static) if (work_of(geo) >= kSpawnWork && total > 1)
  for (int64_t i = 0; i < total; ++i) {
    const int64_t n = i / P, p = i % P;
    Taps<T, K> t;
    taps_of<T, K, false>(grid + i * K, geo, o, t);
    const T* x = in + n * C * plane;
    T* y = out + n * C * P + p;
    if (t.count == Taps<T, K>::kMax) {
      // Every tap inside (the common case): a sum of fixed length.
      for (int64_t c = 0; c < C; ++c) {
        const T* xc = x + c * plane;
        T acc = T(0);
        for (int k = 0; k < Taps<T, K>::kMax; ++k) acc += xc[t.off[k]] * t.w[k];
        y[c * P] = acc;
      }
      continue;
    }
    for (int64_t c = 0; c < C; ++c) {
      T acc = T(0);
      for (int k = 0; k < t.count; ++k) acc += x[c * plane + t.off[k]] * t.w[k];
      y[c * P] = acc;
    }
  }
}

// The gradients of one output point with taps t: scatter-adds into gin_n
// (null when not needed) and writes the point's K grid gradients to gg (null
// when not needed). Count: the number of taps when fixed at compile time, or
// 0 (t.count). x: the sample's input (read for the bilinear grid gradient).
template <class T, int K, int Count>
void backward_taps(const Taps<T, K>& t, int64_t C, int64_t P, int64_t plane, const T* go,
                   const T* x, T* gin_n, T* gg, bool bilinear) {
  const int count = Count > 0 ? Count : t.count;
  // d out / d source index along axis a = sum over taps k of dw[k][a] u[k],
  // u[k] = sum over channels of the input at tap k times the gradient.
  const bool grid_grad = gg && bilinear;
  std::array<T, Taps<T, K>::kMax> u{};
  for (int64_t c = 0; c < C; ++c) {
    const T gv = go[c * P];
    if (gin_n) {
      T* gc = gin_n + c * plane;
      for (int k = 0; k < count; ++k) gc[t.off[k]] += t.w[k] * gv;
    }
    if (grid_grad) {
      const T* xc = x + c * plane;
      for (int k = 0; k < count; ++k) u[k] += xc[t.off[k]] * gv;
    }
  }
  if (!gg) return;
  std::array<T, K> gs{};
  if (grid_grad)
    for (int k = 0; k < count; ++k)
      for (int a = 0; a < K; ++a) gs[a] += u[k] * t.dw[k][a];
  for (int a = 0; a < K; ++a) gg[K - 1 - a] = t.mult[a] * gs[a];
}

// Gradients of output point p of sample n: scatter-adds into gin_n (the
// input gradient of sample n, or a private accumulator; null when not
// needed) and writes the point's grid gradient (ggrid null when not needed).
template <class T, int K>
void backward_point(const Geometry<K>& geo, const Options& o, int64_t n, int64_t p, const T* in,
                    const T* grid, const T* gout, T* gin_n, T* ggrid) {
  const int64_t C = geo.C, P = geo.P, plane = geo.plane;
  const int64_t i = n * P + p;
  Taps<T, K> t;
  if (ggrid && o.mode == GridSampleMode::Bilinear)
    taps_of<T, K, true>(grid + i * K, geo, o, t);
  else
    taps_of<T, K, false>(grid + i * K, geo, o, t);
  const T* go = gout + n * C * P + p;
  const T* x = in ? in + n * C * plane : nullptr;
  T* gg = ggrid ? ggrid + i * K : nullptr;
  const bool bilinear = o.mode == GridSampleMode::Bilinear;
  // With every tap inside (the common case) the tap loops have a fixed
  // length and unroll, so the per-tap sums u stay in registers.
  if (t.count == Taps<T, K>::kMax)
    backward_taps<T, K, Taps<T, K>::kMax>(t, C, P, plane, go, x, gin_n, gg, bilinear);
  else
    backward_taps<T, K, 0>(t, C, P, plane, go, x, gin_n, gg, bilinear);
}

// gin ([N,C,plane]: added to with `accumulate`, else written in full, zeroed
// here sample by sample on the thread that scatters into it) and ggrid
// ([N,P,K]) may each be null.
template <class T, int K>
void backward_kernel(const Geometry<K>& geo, const Options& o, const T* in, const T* grid,
                     const T* gout, T* gin, T* ggrid, bool accumulate) {
  const int64_t N = geo.N, P = geo.P;
  const int64_t S = geo.C * geo.plane;  // input elements per sample
  if (!gin) {
    const int64_t total = N * P;
#pragma omp parallel for schedule(static) if (work_of(geo) >= kSpawnWork && total > 1)
    for (int64_t i = 0; i < total; ++i)
      backward_point<T, K>(geo, o, i / P, i % P, in, grid, gout, nullptr, ggrid);
    return;
  }
  const bool big = work_of(geo) + N * S >= kSpawnWork;
  const int nt = big ? omp_get_max_threads() : 1;
  // Private accumulators cost (nt - 1) * S zeroing and summing per sample;
  // they pay only when a sample's scatter work is larger than that.
  const bool split_samples =
      nt > 1 && N < nt && (nt - 1) * geo.plane <= (int64_t{1} << K) * P;
  if (!split_samples) {
    // Each sample's input gradient is owned by one thread.
#pragma omp parallel for schedule(static) if (big && N > 1)
    for (int64_t n = 0; n < N; ++n) {
      if (!accumulate) std::fill(gin + n * S, gin + (n + 1) * S, T(0));
      for (int64_t p = 0; p < P; ++p)
        backward_point<T, K>(geo, o, n, p, in, grid, gout, gin + n * S, ggrid);
    }
    return;
  }
  // Fewer samples than threads: the points of a sample are split across
  // threads; thread 0 scatters into the gradient itself, the others into
  // private accumulators summed into it after the loop.
  if (!accumulate) std::fill(gin, gin + N * S, T(0));
  Scratch<T> priv("grid_sample backward", (nt - 1) * S);
  for (int64_t n = 0; n < N; ++n) {
    T* dst = gin + n * S;
#pragma omp parallel num_threads(nt)
    {
      const int tid = omp_get_thread_num();
      const int team = omp_get_num_threads();
      T* acc = tid == 0 ? dst : priv.data() + (tid - 1) * S;
      if (tid > 0) std::fill(acc, acc + S, T(0));
#pragma omp for schedule(static)
      for (int64_t p = 0; p < P; ++p) backward_point<T, K>(geo, o, n, p, in, grid, gout, acc, ggrid);
#pragma omp for schedule(static)
      for (int64_t e = 0; e < S; ++e) {
        T s = T(0);
        for (int k = 1; k < team; ++k) s += priv[static_cast<size_t>((k - 1) * S + e)];
        dst[e] += s;
      }
    }
  }
}

template <int K>
Geometry<K> geometry_of(const GridSampleArgs& a) {
  Geometry<K> geo;
  geo.N = a.N;
  geo.C = a.C;
  for (int k = 0; k < K; ++k) geo.size[k] = a.size[k];
  int64_t s = 1;
  for (int k = K - 1; k >= 0; --k) {
    geo.stride[k] = s;
    s *= geo.size[k];
  }
  geo.plane = s;
  geo.P = a.P;
  return geo;
}

Options options_of(const GridSampleArgs& a) {
  return {a.nearest ? GridSampleMode::Nearest : GridSampleMode::Bilinear,
          static_cast<GridSamplePadding>(a.padding), a.align_corners};
}

static_assert(static_cast<int>(GridSamplePadding::Zeros) == 0 &&
                  static_cast<int>(GridSamplePadding::Border) == 1 &&
                  static_cast<int>(GridSamplePadding::Reflection) == 2,
              "GridSampleArgs::padding numbers the modes in this order");

}  // namespace

template <class Scalar>
void Kernels<Scalar>::grid_sample_forward(int, const GridSampleArgs& a, const T* input,
                                          const T* grid, T* out) {
  if (a.K == 2)
    forward_kernel<T, 2>(geometry_of<2>(a), options_of(a), input, grid, out);
  else
    forward_kernel<T, 3>(geometry_of<3>(a), options_of(a), input, grid, out);
}

template <class Scalar>
void Kernels<Scalar>::grid_sample_backward(int, const GridSampleArgs& a, const T* input,
                                           const T* grid, const T* gout, T* ginput, T* ggrid) {
  if (a.K == 2)
    backward_kernel<T, 2>(geometry_of<2>(a), options_of(a), input, grid, gout, ginput, ggrid, a.accumulate);
  else
    backward_kernel<T, 3>(geometry_of<3>(a), options_of(a), input, grid, gout, ginput, ggrid, a.accumulate);
}

TMEM_GRID_SAMPLE_KERNELS(TMEM_CPU_INSTANTIATE)

}  // namespace tmem::cpu
