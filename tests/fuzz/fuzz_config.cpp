// Fuzz target: what `tmem train --config FILE` does with the file before it
// trains: the depth-limited JSON parse, applying its keys to a TrainConfig,
// filling the task's defaults, and the round trip through config_to_json
// (the config a run records must read back as the same config).
#include <cstdlib>
#include <string_view>

#include "tmem/core/file_io.h"
#include "tmem/models/trainer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto j = tmem::parse_json(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz config");
    tmem::models::TrainConfig c;
    tmem::models::apply_config_json(c, j);
    tmem::models::resolve_task_defaults(c);
    const auto recorded = tmem::models::config_to_json(c);
    tmem::models::TrainConfig back;
    tmem::models::apply_config_json(back, recorded);
    if (tmem::models::config_to_json(back) != recorded) std::abort();
  } catch (const tmem::Error&) {
  }
  return 0;
}
