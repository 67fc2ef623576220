// The device transport of a build without NCCL (dist/nccl.h): every
// collective on a device tensor is refused with the reason.
#include "tmem/dist/nccl.h"

#include <string>

#include "tmem/core/error.h"

namespace tmem::dist::nccl {

namespace {
[[noreturn]] void unavailable(const char* op) {
  throw DeviceError(std::string(op) + ": collectives on device tensors need the NCCL transport, which this build "
                    "does not have: " + TMEM_NO_NCCL_REASON);
}
}  // namespace

const char* unavailable_reason() { return TMEM_NO_NCCL_REASON; }
void all_reduce_sum(int, void*, int64_t, DType) { unavailable("dist::all_reduce"); }
void broadcast(int, void*, size_t, int) { unavailable("dist::broadcast"); }
void all_gather(int, const void*, void*, size_t) { unavailable("dist::all_gather"); }
void finalize() {}

}  // namespace tmem::dist::nccl
