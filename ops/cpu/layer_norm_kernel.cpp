// layer_norm's CPU kernels (ops/kernel_list.h TMEM_LAYER_NORM_KERNELS): rows
// [N, C] in xsimd batches with scalar tails, rows split over threads; the
// weight and bias gradients are column sums whose threads own column blocks.
#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "tmem/ops/cpu/kernels.h"
#include "tmem/ops/cpu/simd.h"

namespace tmem::cpu {

namespace {

// sum (x - mu)^2: the second pass of the two-pass variance.
template <class T>
T sum_sq_dev(const T* x, T mu, int64_t n) {
  using B = Batch<T>;
  constexpr int64_t W = B::size;
  B acc(T(0));
  int64_t i = 0;
  for (; i + W <= n; i += W) {
    B d = B::load_unaligned(x + i) - B(mu);
    acc += d * d;
  }
  T s = xsimd::hadd(acc);
  for (; i < n; ++i) s += (x[i] - mu) * (x[i] - mu);
  return s;
}

// mean and rstd = 1 / sqrt(var + eps) of one row. A row whose sum or sum of
// squared deviations overflows (|x| around 1e19 in float32) is measured
// again scaled by its largest |x| (or |x - mu|), so its rstd is right
// rather than 0, which made y all zeros. A row holding NaN or inf keeps its
// NaN statistics, and so does one whose x - mu overflows (|x| near the
// dtype's largest): y NaN there, not zeros.
template <class T>
std::pair<T, T> row_stats(const T* x, int64_t n, T eps) {
  const T count = static_cast<T>(n);
  T mu = row_sum(x, n) / count;
  if (!std::isfinite(mu)) {
    T m = 0;
    for (int64_t i = 0; i < n; ++i) m = std::max(m, std::abs(x[i]));
    if (std::isfinite(m) && m > 0) {
      T s = 0;
      for (int64_t i = 0; i < n; ++i) s += x[i] / m;
      mu = m * (s / count);
    }
  }
  const T var = sum_sq_dev(x, mu, n) / count;
  if (std::isfinite(var) || !std::isfinite(mu)) return {mu, T(1) / std::sqrt(var + eps)};
  T d = 0;
  for (int64_t i = 0; i < n; ++i) d = std::max(d, std::abs(x[i] - mu));
  // x - mu itself overflows (|x| near the dtype's largest): no finite y to give.
  if (!std::isfinite(d)) return {mu, std::numeric_limits<T>::quiet_NaN()};
  T q = 0;
  for (int64_t i = 0; i < n; ++i) q += ((x[i] - mu) / d) * ((x[i] - mu) / d);
  return {mu, T(1) / (d * std::sqrt(q / count + eps / d / d))};
}

// y = (x - mu) * rstd * w + b (w, b may be null).
template <class T>
void normalize_row(T* y, const T* x, T mu, T rstd, const T* w, const T* b, int64_t n) {
  using B = Batch<T>;
  constexpr int64_t W = B::size;
  int64_t i = 0;
  for (; i + W <= n; i += W) {
    B v = (B::load_unaligned(x + i) - B(mu)) * B(rstd);
    if (w) v *= B::load_unaligned(w + i);
    if (b) v += B::load_unaligned(b + i);
    v.store_unaligned(y + i);
  }
  for (; i < n; ++i) {
    T v = (x[i] - mu) * rstd;
    if (w) v *= w[i];
    if (b) v += b[i];
    y[i] = v;
  }
}

// dx for one row: dxhat = g * w; dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)).
template <class T>
void input_grad_row(T* gx, const T* x, const T* g, const T* w, T mu, T rstd, int64_t n) {
  using B = Batch<T>;
  constexpr int64_t W = B::size;
  B a(T(0)), c(T(0));
  int64_t i = 0;
  for (; i + W <= n; i += W) {
    B dxh = B::load_unaligned(g + i);
    if (w) dxh *= B::load_unaligned(w + i);
    a += dxh;
    c += dxh * ((B::load_unaligned(x + i) - B(mu)) * B(rstd));
  }
  T sa = xsimd::hadd(a), sc = xsimd::hadd(c);
  for (; i < n; ++i) {
    T dxh = w ? g[i] * w[i] : g[i];
    sa += dxh;
    sc += dxh * (x[i] - mu) * rstd;
  }
  const T ma = sa / static_cast<T>(n), mc = sc / static_cast<T>(n);
  for (i = 0; i + W <= n; i += W) {
    B dxh = B::load_unaligned(g + i);
    if (w) dxh *= B::load_unaligned(w + i);
    B xh = (B::load_unaligned(x + i) - B(mu)) * B(rstd);
    (B(rstd) * (dxh - B(ma) - xh * B(mc))).store_unaligned(gx + i);
  }
  for (; i < n; ++i) {
    T dxh = w ? g[i] * w[i] : g[i];
    gx[i] = rstd * (dxh - ma - (x[i] - mu) * rstd * mc);
  }
}

}  // namespace

template <class Scalar>
void Kernels<Scalar>::layer_norm_forward(int, const T* x, const T* weight, const T* bias, T* y,
                                         T* mean, T* rstd, int64_t N, int64_t C, double eps) {
  const T e = static_cast<T>(eps);
#pragma omp parallel for if (N * C >= kParallelGrain && N > 1)
  for (int64_t i = 0; i < N; ++i) {
    const T* row = x + i * C;
    const auto [mu, r] = row_stats(row, C, e);
    mean[i] = mu;
    rstd[i] = r;
    normalize_row(y + i * C, row, mu, r, weight, bias, C);
  }
}

template <class Scalar>
void Kernels<Scalar>::layer_norm_backward_input(int, const T* x, const T* g, const T* weight,
                                                const T* mean, const T* rstd, T* gx, int64_t N,
                                                int64_t C) {
#pragma omp parallel for if (N * C >= kParallelGrain && N > 1)
  for (int64_t i = 0; i < N; ++i)
    input_grad_row(gx + i * C, x + i * C, g + i * C, weight, mean[i], rstd[i], C);
}

template <class Scalar>
void Kernels<Scalar>::layer_norm_backward_params(int, const T* x, const T* g, const T* mean,
                                                 const T* rstd, T* gweight, T* gbias, int64_t N,
                                                 int64_t C) {
  if (!gweight && !gbias) return;
  using B = Batch<T>;
  constexpr int64_t W = B::size;
  constexpr int64_t CB = 16 * W;
  const int64_t blocks = (C + CB - 1) / CB;
#pragma omp parallel for if (N * C >= kParallelGrain && blocks > 1)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const int64_t c0 = blk * CB, c1 = std::min(C, c0 + CB);
    if (gweight) std::fill(gweight + c0, gweight + c1, T(0));
    if (gbias) std::fill(gbias + c0, gbias + c1, T(0));
    for (int64_t i = 0; i < N; ++i) {
      const T* xr = x + i * C;
      const T* gr = g + i * C;
      const T mu = mean[i], r = rstd[i];
      int64_t c = c0;
      for (; c + W <= c1; c += W) {
        B gv = B::load_unaligned(gr + c);
        if (gweight) {
          B xh = (B::load_unaligned(xr + c) - B(mu)) * B(r);
          (B::load_unaligned(gweight + c) + gv * xh).store_unaligned(gweight + c);
        }
        if (gbias) (B::load_unaligned(gbias + c) + gv).store_unaligned(gbias + c);
      }
      for (; c < c1; ++c) {
        if (gweight) gweight[c] += gr[c] * (xr[c] - mu) * r;
        if (gbias) gbias[c] += gr[c];
      }
    }
  }
}

TMEM_LAYER_NORM_KERNELS(TMEM_CPU_INSTANTIATE)

}  // namespace tmem::cpu
