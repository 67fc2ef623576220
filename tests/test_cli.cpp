// The tmem program as a careless or hostile user drives it: results that
// cannot be written are errors, not "results written" and exit 0.
#include <filesystem>

#include "cli_util.h"
#include "test_util.h"

using tmem::test::fresh_cli_dir;
using tmem::test::run_tmem;
using tmem::test::tiny_train_args;
namespace fs = std::filesystem;

TEST_CASE("cli: a run directory that cannot be written is an error before training starts") {
  const std::string dir = fresh_cli_dir("tmem_cli_full_disk");
  // Every file tmem creates is limited to 1 byte: a disk that is full.
  const auto r = run_tmem(tiny_train_args("full"), dir, 1);
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK(r.output.find("runs/full") != std::string::npos);
  CHECK(r.output.find("not writable") != std::string::npos);
  CHECK(r.output.find("eval accuracy") == std::string::npos);  // nothing trained
  fs::remove_all(dir);
}

TEST_CASE("cli: a result file that cannot be written fails the run, naming the file") {
  const std::string dir = fresh_cli_dir("tmem_cli_result_blocked");
  // A directory where result.json goes: the rename over it fails.
  fs::create_directories(dir + "/runs/blocked/base_length32_seed42/result.json");
  auto r = run_tmem(tiny_train_args("blocked"), dir);
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK(r.output.find("base_length32_seed42/result.json") != std::string::npos);
  CHECK(r.output.find("results written") == std::string::npos);
  // The same for the sweep's results.json.
  fs::remove_all(dir + "/runs");
  fs::create_directories(dir + "/runs/blocked/results.json");
  r = run_tmem(tiny_train_args("blocked"), dir);
  CHECK(r.status == 1);
  CHECK(r.output.find("blocked/results.json") != std::string::npos);
  fs::remove_all(dir);
}
