// tmem::dist: processes that train one model together (PyTorch
// torch.distributed, on MPI). A job is N processes started by an MPI launcher
// (`mpirun -np N prog`, or Slurm's `srun`); each calls init(), which reads its
// rank, the world size and its local rank from the MPI environment, and then
// the collectives below, called by every rank in the same order.
//
// Collectives take CPU tensors (over MPI) or CUDA tensors (over NCCL, when
// the build has it; one device per process). A tensor need not be contiguous (a
// contiguous copy is sent and the result copied back); every rank must pass
// the same dtype and element count, which is checked first (one small extra
// all-reduce per call) so that a mismatch is a ValueError on every rank, not
// a hang. Results are written in place (no autograd, the version is bumped).
//
// Failure: an exception on one rank while the others wait in a collective
// would hang the job. abort() (and run() and Session, which call it) prints
// the failing rank's message and ends every rank with MPI_Abort; after init()
// an uncaught exception does the same (std::terminate handler).
//
// A build without MPI (CMake found none) still has this API: rank() is 0,
// world_size() 1, and init() throws ValueError with unavailable_reason().
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "tmem/core/tensor.h"

namespace tmem::dist {

/// Why this build cannot run distributed ("" when it can: built with MPI).
std::string unavailable_reason();

/// Whether this process was started as one of several ranks by a launcher:
/// OMPI_COMM_WORLD_SIZE (Open MPI's mpirun), PMI_SIZE (MPICH's mpiexec) or
/// SLURM_STEP_NUM_TASKS (srun) greater than 1. Needs no init().
bool launched_distributed();

/// Joins the job: starts MPI and reads rank, world size and local rank.
/// Calling it again is a no-op. Throws ValueError when the build has no MPI
/// (with unavailable_reason()) or after finalize() (MPI cannot restart).
void init();
/// Whether init() ran and finalize() did not.
bool is_initialized();
/// This process's rank in [0, world_size()); 0 before init().
int rank();
/// The number of ranks; 1 before init().
int world_size();
/// The rank among the job's processes on this machine (for choosing a GPU or
/// a CPU socket); 0 before init().
int local_rank();
/// Leaves the job (MPI_Finalize, collective: every rank calls it). Calling it
/// again, or without init(), is a no-op.
void finalize();

/// Blocks until every rank has called it. Throws ValueError before init().
void barrier();

/// Copies root's t into t on every rank (any dtype). Throws ValueError before
/// init(), for root outside [0, world_size()) or when the ranks' roots,
/// dtypes or element counts differ; DeviceError for a device tensor without
/// the NCCL transport (dist/nccl.h).
void broadcast(const Tensor& t, int root = 0);

/// How all_reduce combines the ranks' values.
enum class ReduceOp { Sum, Mean };

/// t = the element-wise sum (Mean: the sum divided by world_size()) of every
/// rank's t. float32, float64, and int64 with Sum. Every rank gets the same
/// bits. Throws ValueError before init() or when the ranks' dtypes or counts
/// differ, DtypeError for Mean of an int64 tensor, DeviceError for a device
/// tensor without the NCCL transport.
void all_reduce(const Tensor& t, ReduceOp op = ReduceOp::Sum);

/// Every rank's t stacked along a new first axis: [N, ...t.shape()], rank r's
/// at index r (any dtype). Throws as broadcast.
Tensor all_gather(const Tensor& t);

/// A collective started without waiting (PyTorch's Work). Move-only; a Work
/// destroyed before wait() waits for it.
class Work {
 public:
  Work() = default;
  Work(Work&& o) noexcept;
  Work& operator=(Work&& o) noexcept;
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;
  ~Work();
  /// Whether it is finished (also advances MPI's progress, which a
  /// non-blocking collective needs while the caller computes).
  bool test();
  /// Waits for it and applies the Mean division; the tensor then holds the result.
  void wait();
  /// Whether wait() is still due.
  bool pending() const { return id_ != 0; }

 private:
  friend Work all_reduce_async(const Tensor& t, ReduceOp op);
  // The id of a device collective: enqueued on the device's stream, so it
  // is ordered before every later kernel and needs no host wait.
  static constexpr int64_t kEnqueued = -1;
  int64_t id_ = 0;
  Tensor t_;
  ReduceOp op_ = ReduceOp::Sum;
};

/// all_reduce started without waiting: t (a contiguous float32 or float64
/// tensor) holds the result after wait(), and must not be read or written
/// before. Ranks must start their async collectives in the same order. No
/// agreement check (it would wait): the caller guarantees equal dtypes and
/// counts. Throws ValueError before init() or for a non-contiguous t,
/// DtypeError, DeviceError as all_reduce.
Work all_reduce_async(const Tensor& t, ReduceOp op = ReduceOp::Sum);

/// Prints "tmem: rank R of N failed: <message>" to stderr and ends every rank
/// of the job with exit code 1 (MPI_Abort), or this process alone without
/// init(). Never returns.
[[noreturn]] void abort(const std::string& message);

/// Runs body and returns its exit code; an exception escaping body is passed
/// to abort() with its what(), so one rank's error ends every rank.
int run(const std::function<int()>& body);

/// init() for its lifetime: the destructor calls finalize(), or, when it runs
/// because an exception is unwinding the stack, abort() (a finalize would
/// wait for ranks that may never arrive).
class Session {
 public:
  Session();
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

 private:
  int uncaught_;
};

}  // namespace tmem::dist
