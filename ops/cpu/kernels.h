// The CPU backend's op kernels (docs/DESIGN.md §5), as ATen's native/cpu:
// Kernels<T> declares one static member per kernel of ops/kernel_list.h's
// TMEM_OP_KERNELS, with the table's signatures; ops/cpu/<op>_kernel.cpp
// defines a group's members and instantiates them for float and double
// (TMEM_CPU_INSTANTIATE). float64 is the CPU's capability, used by gradcheck.
#pragma once
#include "tmem/ops/device_kernels.h"

namespace tmem::cpu {

/// The CPU kernels for element type Scalar (float or double).
template <class Scalar>
struct Kernels {
  using T = Scalar;
#define TMEM_CPU_KERNEL(name, result, params) static result name params;
  TMEM_OP_KERNELS(TMEM_CPU_KERNEL)
#undef TMEM_CPU_KERNEL
};

/// Expanded over a group of ops/kernel_list.h in the file that defines it:
/// instantiates the group's kernels for float and double.
#define TMEM_CPU_INSTANTIATE(name, result, params) \
  template result Kernels<float>::name params;     \
  template result Kernels<double>::name params;

/// The CPU's kernel table for T (float or double).
template <class T>
const KernelTable<T>& kernels();

}  // namespace tmem::cpu
