// Elementwise kernel machinery shared by the CPU ops. Each functor is written
// once as a template over V, and serves both the scalar tail (V = float or
// double) and the xsimd batch body (V = xsimd::batch<T>) — the xtensor habit.
#pragma once
#include <array>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <tuple>
#include <type_traits>
#include <utility>

#include <xsimd/xsimd.hpp>

#include "tmem/core/strided.h"
#include "tmem/core/tensor.h"

namespace tmem::cpu {

template <class T>
using Batch = xsimd::batch<T>;

/// e^x of a batch. xsimd::exp turns its argument into an integer exponent,
/// undefined for +-Inf and NaN (UBSan reports it, e.g. for a masked score;
/// for NaN only where the conversion is not one instruction, as for doubles
/// on AVX2); x is clamped to [-1000, 1000] first, which changes no result
/// (xsimd gives 0 below about -745 and Inf above 710), and a NaN lane is
/// computed as 0 and given back as the NaN it was.
template <class T, class A>
inline xsimd::batch<T, A> vexp(const xsimd::batch<T, A>& x) {
  using B = xsimd::batch<T, A>;
  const B lim(T(1000));
  const auto nan = xsimd::isnan(x);
  const B finite = xsimd::select(nan, B(T(0)), xsimd::select(x < -lim, -lim, xsimd::select(x > lim, lim, x)));
  return xsimd::select(nan, x, xsimd::exp(finite));
}
/// e^x of one value (std::exp): the scalar tail of the functors that use vexp.
template <class T>
  requires std::is_floating_point_v<T>
inline T vexp(T x) {
  return std::exp(x);
}

/// sum of x[0..n) with two xsimd accumulators and a scalar tail.
template <class T>
T row_sum(const T* x, int64_t n) {
  using B = xsimd::batch<T>;
  constexpr int64_t W = B::size;
  B acc0(T(0)), acc1(T(0));
  int64_t i = 0;
  for (; i + 2 * W <= n; i += 2 * W) {
    acc0 += B::load_unaligned(x + i);
    acc1 += B::load_unaligned(x + i + W);
  }
  T s = xsimd::hadd(acc0 + acc1);
  for (; i < n; ++i) s += x[i];
  return s;
}

/// max of x[0..n) (-inf for n = 0), in xsimd batches.
template <class T>
T row_max(const T* x, int64_t n) {
  using B = Batch<T>;
  constexpr int64_t W = B::size;
  T m = -std::numeric_limits<T>::infinity();
  int64_t i = 0;
  if (n >= W) {
    B acc = B::load_unaligned(x);
    for (i = W; i + W <= n; i += W) acc = xsimd::max(acc, B::load_unaligned(x + i));
    std::array<T, W> lanes;
    acc.store_unaligned(lanes.data());
    for (T v : lanes) m = std::max(m, v);
  }
  for (; i < n; ++i) m = std::max(m, x[i]);
  return m;
}

/// sum_i exp(x_i - m), also writing each term to y when y is non-null (y may be x).
template <class T>
T sum_exp(const T* x, T m, int64_t n, T* y) {
  using B = Batch<T>;
  constexpr int64_t W = B::size;
  B acc(T(0));
  const B mb(m);
  int64_t i = 0;
  for (; i + W <= n; i += W) {
    B e = vexp(B(B::load_unaligned(x + i) - mb));
    if (y) e.store_unaligned(y + i);
    acc += e;
  }
  T s = xsimd::hadd(acc);
  for (; i < n; ++i) {
    T e = std::exp(x[i] - m);
    if (y) y[i] = e;
    s += e;
  }
  return s;
}

/// sum_i a_i * b_i (b null: sum_i a_i).
template <class T>
T row_dot(const T* a, const T* b, int64_t n) {
  using B = Batch<T>;
  constexpr int64_t W = B::size;
  B acc(T(0));
  int64_t i = 0;
  for (; i + W <= n; i += W)
    acc += b ? B::load_unaligned(a + i) * B::load_unaligned(b + i) : B::load_unaligned(a + i);
  T s = xsimd::hadd(acc);
  for (; i < n; ++i) s += b ? a[i] * b[i] : a[i];
  return s;
}

/// y[0..n) += a x[0..n).
template <class T>
void axpy(T a, const T* x, T* y, int64_t n) {
  using B = Batch<T>;
  constexpr int64_t W = B::size;
  const B av(a);
  int64_t i = 0;
  for (; i + W <= n; i += W) xsimd::fma(av, B::load_unaligned(x + i), B::load_unaligned(y + i)).store_unaligned(y + i);
  for (; i < n; ++i) y[i] += a * x[i];
}

/// select(cond, a, b) for scalars (bool) and batches (batch_bool).
template <class T>
inline T sel(bool c, T a, T b) { return c ? a : b; }
template <class T, class A>
inline xsimd::batch<T, A> sel(const xsimd::batch_bool<T, A>& c, const xsimd::batch<T, A>& a,
                              const xsimd::batch<T, A>& b) {
  return xsimd::select(c, a, b);
}

/// The first n lanes (0 <= n <= size) read from p, the others 0. Reads only
/// p[0, n), so it may end a row at the end of an allocation.
template <class T>
inline Batch<T> load_head(const T* p, int64_t n) {
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float> && Batch<T>::size == 16)
    return _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << n) - 1), p);
  if constexpr (std::is_same_v<T, double> && Batch<T>::size == 8)
    return _mm512_maskz_loadu_pd(static_cast<__mmask8>((1u << n) - 1), p);
