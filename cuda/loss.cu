// Cross-entropy's CUDA kernels (ops/kernel_list.h) from lsm = log_softmax(logits)
// [N, C] (computed by cuda/softmax.cu): the per-sample loss is a row
// program of cuda/softmax.cuh (one thread per short row, one block per
// longer row), the logits gradient one thread per element. Targets are
// range-checked by ops/ before the launch. float32.
#include "tmem/cuda/check.h"
#include "tmem/cuda/kernels.h"
#include "tmem/cuda/nn_launch.cuh"
#include "tmem/cuda/softmax.cuh"

namespace tmem::cuda {

// ---- launchers (the kernels are cuda/nn_launch.cuh's, instantiated here) ----

void cross_entropy_forward(int device, const float* lsm, const int64_t* target, float* loss,
                           int64_t samples, int64_t classes, int64_t ignore_index,
                           double label_smoothing, float* total, double divisor) {
  DeviceGuard guard(device);
  launch_rows(samples, classes,
              CrossEntropyRows{lsm, target, loss, classes, ignore_index,
                               static_cast<float>(label_smoothing)});
  if (total) sum_rows(device, loss, total, 1, samples, 1.0 / divisor);
}

void cross_entropy_backward(int device, const float* lsm, const int64_t* target, const float* g,
                            bool per_sample, double divisor, float* gx, int64_t samples,
                            int64_t classes, int64_t ignore_index, double label_smoothing) {
  DeviceGuard guard(device);
  launch_index(samples * classes, CrossEntropyGrad{lsm, target, g, gx, classes, ignore_index,
                                                   static_cast<float>(label_smoothing), per_sample,
                                                   static_cast<float>(divisor)});
}

}  // namespace tmem::cuda
