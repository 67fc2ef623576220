// layer_norm's CUDA kernels (ops/kernel_list.h TMEM_LAYER_NORM_KERNELS): the row programs of
// cuda/layer_norm.cuh over contiguous rows [N, C] for the forward and the
// input gradient (one thread per short row, one block per longer row), and
// for the weight and bias gradients one thread per (chunk of rows, column)
// writing partial column sums, then one thread per column summing the
// chunks (deterministic, no atomics). float32.
#include "tmem/cuda/check.h"
#include "tmem/cuda/kernels.h"
#include "tmem/cuda/layer_norm.cuh"
#include "tmem/cuda/nn_launch.cuh"
#include "tmem/cuda/scratch.h"

namespace tmem::cuda {

// ---- launchers (the kernels are cuda/nn_launch.cuh's, instantiated here) ----

void layer_norm_forward(int device, const float* x, const float* weight, const float* bias,
                        float* y, float* mean, float* rstd, int64_t rows, int64_t cols,
                        double eps) {
  DeviceGuard guard(device);
  launch_rows(rows, cols,
              LayerNormRows{x, weight, bias, y, mean, rstd, cols, static_cast<float>(eps)});
}

void layer_norm_backward_input(int device, const float* x, const float* g, const float* weight,
                               const float* mean, const float* rstd, float* gx, int64_t rows,
                               int64_t cols) {
  DeviceGuard guard(device);
  launch_rows(rows, cols, LayerNormInputGradRows{x, g, weight, mean, rstd, gx, cols});
}

void layer_norm_backward_params(int device, const float* x, const float* g, const float* mean,
                                const float* rstd, float* gweight, float* gbias, int64_t rows,
                                int64_t cols) {
  if (cols == 0 || (!gweight && !gbias)) return;
  DeviceGuard guard(device);
  const int64_t chunks = (rows + kLayerNormChunkRows - 1) / kLayerNormChunkRows;
  if (chunks <= 1) {
    // One chunk (or no rows: zero gradients): its partials are the sums.
    launch_index(cols, LayerNormParamGradChunks{x, g, mean, rstd, gweight, gbias, rows, cols});
    return;
  }
  const int64_t n = chunks * cols;
  Scratch parts(device, (gweight && gbias ? 2 : 1) * n * sizeof(float));
  float* part_w = gweight ? parts.data() : nullptr;
  float* part_b = gbias ? parts.data() + (gweight ? n : 0) : nullptr;
  launch_index(n, LayerNormParamGradChunks{x, g, mean, rstd, part_w, part_b, rows, cols});
  if (gweight) launch_index(cols, ColumnSums{part_w, gweight, chunks, cols});
  if (gbias) launch_index(cols, ColumnSums{part_b, gbias, chunks, cols});
}

}  // namespace tmem::cuda