#endif
  alignas(64) T buf[Batch<T>::size] = {};
  for (int64_t l = 0; l < n; ++l) buf[l] = p[l];
  return Batch<T>::load_aligned(buf);
}

/// Writes the first n lanes (0 <= n <= size) of v to p[0, n).
template <class T>
inline void store_head(T* p, const Batch<T>& v, int64_t n) {
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float> && Batch<T>::size == 16) {
    _mm512_mask_storeu_ps(p, static_cast<__mmask16>((1u << n) - 1), v);
    return;
  }
  if constexpr (std::is_same_v<T, double> && Batch<T>::size == 8) {
    _mm512_mask_storeu_pd(p, static_cast<__mmask8>((1u << n) - 1), v);
    return;
  }
#endif
  alignas(64) T buf[Batch<T>::size];
  v.store_aligned(buf);
  for (int64_t l = 0; l < n; ++l) p[l] = buf[l];
}

/// Stores a batch to a batch-aligned p past the caches (a non-temporal
/// store) where the target has one: for results not read again soon, which
/// then neither evict useful lines nor cost a read of the old line. Call
/// stream_fence() before other threads read what was stored.
template <class T>
inline void stream_store(T* p, const Batch<T>& v) {
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float> && Batch<T>::size == 16) {
    _mm512_stream_ps(p, v);
    return;
  }
  if constexpr (std::is_same_v<T, double> && Batch<T>::size == 8) {
    _mm512_stream_pd(p, v);
    return;
  }
#endif
  v.store_aligned(p);
}

/// Orders this thread's earlier stream_store()s before its later stores.
inline void stream_fence() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

