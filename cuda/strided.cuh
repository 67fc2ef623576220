// Device-side iteration over StridedArgs (core/device_backend.h): one thread
// per element in a grid-stride loop, the element's offset in each operand
// computed from its linear index. Shared by the copy and elementwise kernels.
#pragma once
#include "tmem/core/device_backend.h"
#include "tmem/cuda/check.h"

namespace tmem::cuda {

/// Offsets (in elements) of linear element i in each operand of `a`.
template <size_t N>
__device__ __forceinline__ void strided_offsets(const StridedArgs<N>& a, int64_t i, int64_t (&off)[N]) {
#pragma unroll
  for (size_t j = 0; j < N; ++j) off[j] = 0;
  for (int d = a.ndim - 1; d >= 0; --d) {
    const int64_t q = i / a.shape[d], idx = i - q * a.shape[d];
    i = q;
#pragma unroll
    for (size_t j = 0; j < N; ++j) off[j] += idx * a.strides[j][d];
  }
}

/// Calls f(args, off) for every element, off its offsets in each operand.
template <size_t N, class F>
__global__ void strided_kernel(const __grid_constant__ StridedArgs<N> args, F f) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < args.numel;
       i += int64_t(blockDim.x) * gridDim.x) {
    int64_t off[N];
    strided_offsets(args, i, off);
    f(args, off);
  }
}

/// Launches strided_kernel on `device` (nothing for zero elements) and
/// checks the launch.
template <size_t N, class F>
void launch_strided(int device, const StridedArgs<N>& args, F f) {
  if (args.numel == 0) return;
  DeviceGuard guard(device);
  strided_kernel<N, F><<<blocks_for(args.numel), kThreads>>>(args, f);
  TMEM_CUDA_CHECK_LAUNCH();
}

}  // namespace tmem::cuda
