// The NCCL transport of tmem::dist (dist/nccl.h): one communicator per
// process, for the one CUDA device the process trains on.
#include "tmem/dist/nccl.h"

#include <string>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "tmem/core/error.h"
#include "tmem/dist/backend.h"
#include "tmem/dist/dist.h"

namespace tmem::dist::nccl {

namespace {

ncclComm_t g_comm = nullptr;
int g_device = -1;

void check_nccl(ncclResult_t r, const char* what) {
  if (r != ncclSuccess)
    throw DeviceError(std::string("dist (NCCL): ") + what + " failed: " + ncclGetErrorString(r));
}

void check_cuda(cudaError_t r, const char* what) {
  if (r != cudaSuccess) throw DeviceError(std::string("dist (NCCL): ") + what + " failed: " + cudaGetErrorString(r));
}

// The communicator for `device`, made on first use: rank 0 creates the
// unique id and MPI broadcasts it; every rank joins with its MPI rank.
ncclComm_t comm(int device, const char* op) {
  if (g_comm) {
    check<DeviceError>(device == g_device, op, ": this process's NCCL communicator is for cuda:", g_device,
                       ", but got a tensor on cuda:", device, " (one device per process)");
    return g_comm;
  }
  ncclUniqueId id{};
  if (rank() == 0) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
  backend::broadcast(&id, sizeof id, 0);
  check_cuda(cudaSetDevice(device), "cudaSetDevice");
  check_nccl(ncclCommInitRank(&g_comm, world_size(), id, rank()), "ncclCommInitRank");
  g_device = device;
  return g_comm;
}

ncclDataType_t nccl_type(DType dtype, const char* op) {
  switch (dtype) {
    case DType::Float32: return ncclFloat32;
    case DType::Float64: return ncclFloat64;
    case DType::Int64: return ncclInt64;
  }
  throw DtypeError(std::string(op) + ": no NCCL type for " + dtype_name(dtype));
}

}  // namespace

const char* unavailable_reason() { return ""; }

void all_reduce_sum(int device, void* data, int64_t count, DType dtype) {
  check_cuda(cudaSetDevice(device), "cudaSetDevice");
  check_nccl(ncclAllReduce(data, data, static_cast<size_t>(count), nccl_type(dtype, "dist::all_reduce"), ncclSum,
                           comm(device, "dist::all_reduce"), cudaStreamLegacy),
             "ncclAllReduce");
}

void broadcast(int device, void* data, size_t bytes, int root) {
  check_cuda(cudaSetDevice(device), "cudaSetDevice");
  check_nccl(ncclBroadcast(data, data, bytes, ncclUint8, root, comm(device, "dist::broadcast"), cudaStreamLegacy),
             "ncclBroadcast");
}

void all_gather(int device, const void* in, void* out, size_t bytes) {
  check_cuda(cudaSetDevice(device), "cudaSetDevice");
  check_nccl(ncclAllGather(in, out, bytes, ncclUint8, comm(device, "dist::all_gather"), cudaStreamLegacy),
             "ncclAllGather");
}

void finalize() {
  if (!g_comm) return;
  cudaSetDevice(g_device);
  cudaStreamSynchronize(cudaStreamLegacy);
  ncclCommDestroy(g_comm);
  g_comm = nullptr;
  g_device = -1;
}

}  // namespace tmem::dist::nccl
