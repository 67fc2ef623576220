// The linalg group's CPU kernel (ops/kernel_list.h TMEM_LINALG_KERNELS): the
// batched GEMM over ops/cpu/gemm.
#include <omp.h>

#include "tmem/ops/cpu/gemm.h"
#include "tmem/ops/cpu/kernels.h"

namespace tmem::cpu {

// Many batch items run one product per thread, else each product splits
// across the threads; either way every element is summed in one order.
template <class Scalar>
void Kernels<Scalar>::gemm(const GemmArgs<T>& g) {
  const int64_t a_rs = g.a_col_major ? 1 : g.lda, a_cs = g.a_col_major ? g.lda : 1;
  const int64_t b_rs = g.b_col_major ? 1 : g.ldb, b_cs = g.b_col_major ? g.ldb : 1;
  const int64_t items = g.outer * g.batch;
  const bool outer = items >= omp_get_max_threads() && items > 1 && items * g.m * g.n * g.k > 65536;
  auto product = [&](int64_t i) {
    const int64_t o = i / g.batch, j = i % g.batch;
    cpu::gemm<T>(g.m, g.n, g.k, g.a + o * g.outer_a + j * g.stride_a, a_rs, a_cs,
                 g.b + o * g.outer_b + j * g.stride_b, b_rs, b_cs, g.c + i * g.m * g.n, g.n, false, !outer);
  };
  if (outer) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < items; ++i) product(i);
  } else {
    for (int64_t i = 0; i < items; ++i) product(i);
  }
}

TMEM_LINALG_KERNELS(TMEM_CPU_INSTANTIATE)

}  // namespace tmem::cpu
