// The CPU caching allocator. Training loops allocate the same sizes every
// step; handing freed blocks back to the next request of the same size class
// avoids the mmap/munmap and page faults that large malloc/free pairs cost.
// Size classes: powers of two up to 1 MiB, then multiples of 1 MiB. Blocks
// are 64-byte aligned. Thread-safe.
#pragma once
#include <cstddef>

namespace tmem {

struct AllocatorStats {
  size_t in_use = 0;       // bytes handed out and not yet released
  size_t peak_in_use = 0;  // maximum of in_use since start (or reset_peak)
  size_t cached = 0;       // bytes held in free lists
};

/// The size class of an n-byte request: powers of two from 64 bytes up to
/// 1 MiB, then multiples of 1 MiB (shared by the device allocators).
size_t allocator_size_class(size_t n);

/// A block of at least n bytes (64-byte aligned). Throws OutOfMemoryError
/// naming the size and the bytes in use when the system has no memory for it
/// (after emptying the cache): malloc fails, or the system's available memory
/// (MemAvailable + SwapFree, within the cgroup's limit), read before each
/// request of 64 MiB or more and after every 64 MiB taken, is short of the
/// request and a 256 MiB reserve; and ValueError when TMEM_CPU_CACHE_MB is
/// set to other than a whole number.
void* cpu_allocate(size_t n);
/// Returns a block from cpu_allocate(n) (same n). It is kept for reuse while
/// the cached bytes stay within the limit: the peak of bytes in use (at
/// least 1 GiB), or TMEM_CPU_CACHE_MB when set; beyond it, the block goes
/// back to the system.
void cpu_release(void* p, size_t n);
AllocatorStats cpu_allocator_stats();
void cpu_allocator_reset_peak();
/// Frees every cached block.
void cpu_empty_cache();

}  // namespace tmem
