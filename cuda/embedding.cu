// Embedding's CUDA kernels (ops/kernel_list.h): the forward gather and the
// backward scatter-add of cuda/embedding.cuh, one thread per element of
// [count, D]; the scatter adds with atomicAdd, so repeated indices sum in no
// fixed order. Indices are range-checked by ops/ before the launch. float32.
#include "tmem/cuda/check.h"
#include "tmem/cuda/embedding.cuh"
#include "tmem/cuda/kernels.h"
#include "tmem/cuda/nn_launch.cuh"

namespace tmem::cuda {

namespace {

// *dst += v, atomically (the add of EmbeddingScatter).
struct AtomicAdd {
  __device__ void operator()(float* dst, float v) const { atomicAdd(dst, v); }
};

}  // namespace

// ---- launchers (the kernels are cuda/nn_launch.cuh's, instantiated here) ----

void embedding_forward(int device, const float* weight, const int64_t* indices, float* out,
                       int64_t count, int64_t dim) {
  DeviceGuard guard(device);
  launch_index(count * dim, EmbeddingGather{weight, indices, out, dim});
}

void embedding_backward(int device, const int64_t* indices, const float* g, float* gweight,
                        int64_t count, int64_t dim) {
  DeviceGuard guard(device);
  launch_index(count * dim, EmbeddingScatter<AtomicAdd>{indices, g, gweight, dim, AtomicAdd{}});
}

}  // namespace tmem::cuda