namespace detail {
#if defined(__AVX512F__)
// e^x for 16 floats: x clamped to [-104, 89] (NaN passes), n = round(x /
// ln 2), r = x - n ln 2 in two steps (Cody-Waite), e^r by Cephes' expf
// polynomial, times 2^n by scalef (0 below the range, Inf above). Max
// relative error about 2 ulp.
inline __m512 exp16(__m512 x) {
  x = _mm512_max_ps(_mm512_set1_ps(-104.0f), _mm512_min_ps(_mm512_set1_ps(89.0f), x));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 y = _mm512_set1_ps(1.9875691500e-4f);
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.3981999507e-3f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(8.3334519073e-3f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(4.1665795894e-2f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.6666665459e-1f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(5.0000001201e-1f));
  y = _mm512_fmadd_ps(y, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_scalef_ps(y, n);
}
#endif
}  // namespace detail

/// sigmoid(x) = 1 / (1 + e^-x) of a batch (the fused kernels' gate
/// activation). Float batches on AVX-512 use detail::exp16, others vexp.
template <class T>
inline Batch<T> sigmoid_v(const Batch<T>& x) {
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float> && Batch<T>::size == 16) {
    const __m512 one = _mm512_set1_ps(1.0f);
    const __m512 e = detail::exp16(_mm512_sub_ps(_mm512_setzero_ps(), x));
    return Batch<T>(_mm512_div_ps(one, _mm512_add_ps(one, e)));
  }
#endif
  return Batch<T>(1) / (Batch<T>(1) + vexp(Batch<T>(-x)));
}

/// tanh of a batch. Float batches on AVX-512: below |x| = 0.625 Cephes'
/// tanhf odd polynomial, above it 1 - 2 / (e^{2|x|} + 1) with x's sign (the
/// split xsimd::tanh makes, with detail::exp16 and no branches); others
/// xsimd::tanh.
template <class T>
inline Batch<T> tanh_v(const Batch<T>& x) {
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float> && Batch<T>::size == 16) {
    const __m512 v = x;
    const __m512 one = _mm512_set1_ps(1.0f);
    const __m512 ax = _mm512_abs_ps(v);
    const __m512 s = _mm512_mul_ps(v, v);
    __m512 p = _mm512_set1_ps(-5.70498872745e-3f);
    p = _mm512_fmadd_ps(p, s, _mm512_set1_ps(2.06390887954e-2f));
    p = _mm512_fmadd_ps(p, s, _mm512_set1_ps(-5.37397155531e-2f));
    p = _mm512_fmadd_ps(p, s, _mm512_set1_ps(1.33314422036e-1f));
    p = _mm512_fmadd_ps(p, s, _mm512_set1_ps(-3.33332819422e-1f));
    const __m512 small = _mm512_fmadd_ps(_mm512_mul_ps(p, s), v, v);
    const __m512 e = detail::exp16(_mm512_add_ps(ax, ax));
    const __m512 q = _mm512_div_ps(one, _mm512_add_ps(e, one));
    __m512 big = _mm512_fnmadd_ps(_mm512_set1_ps(2.0f), q, one);
    // x's sign onto big (|big| = big >= 0, or NaN).
    const __m512i sign = _mm512_and_si512(_mm512_castps_si512(v),
                                          _mm512_set1_epi32(static_cast<int>(0x80000000u)));
    big = _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(big), sign));
    const __mmask16 lo = _mm512_cmp_ps_mask(ax, _mm512_set1_ps(0.625f), _CMP_LT_OQ);
    return Batch<T>(_mm512_mask_blend_ps(lo, big, small));
  }
#endif
  return xsimd::tanh(x);
}

/// Strides that view t (whose shape broadcasts to `shape`) as `shape`:
/// 0 along broadcast dims.
inline Shape broadcast_strides(const Tensor& t, const Shape& shape) {
  Shape st(shape.size(), 0);
  size_t lead = shape.size() - t.shape().size();
  for (size_t i = 0; i < t.shape().size(); ++i)
    st[lead + i] = t.shape()[i] == 1 ? 0 : t.strides()[i];
  return st;
}

/// out[i] = f(in_1[i], ..., in_{N-1}[i]) over the launch arguments of an
/// elementwise kernel, args {out, in_1, ...} (ops/dispatch.h
/// elementwise_args: the inputs broadcast to out's shape). Rows whose inner
/// strides are all 0 or 1 run as xsimd batches, other rows element by
/// element. Split across OpenMP threads.
template <class T, size_t N, class F>
void apply(const StridedArgs<N>& args, F f) {
  T* o = static_cast<T*>(args.data[0]);
  std::array<const T*, N - 1> p;
  for (size_t j = 1; j < N; ++j) p[j - 1] = static_cast<const T*>(args.data[j]);
  constexpr size_t W = Batch<T>::size;
  for_each_row<N>(args, [&](std::array<int64_t, N> off, int64_t len, std::array<int64_t, N> st) {
    bool vec = st[0] == 1;
    for (size_t j = 1; j < N; ++j) vec = vec && (st[j] == 0 || st[j] == 1);
    int64_t i = 0;
    if (vec) {
      auto load = [&](size_t j, int64_t k) {
        const T* q = p[j] + off[j + 1];
        return st[j + 1] ? Batch<T>::load_unaligned(q + k) : Batch<T>(q[0]);
      };
      for (; i + static_cast<int64_t>(W) <= len; i += W) {
        [&]<size_t... J>(std::index_sequence<J...>) {
          f(load(J, i)...).store_unaligned(o + off[0] + i);
        }(std::make_index_sequence<N - 1>{});
      }
    }
    for (; i < len; ++i) {
      [&]<size_t... J>(std::index_sequence<J...>) {
        o[off[0] + i * st[0]] = f(p[J][off[J + 1] + i * st[J + 1]]...);
      }(std::make_index_sequence<N - 1>{});
    }
  });
}

}  // namespace tmem::cpu
