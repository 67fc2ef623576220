// Op dispatch to kernel tables (docs/DESIGN.md §5). An op's one body asks
// dispatch_kernels(op, t, f) for the table of t's device (the CPU's for its
// dtype, ops/cpu/kernels.h; else the one the device's backend registered,
// ops/device_kernels.h) and calls the kernel it needs. An op without a kernel
// on that device throws the one DeviceError "<op>: the cuda backend has no
// kernel for this op", from here or from check_cpu (core/tensor.h) in ops
// that have only CPU kernels.
#pragma once
#include <array>

#include "tmem/core/strided.h"
#include "tmem/core/tensor.h"
#include "tmem/ops/cpu/kernels.h"
#include "tmem/ops/cpu/simd.h"
#include "tmem/ops/device_kernels.h"

namespace tmem {

/// The kernels of t's device for `op` (t not on the CPU). Throws DeviceError
/// "<op>: the cuda backend has no kernel for this op (...)" when that device's backend does
/// not run `op`, DeviceError when the device is not available, and
/// DtypeError unless t is float32.
const OpKernels& device_kernels(OpId op, const Tensor& t);

/// f(k) with k the kernel table for `op` of t's device: the CPU's table for
/// t's dtype (KernelTable<float> or <double>; DtypeError naming `op` for any
/// other), else device_kernels(op, t). f takes any table:
/// [&]<class T>(const KernelTable<T>& k) { ... }.
template <class F>
decltype(auto) dispatch_kernels(OpId op, const Tensor& t, F&& f) {
  if (!t.device().is_cpu()) return f(static_cast<const KernelTable<float>&>(device_kernels(op, t)));
  return dispatch_floating(t.dtype(), op_name(op).data(),
                           [&]<class T>() -> decltype(auto) { return f(cpu::kernels<T>()); });
}

/// As dispatch_kernels, for kernels outside the op table (the optimizer
/// steps): `what` names the caller in errors, and a device's table must
/// satisfy has(table) (else the not-implemented DeviceError naming `what`).
template <class Has, class F>
decltype(auto) dispatch_kernels(const char* what, const Tensor& t, Has&& has, F&& f) {
  if (!t.device().is_cpu()) {
    const DeviceBackend& b = device_backend(t.device(), what);
    if (!b.ops || !has(*b.ops)) throw_not_implemented(what, t.device());
    check<DtypeError>(t.dtype() == DType::Float32, what, ": ", b.name, " kernels take float32, but got ",
                      dtype_name(t.dtype()));
    return f(static_cast<const KernelTable<float>&>(*b.ops));
  }
  return dispatch_floating(t.dtype(), what, [&]<class T>() -> decltype(auto) { return f(cpu::kernels<T>()); });
}

/// The gate of an op's int64 path (labels, indices, masks: no gradient), a
/// host loop beside the kernel tables, which are floating only: throws
/// DtypeError naming `op` unless t is on the CPU.
void check_int64_on_cpu(const Tensor& t, const char* op);

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
