// Softmax's and log-softmax's CUDA kernels (ops/kernel_list.h): the row programs
// of cuda/softmax.cuh over contiguous rows [rows, len], one thread per short
// row and one block per longer row (cuda/nn_launch.cuh). float32.
#include "tmem/cuda/check.h"
#include "tmem/cuda/kernels.h"
#include "tmem/cuda/nn_launch.cuh"
#include "tmem/cuda/softmax.cuh"

namespace tmem::cuda {

// ---- launchers (the kernels are cuda/nn_launch.cuh's, instantiated here) ----

void softmax_forward(int device, bool log, const float* x, float* y, int64_t rows, int64_t len) {
  DeviceGuard guard(device);
  launch_rows(rows, len, SoftmaxRows{log, x, y, len});
}

void softmax_backward(int device, bool log, const float* y, const float* g, float* gx, int64_t rows,
                      int64_t len) {
  DeviceGuard guard(device);
  launch_rows(rows, len, SoftmaxBackwardRows{log, y, g, gx, len});
}

}  // namespace tmem::cuda
