// grid_sample's CUDA kernels (ops/kernel_list.h TMEM_GRID_SAMPLE_KERNELS), 4-D bilinear/nearest and
// 5-D trilinear/nearest, every padding mode, forward and backward; the
// arithmetic is cuda/grid_sample.cuh's. The forward and the input gradient
// run one thread per output element (n, c, p); the input gradient
// scatter-adds with atomicAdd, since several points may read one cell (so
// its float32 sum order, and rounding, may differ from run to run). The grid
// gradient runs one thread per point (n, p), summing over the channels.
#include "tmem/cuda/check.h"
#include "tmem/cuda/grid_sample.cuh"
#include "tmem/cuda/kernels.h"

namespace tmem::cuda {

namespace {

// The input gradient's scatter: atomicAdd on the device (the host branch
// only lets cuda/grid_sample.cuh's __host__ __device__ templates compile).
struct AtomicAdd {
  __host__ __device__ void operator()(float* p, float v) const {
#if defined(__CUDA_ARCH__)
    atomicAdd(p, v);
#else
    *p += v;
#endif
  }
};

// ---- kernels ----

template <int K>
__global__ void grid_sample_forward_kernel(const GridSampleArgs a, const float* input, const float* grid,
                                           float* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(blockDim.x) * gridDim.x)
    grid_sample_forward_one<K>(a, input, grid, out, i);
}

template <int K>
__global__ void grid_sample_backward_input_kernel(const GridSampleArgs a, const float* grid, const float* gout,
                                                  float* ginput, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(blockDim.x) * gridDim.x)
    grid_sample_backward_input_one<K>(a, grid, gout, ginput, i, AtomicAdd{});
}

template <int K>
__global__ void grid_sample_backward_grid_kernel(const GridSampleArgs a, const float* input, const float* grid,
                                                 const float* gout, float* ggrid, int64_t n) {
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < n; j += int64_t(blockDim.x) * gridDim.x)
    grid_sample_backward_grid_one<K>(a, input, grid, gout, ggrid, j);
}

template <int K>
void forward_k(const GridSampleArgs& a, const float* input, const float* grid, float* out) {
  const int64_t n = a.N * a.C * a.P;
  grid_sample_forward_kernel<K><<<blocks_for(n), kThreads>>>(a, input, grid, out, n);
  TMEM_CUDA_CHECK_LAUNCH();
}

template <int K>
void backward_k(const GridSampleArgs& a, const float* input, const float* grid, const float* gout,
                float* ginput, float* ggrid) {
  const int64_t n = a.N * a.C * a.P, points = a.N * a.P;
  if (ginput && n > 0) {
    grid_sample_backward_input_kernel<K><<<blocks_for(n), kThreads>>>(a, grid, gout, ginput, n);
    TMEM_CUDA_CHECK_LAUNCH();
  }
  if (ggrid && !a.nearest && points > 0) {
    grid_sample_backward_grid_kernel<K><<<blocks_for(points), kThreads>>>(a, input, grid, gout, ggrid, points);
    TMEM_CUDA_CHECK_LAUNCH();
  }
}

}  // namespace

// ---- launchers ----

void grid_sample_forward(int device, const GridSampleArgs& a, const float* input, const float* grid, float* out) {
  if (a.N * a.C * a.P == 0) return;
  DeviceGuard guard(device);
  if (a.K == 2)
    forward_k<2>(a, input, grid, out);
  else
    forward_k<3>(a, input, grid, out);
}

void grid_sample_backward(int device, const GridSampleArgs& a, const float* input, const float* grid,
                          const float* gout, float* ginput, float* ggrid) {
  DeviceGuard guard(device);
  // The scatter adds into ginput; unless it holds a gradient to add to, zero it first.
  if (ginput && !a.accumulate)
    TMEM_CUDA_CHECK(cudaMemsetAsync(ginput, 0, a.N * a.C * a.size[0] * a.size[1] * a.size[2] * sizeof(float)));
  if (a.N * a.P == 0) return;
  if (a.K == 2)
    backward_k<2>(a, input, grid, gout, ginput, ggrid);
  else
    backward_k<3>(a, input, grid, gout, ginput, ggrid);
}

}  // namespace tmem::cuda
