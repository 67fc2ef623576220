// Fuzz target: the Brown corpus text parser (data/brown.h), and the split of
// what it returns.
#include <string_view>

#include "tmem/core/error.h"
#include "tmem/data/brown.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto tokens = tmem::parse_brown_text(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
    tmem::BrownSplitOptions opts;
    opts.n_train = static_cast<int64_t>(tokens.size() / 2);
    opts.n_valid = static_cast<int64_t>(tokens.size() / 4);
    opts.max_rare_count = 0;
    (void)tmem::split_brown(tokens, opts);
  } catch (const tmem::Error&) {
  }
  return 0;
}
