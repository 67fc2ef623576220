#include "tmem/core/parallel.h"

#include <omp.h>
#if defined(__x86_64__) || defined(_M_X64)
#include <xmmintrin.h>
#endif

#include "tmem/core/error.h"

namespace tmem {

void set_num_threads(int n) {
  check<ValueError>(n >= 1 && n <= kMaxThreads, "set_num_threads: expected n in [1, ", kMaxThreads, "], but got ", n);
  omp_set_num_threads(n);
}

int get_num_threads() { return omp_get_max_threads(); }

bool set_flush_denormal(bool on, bool pool) {
#if defined(__x86_64__) || defined(_M_X64)
  constexpr unsigned kFtzDaz = 0x8040;  // MXCSR bits 15 (flush to zero) and 6 (denormals are zero)
  auto apply = [on] { _mm_setcsr(on ? (_mm_getcsr() | kFtzDaz) : (_mm_getcsr() & ~kFtzDaz)); };
  apply();
  if (pool) {
#pragma omp parallel
    apply();
  }
  return true;
#else
  (void)on;
  (void)pool;
  return false;
#endif
}

}  // namespace tmem
