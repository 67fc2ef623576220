// Optimizer kernels (ops/kernel_list.h, for nn/optim.cpp): AdamW and SGD updates in
// place, one thread per element (cuda/optim.cuh holds the arithmetic), and
// the float64 sum of squares clip_grad_norm_ takes the norm from, so no
// parameter or gradient leaves the device.
#include "tmem/cuda/check.h"
#include "tmem/cuda/kernels.h"
#include "tmem/cuda/optim.cuh"

namespace tmem::cuda {

namespace {

// ---- kernels ----

__global__ void adamw_kernel(float* p, const float* g, float* m, float* v, int64_t n, float b1, float b2,
                             float decay, float step_size, float bc2_sqrt, float eps) {
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < n; k += int64_t(blockDim.x) * gridDim.x)
    adamw_update(p, m, v, g[k], k, b1, b2, decay, step_size, bc2_sqrt, eps);
}

__global__ void sgd_kernel(float* p, const float* g, float* buf, int64_t n, float lr, float momentum, float wd,
                           bool first) {
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < n; k += int64_t(blockDim.x) * gridDim.x)
    sgd_update(p, buf, g[k], k, lr, momentum, wd, first);
}

// Per-thread float64 partial sums, reduced over the warp by shuffles and
// added to *out once per warp.
__global__ void sum_squares_kernel(const float* x, int64_t n, double* out) {
  double s = 0.0;
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < n; k += int64_t(blockDim.x) * gridDim.x)
    s += static_cast<double>(x[k]) * x[k];
  for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
  if ((threadIdx.x & 31) == 0) atomicAdd(out, s);
}

}  // namespace

// ---- launchers ----

void adamw_step(int device, float* p, const float* g, float* m, float* v, int64_t n, const AdamWScalars& s) {
  if (n == 0) return;
  DeviceGuard guard(device);
  adamw_kernel<<<blocks_for(n), kThreads>>>(p, g, m, v, n, float(s.beta1), float(s.beta2), float(s.decay),
                                            float(s.step_size), float(s.bc2_sqrt), float(s.eps));
  TMEM_CUDA_CHECK_LAUNCH();
}

void sgd_step(int device, float* p, const float* g, float* buf, int64_t n, const SgdScalars& s) {
  if (n == 0) return;
  DeviceGuard guard(device);
  sgd_kernel<<<blocks_for(n), kThreads>>>(p, g, buf, n, float(s.lr), float(s.momentum), float(s.weight_decay),
                                          s.first);
  TMEM_CUDA_CHECK_LAUNCH();
}

double sum_squares(int device, const float* x, int64_t n) {
  if (n == 0) return 0.0;
  DeviceGuard guard(device);
  double* d = static_cast<double*>(allocate(device, sizeof(double)));
  double s = 0.0;
  try {
    TMEM_CUDA_CHECK(cudaMemsetAsync(d, 0, sizeof(double)));
    sum_squares_kernel<<<blocks_for(n), kThreads>>>(x, n, d);
    TMEM_CUDA_CHECK_LAUNCH();
    TMEM_CUDA_CHECK(cudaMemcpy(&s, d, sizeof(double), cudaMemcpyDeviceToHost));
  } catch (...) {
    release(device, d, sizeof(double));
    throw;
  }
  release(device, d, sizeof(double));
  return s;
}

}  // namespace tmem::cuda
