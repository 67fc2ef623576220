// Gathering shape ops (ops/shape.cpp's device half): index_select and gather,
// forward and backward, float32 data and int64 indices. One thread per
// output element in a grid-stride loop (the arithmetic is cuda/shape.cuh's);
// the backward scatters with atomicAdd, since repeated indices send several
// gradient elements to one input element (so its float32 sum order, and
// rounding, may differ from run to run). The forwards return true: ops/
// checks the indices on the host before the launch, as a flag written by
// the kernel would cost a synchronisation. cat and pad need no kernel here:
// ops/shape.cpp makes them from the backend's copy and fill (cuda/memory.cu).
#include "tmem/cuda/check.h"
#include "tmem/cuda/kernels.h"
#include "tmem/cuda/shape.cuh"
#include "tmem/cuda/strided.cuh"

namespace tmem::cuda {

namespace {

// The backward kernels' scatter (the `add` of cuda/shape.cuh).
struct AtomicAdd {
  __device__ void operator()(float* p, float v) const { atomicAdd(p, v); }
};

// ---- kernels ----

__global__ void index_select_kernel(const float* a, const int64_t* index, float* out, int64_t n, int64_t N,
                                    int64_t K, int64_t Q) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(blockDim.x) * gridDim.x)
    index_select_one(a, index, out, i, N, K, Q);
}

__global__ void index_select_backward_kernel(const float* g, const int64_t* index, float* ga, int64_t n,
                                             int64_t N, int64_t K, int64_t Q) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(blockDim.x) * gridDim.x)
    index_select_backward_one(g, index, ga, i, N, K, Q, AtomicAdd{});
}

}  // namespace

// ---- launchers ----

bool index_select_forward(int device, const float* a, const int64_t* index, float* out, int64_t P, int64_t N,
                          int64_t Q, int64_t K) {
  const int64_t n = P * K * Q;
  if (n == 0) return true;
  DeviceGuard guard(device);
  index_select_kernel<<<blocks_for(n), kThreads>>>(a, index, out, n, N, K, Q);
  TMEM_CUDA_CHECK_LAUNCH();
  return true;
}

void index_select_backward(int device, const float* g, const int64_t* index, float* ga, int64_t P, int64_t N,
                           int64_t Q, int64_t K) {
  const int64_t n = P * K * Q;
  if (n == 0) return;
  DeviceGuard guard(device);
  index_select_backward_kernel<<<blocks_for(n), kThreads>>>(g, index, ga, n, N, K, Q);
  TMEM_CUDA_CHECK_LAUNCH();
}

bool gather_forward(int device, const StridedArgs<3>& args, int64_t step, int64_t) {
  launch_strided(device, args, [step] __device__(const StridedArgs<3>& a, const int64_t(&o)[3]) {
    gather_one(a, o, step);
  });
  return true;
}

void gather_backward(int device, const StridedArgs<3>& args, int64_t step) {
  launch_strided(device, args, [step] __device__(const StridedArgs<3>& a, const int64_t(&o)[3]) {
    gather_backward_one(a, o, step, AtomicAdd{});
  });
}

}  // namespace tmem::cuda
