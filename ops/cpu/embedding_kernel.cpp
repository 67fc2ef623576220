// embedding's CPU kernels (ops/kernel_list.h TMEM_EMBEDDING_KERNELS): the
// row gather split over threads, and the serial scatter-add of the backward
// (repeated indices add into the same row).
#include <algorithm>

#include "tmem/ops/cpu/kernels.h"
#include "tmem/ops/cpu/simd.h"

namespace tmem::cpu {

template <class Scalar>
void Kernels<Scalar>::embedding_forward(int, const T* weight, const int64_t* indices, T* out,
                                        int64_t count, int64_t dim) {
#pragma omp parallel for if (count * dim >= kParallelGrain && count > 1)
  for (int64_t k = 0; k < count; ++k) std::copy_n(weight + indices[k] * dim, dim, out + k * dim);
}

template <class Scalar>
void Kernels<Scalar>::embedding_backward(int, const int64_t* indices, const T* g, T* gweight,
                                         int64_t count, int64_t dim) {
  using B = Batch<T>;
  constexpr int64_t W = B::size;
  for (int64_t k = 0; k < count; ++k) {
    T* dst = gweight + indices[k] * dim;
    const T* src = g + k * dim;
    int64_t d = 0;
    for (; d + W <= dim; d += W)
      (B::load_unaligned(dst + d) + B::load_unaligned(src + d)).store_unaligned(dst + d);
    for (; d < dim; ++d) dst[d] += src[d];
  }
}

TMEM_EMBEDDING_KERNELS(TMEM_CPU_INSTANTIATE)

}  // namespace tmem::cpu
