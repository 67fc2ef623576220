// Kernels first, then launchers (llm.c layout). Shapes: flat [n].
#include "cuda/runtime.h"

#include <cuda_runtime.h>

#include <string>

#include "core/error.h"

#define TMEM_CUDA_CHECK(call)                                                             \
  do {                                                                                    \
    cudaError_t err_ = (call);                                                            \
    if (err_ != cudaSuccess)                                                              \
      throw ::tmem::DeviceError(std::string("CUDA error at ") + __FILE__ + ":" +          \
                                std::to_string(__LINE__) + ": " + cudaGetErrorString(err_)); \
  } while (0)

namespace tmem::cuda {

namespace {

__global__ void add_kernel(const float* a, const float* b, float* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(blockDim.x) * gridDim.x)
    out[i] = a[i] + b[i];
}

}  // namespace

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return n;
}

const char* device_name(int index) {
  static thread_local cudaDeviceProp prop;
  TMEM_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
  return prop.name;
}

void add_f32_roundtrip(const float* a, const float* b, float* out, int64_t n) {
  if (device_count() == 0) throw DeviceError("add_f32_roundtrip: no CUDA device");
  size_t bytes = static_cast<size_t>(n) * sizeof(float);
  float *da = nullptr, *db = nullptr, *dout = nullptr;
  TMEM_CUDA_CHECK(cudaMalloc(&da, bytes));
  TMEM_CUDA_CHECK(cudaMalloc(&db, bytes));
  TMEM_CUDA_CHECK(cudaMalloc(&dout, bytes));
  TMEM_CUDA_CHECK(cudaMemcpy(da, a, bytes, cudaMemcpyHostToDevice));
  TMEM_CUDA_CHECK(cudaMemcpy(db, b, bytes, cudaMemcpyHostToDevice));
  int threads = 256;
  int blocks = static_cast<int>(std::min<int64_t>((n + threads - 1) / threads, 65535));
  add_kernel<<<blocks > 0 ? blocks : 1, threads>>>(da, db, dout, n);
  TMEM_CUDA_CHECK(cudaGetLastError());
  TMEM_CUDA_CHECK(cudaMemcpy(out, dout, bytes, cudaMemcpyDeviceToHost));
  TMEM_CUDA_CHECK(cudaFree(da));
  TMEM_CUDA_CHECK(cudaFree(db));
  TMEM_CUDA_CHECK(cudaFree(dout));
}

}  // namespace tmem::cuda
