// Shared pieces of the libFuzzer targets (tests/fuzz/, built with
// -DTMEM_FUZZ=ON and clang): the input written to a scratch file for the
// readers that take a path, and the rule every target checks: a reader
// either returns a valid result or throws a tmem::Error; anything else (a
// crash, a sanitizer report, another exception type) is a bug.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

namespace tmem::fuzz {

/// Writes `size` bytes to a per-process scratch file in $TMPDIR (or /tmp)
/// with `suffix`, and returns its path. Aborts when it cannot: the harness,
/// not the reader, is at fault then.
inline std::string scratch_file(const uint8_t* data, size_t size, const std::string& suffix) {
  const char* dir = std::getenv("TMPDIR");
  const std::string path =
      std::string(dir && *dir ? dir : "/tmp") + "/tmem_fuzz_" + std::to_string(::getpid()) + suffix;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f || (size && std::fwrite(data, 1, size, f) != size) || std::fclose(f) != 0) std::abort();
  return path;
}

}  // namespace tmem::fuzz
