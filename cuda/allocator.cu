// The caching device allocator. Training loops allocate the same sizes every
// step; cudaMalloc and cudaFree synchronise the device and cost far more than
// a kernel, so freed blocks wait in per-size-class free lists (the CPU
// allocator's classes, core/allocator.h) for the next request of that class,
// and cudaMalloc runs only on a miss. All work runs on the legacy default
// stream, so a block handed out again is only touched by work queued after
// everything that used it before. Blocks go back to the driver only through
// empty_cache, or when a cudaMalloc fails and is retried. Thread-safe.
#include <algorithm>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "tmem/core/error.h"
#include "tmem/cuda/check.h"
#include "tmem/cuda/kernels.h"

namespace tmem::cuda {

namespace {

constexpr int kMaxDevices = 64;

struct Cache {
  std::mutex mu;
  std::unordered_map<size_t, std::vector<void*>> free;
  AllocatorStats stats;
};

Cache& cache(int device) {
  check<DeviceError>(device >= 0 && device < kMaxDevices, "cuda allocator: device index ", device,
                     " is out of range");
  // Never destroyed: storages may be released after static destructors ran.
  static Cache* caches = new Cache[kMaxDevices];
  return caches[device];
}

void empty_locked(int device, Cache& c) {
  DeviceGuard guard(device);
  for (auto& [cls, list] : c.free)
    for (void* p : list) TMEM_CUDA_CHECK(cudaFree(p));
  c.free.clear();
  c.stats.cached = 0;
}

}  // namespace

void* allocate(int device, size_t n) {
  const size_t cls = allocator_size_class(n);
  Cache& c = cache(device);
  std::lock_guard<std::mutex> lock(c.mu);
  void* p = nullptr;
  auto it = c.free.find(cls);
  if (it != c.free.end() && !it->second.empty()) {
    p = it->second.back();
    it->second.pop_back();
    c.stats.cached -= cls;
  } else {
    DeviceGuard guard(device);
    cudaError_t err = cudaMalloc(&p, cls);
    if (err == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      empty_locked(device, c);
      err = cudaMalloc(&p, cls);
    }
    if (err == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      throw OutOfMemoryError(detail::cat("cuda:", device, ": out of memory allocating ", n,
                                    " bytes (", c.stats.in_use, " bytes in use by tensors)"));
    }
    TMEM_CUDA_CHECK(err);
  }
  c.stats.in_use += cls;
  c.stats.peak_in_use = std::max(c.stats.peak_in_use, c.stats.in_use);
  return p;
}

void release(int device, void* p, size_t n) noexcept {
  if (!p) return;
  const size_t cls = allocator_size_class(n);
  Cache& c = cache(device);
  std::lock_guard<std::mutex> lock(c.mu);
  c.stats.in_use -= cls;
  c.free[cls].push_back(p);
  c.stats.cached += cls;
}

AllocatorStats allocator_stats(int device) {
  Cache& c = cache(device);
  std::lock_guard<std::mutex> lock(c.mu);
  return c.stats;
}

void allocator_reset_peak(int device) {
  Cache& c = cache(device);
  std::lock_guard<std::mutex> lock(c.mu);
  c.stats.peak_in_use = c.stats.in_use;
}

void empty_cache(int device) {
  Cache& c = cache(device);
  std::lock_guard<std::mutex> lock(c.mu);
  empty_locked(device, c);
}

}  // namespace tmem::cuda
