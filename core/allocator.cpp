#include "tmem/core/allocator.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

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
  size_t unchecked = 0;  // bytes taken from the system since the last memory check
};

// The first number after `key` in the file at path (a /proc/meminfo or
// cgroup memory.stat line), or nullopt when the file or the key is missing.
std::optional<size_t> read_number(const char* path, std::string_view key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line))
    if (line.starts_with(key)) {
      const size_t at = line.find_first_of("0123456789", key.size());
      size_t v = 0;
      if (at == std::string::npos ||
          std::from_chars(line.data() + at, line.data() + line.size(), v).ec != std::errc())
        return std::nullopt;
      return v;
    }
  return std::nullopt;
}

// Bytes the system can still give this process without swapping out or
// killing anything: /proc/meminfo's MemAvailable plus SwapFree, bounded by
// the cgroup v2 limit when one is set (memory.max less memory.current, plus
// the page cache it could reclaim). SIZE_MAX when neither can be read.
size_t system_available() {
  size_t avail = SIZE_MAX;
  if (auto mem = read_number("/proc/meminfo", "MemAvailable:"))
    avail = (*mem + read_number("/proc/meminfo", "SwapFree:").value_or(0)) * 1024;
  const auto max = read_number("/sys/fs/cgroup/memory.max", "");
  const auto current = read_number("/sys/fs/cgroup/memory.current", "");
  if (max && current) {
    const size_t reclaimable = read_number("/sys/fs/cgroup/memory.stat", "inactive_file ").value_or(0);
    avail = std::min(avail, *max > *current ? *max - *current + reclaimable : reclaimable);
  }
  return avail;
}

// Every 64 MiB taken from the system, and before any request of 64 MiB or
// more, the allocator checks that the system still has the request and a
// 256 MiB reserve; past that, Linux would hand out the block and kill the
// process when its pages are first written (the OOM killer), not fail the
// allocation.
constexpr size_t kCheckEvery = 64 * kMiB;
constexpr size_t kReserve = 256 * kMiB;
constexpr double kGiB = 1 << 30;

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
  bool check_system = cls >= kCheckEvery;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    c.unchecked += cls;
    if (c.unchecked >= kCheckEvery) check_system = true;
    if (check_system) c.unchecked = 0;
  }
  const auto refuse = [&](const std::string& why) {
    throw OutOfMemoryError(fmt::format("cpu allocator: out of memory: cannot allocate {} bytes ({:.2f} GiB){} ({} bytes "
                                       "in use by tensors)", n, n / kGiB, why, cpu_allocator_stats().in_use));
  };
  if (check_system && system_available() < cls + kReserve) {
    cpu_empty_cache();
    const size_t avail = system_available();
    if (avail < cls + kReserve)
      refuse(fmt::format(": the system has {:.2f} GiB available and keeps {:.2f} GiB of it in reserve",
                         avail / kGiB, kReserve / kGiB));
  }
  void* p = std::aligned_alloc(kAlign, cls);
  if (!p) {
    cpu_empty_cache();
    p = std::aligned_alloc(kAlign, cls);
    if (!p) refuse("");
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
