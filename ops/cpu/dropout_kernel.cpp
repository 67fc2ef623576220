// dropout's CPU kernel (ops/kernel_list.h TMEM_DROPOUT_KERNELS): the
// elementwise product with the mask, split over threads.
#include "tmem/ops/cpu/kernels.h"
#include "tmem/ops/cpu/simd.h"

namespace tmem::cpu {

template <class Scalar>
void Kernels<Scalar>::dropout_apply(int, const T* x, const T* mask, T* out, int64_t n) {
#pragma omp parallel for simd if (n >= kParallelGrain)
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * mask[i];
}

TMEM_DROPOUT_KERNELS(TMEM_CPU_INSTANTIATE)

}  // namespace tmem::cpu
