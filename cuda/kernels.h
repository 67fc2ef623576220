// The CUDA backend's functions behind DeviceBackend (core/device_backend.h)
// and OpKernels (ops/device_kernels.h, the kernels of ops/kernel_list.h);
// cuda/backend.cu puts them in those tables. Internal to cuda/: the rest of the library reaches them only
// through the tables. Each throws DeviceError (file:line) on a CUDA failure.
#pragma once
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "tmem/core/allocator.h"
#include "tmem/core/device_backend.h"
#include "tmem/ops/device_kernels.h"

namespace tmem::cuda {

// ---- cuda/backend.cu ----
/// This backend: its DeviceBackend, whose `ops` are the kernels below (the
/// entries that compose other kernels, cuda/convlstm_cell.h, go through it).
const DeviceBackend& backend();

// ---- cuda/allocator.cu: the caching device allocator ----
/// A block of at least n bytes on `device`: a cached block of n's size class
/// (core/allocator.h allocator_size_class) when one is free, else cudaMalloc;
/// when that fails, the device's cache is emptied and cudaMalloc retried.
/// Throws DeviceError "cuda:<d>: out of memory ..." with the stats.
void* allocate(int device, size_t n);
/// Puts a block from allocate(device, n) back in its size class's free list.
void release(int device, void* p, size_t n) noexcept;
/// Bytes handed out (by size class), their peak, and bytes cached.
AllocatorStats allocator_stats(int device);
/// Sets the peak to the bytes in use.
void allocator_reset_peak(int device);
/// cudaFree of every cached block of `device`.
void empty_cache(int device);

// ---- cuda/memory.cu: copies and fills, as DeviceBackend documents them ----
void copy_from_host(int device, void* dst, const void* src, size_t n);
void copy_to_host(int device, void* dst, const void* src, size_t n);
void copy_between(int dst_device, void* dst, int src_device, const void* src, size_t n);
void copy(int device, const StridedArgs<2>& args, DType dst_type, DType src_type);
void fill(int device, const StridedArgs<1>& args, DType type, double value);
void accumulate(int device, const StridedArgs<2>& args, DType type);
void synchronize(int device);

// ---- the op kernels of ops/kernel_list.h, one per entry (cuda/<op>.cu),
// declared with the table's own signatures ----
#define TMEM_CUDA_KERNEL(name, result, params) std::remove_pointer_t<decltype(OpKernels::name)> name;
TMEM_OP_KERNELS(TMEM_CUDA_KERNEL)
#undef TMEM_CUDA_KERNEL

}  // namespace tmem::cuda
