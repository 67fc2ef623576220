// gaussian_splat's CUDA kernels (ops/kernel_list.h), forward and
// backward; the arithmetic is cuda/gaussian_splat.cuh's. The forward runs one
// thread per volume element; the backward gathers: one thread per (b, c) for
// the content gradient (a sum over the voxels) and one per batch item for
// the mu and sigma gradients (a sum over channels and voxels), so the
// gradients do not depend on timing.
#include "tmem/cuda/check.h"
#include "tmem/cuda/gaussian_splat.cuh"
#include "tmem/cuda/kernels.h"

namespace tmem::cuda {

namespace {

// ---- kernels ----

__global__ void splat_forward_kernel(const SplatArgs a, const float* content, const float* mu, const float* sigma,
                                     float* vol, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(blockDim.x) * gridDim.x)
    splat_forward_one(a, content, mu, sigma, vol, i);
}

__global__ void splat_backward_content_kernel(const SplatArgs a, const float* mu, const float* sigma,
                                              const float* gvol, float* gcontent, int64_t n) {
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < n; j += int64_t(blockDim.x) * gridDim.x)
    splat_backward_content_one(a, mu, sigma, gvol, gcontent, j);
}

__global__ void splat_backward_geometry_kernel(const SplatArgs a, const float* content, const float* mu,
                                               const float* sigma, const float* gvol, float* gmu, float* gsigma) {
  for (int64_t b = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; b < a.B; b += int64_t(blockDim.x) * gridDim.x)
    splat_backward_geometry_one(a, content, mu, sigma, gvol, gmu, gsigma, b);
}

}  // namespace

// ---- launchers ----

void gaussian_splat_forward(int device, const SplatArgs& a, const float* content, const float* mu,
                            const float* sigma, float* vol) {
  const int64_t n = a.B * a.C * a.D * a.H * a.W;
  if (n == 0) return;
  DeviceGuard guard(device);
  splat_forward_kernel<<<blocks_for(n), kThreads>>>(a, content, mu, sigma, vol, n);
  TMEM_CUDA_CHECK_LAUNCH();
}

void gaussian_splat_backward(int device, const SplatArgs& a, const float* content, const float* mu,
                             const float* sigma, const float* gvol, float* gcontent, float* gmu, float* gsigma) {
  if (a.B == 0) return;
  DeviceGuard guard(device);
  if (gcontent && a.C > 0) {
    splat_backward_content_kernel<<<blocks_for(a.B * a.C), kThreads>>>(a, mu, sigma, gvol, gcontent, a.B * a.C);
    TMEM_CUDA_CHECK_LAUNCH();
  }
  if (gmu || gsigma) {
    splat_backward_geometry_kernel<<<blocks_for(a.B), kThreads>>>(a, content, mu, sigma, gvol, gmu, gsigma);
    TMEM_CUDA_CHECK_LAUNCH();
  }
}

}  // namespace tmem::cuda
