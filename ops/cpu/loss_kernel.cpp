// cross_entropy's CPU kernels (ops/kernel_list.h TMEM_LOSS_KERNELS): rows of
// lsm [N, C] split over threads; the reduction sums the per-sample losses in
// order.
#include <algorithm>
#include <cmath>

#include "tmem/ops/cpu/kernels.h"
#include "tmem/ops/cpu/simd.h"

namespace tmem::cpu {

template <class Scalar>
void Kernels<Scalar>::cross_entropy_forward(int, const T* lsm, const int64_t* target, T* loss, int64_t N,
                                            int64_t C, int64_t ignore_index, double eps, T* total,
                                            double divisor) {
#pragma omp parallel for if (N * C >= kParallelGrain && N > 1)
  for (int64_t n = 0; n < N; ++n) {
    if (target[n] == ignore_index) {
      loss[n] = T(0);
      continue;
    }
    const T* row = lsm + n * C;
    T l = -(T(1) - T(eps)) * row[target[n]];
    if (eps > 0) {
      l -= T(eps) * row_sum(row, C) / static_cast<T>(C);
    }
    loss[n] = l;
  }
  if (!total) return;
  T sum = 0;
  for (int64_t n = 0; n < N; ++n) sum += loss[n];
  total[0] = sum / static_cast<T>(divisor);
}

template <class Scalar>
void Kernels<Scalar>::cross_entropy_backward(int, const T* lsm, const int64_t* target, const T* g,
                                             bool per_sample, double divisor, T* gx, int64_t N, int64_t C,
                                             int64_t ignore_index, double eps) {
  using B = Batch<T>;
  constexpr int64_t W = B::size;
  const T hit = T(1) - T(eps), spread = T(eps) / static_cast<T>(C);
#pragma omp parallel for if (N * C >= kParallelGrain && N > 1)
  for (int64_t n = 0; n < N; ++n) {
    T* row = gx + n * C;
    if (target[n] == ignore_index) {
      std::fill(row, row + C, T(0));
      continue;
    }
    const T s = per_sample ? g[n] : g[0] / static_cast<T>(divisor);
    const T* lr = lsm + n * C;
    int64_t c = 0;
    for (; c + W <= C; c += W)
      (B(s) * (vexp(B::load_unaligned(lr + c)) - B(spread))).store_unaligned(row + c);
    for (; c < C; ++c) row[c] = s * (std::exp(lr[c]) - spread);
    row[target[n]] -= s * hit;
  }
}

TMEM_LOSS_KERNELS(TMEM_CPU_INSTANTIATE)

}  // namespace tmem::cpu
