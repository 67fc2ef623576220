// The optimizers' CPU kernels (ops/kernel_list.h TMEM_OPTIM_KERNELS): AdamW
// (split over threads for large tensors) and SGD, in the parameters' dtype;
// and clip_grad_norm_'s (TMEM_CLIP_KERNELS), sequential, so a norm does not
// depend on the thread count.
#include <algorithm>
#include <cmath>

#include "tmem/ops/cpu/kernels.h"

namespace tmem::cpu {

template <class Scalar>
void Kernels<Scalar>::adamw_step(int, T* p, const T* g, T* m, T* v, int64_t n, const AdamWScalars& s) {
  // 1 - beta in double, then rounded (PyTorch's alpha = 1 - beta1): in
  // float32, 1 - 0.999f is 0.00099998713, 1.3e-5 off.
  const T b1 = static_cast<T>(s.beta1), b2 = static_cast<T>(s.beta2), decay = static_cast<T>(s.decay);
  const T c1 = static_cast<T>(1.0 - s.beta1), c2 = static_cast<T>(1.0 - s.beta2);
#pragma omp parallel for if (n > 65536)
  for (int64_t k = 0; k < n; ++k) {
    p[k] *= decay;
    m[k] = b1 * m[k] + c1 * g[k];
    v[k] = b2 * v[k] + c2 * g[k] * g[k];
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

template <class Scalar>
double Kernels<Scalar>::abs_max(int, const T* x, int64_t n) {
  double m = 0;
  for (int64_t k = 0; k < n; ++k) {
    const double a = std::abs(static_cast<double>(x[k]));
    if (std::isnan(a)) return a;
    m = std::max(m, a);
  }
  return m;
}

template <class Scalar>
double Kernels<Scalar>::sum_squares(int, const T* x, int64_t n, double scale, double acc) {
  for (int64_t k = 0; k < n; ++k) {
    const double v = static_cast<double>(x[k]) / scale;
    acc += v * v;
  }
  return acc;
}

template <class Scalar>
void Kernels<Scalar>::scale_inplace(int, T* x, int64_t n, double coef) {
  const T c = static_cast<T>(coef);
  for (int64_t k = 0; k < n; ++k) x[k] *= c;
}

TMEM_OPTIM_KERNELS(TMEM_CPU_INSTANTIATE)
TMEM_CLIP_KERNELS(TMEM_CPU_INSTANTIATE)

}  // namespace tmem::cpu
