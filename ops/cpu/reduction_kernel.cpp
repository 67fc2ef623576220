// The reductions' CPU kernels (ops/kernel_list.h TMEM_REDUCTION_KERNELS):
// max/min and var over contiguous rows [O, R], one row after another.
#include <cmath>

#include "tmem/core/strided.h"
#include "tmem/ops/cpu/kernels.h"
#include "tmem/ops/cpu/simd.h"

namespace tmem::cpu {

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
  const Shape shape(args.shape, args.shape + args.ndim);
  std::array<Shape, 4> strides;
  for (size_t j = 0; j < 4; ++j) strides[j] = Shape(args.strides[j], args.strides[j] + args.ndim);
  T* gx = static_cast<T*>(args.data[0]);
  const T* x = static_cast<const T*>(args.data[1]);
  const T* mean = static_cast<const T*>(args.data[2]);
  const T* g = static_cast<const T*>(args.data[3]);
  const T s = static_cast<T>(scale);
  for_each_element<4>(shape, strides, [&](std::array<int64_t, 4> o) {
    gx[o[0]] = (x[o[1]] - mean[o[2]]) * g[o[3]] * s;
  });
}

TMEM_REDUCTION_KERNELS(TMEM_CPU_INSTANTIATE)

}  // namespace tmem::cpu
