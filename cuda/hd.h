// TMEM_HD marks a CUDA kernel's per-thread arithmetic: a function in a
// cuda/*.cuh header that nvcc compiles for the device (called by the
// kernel) and g++ compiles as plain C++17 for the host. tests/host_kernels
// runs those same functions over the kernels' index space on the CPU, so CI
// checks every kernel's arithmetic against the CPU ops without a GPU; only
// the launch itself (grid, shared memory, atomics) needs one. Headers that
// use it include no CUDA header and use std:: math (std::exp, std::fma, ...),
// which nvcc maps to the device functions.
#pragma once

#if defined(__CUDACC__)
#define TMEM_HD __host__ __device__ inline
#else
#define TMEM_HD inline
#endif
