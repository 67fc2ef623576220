// Elementwise kernel machinery shared by the CPU ops. Each functor is written
// once as a template over V, and serves both the scalar tail (V = float or
// double) and the xsimd batch body (V = xsimd::batch<T>) — the xtensor habit.
#pragma once
#include <array>
#include <cstdint>
#include <tuple>
#include <utility>

#include <xsimd/xsimd.hpp>

#include "core/strided.h"
#include "core/tensor.h"

namespace tmem::cpu {

template <class T>
using Batch = xsimd::batch<T>;

/// select(cond, a, b) for scalars (bool) and batches (batch_bool).
template <class T>
inline T sel(bool c, T a, T b) { return c ? a : b; }
template <class T, class A>
inline xsimd::batch<T, A> sel(const xsimd::batch_bool<T, A>& c, const xsimd::batch<T, A>& a,
                              const xsimd::batch<T, A>& b) {
  return xsimd::select(c, a, b);
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

/// out[i] = f(in_0[i], ..., in_k[i]) over out's shape; the inputs are
/// broadcast to it. Rows whose inner strides are all 0 or 1 run as xsimd
/// batches, other rows element by element. Split across OpenMP threads.
template <class T, class F, class... In>
void apply(const Tensor& out, F f, const In&... ins) {
  constexpr size_t N = sizeof...(In) + 1;
  const Shape& shape = out.shape();
  std::array<Shape, N> strides{out.strides(), broadcast_strides(ins, shape)...};
  T* o = out.data<T>();
  std::array<const T*, N - 1> p{ins.template data<T>()...};
  constexpr size_t W = Batch<T>::size;
  for_each_row<N>(shape, strides, [&](std::array<int64_t, N> off, int64_t len,
                                      std::array<int64_t, N> st) {
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
