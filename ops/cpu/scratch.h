// Per-thread scratch memory for an OpenMP region, allocated before the region
// starts: an exception thrown inside a region (a failed allocation) cannot
// leave it and would end the program through std::terminate, while one thrown
// here is an ordinary tmem error the caller sees.
#pragma once
#include <omp.h>

#include <new>
#include <string>
#include <vector>

#include "core/error.h"

namespace tmem::cpu {

/// `n` values of T for each thread of the next region (at most
/// omp_get_max_threads() of them), zero-initialised. Throws tmem::Error
/// naming `op` and the size when the memory cannot be had.
template <class T>
class ThreadScratch {
 public:
  ThreadScratch(const char* op, int64_t n) : n_(n) {
    const auto threads = static_cast<size_t>(omp_get_max_threads());
    try {
      buf_.resize(static_cast<size_t>(n) * threads);
    } catch (const std::bad_alloc&) {
      throw Error(std::string(op) + ": cannot allocate " + std::to_string(n) + " x " + std::to_string(threads) +
                  " values of scratch memory");
    } catch (const std::length_error&) {
      throw Error(std::string(op) + ": cannot allocate " + std::to_string(n) + " x " + std::to_string(threads) +
                  " values of scratch memory");
    }
  }
  /// The calling thread's n values (call inside the region).
  T* slot() { return buf_.data() + n_ * omp_get_thread_num(); }

 private:
  int64_t n_;
  std::vector<T> buf_;
};

}  // namespace tmem::cpu
