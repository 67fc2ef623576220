// The shape ops' CPU kernels (ops/kernel_list.h TMEM_SHAPE_KERNELS):
// index_select and gather, forward and backward. The backwards add in index
// order, so repeated indices sum in one fixed order.
#include <algorithm>

#include "tmem/core/strided.h"
#include "tmem/ops/cpu/kernels.h"

namespace tmem::cpu {

template <class Scalar>
void Kernels<Scalar>::index_select_forward(int, const T* a, const int64_t* index, T* out, int64_t P, int64_t N,
                                           int64_t Q, int64_t K) {
#pragma omp parallel for if (P * K * Q >= kParallelGrain && P * K > 1)
  for (int64_t pk = 0; pk < P * K; ++pk) {
    const int64_t p = pk / K, k = pk % K;
    std::copy_n(a + (p * N + index[k]) * Q, Q, out + pk * Q);
  }
}

template <class Scalar>
void Kernels<Scalar>::index_select_backward(int, const T* g, const int64_t* index, T* ga, int64_t P, int64_t N,
                                            int64_t Q, int64_t K) {
#pragma omp parallel for if (P * K * Q >= kParallelGrain && P > 1)
  for (int64_t p = 0; p < P; ++p)
    for (int64_t k = 0; k < K; ++k) {
      const T* src = g + (p * K + k) * Q;
      T* dst = ga + (p * N + index[k]) * Q;
      for (int64_t q = 0; q < Q; ++q) dst[q] += src[q];
    }
}

template <class Scalar>
void Kernels<Scalar>::gather_forward(int, const StridedArgs<3>& args, int64_t step) {
  T* out = static_cast<T*>(args.data[0]);
  const int64_t* index = static_cast<const int64_t*>(args.data[1]);
  const T* a = static_cast<const T*>(args.data[2]);
  for_each_element(args, [&](std::array<int64_t, 3> o) { out[o[0]] = a[o[2] + index[o[1]] * step]; });
}

template <class Scalar>
void Kernels<Scalar>::gather_backward(int, const StridedArgs<3>& args, int64_t step) {
  T* ga = static_cast<T*>(args.data[0]);
  const int64_t* index = static_cast<const int64_t*>(args.data[1]);
  const T* g = static_cast<const T*>(args.data[2]);
  for_each_element(args, [&](std::array<int64_t, 3> o) { ga[o[0] + index[o[1]] * step] += g[o[2]]; });
}

TMEM_SHAPE_KERNELS(TMEM_CPU_INSTANTIATE)

}  // namespace tmem::cpu
