// Intra-op thread count (libtorch at::set_num_threads / get_num_threads). The
// CPU kernels parallelise with OpenMP, so these wrap its thread count.
#pragma once

namespace tmem {

/// Sets the number of threads the CPU kernels use from now on (OpenMP
/// omp_set_num_threads; it applies to the calling thread and to threads it
/// starts afterwards). Throws ValueError for n < 1.
void set_num_threads(int n);
/// The number of threads the next parallel CPU kernel will use
/// (omp_get_max_threads).
int get_num_threads();

}  // namespace tmem
