// conv3d_depthwise's CUDA kernels (ops/kernel_list.h TMEM_CONV3D_KERNELS); the
// arithmetic is cuda/conv3d.cuh's. One thread per output element (forward),
// per input element (input gradient: a gather over the taps and outputs
// that read it), per (channel, tap, sample) and per (channel, sample) for the
// parameter gradients' per-sample parts, which the entry then sums over
// the samples (sum_rows). No atomics, so the results do not depend on timing.
#include <algorithm>

#include "tmem/cuda/check.h"
#include "tmem/cuda/conv3d.cuh"
#include "tmem/cuda/kernels.h"
#include "tmem/cuda/scratch.h"

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

// Per-sample parts wpart [C, taps, B] and bpart [C, B], summed over B by
// sum_rows, so no sum depends on timing.
void conv3d_depthwise_backward_params(int device, const Conv3dArgs& a, const float* gout, const float* input,
                                      float* gweight, float* gbias) {
  const int64_t taps = taps_of(a), nw = a.C * taps * a.B, nb = a.C * a.B;
  DeviceGuard guard(device);
  auto bytes = [](int64_t n) { return static_cast<size_t>(std::max<int64_t>(n, 1)) * sizeof(float); };
  if (gweight) {
    Scratch wpart(device, bytes(nw));
    if (nw > 0) {
      conv3d_backward_weight_kernel<<<blocks_for(nw), kThreads>>>(a, gout, input, wpart.data(), nw);
      TMEM_CUDA_CHECK_LAUNCH();
    }
    sum_rows(device, wpart.data(), gweight, a.C * taps, a.B, 1.0);
  }
  if (gbias) {
    Scratch bpart(device, bytes(nb));
    if (nb > 0) {
      conv3d_backward_bias_kernel<<<blocks_for(nb), kThreads>>>(a, gout, bpart.data(), nb);
      TMEM_CUDA_CHECK_LAUNCH();
    }
    sum_rows(device, bpart.data(), gbias, a.C, a.B, 1.0);
  }
}

}  // namespace tmem::cuda
