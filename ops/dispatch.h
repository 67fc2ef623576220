// Op dispatch to device kernels. An op runs its CPU kernel for CPU tensors;
// for a tensor on another device it asks device_kernels(op, t) for the
// kernels that device's backend registered (ops/device_kernels.h) and calls
// the one it needs. An op without a kernel on that device throws the one
// DeviceError "<op>: the cuda backend has no kernel for this op", from here or from
// check_cpu (core/tensor.h) in ops that have only CPU kernels.
#pragma once
#include <array>

#include "tmem/core/strided.h"
#include "tmem/core/tensor.h"
#include "tmem/ops/cpu/simd.h"
#include "tmem/ops/device_kernels.h"

namespace tmem {

/// The kernels of t's device for `op` (t not on the CPU). Throws DeviceError
/// "<op>: the cuda backend has no kernel for this op (...)" when that device's backend does
/// not run `op`, DeviceError when the device is not available, and
/// DtypeError unless t is float32.
const OpKernels& device_kernels(OpId op, const Tensor& t);

/// Whether `op` runs (forward and backward) on devices of `kind` in this
/// build: always for the CPU, else when the registered backend says so.
bool device_implements(Device::Kind kind, OpId op);

/// Launch arguments of an elementwise kernel: `out` (written) and `ins`
/// broadcast to out's shape, in that order. Throws ShapeError naming `op`
/// when too many dims remain after merging.
template <size_t N>
StridedArgs<N> elementwise_args(const Tensor& out, const std::array<Tensor, N - 1>& ins,
                                const char* op) {
  std::array<Shape, N> strides;
  std::array<void*, N> data;
  strides[0] = out.strides();
  data[0] = out.raw_data();
  for (size_t j = 0; j + 1 < N; ++j) {
    strides[j + 1] = cpu::broadcast_strides(ins[j], out.shape());
    data[j + 1] = ins[j].raw_data();
  }
  return strided_args<N>(out.shape(), strides, data, op);
}

}  // namespace tmem
