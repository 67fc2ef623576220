#include "tmem/ops/dispatch.h"

#include "tmem/core/device_backend.h"

namespace tmem {

const OpKernels& device_kernels(OpId op, const Tensor& t) {
  const char* name = op_name(op).data();
  const Device d = t.device();
  const DeviceBackend& b = device_backend(d, name);
  if (!b.ops || !b.ops->implemented[static_cast<size_t>(op)]) throw_not_implemented(name, d);
  check<DtypeError>(t.dtype() == DType::Float32, name, ": ", b.name,
                    " kernels take float32, but got ", dtype_name(t.dtype()));
  return *b.ops;
}

void check_int64_on_cpu(const Tensor& t, const char* op) {
  check<DtypeError>(t.device().is_cpu(), op, ": int64 data runs on the CPU only, but got an int64 tensor on ",
                    t.device().str(), "; cast it to float32 (to_dtype) or move it to the CPU");
}

bool device_implements(Device::Kind kind, OpId op) {
  if (kind == Device::Kind::CPU) return true;
  const DeviceBackend* b = registered_device_backend(kind);
  return b && b->ops && b->ops->implemented[static_cast<size_t>(op)];
}

}  // namespace tmem
