// The CUDA backend's kernels built for the host: an OpKernels table whose
// entries run the kernels' own per-thread arithmetic (the TMEM_HD functions
// of cuda/*.cuh, cuda/hd.h) in plain loops over the same index space the
// CUDA launch covers. Installed with the stand-in backend (fake_device.h),
// it lets CI compare every such kernel with the CPU op, forward and
// backward, without a GPU (tests/test_device_kernels.cpp). One file per op
// family (tests/host_kernels_<family>.cpp) defines its entries.
#pragma once
#include <type_traits>

#include "tmem/ops/device_kernels.h"

namespace tmem::test {

/// The host-built kernel table: every kernel of ops/kernel_list.h (the
/// stand-in GEMM and row sum of fake_device.h among them), with
/// `implemented` set for the ops whose kernels are all there.
const OpKernels& host_op_kernels();

/// The host builds, one per kernel of ops/kernel_list.h, with the table's
/// signatures (tests/host_kernels_<family>.cpp).
namespace host {
#define TMEM_HOST_KERNEL(name, result, params) std::remove_pointer_t<decltype(OpKernels::name)> name;
TMEM_OP_KERNELS(TMEM_HOST_KERNEL)
#undef TMEM_HOST_KERNEL
}  // namespace host

}  // namespace tmem::test
