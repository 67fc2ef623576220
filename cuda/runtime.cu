// Runtime queries and the error plumbing of cuda/check.h.
#include "tmem/cuda/runtime.h"

#include <cuda_runtime.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "tmem/core/error.h"
#include "tmem/cuda/check.h"

namespace tmem::cuda {

void throw_cuda_error(const char* what, const char* file, int line) {
  throw DeviceError(std::string("CUDA error at ") + file + ":" + std::to_string(line) + ": " + what);
}

bool sync_after_launch() {
  static const bool on = [] {
    const char* env = std::getenv("TMEM_CUDA_SYNC");
    return env != nullptr && std::strcmp(env, "1") == 0;
  }();
  return on;
}

DeviceGuard::DeviceGuard(int device) {
  TMEM_CUDA_CHECK(cudaGetDevice(&prev_));
  if (prev_ != device) TMEM_CUDA_CHECK(cudaSetDevice(device));
}

DeviceGuard::~DeviceGuard() {
  int now = prev_;
  if (cudaGetDevice(&now) == cudaSuccess && now != prev_) cudaSetDevice(prev_);
}

int device_count() {
  static const int n = [] {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
      cudaGetLastError();  // clear the "no device" error so later calls do not see it
      return 0;
    }
    return count;
  }();
  return n;
}

const char* device_name(int index) {
  static thread_local cudaDeviceProp prop;
  TMEM_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
  return prop.name;
}

double memory_bandwidth_gbs(int index) {
  int clock_khz = 0, bus_bits = 0;
  TMEM_CUDA_CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, index));
  TMEM_CUDA_CHECK(cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, index));
  return 2.0 * clock_khz * 1e3 * (bus_bits / 8.0) * 1e-9;
}

}  // namespace tmem::cuda
