// Row sums for sum and mean (ops/reduction.cpp's device half): x[rows, len]
// contiguous -> out[rows] = scale * row sum, accumulated in float32. Short
// rows take one thread each; longer rows one block each (per-thread partial
// sums, then warp shuffles and one pass over the warps' sums).
#include "cuda/check.h"
#include "cuda/kernels.h"

namespace tmem::cuda {

namespace {

// Rows up to this length are summed by one thread each.
constexpr int64_t kShortRow = 64;

// ---- kernels ----

__global__ void sum_short_rows(const float* x, float* out, int64_t rows, int64_t len, float scale) {
  for (int64_t r = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; r < rows;
       r += int64_t(blockDim.x) * gridDim.x) {
    const float* row = x + r * len;
    float s = 0.0f;
    for (int64_t j = 0; j < len; ++j) s += row[j];
    out[r] = s * scale;
  }
}

// Sum of v over the block (blockDim.x a multiple of 32), valid in thread 0.
__device__ float block_sum(float v) {
  __shared__ float warp_sums[32];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  v = threadIdx.x < (blockDim.x >> 5) ? warp_sums[threadIdx.x] : 0.0f;
  if (warp == 0)
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  __syncthreads();  // warp_sums is reused by the next row
  return v;
}

__global__ void sum_long_rows(const float* x, float* out, int64_t rows, int64_t len, float scale) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* row = x + r * len;
    float s = 0.0f;
    for (int64_t j = threadIdx.x; j < len; j += blockDim.x) s += row[j];
    s = block_sum(s);
    if (threadIdx.x == 0) out[r] = s * scale;
  }
}

}  // namespace

// ---- launcher ----

void sum_rows(int device, const float* x, float* out, int64_t rows, int64_t len, double scale) {
  if (rows == 0) return;
  DeviceGuard guard(device);
  const float s = static_cast<float>(scale);
  if (len <= kShortRow) {
    sum_short_rows<<<blocks_for(rows), kThreads>>>(x, out, rows, len, s);
  } else {
    const unsigned blocks = static_cast<unsigned>(rows < (int64_t{1} << 20) ? rows : (int64_t{1} << 20));
    sum_long_rows<<<blocks, kThreads>>>(x, out, rows, len, s);
  }
  TMEM_CUDA_CHECK_LAUNCH();
}

}  // namespace tmem::cuda
