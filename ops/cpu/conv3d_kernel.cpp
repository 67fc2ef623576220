// conv3d_depthwise's CPU kernels (ops/kernel_list.h TMEM_CONV3D_KERNELS).
// Every kernel walks one (b, c) plane tap by tap: for a tap (i, j, k) it
// computes the range of output rows/columns whose input position is inside
// the volume, so no bounds test runs in the inner loop, which is a contiguous
// (stride-1 along W) multiply-add over an output row.
#include <algorithm>

#include "tmem/ops/cpu/kernels.h"
#include "tmem/ops/cpu/simd.h"

namespace tmem::cpu {

namespace {

// floor(a / b) and ceil(a / b) for b > 0 and any sign of a.
int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
int64_t ceil_div(int64_t a, int64_t b) { return -floor_div(-a, b); }

// One axis: input length n, kernel k, stride s, padding p, output length out.
struct Axis {
  int64_t n, k, s, p, out;
  // Outputs o in [lo, hi) read input o*s - p + tap inside [0, n).
  int64_t lo(int64_t tap) const { return std::max<int64_t>(0, ceil_div(p - tap, s)); }
  int64_t hi(int64_t tap) const {
    return std::min<int64_t>(out, floor_div(n - 1 + p - tap, s) + 1);
  }
  int64_t in(int64_t o, int64_t tap) const { return o * s - p + tap; }
};

struct Geometry {
  int64_t B, C;
  Axis d, h, w;
  int64_t in_plane() const { return d.n * h.n * w.n; }
  int64_t out_plane() const { return d.out * h.out * w.out; }
  int64_t taps() const { return d.k * h.k * w.k; }
};

// Calls f(in_row, out_row, tap_index, ow_lo, ow_hi) for every pair of an input
// row and an output row that one tap (i, j) connects; f covers the W taps.
template <class F>
void for_each_row_pair(const Geometry& g, F&& f) {
  for (int64_t i = 0; i < g.d.k; ++i)
    for (int64_t od = g.d.lo(i); od < g.d.hi(i); ++od) {
      const int64_t id = g.d.in(od, i);
      for (int64_t j = 0; j < g.h.k; ++j)
        for (int64_t oh = g.h.lo(j); oh < g.h.hi(j); ++oh) {
          const int64_t ih = g.h.in(oh, j);
          f((id * g.h.n + ih) * g.w.n, (od * g.h.out + oh) * g.w.out, (i * g.h.k + j) * g.w.k);
        }
    }
}

// out[ow] += wv * in[ow*s - p + k] for ow in [lo, hi).
template <class T>
void row_fma(T* __restrict out, const T* __restrict in, T wv, const Axis& a, int64_t k) {
  const int64_t lo = a.lo(k), hi = a.hi(k);
  if (a.s == 1) {
    const T* src = in - a.p + k;
#pragma omp simd
    for (int64_t o = lo; o < hi; ++o) out[o] += wv * src[o];
  } else {
    for (int64_t o = lo; o < hi; ++o) out[o] += wv * in[o * a.s - a.p + k];
  }
}

// in[ow*s - p + k] += wv * out[ow] for ow in [lo, hi): the transposed tap.
template <class T>
void row_fma_t(T* __restrict in, const T* __restrict out, T wv, const Axis& a, int64_t k) {
  const int64_t lo = a.lo(k), hi = a.hi(k);
  if (a.s == 1) {
    T* dst = in - a.p + k;
#pragma omp simd
    for (int64_t o = lo; o < hi; ++o) dst[o] += wv * out[o];
  } else {
    for (int64_t o = lo; o < hi; ++o) in[o * a.s - a.p + k] += wv * out[o];
  }
}

// sum over ow in [lo, hi) of out[ow] * in[ow*s - p + k].
template <class T>
T row_dot(const T* __restrict out, const T* __restrict in, const Axis& a, int64_t k) {
  const int64_t lo = a.lo(k), hi = a.hi(k);
  T acc = T(0);
  if (a.s == 1) {
    const T* src = in - a.p + k;
#pragma omp simd reduction(+ : acc)
    for (int64_t o = lo; o < hi; ++o) acc += out[o] * src[o];
  } else {
    for (int64_t o = lo; o < hi; ++o) acc += out[o] * in[o * a.s - a.p + k];
  }
  return acc;
}

template <class T>
void conv_forward(const Geometry& g, const T* in, const T* w, const T* bias, T* out) {
  const int64_t IP = g.in_plane(), OP = g.out_plane(), nt = g.taps();
#pragma omp parallel for schedule(static) if (g.B * g.C * OP * nt >= kParallelGrain && g.B * g.C > 1)
  for (int64_t bc = 0; bc < g.B * g.C; ++bc) {
    const int64_t c = bc % g.C;
    const T* ip = in + bc * IP;
    const T* wc = w + c * nt;
    T* op = out + bc * OP;
    std::fill(op, op + OP, bias ? bias[c] : T(0));
    for_each_row_pair(g, [&](int64_t irow, int64_t orow, int64_t tap) {
      for (int64_t k = 0; k < g.w.k; ++k) row_fma(op + orow, ip + irow, wc[tap + k], g.w, k);
    });
  }
}

// gout[B,C,Do,Ho,Wo] -> gin[B,C,D,H,W] (the transposed convolution).
template <class T>
void conv_backward_input(const Geometry& g, const T* gout, const T* w, T* gin) {
  const int64_t IP = g.in_plane(), OP = g.out_plane(), nt = g.taps();
#pragma omp parallel for schedule(static) if (g.B * g.C * OP * nt >= kParallelGrain && g.B * g.C > 1)
  for (int64_t bc = 0; bc < g.B * g.C; ++bc) {
    const T* gp = gout + bc * OP;
    const T* wc = w + (bc % g.C) * nt;
    T* ip = gin + bc * IP;
    std::fill(ip, ip + IP, T(0));
    for_each_row_pair(g, [&](int64_t irow, int64_t orow, int64_t tap) {
      for (int64_t k = 0; k < g.w.k; ++k) row_fma_t(ip + irow, gp + orow, wc[tap + k], g.w, k);
    });
  }
}

// gout, input -> gw[C,taps] and gb[C] (either may be null); channels in parallel.
template <class T>
void conv_backward_params(const Geometry& g, const T* gout, const T* in, T* gw, T* gb) {
  const int64_t IP = g.in_plane(), OP = g.out_plane(), nt = g.taps();
#pragma omp parallel for schedule(static) if (g.B * g.C * OP * nt >= kParallelGrain && g.C > 1)
  for (int64_t c = 0; c < g.C; ++c) {
    if (gw) {
      T* wc = gw + c * nt;
      std::fill(wc, wc + nt, T(0));
      for (int64_t b = 0; b < g.B; ++b) {
        const T* gp = gout + (b * g.C + c) * OP;
        const T* ip = in + (b * g.C + c) * IP;
        for_each_row_pair(g, [&](int64_t irow, int64_t orow, int64_t tap) {
          for (int64_t k = 0; k < g.w.k; ++k) wc[tap + k] += row_dot(gp + orow, ip + irow, g.w, k);
        });
      }
    }
    if (gb) {
      T acc = T(0);
      for (int64_t b = 0; b < g.B; ++b) {
        const T* gp = gout + (b * g.C + c) * OP;
#pragma omp simd reduction(+ : acc)
        for (int64_t v = 0; v < OP; ++v) acc += gp[v];
      }
      gb[c] = acc;
    }
  }
}

Geometry geometry_of(const Conv3dArgs& a) {
  Geometry g{a.B, a.C, {}, {}, {}};
  Axis* ax[3] = {&g.d, &g.h, &g.w};
  for (int k = 0; k < 3; ++k) *ax[k] = {a.size[k], a.kernel[k], a.stride[k], a.padding[k], a.out[k]};
  return g;
}

}  // namespace

template <class Scalar>
void Kernels<Scalar>::conv3d_depthwise_forward(int, const Conv3dArgs& a, const T* input, const T* weight,
                                               const T* bias, T* out) {
  conv_forward<T>(geometry_of(a), input, weight, bias, out);
}

template <class Scalar>
void Kernels<Scalar>::conv3d_depthwise_backward_input(int, const Conv3dArgs& a, const T* gout, const T* weight,
                                                      T* ginput) {
  conv_backward_input<T>(geometry_of(a), gout, weight, ginput);
}

template <class Scalar>
void Kernels<Scalar>::conv3d_depthwise_backward_params(int, const Conv3dArgs& a, const T* gout, const T* input,
                                                       T* gweight, T* gbias) {
  conv_backward_params<T>(geometry_of(a), gout, input, gweight, gbias);
}

TMEM_CONV3D_KERNELS(TMEM_CPU_INSTANTIATE)

}  // namespace tmem::cpu
