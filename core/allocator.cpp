#include "tmem/core/allocator.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tmem/core/error.h"

namespace tmem {

namespace {

constexpr size_t kAlign = 64;
constexpr size_t kMiB = size_t{1} << 20;

// TMEM_CPU_CACHE_MB in bytes, read once; nullopt when unset. Throws
// ValueError naming the variable when it is not a whole number of MiB.
std::optional<size_t> env_cache_limit() {
  static const std::optional<size_t> set = []() -> std::optional<size_t> {
    const char* env = std::getenv("TMEM_CPU_CACHE_MB");
    if (!env) return std::nullopt;
    const std::string_view text(env);
    size_t mb = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), mb);
    check<ValueError>(ec == std::errc() && end == text.data() + text.size() && mb <= (SIZE_MAX >> 20),
                      "TMEM_CPU_CACHE_MB: expected a whole number of MiB, but got \"", text, "\"");
    return mb * kMiB;
  }();
  return set;
}

// The most bytes the free lists hold with in-use peak `peak`: TMEM_CPU_CACHE_MB
// when set, else the peak itself (at least 1 GiB), so every block a training
// step needs at once comes back the next step. With a fixed 1 GiB, an 8^3
// Tensor Memory step (3.7 GB at once) sent its blocks back to malloc, and
// its first steps page-faulted 1.9M times instead of 0.95M (bench/RESULTS.md).
size_t cache_limit(size_t peak) {
  const std::optional<size_t> set = env_cache_limit();
  return set ? *set : std::max(size_t{1024} * kMiB, peak);
}

struct Cache {
  std::mutex mu;
  std::unordered_map<size_t, std::vector<void*>> free;
  AllocatorStats stats;
};

Cache& cache() {
  static Cache* c = new Cache;  // never destroyed: storages may outlive static destructors
  return *c;
}

}  // namespace

size_t allocator_size_class(size_t n) {
  n = std::max(n, kAlign);
  if (n <= kMiB) {
    size_t c = kAlign;
    while (c < n) c <<= 1;
    return c;
  }
  return (n + kMiB - 1) / kMiB * kMiB;
}

void* cpu_allocate(size_t n) {
  env_cache_limit();  // a bad TMEM_CPU_CACHE_MB fails here, before any block exists to release
  const size_t cls = allocator_size_class(n);
  Cache& c = cache();
  {
    std::lock_guard<std::mutex> lock(c.mu);
    auto it = c.free.find(cls);
    if (it != c.free.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      c.stats.cached -= cls;
      c.stats.in_use += cls;
      c.stats.peak_in_use = std::max(c.stats.peak_in_use, c.stats.in_use);
      return p;
    }
  }
  void* p = std::aligned_alloc(kAlign, cls);
  if (!p) {
    cpu_empty_cache();
    p = std::aligned_alloc(kAlign, cls);
    if (!p)
      throw OutOfMemoryError("cpu allocator: out of memory: cannot allocate " + std::to_string(n) + " bytes (" +
                             std::to_string(cpu_allocator_stats().in_use) + " bytes in use by tensors)");
  }
  std::lock_guard<std::mutex> lock(c.mu);
  c.stats.in_use += cls;
  c.stats.peak_in_use = std::max(c.stats.peak_in_use, c.stats.in_use);
  return p;
}

void cpu_release(void* p, size_t n) {
  if (!p) return;
  const size_t cls = allocator_size_class(n);
  Cache& c = cache();
  {
    std::lock_guard<std::mutex> lock(c.mu);
    c.stats.in_use -= cls;
    if (c.stats.cached + cls <= cache_limit(c.stats.peak_in_use)) {
      // Release runs in destructors, also while a bad_alloc unwinds: when
      // the free list cannot grow, the block goes back to the system.
      try {
        c.free[cls].push_back(p);
        c.stats.cached += cls;
        return;
      } catch (const std::bad_alloc&) {
      }
    }
  }
  std::free(p);
}

AllocatorStats cpu_allocator_stats() {
  std::lock_guard<std::mutex> lock(cache().mu);
  return cache().stats;
}

void cpu_allocator_reset_peak() {
  std::lock_guard<std::mutex> lock(cache().mu);
  cache().stats.peak_in_use = cache().stats.in_use;
}

void cpu_empty_cache() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  for (auto& [cls, list] : c.free)
    for (void* p : list) std::free(p);
  c.free.clear();
  c.stats.cached = 0;
}

}  // namespace tmem
