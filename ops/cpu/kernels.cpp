// The CPU kernel tables (ops/cpu/kernels.h): one per element type, filled by
// expanding ops/kernel_list.h's TMEM_OP_KERNELS.
#include "tmem/ops/cpu/kernels.h"

namespace tmem::cpu {

template <class T>
const KernelTable<T>& kernels() {
  static const KernelTable<T> table = [] {
    KernelTable<T> k;
#define TMEM_SET_KERNEL(name, result, params) k.name = &Kernels<T>::name;
    TMEM_OP_KERNELS(TMEM_SET_KERNEL)
#undef TMEM_SET_KERNEL
    return k;
  }();
  return table;
}

template const KernelTable<float>& kernels<float>();
template const KernelTable<double>& kernels<double>();

}  // namespace tmem::cpu
