// The shape ops' CPU kernels (ops/kernel_list.h TMEM_SHAPE_KERNELS):
// index_select and gather, forward and backward. The forwards check each
// index in their own pass (ops/ then names the first bad one); the backwards
// add in index order, so repeated indices sum in one fixed order.
#include <algorithm>

#include "tmem/core/strided.h"
#include "tmem/ops/cpu/kernels.h"

namespace tmem::cpu {

template <class Scalar>
bool Kernels<Scalar>::index_select_forward(int, const T* a, const int64_t* index, T* out, int64_t P, int64_t N,
                                           int64_t Q, int64_t K) {
  bool ok = true;
#pragma omp parallel for if (P * K * Q >= kParallelGrain && P * K > 1) reduction(&& : ok)
  for (int64_t pk = 0; pk < P * K; ++pk) {
    const int64_t p = pk / K, v = index[pk % K];
    if (v < 0 || v >= N) {
      ok = false;
      continue;
    }
    std::copy_n(a + (p * N + v) * Q, Q, out + pk * Q);
  }
  return ok;
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
bool Kernels<Scalar>::gather_forward(int, const StridedArgs<3>& args, int64_t step, int64_t n) {
  T* out = static_cast<T*>(args.data[0]);
  const int64_t* index = static_cast<const int64_t*>(args.data[1]);
  const T* a = static_cast<const T*>(args.data[2]);
  if (n == 0) return args.numel == 0;  // no index is in range; below, a[o2] exists
  bool ok = true;
  for_each_row(args, [&](std::array<int64_t, 3> o, int64_t len, std::array<int64_t, 3> inner) {
    for (int64_t i = 0; i < len; ++i) {
      const int64_t v = index[o[1] + i * inner[1]];
      const bool in = v >= 0 && v < n;
      ok &= in;
      out[o[0] + i * inner[0]] = a[o[2] + i * inner[2] + (in ? v : 0) * step];
    }
  }, false);
  return ok;
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
