// Per-thread scratch memory for an OpenMP region, allocated before the region
// starts: an exception thrown inside a region (a failed allocation) cannot
// leave it and would end the program through std::terminate, while one thrown
// here is an ordinary tmem error the caller sees.
#pragma once
#include <omp.h>

#include <cstring>
#include <string>

#include "tmem/core/allocator.h"
#include "tmem/core/error.h"

namespace tmem::cpu {

/// `n` values of T for each thread of the next region (at most
/// omp_get_max_threads() of them), zero-initialised, from the CPU allocator;
/// each thread's slot starts on a 64-byte boundary.
/// Throws tmem::Error naming `op` and the size when the size overflows, and
/// OutOfMemoryError naming `op` when the memory cannot be had.
template <class T>
class ThreadScratch {
 public:
  ThreadScratch(const char* op, int64_t n) {
    const auto threads = static_cast<size_t>(omp_get_max_threads());
    constexpr int64_t per_line = 64 / sizeof(T);
    check<Error>(n >= 0 && !__builtin_add_overflow(n, per_line - 1, &n_) &&
                     !__builtin_mul_overflow(static_cast<size_t>(n_ / per_line * per_line), threads * sizeof(T), &bytes_),
                 op, ": scratch of ", n, " values x ", threads, " threads overflows a size");
    n_ = n_ / per_line * per_line;
    try {
      p_ = static_cast<T*>(cpu_allocate(bytes_));
    } catch (const OutOfMemoryError& e) {
      throw OutOfMemoryError(std::string(op) + ": scratch memory: " + e.what());
    }
    std::memset(p_, 0, bytes_);
  }
  ThreadScratch(const ThreadScratch&) = delete;
  ThreadScratch& operator=(const ThreadScratch&) = delete;
  ~ThreadScratch() { cpu_release(p_, bytes_); }
  /// The calling thread's n values (call inside the region).
  T* slot() { return p_ + n_ * omp_get_thread_num(); }

 private:
  int64_t n_ = 0;
  size_t bytes_ = 0;
  T* p_ = nullptr;
};

}  // namespace tmem::cpu
