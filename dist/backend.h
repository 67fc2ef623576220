// The transport under tmem::dist (internal to dist/): dist/mpi.cpp when the
// build found MPI, dist/no_mpi.cpp otherwise. Buffers are contiguous host
// memory; argument checks (dtype, device, agreement between ranks) are done
// by dist/dist.cpp before any of these is called.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "tmem/core/dtype.h"

namespace tmem::dist::backend {

/// Why this build cannot run distributed ("" when it can).
const char* unavailable_reason();
/// Starts the transport (MPI_Init_thread, funneled). Returns rank, world
/// size and the rank among the processes of this machine (from
/// OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID or SLURM_LOCALID, else from an
/// MPI shared-memory split). Throws ValueError when the build has no MPI.
void init(int& rank, int& world_size, int& local_rank);
/// Stops it (MPI_Finalize).
void finalize();
/// Ends every rank of the job with exit code `code` (MPI_Abort).
[[noreturn]] void abort(int code);
void barrier();
/// Root's `bytes` bytes at `data` into every rank's `data`.
void broadcast(void* data, size_t bytes, int root);
/// Element-wise sum over the ranks of `count` values of `dtype`, in place.
void all_reduce_sum(void* data, int64_t count, DType dtype);
/// Element-wise maximum over the ranks of `count` int64 values, in place.
void all_reduce_max(int64_t* data, int count);
/// Every rank's `bytes` bytes of `in`, rank r's at out + r * bytes.
void all_gather(const void* in, void* out, size_t bytes);
/// all_reduce_sum started without waiting (MPI_Iallreduce); returns a request
/// id for test / wait. The buffer must stay untouched until the request is done.
int64_t all_reduce_sum_start(void* data, int64_t count, DType dtype);
/// Whether request `id` is done (advances the transport's progress; a done
/// request is released).
bool test(int64_t id);
/// Waits for request `id` and releases it.
void wait(int64_t id);

}  // namespace tmem::dist::backend
