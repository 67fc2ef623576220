// Error checks of the CUDA backend (llm.c habit): every CUDA runtime call goes
// through TMEM_CUDA_CHECK and every cuBLAS call through TMEM_CUBLAS_CHECK
// (cuda/linalg.cu); every kernel launch is followed by
// TMEM_CUDA_CHECK_LAUNCH(). A failure throws tmem::DeviceError with the
// file:line of the call. A fault inside a kernel surfaces at a later call;
// with the environment variable TMEM_CUDA_SYNC=1 every launch is followed by
// a synchronisation, so the error names the launch that failed.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace tmem::cuda {

/// Throws DeviceError "CUDA error at <file>:<line>: <what>".
[[noreturn]] void throw_cuda_error(const char* what, const char* file, int line);
/// Whether TMEM_CUDA_SYNC=1 asks for a synchronisation after every launch.
bool sync_after_launch();

/// Makes `device` the current CUDA device for its lifetime and then restores
/// the previous one. Throws DeviceError.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int prev_ = 0;
};

/// Threads per block of the elementwise and copy kernels.
inline constexpr int kThreads = 256;
/// Blocks for a grid-stride loop over n > 0 elements (kernels loop, so any n
/// is covered, not only multiples of the block size).
inline unsigned blocks_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < (int64_t{1} << 20) ? b : (int64_t{1} << 20));
}

}  // namespace tmem::cuda

#define TMEM_CUDA_CHECK(call)                                                        \
  do {                                                                               \
    const cudaError_t tmem_err_ = (call);                                            \
    if (tmem_err_ != cudaSuccess)                                                    \
      ::tmem::cuda::throw_cuda_error(cudaGetErrorString(tmem_err_), __FILE__, __LINE__); \
  } while (0)

#define TMEM_CUDA_CHECK_LAUNCH()                                                     \
  do {                                                                               \
    TMEM_CUDA_CHECK(cudaGetLastError());                                             \
    if (::tmem::cuda::sync_after_launch()) TMEM_CUDA_CHECK(cudaDeviceSynchronize()); \
  } while (0)
