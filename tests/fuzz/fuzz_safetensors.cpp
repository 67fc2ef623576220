// Fuzz target: the safetensors checkpoint reader (core/safetensors.h). Every
// tensor a load returns is summed, so a tensor whose shape claims more bytes
// than were read is caught by AddressSanitizer.
#include "tmem/core/safetensors.h"
#include "tmem/ops/elementwise.h"
#include "tmem/ops/reduction.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = tmem::fuzz::scratch_file(data, size, ".safetensors");
  try {
    const tmem::SafetensorsFile f = tmem::load_safetensors(path);
    for (const auto& [name, t] : f.tensors) (void)tmem::sum(tmem::to_dtype(t, tmem::DType::Float64)).item();
  } catch (const tmem::Error&) {
  }
  return 0;
}
