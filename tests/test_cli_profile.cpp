// The training commands' --profile FILE and --detect-anomaly (tools/progress.h
// add_debug_options).
#include <algorithm>
#include <filesystem>
#include <sstream>

#include "cli_util.h"
#include "tmem/core/file_io.h"
#include "test_util.h"

using tmem::test::fresh_cli_dir;
using tmem::test::run_tmem;
using tmem::test::tiny_train_args;
namespace fs = std::filesystem;

namespace {

// The calls and backward calls the table prints for `op` (-1 when the row
// is missing; "-" reads as 0).
std::pair<long, long> table_calls(const std::string& output, const std::string& op) {
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);) {
    std::istringstream row(line);
    std::string name, calls, bwd;
    if (!(row >> name >> calls >> bwd) || name != op) continue;
    auto num = [](const std::string& s) { return s == "-" ? 0L : std::stol(s); };
    return {num(calls), num(bwd)};
  }
  return {-1, -1};
}

}  // namespace

TEST_CASE("cli: train --profile FILE prints the op table and writes a Chrome trace of the same calls") {
  const std::string dir = fresh_cli_dir("tmem_cli_profile");
  auto args = tiny_train_args("prof");
  args.insert(args.end(), {"--profile", "trace.json"});
  const auto r = run_tmem(args, dir);
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(r.output.find("profile (trace.json):") != std::string::npos);
  CHECK(r.output.find("[AdamW.step]") != std::string::npos);
  CHECK(r.output.find("trace written to trace.json") != std::string::npos);
  const std::pair<long, long> mm = table_calls(r.output, "matmul");
  CHECK(mm.first > 0);
  CHECK(mm.second > 0);
  const nlohmann::json j = tmem::parse_json(tmem::test::read_all(dir + "/trace.json"), "trace.json");
  long fwd_events = 0, bwd_events = 0, adamw = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e["name"] == "matmul") ++(e["cat"] == "forward" ? fwd_events : bwd_events);
    if (e["name"] == "AdamW.step") ++adamw;
  }
  CHECK(fwd_events == mm.first);
  CHECK(bwd_events == mm.second);
  CHECK(adamw == 3);  // one per step
  fs::remove_all(dir);
}

TEST_CASE("cli: a --profile file that cannot be written is refused before training") {
  const std::string dir = fresh_cli_dir("tmem_cli_profile_bad");
  tmem::test::write_all(dir + "/a_file", "x");
  auto args = tiny_train_args("prof");
  args.insert(args.end(), {"--profile", "a_file/trace.json"});
  auto r = run_tmem(args, dir);
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK(r.output.find("a_file") != std::string::npos);
  CHECK(r.output.find("eval accuracy") == std::string::npos);
  fs::create_directory(dir + "/traces");
  args = tiny_train_args("prof");
  args.insert(args.end(), {"--profile", "traces"});
  r = run_tmem(args, dir);
  CHECK(r.status == 1);
  CHECK(r.output.find("--profile: traces is a directory") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("cli: stream --profile times the forward ops alone") {
  const std::string dir = fresh_cli_dir("tmem_cli_profile_stream");
  const auto r = run_tmem({"stream", "--tokens", "16", "--dim", "16", "--layers", "1", "--heads", "2", "--seq", "8", "--chunk", "4",
                           "--vocab", "10", "--method", "tensor", "--threads", "1", "--name", "s", "--profile",
                           "stream.json"},
                          dir);
  INFO(r.output);
  REQUIRE(r.status == 0);
  const std::pair<long, long> mm = table_calls(r.output, "matmul");
  CHECK(mm.first > 0);
  CHECK(mm.second == 0);
  CHECK(fs::exists(dir + "/stream.json"));
  fs::remove_all(dir);
}

TEST_CASE("cli: --detect-anomaly stops a diverging run at the op that made the first NaN or Inf gradient") {
  // Weight decay 10 at lr 10 multiplies every weight by 1 - 100 each step:
  // the weights overflow within a few steps.
  const std::string dir = fresh_cli_dir("tmem_cli_anomaly");
  auto args = tiny_train_args("nan");
  args[5] = "40";  // --steps
  args.insert(args.end(), {"--lr", "10", "--weight-decay", "10"});
  auto r = run_tmem(args, dir);
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK(r.output.find("clip_grad_norm_: the total gradient norm is non-finite") != std::string::npos);
  CHECK(r.output.find("anomaly:") == std::string::npos);
  args.push_back("--detect-anomaly");
  r = run_tmem(args, dir);
  INFO(r.output);
  CHECK(r.status == 1);
  const size_t at = r.output.find("tmem: error: anomaly: ");
  REQUIRE(at != std::string::npos);
  // "anomaly: output 0 of softmax (node #286) has NaN at flat index 32 of
  // shape [2,2,32,32]" (this run on one thread), or the gradient's message.
  const std::string message = r.output.substr(at, r.output.find('\n', at) - at);
  const size_t node = message.find(" (node #");
  REQUIRE(node != std::string::npos);
  const size_t name = message.rfind(' ', node - 1) + 1;
  const std::string op = message.substr(name, node - name);
  CHECK(std::find(tmem::kOpNames.begin(), tmem::kOpNames.end(), op) != tmem::kOpNames.end());
  CHECK((message.find(" has NaN at flat index ") != std::string::npos ||
         message.find(" has Inf at flat index ") != std::string::npos));
  fs::remove_all(dir);
}
