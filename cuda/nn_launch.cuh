// Device-side launch helpers of the nn kernels (cuda/softmax.cu,
// layer_norm.cu, embedding.cu, loss.cu, dropout.cu) and gaussian_splat's
// backward (cuda/gaussian_splat.cu): grid-stride kernels that call the
// functors of cuda/softmax.cuh, layer_norm.cuh, embedding.cuh, dropout.cuh
// and gaussian_splat.cuh, which hold all the arithmetic. A row program
// (cuda/rows.cuh) runs with one thread per row for short rows and one block
// per row, combining the threads' partials with warp shuffles and shared
// memory, for longer ones. CUDA only (nvcc).
#pragma once
#include <cstdint>

#include "tmem/cuda/check.h"
#include "tmem/cuda/rows.cuh"

namespace tmem::cuda {

/// Threads per block of a block-per-row launch at most (a multiple of 32).
inline constexpr int kRowThreads = 256;

/// v (float or double) combined with op over the threads of the block,
/// returned to every thread. blockDim.x must be a multiple of 32 and every
/// thread must call it.
template <class T, class Op>
__device__ T block_reduce(T v, Op op) {
  __shared__ T warp_parts[32];
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) warp_parts[warp] = v;
  __syncthreads();
  v = lane < static_cast<int>(blockDim.x >> 5) ? warp_parts[lane] : static_cast<T>(Op::identity());
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  __syncthreads();  // warp_parts is reused by the next call
  return v;
}

/// The reduce of a row handled by a whole block.
struct BlockReduce {
  template <class T, class Op>
  __device__ T operator()(T v, Op op) const {
    return block_reduce(v, op);
  }
};

/// f(i) for i < n, one thread per i in a grid-stride loop.
template <class F>
__global__ void index_kernel(int64_t n, F f) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(blockDim.x) * gridDim.x)
    f(i);
}

/// Row program f over rows r < rows, one thread per row.
template <class F>
__global__ void row_per_thread_kernel(int64_t rows, F f) {
  for (int64_t r = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; r < rows;
       r += int64_t(blockDim.x) * gridDim.x)
    f(r, 0, 1, OneThread{});
}

/// Row program f over rows r < rows, one block per row.
template <class F>
__global__ void row_per_block_kernel(int64_t rows, F f) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x)
    f(r, threadIdx.x, blockDim.x, BlockReduce{});
}

/// Launches index_kernel over n elements on the current device (nothing for
/// n == 0) and checks the launch.
template <class F>
void launch_index(int64_t n, F f) {
  if (n == 0) return;
  index_kernel<<<blocks_for(n), kThreads>>>(n, f);
  TMEM_CUDA_CHECK_LAUNCH();
}

/// Launches row program f over `rows` rows of `len` elements on the current
/// device: one thread per row when len <= kShortRow, else one block of up to
/// kRowThreads threads (len rounded up to a multiple of 32) per row. Nothing
/// for rows == 0.
template <class F>
void launch_rows(int64_t rows, int64_t len, F f) {
  if (rows == 0) return;
  if (len <= kShortRow) {
    row_per_thread_kernel<<<blocks_for(rows), kThreads>>>(rows, f);
  } else {
    const unsigned threads =
        static_cast<unsigned>(len < kRowThreads ? (len + 31) / 32 * 32 : kRowThreads);
    const unsigned blocks =
        static_cast<unsigned>(rows < (int64_t{1} << 20) ? rows : (int64_t{1} << 20));
    row_per_block_kernel<<<blocks, threads>>>(rows, f);
  }
  TMEM_CUDA_CHECK_LAUNCH();
}

}  // namespace tmem::cuda
