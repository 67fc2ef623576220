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
  const bool outer = g.batch >= omp_get_max_threads() && g.batch > 1 && g.batch * g.m * g.n * g.k > 65536;
  auto product = [&](int64_t i) {
    cpu::gemm<T>(g.m, g.n, g.k, g.a + i * g.stride_a, a_rs, a_cs, g.b + i * g.stride_b, b_rs, b_cs,
                 g.c + i * g.m * g.n, g.n, false, !outer);
  };
  if (outer) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < g.batch; ++i) product(i);
  } else {
    for (int64_t i = 0; i < g.batch; ++i) product(i);
  }
}

TMEM_LINALG_KERNELS(TMEM_CPU_INSTANTIATE)

}  // namespace tmem::cpu
