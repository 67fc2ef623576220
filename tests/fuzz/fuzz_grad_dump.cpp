// Fuzz target: the gradient-dump reader (core/json_dump.h) and what
// `tmem grads` does with a dump: the per-tensor summary and a diff of the
// dump against itself.
#include "tmem/core/json_dump.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = tmem::fuzz::scratch_file(data, size, ".jsonl");
  try {
    const auto steps = tmem::read_grad_dump(path);
    (void)tmem::summarize_grad_dump(steps);
    (void)tmem::diff_grad_dumps(steps, steps, 5);
  } catch (const tmem::Error&) {
  }
  return 0;
}
