// Row reductions (ops/reduction.cpp's device half) over x[rows, len]
// contiguous. Short rows (len <= kReduceShortRow) take one thread each;
// longer rows one block each.
// - sum and mean: out[rows] = scale * row sum, accumulated in float32 (per-
//   thread partial sums, then warp shuffles and one pass over the warps'
//   sums); a sum over leading dims (columns) is a transposing copy, then
//   row sums.
// - max and min (values + first indices) and var (two passes, in double):
//   the per-thread arithmetic of cuda/reduction.cuh, the block's partials
//   combined in a shared-memory tree; var's backward is elementwise
//   (cuda/strided.cuh).
#include "tmem/cuda/check.h"
#include "tmem/cuda/kernels.h"
#include "tmem/cuda/reduction.cuh"
#include "tmem/cuda/scratch.h"
#include "tmem/cuda/strided.cuh"

namespace tmem::cuda {

namespace {

// Blocks for one block per row.
unsigned row_blocks(int64_t rows) {
  return static_cast<unsigned>(rows < (int64_t{1} << 20) ? rows : (int64_t{1} << 20));
}

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

// The combination of every thread's v over the block (blockDim.x ==
// kReduceThreads), in a tree with halving strides; returned to every thread.
template <class T, class C>
__device__ T block_combine(T v, C combine) {
  __shared__ T part[kReduceThreads];
  part[threadIdx.x] = v;
  __syncthreads();
  for (int h = kReduceThreads / 2; h > 0; h >>= 1) {
    if (static_cast<int>(threadIdx.x) < h) part[threadIdx.x] = combine(part[threadIdx.x], part[threadIdx.x + h]);
    __syncthreads();
  }
  const T out = part[0];
  __syncthreads();  // part is reused by the next call
  return out;
}

__global__ void extreme_short_rows(const float* x, float* values, int64_t* indices, int64_t rows, int64_t len,
                                   bool is_max) {
  for (int64_t r = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; r < rows;
       r += int64_t(blockDim.x) * gridDim.x) {
    const Extreme e = extreme_scan(x + r * len, 0, len, 1, is_max);
    values[r] = e.v;
    indices[r] = e.i;
  }
}

__global__ void extreme_long_rows(const float* x, float* values, int64_t* indices, int64_t rows, int64_t len,
                                  bool is_max) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const Extreme e = block_combine(extreme_scan(x + r * len, threadIdx.x, len, kReduceThreads, is_max),
                                    [is_max](Extreme a, Extreme b) { return extreme_combine(a, b, is_max); });
    if (threadIdx.x == 0) {
      values[r] = e.v;
      indices[r] = e.i;
    }
  }
}

__global__ void extreme_backward_kernel(const float* g, const int64_t* indices, float* out, int64_t rows,
                                        int64_t len) {
  for (int64_t r = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; r < rows;
       r += int64_t(blockDim.x) * gridDim.x)
    extreme_backward_one(g, indices, out, r, len);
}

__global__ void var_short_rows(const float* x, float* out, float* mean, int64_t rows, int64_t len, double denom) {
  for (int64_t r = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; r < rows;
       r += int64_t(blockDim.x) * gridDim.x) {
    const float* row = x + r * len;
    const float m = row_mean(row_partial_sum(row, 0, len, 1), len);
    mean[r] = m;
    out[r] = row_var(row_partial_sq_dev(row, 0, len, 1, m), denom);
  }
}

__global__ void var_long_rows(const float* x, float* out, float* mean, int64_t rows, int64_t len, double denom) {
  const auto add = [](double a, double b) { return a + b; };
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* row = x + r * len;
    const float m = row_mean(block_combine(row_partial_sum(row, threadIdx.x, len, kReduceThreads), add), len);
    const double ss = block_combine(row_partial_sq_dev(row, threadIdx.x, len, kReduceThreads, m), add);
    if (threadIdx.x == 0) {
      mean[r] = m;
      out[r] = row_var(ss, denom);
    }
  }
}

}  // namespace

// ---- launchers ----

void sum_rows(int device, const float* x, float* out, int64_t rows, int64_t len, double scale) {
  if (rows == 0) return;
  DeviceGuard guard(device);
  const float s = static_cast<float>(scale);
  if (len <= kReduceShortRow) {
    sum_short_rows<<<blocks_for(rows), kThreads>>>(x, out, rows, len, s);
  } else {
    sum_long_rows<<<row_blocks(rows), kThreads>>>(x, out, rows, len, s);
  }
  TMEM_CUDA_CHECK_LAUNCH();
}

// The columns copied into rows (a transposing copy), then sum_rows: the
// layout the row kernels read.
void sum_columns(int device, const float* x, float* out, int64_t rows, int64_t cols, double scale) {
  if (cols == 0) return;
  if (rows == 0) {
    sum_rows(device, x, out, cols, 0, scale);
    return;
  }
  Scratch t(device, static_cast<size_t>(rows * cols) * sizeof(float));
  StridedArgs<2> a;
  a.ndim = 2;
  a.numel = rows * cols;
  a.shape[0] = cols;
  a.shape[1] = rows;
  a.data[0] = t.data();
  a.data[1] = const_cast<float*>(x);
  a.strides[0][0] = rows;
  a.strides[0][1] = 1;
  a.strides[1][0] = 1;
  a.strides[1][1] = cols;
  copy(device, a, DType::Float32, DType::Float32);
  sum_rows(device, t.data(), out, cols, rows, scale);
}

void extreme_rows(int device, const float* x, float* values, int64_t* indices, int64_t O, int64_t R,
                  bool is_max) {
  if (O == 0) return;
  DeviceGuard guard(device);
  if (R <= kReduceShortRow)
    extreme_short_rows<<<blocks_for(O), kThreads>>>(x, values, indices, O, R, is_max);
  else
    extreme_long_rows<<<row_blocks(O), kReduceThreads>>>(x, values, indices, O, R, is_max);
  TMEM_CUDA_CHECK_LAUNCH();
}

void extreme_rows_backward(int device, const float* g, const int64_t* indices, float* rows, int64_t O,
                           int64_t R) {
  if (O == 0) return;
  DeviceGuard guard(device);
  extreme_backward_kernel<<<blocks_for(O), kThreads>>>(g, indices, rows, O, R);
  TMEM_CUDA_CHECK_LAUNCH();
}

void var_rows(int device, const float* x, float* out, float* mean, int64_t O, int64_t R, double denom) {
  if (O == 0) return;
  DeviceGuard guard(device);
  if (R <= kReduceShortRow)
    var_short_rows<<<blocks_for(O), kThreads>>>(x, out, mean, O, R, denom);
  else
    var_long_rows<<<row_blocks(O), kReduceThreads>>>(x, out, mean, O, R, denom);
  TMEM_CUDA_CHECK_LAUNCH();
}

void var_backward(int device, const StridedArgs<4>& args, double scale) {
  const float s = static_cast<float>(scale);
  launch_strided(device, args, [s] __device__(const StridedArgs<4>& a, const int64_t(&o)[4]) {
    var_backward_one(a, o, s);
  });
}

}  // namespace tmem::cuda
