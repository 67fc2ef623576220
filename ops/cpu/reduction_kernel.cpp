// The reductions' CPU kernels (ops/kernel_list.h TMEM_REDUCTION_KERNELS):
// row and column sums; max/min and var over contiguous rows [O, R], one row
// after another.
#include <algorithm>
#include <cmath>

#include "tmem/core/strided.h"
#include "tmem/ops/cpu/kernels.h"
#include "tmem/ops/cpu/simd.h"

namespace tmem::cpu {

template <class Scalar>
void Kernels<Scalar>::sum_rows(int, const T* x, T* out, int64_t rows, int64_t len, double scale) {
#pragma omp parallel for if (rows * len >= kParallelGrain && rows > 1)
  for (int64_t i = 0; i < rows; ++i) out[i] = row_sum(x + i * len, len) * static_cast<T>(scale);
}

// Each thread sums a range of columns, 256 rows at a time into an L1-resident
// block of partial sums that is then added to out, so no thread count or
// timing changes a sum.
template <class Scalar>
void Kernels<Scalar>::sum_columns(int, const T* x, T* out, int64_t rows, int64_t cols, double scale) {
  using V = xsimd::batch<T>;
  constexpr int64_t L = static_cast<int64_t>(V::size), kRows = 256, kCols = 16 * L;
  const T s = static_cast<T>(scale);
  const int64_t chunks = (cols + kCols - 1) / kCols;
#pragma omp parallel for if (rows * cols >= kParallelGrain && chunks > 1)
  for (int64_t ch = 0; ch < chunks; ++ch) {
    const int64_t c0 = ch * kCols, c1 = std::min(cols, c0 + kCols), vend = c0 + (c1 - c0) / L * L;
    T part[kCols];
    std::fill(out + c0, out + c1, T(0));
    for (int64_t r0 = 0; r0 < rows; r0 += kRows) {
      std::fill(part, part + (c1 - c0), T(0));
      for (int64_t i = r0; i < std::min(rows, r0 + kRows); ++i) {
        const T* row = x + i * cols;
        for (int64_t j = c0; j < vend; j += L)
          (V::load_unaligned(part + (j - c0)) + V::load_unaligned(row + j)).store_unaligned(part + (j - c0));
        for (int64_t j = vend; j < c1; ++j) part[j - c0] += row[j];
      }
      for (int64_t j = c0; j < c1; ++j) out[j] += part[j - c0];
    }
    for (int64_t j = c0; j < c1; ++j) out[j] *= s;
  }
}

template <class Scalar>
void Kernels<Scalar>::extreme_rows(int, const T* x, T* values, int64_t* indices, int64_t O, int64_t R,
                                   bool is_max) {
  for (int64_t i = 0; i < O; ++i) {
    const T* row = x + i * R;
    int64_t best = 0;
    for (int64_t k = 1; k < R && !std::isnan(row[best]); ++k)
      if (std::isnan(row[k]) || (is_max ? row[k] > row[best] : row[k] < row[best])) best = k;
    values[i] = row[best];
    indices[i] = best;
  }
}

template <class Scalar>
void Kernels<Scalar>::extreme_rows_backward(int, const T* g, const int64_t* indices, T* rows, int64_t O,
                                            int64_t R) {
  for (int64_t i = 0; i < O; ++i) rows[i * R + indices[i]] = g[i];
}

template <class Scalar>
void Kernels<Scalar>::var_rows(int, const T* x, T* out, T* mean, int64_t O, int64_t R, double denom) {
  for (int64_t i = 0; i < O; ++i) {
    const T* row = x + i * R;
    const T m = row_sum(row, R) / static_cast<T>(R);
    T ss = 0;
    for (int64_t k = 0; k < R; ++k) ss += (row[k] - m) * (row[k] - m);
    mean[i] = m;
    out[i] = ss / static_cast<T>(denom);
  }
}

template <class Scalar>
void Kernels<Scalar>::var_backward(int, const StridedArgs<4>& args, double scale) {
  T* gx = static_cast<T*>(args.data[0]);
  const T* x = static_cast<const T*>(args.data[1]);
  const T* mean = static_cast<const T*>(args.data[2]);
  const T* g = static_cast<const T*>(args.data[3]);
  const T s = static_cast<T>(scale);
  for_each_element(args, [&](std::array<int64_t, 4> o) {
    gx[o[0]] = (x[o[1]] - mean[o[2]]) * g[o[3]] * s;
  });
}

TMEM_REDUCTION_KERNELS(TMEM_CPU_INSTANTIATE)

}  // namespace tmem::cpu
