// gaussian_splat's CUDA kernels (ops/kernel_list.h), forward and
// backward; the arithmetic is cuda/gaussian_splat.cuh's. The forward runs one
// thread per volume element; the backward gathers with row programs
// (cuda/nn_launch.cuh's launch_rows: a block per row over more than 32
// voxels): a row per (b, c) for the content gradient (a sum over the voxels)
// and one per batch item for the mu and sigma gradients (sums over channels
// and voxels), so the gradients do not depend on timing. One thread per
// batch item ran the geometry sums at 5 GB/s on an H200 (bench/RESULTS.md).
#include "tmem/cuda/check.h"
#include "tmem/cuda/gaussian_splat.cuh"
#include "tmem/cuda/kernels.h"
#include "tmem/cuda/nn_launch.cuh"

namespace tmem::cuda {

namespace {

// ---- kernels ----

__global__ void splat_forward_kernel(const SplatArgs a, const float* content, const float* mu, const float* sigma,
                                     float* vol, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(blockDim.x) * gridDim.x)
    splat_forward_one(a, content, mu, sigma, vol, i);
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
  const int64_t S = a.D * a.H * a.W;
  if (gcontent && a.C > 0) launch_rows(a.B * a.C, S, SplatContentRows{a, mu, sigma, gvol, gcontent});
  if (gmu || gsigma) launch_rows(a.B, S, SplatGeometryRows{a, content, mu, sigma, gvol, gmu, gsigma});
}

}  // namespace tmem::cuda
