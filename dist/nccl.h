// The device transport under tmem::dist (internal to dist/): dist/nccl.cpp
// when the build has the CUDA backend, MPI and NCCL, dist/no_nccl.cpp
// otherwise. Buffers are contiguous memory of one CUDA device per process.
// Every call is enqueued on the legacy default stream, where the CUDA backend
// launches its kernels, so it runs after the kernels that wrote the buffer
// and before those that read it, without the host waiting. The communicator
// is made on the first call (rank 0's ncclUniqueId broadcast over MPI, as
// llm.c does); every rank must make the same calls in the same order.
#pragma once
#include <cstddef>
#include <cstdint>

#include "tmem/core/dtype.h"

namespace tmem::dist::nccl {

/// Why this build has no NCCL transport ("" when it has one).
const char* unavailable_reason();
/// Element-wise sum over the ranks of `count` float32 or float64 values on
/// CUDA device `device`, in place. Throws DeviceError naming the NCCL error,
/// or when a process uses a second device.
void all_reduce_sum(int device, void* data, int64_t count, DType dtype);
/// Root's `bytes` bytes at `data` into every rank's `data`.
void broadcast(int device, void* data, size_t bytes, int root);
/// Every rank's `bytes` bytes of `in`, rank r's at out + r * bytes.
void all_gather(int device, const void* in, void* out, size_t bytes);
/// Destroys the communicator, if one was made (before MPI_Finalize).
void finalize();

}  // namespace tmem::dist::nccl
