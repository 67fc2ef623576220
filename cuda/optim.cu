// Optimizer kernels (ops/kernel_list.h, for nn/optim.cpp): AdamW and SGD updates in
// place, one thread per element (cuda/optim.cuh holds the arithmetic), and
// clip_grad_norm_'s largest magnitude, float64 sum of scaled squares and
// scaling, so no parameter or gradient leaves the device.
#include <cstring>

#include "tmem/cuda/check.h"
#include "tmem/cuda/kernels.h"
#include "tmem/cuda/optim.cuh"

namespace tmem::cuda {

namespace {

// ---- kernels ----

__global__ void adamw_kernel(float* p, const float* g, float* m, float* v, int64_t n, float b1, float c1, float b2,
                             float c2, float decay, float step_size, float bc2_sqrt, float eps) {
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < n; k += int64_t(blockDim.x) * gridDim.x)
    adamw_update(p, m, v, g[k], k, b1, c1, b2, c2, decay, step_size, bc2_sqrt, eps);
}

__global__ void sgd_kernel(float* p, const float* g, float* buf, int64_t n, float lr, float momentum, float wd,
                           bool first) {
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < n; k += int64_t(blockDim.x) * gridDim.x)
    sgd_update(p, buf, g[k], k, lr, momentum, wd, first);
}

// Per-thread largest magnitudes, combined over the warp by shuffles and into
// *out once per warp: for values >= 0 (NaN included, whose bits exceed
// +inf's) the float order is the order of the bits as unsigned integers.
__global__ void abs_max_kernel(const float* x, int64_t n, unsigned int* out) {
  float m = 0.0f;
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < n; k += int64_t(blockDim.x) * gridDim.x)
    m = max_magnitude(m, std::fabs(x[k]));
  for (int o = 16; o > 0; o >>= 1) m = max_magnitude(m, __shfl_down_sync(0xffffffffu, m, o));
  if ((threadIdx.x & 31) == 0) atomicMax(out, __float_as_uint(m));
}

// Per-thread float64 partial sums, reduced over the warp by shuffles and
// added to *out once per warp.
__global__ void sum_squares_kernel(const float* x, int64_t n, double scale, double* out) {
  double s = 0.0;
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < n; k += int64_t(blockDim.x) * gridDim.x)
    s += scaled_square(x[k], scale);
  for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
  if ((threadIdx.x & 31) == 0) atomicAdd(out, s);
}

__global__ void scale_kernel(float* x, int64_t n, float coef) {
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < n; k += int64_t(blockDim.x) * gridDim.x)
    x[k] *= coef;
}

// The one value of type V that launch(out) leaves in a zeroed device
// scratch, copied to the host.
template <class V, class Launch>
V reduce_to_host(int device, Launch launch) {
  V* d = static_cast<V*>(allocate(device, sizeof(V)));
  V v{};
  try {
    TMEM_CUDA_CHECK(cudaMemsetAsync(d, 0, sizeof(V)));
    launch(d);
    TMEM_CUDA_CHECK_LAUNCH();
    TMEM_CUDA_CHECK(cudaMemcpy(&v, d, sizeof(V), cudaMemcpyDeviceToHost));
  } catch (...) {
    release(device, d, sizeof(V));
    throw;
  }
  release(device, d, sizeof(V));
  return v;
}

}  // namespace

// ---- launchers ----

void adamw_step(int device, float* p, const float* g, float* m, float* v, int64_t n, const AdamWScalars& s) {
  if (n == 0) return;
  DeviceGuard guard(device);
  adamw_kernel<<<blocks_for(n), kThreads>>>(p, g, m, v, n, float(s.beta1), float(1.0 - s.beta1), float(s.beta2),
                                            float(1.0 - s.beta2), float(s.decay), float(s.step_size),
                                            float(s.bc2_sqrt), float(s.eps));
  TMEM_CUDA_CHECK_LAUNCH();
}

void sgd_step(int device, float* p, const float* g, float* buf, int64_t n, const SgdScalars& s) {
  if (n == 0) return;
  DeviceGuard guard(device);
  sgd_kernel<<<blocks_for(n), kThreads>>>(p, g, buf, n, float(s.lr), float(s.momentum), float(s.weight_decay),
                                          s.first);
  TMEM_CUDA_CHECK_LAUNCH();
}

double abs_max(int device, const float* x, int64_t n) {
  if (n == 0) return 0.0;
  DeviceGuard guard(device);
  const unsigned int bits = reduce_to_host<unsigned int>(
      device, [&](unsigned int* d) { abs_max_kernel<<<blocks_for(n), kThreads>>>(x, n, d); });
  float m;
  std::memcpy(&m, &bits, sizeof m);
  return m;
}

double sum_squares(int device, const float* x, int64_t n, double scale, double acc) {
  if (n == 0) return acc;
  DeviceGuard guard(device);
  return acc + reduce_to_host<double>(
                   device, [&](double* d) { sum_squares_kernel<<<blocks_for(n), kThreads>>>(x, n, scale, d); });
}

void scale_inplace(int device, float* x, int64_t n, double coef) {
  if (n == 0) return;
  DeviceGuard guard(device);
  scale_kernel<<<blocks_for(n), kThreads>>>(x, n, float(coef));
  TMEM_CUDA_CHECK_LAUNCH();
}

}  // namespace tmem::cuda
