// Dropout's CUDA kernel (ops/kernel_list.h): out = x * mask, one thread per
// element (cuda/dropout.cuh). The mask is drawn on the host from the same
// Generator draws as the CPU path and copied here, so a seed gives the same
// mask on every device. float32.
#include "tmem/cuda/check.h"
#include "tmem/cuda/dropout.cuh"
#include "tmem/cuda/kernels.h"
#include "tmem/cuda/nn_launch.cuh"

namespace tmem::cuda {

// ---- launcher (the kernel is cuda/nn_launch.cuh's, instantiated here) ----

void dropout_apply(int device, const float* x, const float* mask, float* out, int64_t n) {
  DeviceGuard guard(device);
  launch_index(n, MaskProduct{x, mask, out});
}

}  // namespace tmem::cuda
