// conv3d_depthwise (ops/conv3d.cpp's device half), forward and backward; the
// arithmetic is cuda/conv3d.cuh's. One thread per output element (forward),
// per input element (input gradient: a gather over the taps and outputs
// that read it), per (channel, tap, sample) and per (channel, sample) for the
// parameter gradients' per-sample parts, which ops/ then sums over the
// samples. No atomics, so the results do not depend on timing.
#include "tmem/cuda/check.h"
#include "tmem/cuda/conv3d.cuh"
#include "tmem/cuda/kernels.h"

namespace tmem::cuda {

namespace {

int64_t taps_of(const Conv3dArgs& a) { return a.kernel[0] * a.kernel[1] * a.kernel[2]; }

// ---- kernels ----

__global__ void conv3d_forward_kernel(const Conv3dArgs a, const float* input, const float* weight,
                                      const float* bias, float* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(blockDim.x) * gridDim.x)
    conv3d_forward_one(a, input, weight, bias, out, i);
}

__global__ void conv3d_backward_input_kernel(const Conv3dArgs a, const float* gout, const float* weight,
                                             float* ginput, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(blockDim.x) * gridDim.x)
    conv3d_backward_input_one(a, gout, weight, ginput, i);
}

__global__ void conv3d_backward_weight_kernel(const Conv3dArgs a, const float* gout, const float* input,
                                              float* wpart, int64_t n) {
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < n; j += int64_t(blockDim.x) * gridDim.x)
    conv3d_backward_weight_one(a, gout, input, wpart, j);
}

__global__ void conv3d_backward_bias_kernel(const Conv3dArgs a, const float* gout, float* bpart, int64_t n) {
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < n; j += int64_t(blockDim.x) * gridDim.x)
    conv3d_backward_bias_one(a, gout, bpart, j);
}

}  // namespace

// ---- launchers ----

void conv3d_depthwise_forward(int device, const Conv3dArgs& a, const float* input, const float* weight,
                              const float* bias, float* out) {
  const int64_t n = a.B * a.C * a.out[0] * a.out[1] * a.out[2];
  if (n == 0) return;
  DeviceGuard guard(device);
  conv3d_forward_kernel<<<blocks_for(n), kThreads>>>(a, input, weight, bias, out, n);
  TMEM_CUDA_CHECK_LAUNCH();
}

void conv3d_depthwise_backward_input(int device, const Conv3dArgs& a, const float* gout, const float* weight,
                                     float* ginput) {
  const int64_t n = a.B * a.C * a.size[0] * a.size[1] * a.size[2];
  if (n == 0) return;
  DeviceGuard guard(device);
  conv3d_backward_input_kernel<<<blocks_for(n), kThreads>>>(a, gout, weight, ginput, n);
  TMEM_CUDA_CHECK_LAUNCH();
}

void conv3d_depthwise_backward_params(int device, const Conv3dArgs& a, const float* gout, const float* input,
                                      float* wpart, float* bpart) {
  const int64_t nw = a.C * taps_of(a) * a.B, nb = a.C * a.B;
  if (nb == 0) return;
  DeviceGuard guard(device);
  if (wpart) {
    conv3d_backward_weight_kernel<<<blocks_for(nw), kThreads>>>(a, gout, input, wpart, nw);
    TMEM_CUDA_CHECK_LAUNCH();
  }
  if (bpart) {
    conv3d_backward_bias_kernel<<<blocks_for(nb), kThreads>>>(a, gout, bpart, nb);
    TMEM_CUDA_CHECK_LAUNCH();
  }
}

}  // namespace tmem::cuda
