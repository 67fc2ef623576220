// softmax's and log_softmax's CPU kernels (ops/kernel_list.h
// TMEM_SOFTMAX_KERNELS): contiguous rows [rows, len], each vectorised with
// xsimd, rows split over threads.
#include <algorithm>
#include <cmath>
#include <limits>

#include "tmem/ops/cpu/kernels.h"
#include "tmem/ops/cpu/simd.h"

namespace tmem::cpu {

namespace {

template <class T>
constexpr T kNegInf = -std::numeric_limits<T>::infinity();

// True when every element is -inf: a fully masked row. (A row holding NaN can
// also have max -inf under max's NaN rules; it is not masked and gives NaN.)
template <class T>
bool all_neg_inf(const T* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (x[i] != kNegInf<T>) return false;
  return true;
}

template <class T>
void softmax_row(T* y, int64_t n, const T* x) {
  using B = Batch<T>;
  constexpr int64_t W = B::size;
  const T m = row_max(x, n);
  if (m == kNegInf<T> && all_neg_inf(x, n)) {
    std::fill(y, y + n, T(0));
    return;
  }
  const T inv = T(1) / sum_exp(x, m, n, y);
  int64_t i = 0;
  for (; i + W <= n; i += W) (B::load_unaligned(y + i) * B(inv)).store_unaligned(y + i);
  for (; i < n; ++i) y[i] *= inv;
}

// dx = y * (g - sum(g * y)); zero on a masked row, where y = 0.
template <class T>
void softmax_backward_row(T* gx, int64_t n, const T* y, const T* g) {
  using B = Batch<T>;
  constexpr int64_t W = B::size;
  const T dot = row_dot(g, y, n);
  int64_t i = 0;
  for (; i + W <= n; i += W) {
    B yv = B::load_unaligned(y + i);
    (yv * (B::load_unaligned(g + i) - B(dot))).store_unaligned(gx + i);
  }
  for (; i < n; ++i) gx[i] = y[i] * (g[i] - dot);
}

// y = (x - m) - log(sum exp(x - m)): x - m first, so a huge common offset
// (logits 1e8) cancels exactly before the small log-sum is subtracted.
template <class T>
void log_softmax_row(T* y, int64_t n, const T* x) {
  using B = Batch<T>;
  constexpr int64_t W = B::size;
  const T m = row_max(x, n);
  if (m == kNegInf<T> && all_neg_inf(x, n)) {
    std::fill(y, y + n, kNegInf<T>);
    return;
  }
  const T lse = std::log(sum_exp(x, m, n, static_cast<T*>(nullptr)));
  int64_t i = 0;
  for (; i + W <= n; i += W)
    ((B::load_unaligned(x + i) - B(m)) - B(lse)).store_unaligned(y + i);
  for (; i < n; ++i) y[i] = (x[i] - m) - lse;
}

// dx = g - exp(y) * sum(g); zero on a masked row (y all -inf).
template <class T>
void log_softmax_backward_row(T* gx, int64_t n, const T* y, const T* g) {
  using B = Batch<T>;
  constexpr int64_t W = B::size;
  if (row_max(y, n) == kNegInf<T> && all_neg_inf(y, n)) {
    std::fill(gx, gx + n, T(0));
    return;
  }
  const T sg = row_dot(g, static_cast<const T*>(nullptr), n);
  int64_t i = 0;
  for (; i + W <= n; i += W) {
    B e = vexp(B::load_unaligned(y + i));
    (B::load_unaligned(g + i) - e * B(sg)).store_unaligned(gx + i);
  }
  for (; i < n; ++i) gx[i] = g[i] - std::exp(y[i]) * sg;
}

}  // namespace

template <class Scalar>
void Kernels<Scalar>::softmax_forward(int, bool log, const T* x, T* y, int64_t rows, int64_t len) {
#pragma omp parallel for if (rows * len >= kParallelGrain && rows > 1)
  for (int64_t i = 0; i < rows; ++i) {
    if (log)
      log_softmax_row(y + i * len, len, x + i * len);
    else
      softmax_row(y + i * len, len, x + i * len);
  }
}

template <class Scalar>
void Kernels<Scalar>::softmax_backward(int, bool log, const T* y, const T* g, T* gx, int64_t rows,
                                       int64_t len) {
#pragma omp parallel for if (rows * len >= kParallelGrain && rows > 1)
  for (int64_t i = 0; i < rows; ++i) {
    if (log)
      log_softmax_backward_row(gx + i * len, len, y + i * len, g + i * len);
    else
      softmax_backward_row(gx + i * len, len, y + i * len, g + i * len);
  }
}

TMEM_SOFTMAX_KERNELS(TMEM_CPU_INSTANTIATE)

}  // namespace tmem::cpu
