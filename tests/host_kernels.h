// The CUDA backend's kernels built for the host: an OpKernels table whose
// entries run the kernels' own per-thread arithmetic (the TMEM_HD functions
// of cuda/*.cuh, cuda/hd.h) in plain loops over the same index space the
// CUDA launch covers. Installed with the stand-in backend (fake_device.h),
// it lets CI compare every such kernel with the CPU op, forward and
// backward, without a GPU (tests/test_device_kernels.cpp). One file per op
// family (tests/host_kernels_<family>.cpp) adds its entries.
#pragma once
#include "tmem/ops/device_kernels.h"

namespace tmem::test {

/// The host-built kernel table: the stand-in GEMM, row-sum and mul_scalar
/// kernels of fake_device.h, plus every family's host kernels; `implemented`
/// is set for the ops whose kernels are all there.
const OpKernels& host_op_kernels();

// ---- per-family entries (tests/host_kernels_<family>.cpp) ----
// Each sets its kernels in k and marks its ops implemented.
void add_elementwise_host_kernels(OpKernels& k);
void add_reduction_shape_host_kernels(OpKernels& k);
void add_nn_host_kernels(OpKernels& k);
void add_spatial_host_kernels(OpKernels& k);
void add_optim_host_kernels(OpKernels& k);
void add_scan_host_kernels(OpKernels& k);
void add_attention_host_kernels(OpKernels& k);

}  // namespace tmem::test
