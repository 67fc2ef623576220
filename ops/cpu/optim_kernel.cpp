// The optimizers' CPU kernels (ops/kernel_list.h TMEM_OPTIM_KERNELS): AdamW
// (split over threads for large tensors) and SGD, in the parameters' dtype.
#include <cmath>

#include "tmem/ops/cpu/kernels.h"

namespace tmem::cpu {

template <class Scalar>
void Kernels<Scalar>::adamw_step(int, T* p, const T* g, T* m, T* v, int64_t n, const AdamWScalars& s) {
  const T b1 = static_cast<T>(s.beta1), b2 = static_cast<T>(s.beta2), decay = static_cast<T>(s.decay);
#pragma omp parallel for if (n > 65536)
  for (int64_t k = 0; k < n; ++k) {
    p[k] *= decay;
    m[k] = b1 * m[k] + (T(1) - b1) * g[k];
    v[k] = b2 * v[k] + (T(1) - b2) * g[k] * g[k];
    T denom = std::sqrt(v[k]) / static_cast<T>(s.bc2_sqrt) + static_cast<T>(s.eps);
    p[k] -= static_cast<T>(s.step_size) * m[k] / denom;
  }
}

template <class Scalar>
void Kernels<Scalar>::sgd_step(int, T* p, const T* g, T* buf, int64_t n, const SgdScalars& s) {
  const T lr = static_cast<T>(s.lr), wd = static_cast<T>(s.weight_decay);
  for (int64_t k = 0; k < n; ++k) {
    T d = g[k] + wd * p[k];
    if (buf) {
      buf[k] = s.first ? d : static_cast<T>(s.momentum) * buf[k] + d;
      d = buf[k];
    }
    p[k] -= lr * d;
  }
}

TMEM_OPTIM_KERNELS(TMEM_CPU_INSTANTIATE)

}  // namespace tmem::cpu
