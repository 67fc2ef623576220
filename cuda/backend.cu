// The CUDA backend's registration: the DeviceBackend (memory, copies, the
// caching allocator) and OpKernels tables of this backend, installed for
// Device::Kind::CUDA while the program starts. Nothing in tmem names a
// symbol of this file, so every program linking tmem_ops is linked with
// -u tmem_cuda_backend_anchor (CMakeLists.txt): that keeps this object, and
// through its tables every kernel, where the linker's archive-member
// selection would drop them; the test "device: the CUDA backend is registered
// exactly when the build has one" checks that the registration ran.
#include "tmem/core/device_backend.h"
#include "tmem/cuda/kernels.h"
#include "tmem/cuda/runtime.h"
#include "tmem/ops/device_kernels.h"

namespace tmem::cuda {

namespace {

OpKernels make_op_kernels() {
  OpKernels k;
  for (OpId op : kDeviceOps) k.implemented[static_cast<size_t>(op)] = true;
#define TMEM_SET_KERNEL(name, result, params) k.name = &name;
  TMEM_OP_KERNELS(TMEM_SET_KERNEL)
#undef TMEM_SET_KERNEL
  return k;
}

const OpKernels kOpKernels = make_op_kernels();

const DeviceBackend kBackend{"cuda",          &device_count,   &allocate,
                             &release,        &copy_from_host, &copy_to_host,
                             &copy_between,   &copy,           &fill,
                             &accumulate,     &synchronize,    &allocator_stats,
                             &allocator_reset_peak, &empty_cache, &kOpKernels};

// Defined after the tables, so it runs after them (one translation unit).
struct Registrar {
  Registrar() { register_device_backend(Device::Kind::CUDA, &kBackend); }
} registrar;

}  // namespace

const DeviceBackend& backend() { return kBackend; }

}  // namespace tmem::cuda

/// The symbol the link option `-u tmem_cuda_backend_anchor` names, so that the
/// linker keeps this object (and the registration above) in every program.
extern "C" void tmem_cuda_backend_anchor() {}
