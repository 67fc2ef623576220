// The device backend hook (docs/DESIGN.md §1, §5). core reaches device memory, and ops/
// reaches device kernels, only through the DeviceBackend that a backend
// library (cuda/) registers for its Device::Kind while the program starts;
// core and ops/ name no CUDA symbol, so dependencies keep pointing one way
// (core <- ops <- nn, cuda/ a backend of ops/). Without a registered backend,
// or without a device, every use of a device tensor throws DeviceError naming
// the op. This header is the ABI between the two sides: plain structs and
// function pointers in C++17, so that nvcc (cuda/ is C++17) includes it too.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "tmem/core/allocator.h"
#include "tmem/core/dtype.h"

namespace tmem {

struct OpKernels;  // a device's op kernels, defined by ops/device_kernels.h

/// Most dims a device kernel takes, after merging dims laid out alike.
inline constexpr int kMaxDims = 8;

/// N operands of one shape as a kernel sees them (core/strided.h
/// strided_args builds it): the shape with dims merged, and per operand a
/// pointer to its element [0,...,0] and its strides in elements (0 along
/// broadcast dims). Operand 0 is the one written.
template <size_t N>
struct StridedArgs {
  int ndim = 0;
  int64_t numel = 0;
  int64_t shape[kMaxDims] = {};
  void* data[N] = {};
  int64_t strides[N][kMaxDims] = {};
};

/// What core needs from a device kind. Every function takes the device
/// index, runs on the device's work queue in order, and throws DeviceError
/// (with the file:line of the failing call) except `release`.
struct DeviceBackend {
  const char* name;  // "cuda"
  /// Number of usable devices (0 when there is no driver or no device).
  int (*device_count)();
  /// At least nbytes of device memory. Throws DeviceError when out of memory.
  void* (*allocate)(int device, size_t nbytes);
  /// Returns a block from allocate(device, nbytes) (same nbytes). Never throws.
  void (*release)(int device, void* p, size_t nbytes) noexcept;
  /// nbytes from host memory to device memory; returns when src may be reused.
  void (*copy_from_host)(int device, void* dst, const void* src, size_t nbytes);
  /// nbytes from device memory to host memory; returns when dst holds them.
  void (*copy_to_host)(int device, void* dst, const void* src, size_t nbytes);
  /// nbytes between two devices of this kind (or within one).
  void (*copy_between)(int dst_device, void* dst, int src_device, const void* src, size_t nbytes);
  /// args.data[0] = args.data[1] element by element, converting src_type to
  /// dst_type (any pair of dtypes).
  void (*copy)(int device, const StridedArgs<2>& args, DType dst_type, DType src_type);
  /// Every element of args.data[0] = value.
  void (*fill)(int device, const StridedArgs<1>& args, DType type, double value);
  /// args.data[0] += args.data[1] (a floating dtype; the gradient sum of
  /// accumulate_grad).
  void (*accumulate)(int device, const StridedArgs<2>& args, DType type);
  /// Waits until the work queued on the device has finished.
  void (*synchronize)(int device);
  /// Bytes in use, peak and cached of the device's caching allocator.
  AllocatorStats (*allocator_stats)(int device);
  /// Sets the device's peak to its bytes in use.
  void (*allocator_reset_peak)(int device);
  /// Returns every cached block of the device's allocator to the driver.
  void (*empty_cache)(int device);
  /// The op kernels ops/ dispatches to (null: no op runs on this kind).
  const OpKernels* ops;
};

/// Installs `backend` for devices of `kind` and returns the one it replaces
/// (null if none). A backend library calls it while the program starts;
/// tests may install a stand-in and restore the previous one. Storages keep
/// the backend that allocated them. `kind` must not be the CPU.
const DeviceBackend* register_device_backend(Device::Kind kind, const DeviceBackend* backend);
/// The backend installed for `kind`, or null.
const DeviceBackend* registered_device_backend(Device::Kind kind);
/// The backend of device d (not the CPU). Throws DeviceError naming `op` when
/// this build has no backend for d's kind or d.index is not a device of this
/// machine ("op: cuda:0 is not available: no CUDA device was found").
const DeviceBackend& device_backend(Device d, const char* op);
/// Number of usable devices of `kind` (the CPU: 1; 0 without a backend).
int device_count(Device::Kind kind);
/// Throws DeviceError "<op>: the <kind> backend has no kernel for this op (got a tensor on
/// <device>)": the one message of every op that has no kernel for d.
[[noreturn]] void throw_not_implemented(const char* op, Device d);

/// The device named by `name`: "cpu" (or "cpu:0"), "cuda" (device 0) or
/// "cuda:<index>" (PyTorch's torch.device strings). Throws ValueError naming the string for
/// anything else; whether the device exists is checked where it is used.
Device parse_device(const std::string& name);

/// Bytes in use, peak and cached of d's caching allocator (the CPU's for the
/// CPU). Throws DeviceError when d is not available.
AllocatorStats allocator_stats(Device d);
/// Sets d's peak to its current bytes in use.
void allocator_reset_peak(Device d);
/// Frees every block cached by d's allocator.
void empty_cache(Device d);
/// Waits until the work queued on d has finished (a no-op for the CPU).
void synchronize(Device d);

}  // namespace tmem
