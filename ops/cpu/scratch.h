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

/// `n` zero-initialised values of T from the CPU allocator (so its check of
/// the system's memory applies, as it does not to a std::vector), for a
/// kernel's own buffers. Throws tmem::Error naming `op` and the size when the
/// size overflows, and OutOfMemoryError naming `op` when the memory cannot be
/// had.
template <class T>
class Scratch {
 public:
  Scratch(const char* op, int64_t n) {
    check<Error>(n >= 0 && !__builtin_mul_overflow(static_cast<size_t>(n), sizeof(T), &bytes_), op, ": scratch of ",
                 n, " values overflows a size");
    try {
      p_ = static_cast<T*>(cpu_allocate(bytes_));
    } catch (const OutOfMemoryError& e) {
      throw OutOfMemoryError(std::string(op) + ": scratch memory: " + e.what());
    }
    std::memset(static_cast<void*>(p_), 0, bytes_);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() { cpu_release(p_, bytes_); }
  T* data() const { return p_; }
  T& operator[](int64_t i) const { return p_[i]; }

 private:
  size_t bytes_ = 0;
  T* p_ = nullptr;
};

/// `n` values of T for each thread of the next region (at most
/// omp_get_max_threads() of them), zero-initialised, from the CPU allocator;
/// each thread's slot starts on a 64-byte boundary. Throws as Scratch does.
template <class T>
class ThreadScratch {
 public:
  ThreadScratch(const char* op, int64_t n) : n_(per_thread(op, n)), buf_(op, n_ * omp_get_max_threads()) {}
  /// The calling thread's n values (call inside the region).
  T* slot() { return buf_.data() + n_ * omp_get_thread_num(); }

 private:
  // n rounded up to whole 64-byte lines; throws when the threads' total
  // overflows.
  static int64_t per_thread(const char* op, int64_t n) {
    constexpr int64_t per_line = 64 / sizeof(T);
    const int64_t threads = omp_get_max_threads();
    int64_t up = 0, total = 0;
    check<Error>(n >= 0 && !__builtin_add_overflow(n, per_line - 1, &up) &&
                     !__builtin_mul_overflow(up / per_line * per_line, threads, &total),
                 op, ": scratch of ", n, " values x ", threads, " threads overflows a size");
    return up / per_line * per_line;
  }
  int64_t n_;
  Scratch<T> buf_;
};

}  // namespace tmem::cpu
