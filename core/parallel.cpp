#include "tmem/core/parallel.h"

#include <omp.h>

#include "tmem/core/error.h"

namespace tmem {

void set_num_threads(int n) {
  check<ValueError>(n >= 1, "set_num_threads: expected n >= 1, but got ", n);
  omp_set_num_threads(n);
}

int get_num_threads() { return omp_get_max_threads(); }

}  // namespace tmem
