// The tmem program as a careless or hostile user drives it: results that
// cannot be written are errors, not "results written" and exit 0.
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "cli_util.h"
#include "tmem/core/json_dump.h"
#include "tmem/core/safetensors.h"
#include "test_util.h"

using tmem::test::fresh_cli_dir;
using tmem::test::run_tmem;
using tmem::test::tiny_train_args;
using json = nlohmann::json;
namespace fs = std::filesystem;

TEST_CASE("cli: a run directory that cannot be written is an error before training starts") {
  const std::string dir = fresh_cli_dir("tmem_cli_full_disk");
  // Every file tmem creates is limited to 1 KiB: a disk that is full. (Not
  // less: clang's OpenMP runtime sizes a 1 KiB shared-memory file at start.)
  const auto r = run_tmem(tiny_train_args("full"), dir, 1024);
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK(r.output.find("runs/full") != std::string::npos);
  CHECK(r.output.find("not writable") != std::string::npos);
  CHECK(r.output.find("eval accuracy") == std::string::npos);  // nothing trained
  fs::remove_all(dir);
}

TEST_CASE("cli: a --profile trace that cannot be written is an error naming --profile before training starts") {
  const std::string dir = fresh_cli_dir("tmem_cli_profile_dir");
  std::vector<std::string> args = tiny_train_args("prof");
  args.insert(args.end(), {"--profile", "/proc/no-such-dir/p.json"});
  const auto r = run_tmem(args, dir);
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK(r.output.find("--profile: cannot write the trace /proc/no-such-dir/p.json: cannot create the directory "
                      "/proc/no-such-dir") != std::string::npos);
  CHECK(r.output.find("eval accuracy") == std::string::npos);  // nothing trained
  fs::remove_all(dir);
}

TEST_CASE("cli: a really full disk (a 1 MiB tmpfs) fails the run naming runs/<name>, and keeps the old results") {
  const std::string dir = fresh_cli_dir("tmem_cli_tmpfs");
  if (geteuid() != 0 || mount("tmpfs", dir.c_str(), "tmpfs", 0, "size=1m") != 0) {
    MESSAGE("skipped: mounting a tmpfs needs root (the injected-failure tests above cover the same paths)");
    fs::remove_all(dir);
    return;
  }
  struct Unmount {  // also when a REQUIRE below ends the test early
    std::string dir;
    ~Unmount() {
      umount2(dir.c_str(), MNT_DETACH);
      fs::remove_all(dir);
    }
  } unmount{dir};
  auto r = run_tmem(tiny_train_args("full"), dir);
  INFO(r.output);
  REQUIRE(r.status == 0);
  const std::string result = dir + "/runs/full/base_length32_seed42/result.json";
  const auto read = [](const std::string& path) {
    std::ostringstream s;
    s << std::ifstream(path).rdbuf();
    return s.str();
  };
  const std::string before = read(result);
  REQUIRE(before.find("eval_accuracy") != std::string::npos);
  {  // Fill the disk: write until the file system refuses.
    std::ofstream filler(dir + "/filler", std::ios::binary);
    const std::string block(4096, 'x');
    while (filler.write(block.data(), block.size())) filler.flush();
  }
  r = run_tmem(tiny_train_args("full"), dir);
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK(r.output.find("runs/full") != std::string::npos);
  CHECK(r.output.find("results written") == std::string::npos);
  CHECK(read(result) == before);  // the finished run's results are still there, whole
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

TEST_CASE("cli: every run leaves its config, its JSON read back whole, and its curves as SVG") {
  const std::string dir = fresh_cli_dir("tmem_cli_recorder");
  auto r = run_tmem(tiny_train_args("rec"), dir);
  INFO(r.output);
  REQUIRE(r.status == 0);
  const std::string run = dir + "/runs/rec";
  const auto config = nlohmann::json::parse(tmem::test::read_all(run + "/config.json"));
  CHECK(config.at("command") == "train no-harm");
  CHECK(config.at("config").at("cell").at("steps") == 3);
  CHECK(nlohmann::json::parse(tmem::test::read_all(run + "/results.json")).at("cells").size() == 1);
  CHECK(nlohmann::json::parse(tmem::test::read_all(run + "/base_length32_seed42/losses.json")).size() == 3);
  for (const char* plot : {"loss.svg", "accuracy.svg"}) {
    INFO(plot);
    const std::string svg = tmem::test::read_all(run + "/" + plot);
    CHECK(svg.rfind("<svg", 0) == 0);
    CHECK(svg.find("base_length32_seed42") != std::string::npos);  // the cell's curve, in the legend
  }
  r = run_tmem({"stream", "--tokens", "16", "--dim", "16", "--layers", "1", "--heads", "2", "--seq", "8", "--chunk", "4", "--vocab",
                "10", "--method", "tensor", "--threads", "1", "--name", "s"},
               dir);
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(tmem::test::read_all(dir + "/runs/s/state.svg").find("<polyline") != std::string::npos);
  CHECK(nlohmann::json::parse(tmem::test::read_all(dir + "/runs/s/config.json")).at("command") == "stream");
  fs::remove_all(dir);
}

TEST_CASE("cli: train on a segmented task defaults to the methods full and tensor") {
  const std::string dir = fresh_cli_dir("tmem_cli_segmented_default");
  const auto r = run_tmem({"train", "mqar", "--steps", "2", "--batch", "4", "--eval-batches", "1", "--threads", "1",
                           "--name", "m"},
                          dir);
  INFO(r.output);
  REQUIRE(r.status == 0);
  std::set<std::string> cells;
  for (const auto& f : fs::directory_iterator(dir + "/runs/m"))
    if (f.is_directory()) cells.insert(f.path().filename().string().substr(0, f.path().filename().string().find('_')));
  CHECK(cells == std::set<std::string>{"full", "tensor"});
  fs::remove_all(dir);
}

TEST_CASE("cli: --resume of a run whose config.json holds no config object says it is damaged, and keeps it") {
  const std::string dir = fresh_cli_dir("tmem_cli_damaged_config");
  fs::create_directories(dir + "/runs/dc");
  for (const char* text : {"[]", "{\"config\": 3}", "null"}) {
    INFO(text);
    tmem::test::write_all(dir + "/runs/dc/config.json", text);
    auto args = tiny_train_args("dc");
    args.push_back("--resume");
    const auto r = run_tmem(args, dir);
    INFO(r.output);
    CHECK(r.status == 1);
    CHECK(r.output.find("tmem: error: --resume: runs/dc/config.json is damaged (no \"config\" object in it), so what "
                        "it ran is unknown; give this run another --name, or run without --resume to replace it") !=
          std::string::npos);
    CHECK(tmem::test::read_all(dir + "/runs/dc/config.json") == text);
  }
  fs::remove_all(dir);
}

TEST_CASE("cli: --resume does not replace a finished cell of another config, and extends one of fewer steps") {
  const std::string dir = fresh_cli_dir("tmem_cli_other_config");
  const auto args = tiny_train_args("oc");
  auto r = run_tmem(args, dir);
  INFO(r.output);
  REQUIRE(r.status == 0);
  const std::string result = dir + "/runs/oc/base_length32_seed42/result.json";
  const std::string before = tmem::test::read_all(result);
  const std::string config = dir + "/runs/oc/config.json", config_before = tmem::test::read_all(config);
  CHECK(config_before.find("0.0003") != std::string::npos);
  auto other = args;
  other.insert(other.end(), {"--resume", "--lr", "0.001"});
  r = run_tmem(other, dir);
  CHECK(r.status == 1);
  CHECK(r.output.find("tmem: error: --resume: runs/oc holds a run of another config (cell.lr: 0.0003 -> 0.001); "
                      "give this run another --name, or run without --resume to replace it") != std::string::npos);
  CHECK(tmem::test::read_all(result) == before);
  CHECK(tmem::test::read_all(config) == config_before);  // the refused run's command is not recorded
  auto longer = args;
  *(std::find(longer.begin(), longer.end(), "--steps") + 1) = "4";
  longer.push_back("--resume");
  r = run_tmem(longer, dir);
  CHECK(r.status == 0);
  CHECK(r.output.find(": resumed from its checkpoint at step 3/4\n") != std::string::npos);
  CHECK(r.output.find("step 4/4") != std::string::npos);
  const std::string extended = tmem::test::read_all(result);
  CHECK(extended != before);
  // Without its checkpoint (a cell restored from docs/frontier), neither a
  // shorter nor a longer run replaces the finished one.
  fs::remove(dir + "/runs/oc/base_length32_seed42/checkpoint.safetensors");
  for (const char* steps : {"2", "6"}) {
    auto again = longer;
    *(std::find(again.begin(), again.end(), "--steps") + 1) = steps;
    r = run_tmem(again, dir);
    CHECK(r.status == 1);
    CHECK(r.output.find(std::string("holds a finished run of another config:\n  steps: saved 4, now ") + steps +
                        "\n(and no checkpoint to extend it from)") != std::string::npos);
    CHECK(tmem::test::read_all(result) == extended);
  }
  fs::remove_all(dir);
}

TEST_CASE("cli: grads plot draws a run's gradient dump next to it as SVG") {
  const std::string dir = fresh_cli_dir("tmem_cli_grads_plot");
  auto args = tiny_train_args("g");
  args.insert(args.end(), {"--dump-grads", "grads.jsonl", "--dump-every", "1"});
  auto r = run_tmem(args, dir);
  INFO(r.output);
  REQUIRE(r.status == 0);
  r = run_tmem({"grads", "plot", "runs/g/base_length32_seed42/grads.jsonl"}, dir);
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(r.output.find("3 dumped steps drawn to runs/g/base_length32_seed42/grads.svg") != std::string::npos);
  const std::string svg = tmem::test::read_all(dir + "/runs/g/base_length32_seed42/grads.svg");
  CHECK(svg.find("grads.jsonl: backbone.blocks.0") != std::string::npos);
  r = run_tmem({"grads", "plot", "runs/g/absent.jsonl"}, dir);
  CHECK(r.status == 1);
  CHECK(r.output.find("absent.jsonl") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("cli: every bad option value is a parse error naming the option and its range") {
  const std::string dir = fresh_cli_dir("tmem_cli_options");
  struct Case {
    std::vector<std::string> args;
    std::string expected;  // in the message
  };
  const std::vector<Case> cases = {
      {{"train", "no-harm", "--steps", "abc"}, "--steps: expected an integer in [0, 1000000000]"},
      {{"train", "no-harm", "--steps", ""}, "--steps: expected an integer in [0, 1000000000], but got an empty value"},
      {{"train", "no-harm", "--steps", "nan"}, "--steps: expected an integer"},
      {{"train", "no-harm", "--steps", "99999999999999999999"}, "(too large)"},
      {{"train", "no-harm", "--steps", "0x10"}, "--steps: expected an integer"},
      {{"train", "no-harm", "--lr", ""}, "--lr: expected a finite number in [0, 10], but got an empty value"},
      {{"train", "no-harm", "--lr", "inf"}, "--lr: expected a finite number"},
      {{"train", "no-harm", "--noise", "nan"}, "--noise: expected a finite number"},
      {{"train", "no-harm", "--seed", "-1"}, "--seed: expected an integer in [0, "},
      {{"train", "no-harm", "--dump-every", "0"}, "--dump-every: expected an integer in [1, "},
      {{"train", "no-harm", "--batch", "100000000000"}, "--batch: expected an integer in [1, 65536]"},
      {{"train", "no-harm", "--W", "100000000000"}, "--W: expected an integer in [1, 65536]"},
      {{"train", "no-harm", "--dim", "100000000000"}, "--dim: expected an integer in [0, 65536]"},
      {{"train", "no-harm", "--mem-grid", "100000"}, "--mem-grid: expected an integer in [1, 256]"},
      {{"train", "no-harm", "--mem-channels", "100000"}, "--mem-channels: expected an integer in [1, 4096]"},
      {{"train", "no-harm", "--queries", "-3"}, "--queries: expected an integer in [1, 65536]"},
      {{"train", "coord-binding", "--heads", "3"},
       "--heads: 3 heads do not divide the model width 64 (the task's default --dim); choose a divisor of it"},
      {{"train", "coord-binding", "--heads", "3", "--dim", "32"},
       "--heads: 3 heads do not divide the model width 32 (--dim); choose a divisor of it"},
      {{"train", "no-harm", "--memory-forget-bias", "25"}, "--memory-forget-bias: expected a finite number in [-20, 20]"},
      {{"train", "no-harm", "--memory-forget-bias", "nan"}, "--memory-forget-bias: expected a finite number"},
      {{"train", "no-harm", "--name", ""}, "--name: expected a value, but got an empty one"},
      {{"train", "no-harm", "--method", "base,base"}, "--method: the value \"base\" is given twice"},
      {{"train", "no-harm", "--method", "base,slotz"},
       "--method: unknown method \"slotz\" (expected base, base_wide, slots, tensor, linear, ssm, rmt, none, full or xl)"},
      {{"frontier", "mqar", "--methods", "xl,ql"},
       "--methods: unknown segmented method \"ql\" (expected none, full, xl, linear, ssm, rmt or tensor)"},
      {{"frontier", "mqar", "--methods", "base"}, "--methods: unknown segmented method \"base\""},
      {{"train", "coord-binding", "--seed", "1,,2"}, "--seed: the list \"1,,2\" has an empty item"},
      {{"frontier", "mqar", "--lr=1e-3,"}, "--lr: the list \"1e-3,\" has an empty item"},
      {{"train", "mqar", "--method", ",xl"}, "--method: the list \",xl\" has an empty item"},
      {{"frontier", "mqar", "--memory-forget-bias", "-30"}, "--memory-forget-bias: expected a finite number in [-20, 20]"},
      {{"frontier", "mqar", "--values", "16"}, "frontier: --values [16] needs --vs P or --vs G"},
      {{"frontier", "mqar", "--vs", "P", "--values", "16,40"},
       "mqar: expected P a multiple of 16 in [16, 256] and G >= 0, but got P 40 G 1"},
      {{"frontier", "mqar", "--report", "--name", "never-run"},
       "frontier --report: there is no run runs/never-run to report"},
      {{"train", "coord-recall", "--W", "20"}, "coord-recall: expected W a positive multiple of 16"},
      {{"train", "brown", "--method", "lineer"},
       "--method: unknown LM method \"lineer\" (expected base, local, linear, xl, tensor or leaky)"},
      {{"train", "fashion-mnist", "--method", "swin"},
       "--method: unknown ViT method \"swin\" (expected vit, local, registers or spatial)"},
      {{"train", "moving-fmnist", "--method", "slowfast"},
       "--method: VideoModel: unknown method \"slowfast\" (expected joint, registers or tensor)"},
      {{"train", "coord-binding", "--W", "5,5"}, "--W: the value \"5\" is given twice"},
      {{"ablate", "--steps", "abc"}, "--steps: expected an integer"},
      {{"stream", "--tokens", "abc"}, "--tokens: expected an integer in [1, "},
      {{"stream", "--vocab", ""}, "--vocab: expected an integer"},
      {{"frontier", "mqar", "--lr", "1e-3,0.001"}, "--lr: the value \"0.001\" is given twice"},
      // Compared as parsed, not with ==, which flushes 1e-320 (a denormal) to 0.
      {{"train", "coord-binding", "--noise", "0,1e-320"},
       "--noise: the values \"0\" and \"1e-320\" agree to the 6 significant digits that name runs and cells (0)"},
      {{"frontier", "mqar", "--seed", "42,0042"}, "--seed: the value \"42\" is given twice"},
      {{"frontier", "mqar", "--lr", "0.001,0.0010000001"},
       "--lr: the values \"0.001\" and \"0.0010000001\" agree to the 6 significant digits that name runs and cells "
       "(0.001): give values that differ there"},
      {{"train", "coord-binding", "--noise", "0.05,0.0500000001"}, "--noise: the values \"0.05\" and \"0.0500000001\" agree"},
      {{"grads", "diff", "a.jsonl", "b.jsonl", "--rtol", "inf"}, "--rtol: expected a finite number >= 0, but got \"inf\""},
      {{"train", "no-harm", "--steps", "09x"}, "--steps: expected an integer in [0, 1000000000], but got \"09x\""},
      {{"train", "no-harm", "--name", "a\nb"}, "--name: expected a plain directory name under runs/ (no '/' or control"},
      {{"stream", "--max-minutes", "0"}, "--max-minutes: expected a finite number in (0, 1e+06), but got 0"},
      {{"train", "fashion-mnist", "--mask-ratio", "1"}, "--mask-ratio: expected a finite number in (0, 1), but got 1"},
      {{"bench", "--threads", "-1"}, "--threads: expected an integer in [1, 1024]"},
      {{"bench", "--quick", "--no-peers", "--areas", "gemm", "--results", "."},
       "--results: \".\" is not a regular file; expected the markdown file the table is appended to"},
      {{"bench", "--quick", "--no-peers", "--areas", "gemm", "--results", "/dev/null"},
       "--results: \"/dev/null\" is not a regular file"},
      {{"bench", "--quick", "--no-peers", "--areas", "gemm", "--results", "x.md", "--no-append"},
       "--results excludes --no-append"},
      {{"grads", "diff", "a", "b", "--top", "-1"}, "--top: expected an integer in [0, "},
      {{"train", "brown", "--dim", "abc"}, "--dim: expected an integer in [1, 65536]"},
      {{"train", "fashion-mnist", "--lr", "inf"}, "--lr: expected a finite number"},
      {{"train", "moving-fmnist", "--batch", ""}, "--batch: expected an integer in [1, 65536]"},
      {{"train", "moving-fmnist", "--seed", "-1"}, "--seed: expected an integer in [0, "},
      {{"train", "no-harm", "--dump-grads", "../../../x"}, "--dump-grads: expected a plain file name inside the run"},
      {{"train", "no-harm", "--dump-grads", "/tmp/x"}, "--dump-grads: expected a plain file name inside the run"},
      {{"train", "no-harm", "--dump-grads", ".."}, "--dump-grads: expected a plain file name inside the run"},
      {{"train", "no-harm", "--dump-grads", "checkpoint.safetensors"},
       "--dump-grads: \"checkpoint.safetensors\" is a file the run writes itself"},
      {{"train", "no-harm", "--dump-grads", "result.json"}, "\"result.json\" is a file the run writes itself"},
      {{"train", "no-harm", "--dump-grads", "losses.json"}, "\"losses.json\" is a file the run writes itself"},
  };
  for (const Case& c : cases) {
    const auto r = run_tmem(c.args, dir);
    std::string line;
    for (const auto& a : c.args) line += a + " ";
    INFO("tmem " << line << "\n" << r.output);
    CHECK(r.status != 0);
    CHECK(r.status < 128);  // not killed by a signal (SIGFPE, SIGABRT)
    CHECK(r.output.find(c.expected) != std::string::npos);
  }
  CHECK(!fs::exists(dir + "/runs"));  // nothing started
  fs::remove_all(dir);
}

TEST_CASE("cli: a method, a task option or a method option the run cannot use, and clip 0, are usage errors (status 2)") {
  const std::string dir = fresh_cli_dir("tmem_cli_usage_of_task");
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"train", "coord-binding", "--method", "none"},
       "--method: the coord-binding task takes base, base_wide, slots, tensor, linear, ssm or rmt, but got none "
       "(a method of the segmented tasks mqar, map-recall and coord-recall)"},
      {{"train", "no-harm", "--method", "base,xl"}, "--method: the no-harm task takes base, base_wide, slots"},
      {{"train", "mqar", "--method", "full,base"},
       "--method: the segmented task mqar takes none, full, xl, linear, ssm, rmt or tensor, but got base"},
      {{"train", "mqar", "--W", "16"}, "--W: the mqar task does not read W, so the option would be ignored"},
      {{"frontier", "map-recall", "--G", "2"}, "--G: the map-recall task does not read G"},
      {{"train", "mqar", "--clip", "0"}, "--clip: expected a finite number in (0, 1e+09), but got 0"},
      {{"train", "brown", "--clip", "0"}, "--clip: expected a finite number in (0, 1e+09), but got 0"},
      {{"train", "mqar", "--method", "full", "--xl-cache", "5"},
       "--xl-cache: it sets xl, and the run's methods are full, so the option would be ignored"},
      {{"train", "mqar", "--ssm-state", "8"},  // the default methods
       "--ssm-state: it sets ssm, and the run's methods are full and tensor, so the option would be ignored"},
      {{"train", "coord-binding", "--method", "base,base_wide", "--chunk", "2"},
       "--chunk: it sets tensor or slots, and the run's methods are base and base_wide"},
  };
  for (const auto& c : cases) {
    const auto r = run_tmem(c.first, dir);
    INFO(c.first[1] << " " << c.first[2] << "\n" << r.output);
    CHECK(r.status == 2);
    CHECK(r.output.find("tmem: error: " + c.second) != std::string::npos);
  }
  CHECK(!fs::exists(dir + "/runs"));
  fs::remove_all(dir);
}

TEST_CASE("cli: --config=FILE is read as --config FILE, and config values keep their types") {
  const std::string dir = fresh_cli_dir("tmem_cli_config");
  tmem::test::write_all(dir + "/unknown.json", R"({"no_such_key": 1})");
  tmem::test::write_all(dir + "/float.json", R"({"batch": 1.9})");
  tmem::test::write_all(dir + "/seed.json", R"({"seed": -1})");
  tmem::test::write_all(dir + "/bool.json", R"({"lr": true})");
  auto r = run_tmem({"train", "no-harm", "--config=unknown.json"}, dir);
  CHECK(r.status == 1);
  CHECK(r.output.find("unknown key \"no_such_key\"") != std::string::npos);
  r = run_tmem({"train", "no-harm", "--config", "float.json"}, dir);
  CHECK(r.status == 1);
  CHECK(r.output.find("key \"batch\" expects an integer, but got 1.9") != std::string::npos);
  r = run_tmem({"train", "no-harm", "--config=seed.json"}, dir);
  CHECK(r.status == 1);
  CHECK(r.output.find("key \"seed\" expects an integer in [0, 9223372036854775807], but got -1") != std::string::npos);
  tmem::test::write_all(dir + "/seed.json", R"({"seed": 18446744073709551615})");  // past --seed's range
  r = run_tmem({"train", "no-harm", "--config=seed.json"}, dir);
  CHECK(r.status == 1);
  CHECK(r.output.find("key \"seed\" expects an integer in [0, 9223372036854775807], but got 18446744073709551615") !=
        std::string::npos);
  r = run_tmem({"train", "no-harm", "--config=bool.json"}, dir);
  CHECK(r.status == 1);
  CHECK(r.output.find("key \"lr\" expects a number, but got true") != std::string::npos);
  // Integers take the range of their command-line options: an eval over no
  // batches reported 0% accuracy, and the run directory was made first.
  for (const auto& bad : std::vector<std::pair<std::string, std::string>>{
           {R"({"eval_batches": 0})", R"(key "eval_batches" expects an integer in [1, 1000000], but got 0)"},
           {R"({"eval_batches": -1})", R"(key "eval_batches" expects an integer in [1, 1000000], but got -1)"},
           {R"({"steps": -1})", R"(key "steps" expects an integer in [0, 1000000000], but got -1)"},
           {R"({"batch": 0})", R"(key "batch" expects an integer in [1, 65536], but got 0)"},
           {R"({"mem_grid": [2, 0, 2]})", R"(key "mem_grid" expects an integer in [1, 256], but got 0)"}}) {
    tmem::test::write_all(dir + "/range.json", bad.first);
    r = run_tmem({"train", "no-harm", "--config=range.json", "--name", "range"}, dir);
    INFO(bad.first << "\n" << r.output);
    CHECK(r.status == 1);
    CHECK(r.output.find(bad.second) != std::string::npos);
    CHECK(!fs::exists(dir + "/runs/range"));
  }
  fs::remove_all(dir);
}

TEST_CASE("cli: a run directory whose results.json is a directory is refused before training, not after") {
  const std::string dir = fresh_cli_dir("tmem_cli_results_dir");
  fs::create_directories(dir + "/runs/rd/results.json");
  const auto r = run_tmem(tiny_train_args("rd"), dir);
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK(r.output.find("tmem: error: run: runs/rd/results.json is not a regular file (a directory), and the run "
                      "would fail to write its results over it after training; remove it") != std::string::npos);
  CHECK(r.output.find("eval accuracy") == std::string::npos);
  fs::remove_all(dir);
}

// A reused cell keeps its directory's name; a FIFO is refused before training, neither read nor replaced.
TEST_CASE("cli: --resume runs again a cell whose result.json was edited out of range or to a wrong type") {
  const std::string dir = fresh_cli_dir("tmem_cli_resume_edited");
  auto args = tiny_train_args("ed");
  auto r = run_tmem(args, dir);
  INFO(r.output);
  REQUIRE(r.status == 0);
  const std::string cell = dir + "/runs/ed/base_length32_seed42", result = cell + "/result.json";
  std::string text = tmem::test::read_all(result);
  const size_t at = text.find("\"eval_accuracy\": ");
  REQUIRE(at != std::string::npos);
  text.replace(at, text.find(',', at) - at, "\"eval_accuracy\": 5.0");  // printed as 500.0%
  tmem::test::write_all(result, text);
  args.push_back("--resume");
  r = run_tmem(args, dir);
  CHECK(r.status == 0);
  CHECK(r.output.find("warning: " + std::string("runs/ed/base_length32_seed42/result.json is not a finished run's "
                                                "result (a key is missing, of the wrong type or out of range): the "
                                                "cell runs again")) != std::string::npos);
  CHECK(r.output.find("500.0") == std::string::npos);
  // Another key of the wrong type is refused alike; a reused cell keeps the
  // name of its directory, whatever the file says.
  json j = json::parse(tmem::test::read_all(result));
  j["gates"] = 5;
  tmem::test::write_all(result, j.dump());
  r = run_tmem(args, dir);
  CHECK(r.status == 0);
  CHECK(r.output.find("runs/ed/base_length32_seed42/result.json is not a finished run's result (a key is missing, "
                      "of the wrong type or out of range): the cell runs again") != std::string::npos);
  j = json::parse(tmem::test::read_all(result));
  CHECK(j["gates"].is_array());
  j["cell"] = "other";
  tmem::test::write_all(result, j.dump());
  r = run_tmem(args, dir);
  CHECK(r.status == 0);
  CHECK(r.output.find("base_length32_seed42: done earlier") != std::string::npos);
  const json results = json::parse(tmem::test::read_all(dir + "/runs/ed/results.json"));
  REQUIRE(results["cells"].size() == 1);
  CHECK(results["cells"][0]["cell"] == "base_length32_seed42");
  // A FIFO once blocked the read for ever; /dev/zero grew without bound.
  fs::remove(result);
  REQUIRE(::mkfifo(result.c_str(), 0600) == 0);
  r = run_tmem(args, dir);
  CHECK(r.status == 1);
  CHECK(r.output.find("tmem: error: run: runs/ed/base_length32_seed42/result.json is not a regular file (a device, "
                      "a FIFO or a socket), and the run would fail to write its results over it after training") !=
        std::string::npos);
  CHECK(r.output.find("eval accuracy") == std::string::npos);  // refused before training
  CHECK(fs::is_fifo(result));
  fs::remove_all(dir);
}

TEST_CASE("cli: integers with leading zeros are read in base 10, not as octal") {
  // --steps 010 trained 8 steps and --seed 0042 seed 34 (CLI11 converts with base 0).
  const std::string dir = fresh_cli_dir("tmem_cli_octal");
  auto args = tiny_train_args("oct");
  *(std::find(args.begin(), args.end(), "--steps") + 1) = "010";
  args.insert(args.end(), {"--seed", "0042", "--length", "010"});
  const auto r = run_tmem(args, dir);
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(r.output.find(", 10 steps,") != std::string::npos);
  CHECK(fs::is_directory(dir + "/runs/oct/base_length10_seed42"));
  fs::remove_all(dir);
}

TEST_CASE("cli: --resume without --name is an error, not a fresh run") {
  const std::string dir = fresh_cli_dir("tmem_cli_resume_name");
  auto args = tiny_train_args("x");
  args.resize(args.size() - 2);  // drop --name x
  args.push_back("--resume");
  const auto r = run_tmem(args, dir);
  CHECK(r.status == 1);
  CHECK(r.output.find("--resume needs --name") != std::string::npos);
  CHECK(!fs::exists(dir + "/runs"));
  fs::remove_all(dir);
}

TEST_CASE("cli: a run name of another command is refused, and that run's files are kept") {
  // `tmem ablate --resume --name X` on X of `tmem train` once overwrote X's
  // results.json and config.json, and mixed its cells with the variants.
  const std::string dir = fresh_cli_dir("tmem_cli_other_command");
  const auto first = run_tmem(tiny_train_args("x"), dir);
  REQUIRE(first.status == 0);
  const auto read = [&](const std::string& f) {
    std::ifstream in(dir + "/runs/x/" + f);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const std::string results = read("results.json"), config = read("config.json");
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"ablate", "--resume", "--variants", "7", "--steps", "1", "--batch", "2", "--threads",
                                 "1", "--name", "x"},
        std::vector<std::string>{"stream", "--tokens", "4", "--dim", "8", "--layers", "1", "--heads", "1", "--seq", "2", "--chunk", "2",
                                 "--vocab", "4", "--threads", "1", "--name", "x"}}) {
    const auto r = run_tmem(args, dir);
    INFO(r.output);
    CHECK(r.status == 1);
    CHECK(r.output == "tmem: error: --name: runs/x holds a run of `tmem train no-harm`, not of `tmem " + args[0] +
                          "`; give this run another --name\n");
  }
  CHECK(read("results.json") == results);
  CHECK(read("config.json") == config);
  CHECK(!fs::exists(dir + "/runs/x/variant7"));
  auto again = tiny_train_args("x");
  again.push_back("--resume");
  CHECK(run_tmem(again, dir).status == 0);  // the same command may continue it
  fs::remove_all(dir);
}

namespace {

// The "step" of every line of a gradient dump, and whether each line has tensors.
std::vector<int64_t> dumped_steps(const std::string& path, bool& all_have_tensors) {
  std::vector<int64_t> steps;
  all_have_tensors = true;
  for (const auto& j : tmem::read_grad_dump(path)) {
    steps.push_back(j.at("step").get<int64_t>());
    all_have_tensors = all_have_tensors && !j.at("tensors").empty();
  }
  return steps;
}

}  // namespace

TEST_CASE("cli: --resume keeps the gradient dump's steps before the checkpoint, once each") {
  // A resume truncated the dump to the steps after it (issue 15, defect 5).
  const std::string dir = fresh_cli_dir("tmem_cli_dump_resume");
  auto args = tiny_train_args("dump");
  args[5] = "4";  // --steps 4: the checkpoint is at step 4
  for (const char* a : {"--dump-grads", "grads.jsonl", "--dump-every", "1"}) args.push_back(a);
  auto r = run_tmem(args, dir);
  INFO(r.output);
  REQUIRE(r.status == 0);
  const std::string dump = dir + "/runs/dump/base_length32_seed42/grads.jsonl";
  bool tensors = false;
  REQUIRE(dumped_steps(dump, tensors) == std::vector<int64_t>{0, 1, 2, 3});
  // A run killed after dumping steps 4 and 5 (and half of 6) past its last
  // checkpoint: the resume replays them, so they must not stay twice.
  {
    std::ofstream out(dump, std::ios::app);
    out << "{\"step\": 4, \"loss\": 1, \"tensors\": []}\n{\"step\": 5, \"loss\": 1, \"tensors\": []}\n{\"step\": 6, \"lo";
  }
  args[5] = "6";
  args.push_back("--resume");
  r = run_tmem(args, dir);
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(dumped_steps(dump, tensors) == std::vector<int64_t>{0, 1, 2, 3, 4, 5});
  CHECK(tensors);  // steps 4 and 5 are the resumed run's, not the stale ones
  fs::remove_all(dir);
}

TEST_CASE("cli: a resume from a checkpoint without its checksum warns that it resumes unchecked") {
  const std::string dir = fresh_cli_dir("tmem_cli_resume_no_crc");
  auto args = tiny_train_args("no-crc");
  auto r = run_tmem(args, dir);
  INFO(r.output);
  REQUIRE(r.status == 0);
  // The checkpoint as a tmem from before checksums wrote it: the header without the key.
  const fs::path ckpt = fs::path(dir) / "runs/no-crc/base_length32_seed42/checkpoint.safetensors";
  const std::string bytes = tmem::test::read_all(ckpt);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  nlohmann::json header = nlohmann::json::parse(bytes.substr(8, n));
  REQUIRE(header["__metadata__"].erase(tmem::kChecksumKey) == 1);
  const std::string text = header.dump();
  const uint64_t size = text.size();
  tmem::test::write_all(ckpt, std::string(reinterpret_cast<const char*>(&size), 8) + text + bytes.substr(8 + n));
  args[5] = "4";
  args.push_back("--resume");
  r = run_tmem(args, dir);
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(r.output.find("warning: runs/no-crc/base_length32_seed42/checkpoint.safetensors carries no checksum "
                      "(tmem_crc32)") != std::string::npos);
  CHECK(r.output.find("resumed from its checkpoint at step 3/4") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("cli: a resume with another thread count says the losses can differ in the last bits") {
  const std::string dir = fresh_cli_dir("tmem_cli_resume_threads");
  auto args = tiny_train_args("threads");
  args[5] = "4";
  REQUIRE(args[16] == "--threads");
  auto r = run_tmem(args, dir);
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(r.output.find("warning") == std::string::npos);
  args[5] = "6";
  args[17] = "2";
  args.push_back("--resume");
  r = run_tmem(args, dir);
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(r.output.find("written with 1 threads and resumes with 2") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("cli: 100000 nested arrays in a config or a gradient dump is an error, not a stack overflow") {
  const std::string dir = fresh_cli_dir("tmem_cli_deep_json");
  tmem::test::write_all(dir + "/deep.json", std::string(100000, '['));
  auto r = run_tmem({"train", "no-harm", "--config", "deep.json"}, dir);
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK(r.output.find("train: config file deep.json: JSON nested deeper than 64 levels") != std::string::npos);
  r = run_tmem({"grads", "summarize", "deep.json"}, dir);
  CHECK(r.status == 1);
  CHECK(r.output.find("deep.json line 1: JSON nested deeper than 64 levels") != std::string::npos);
  // Untrusted values are cut in messages: a 100,000-byte method name.
  tmem::test::write_all(dir + "/long.json", "{\"method\": \"" + std::string(100000, 'q') + "\"}");
  r = run_tmem({"train", "no-harm", "--config", "long.json"}, dir);
  CHECK(r.status == 1);
  CHECK(r.output.find("(100000 bytes in all)") != std::string::npos);
  CHECK(r.output.size() < 1000);
  fs::remove_all(dir);
}

TEST_CASE("cli: grads summarize refuses NaN counts that are negative or overflow") {
  const std::string dir = fresh_cli_dir("tmem_cli_grads_nan");
  const std::string step = R"(, "tensors": [{"name": "w", "norm": 1, "nan": 9223372036854775807}]})";
  tmem::test::write_all(dir + "/d.jsonl", R"({"step": 0)" + step + "\n" + R"({"step": 1)" + step + "\n");
  auto r = run_tmem({"grads", "summarize", "d.jsonl"}, dir);
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK(r.output.find("overflow int64") != std::string::npos);
  tmem::test::write_all(dir + "/d.jsonl", R"({"step": 0, "tensors": [{"name": "w", "norm": 1, "nan": -5}]})");
  r = run_tmem({"grads", "summarize", "d.jsonl"}, dir);
  CHECK(r.status == 1);
  CHECK(r.output.find("\"nan\" count is -5") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("cli: grads summarize flags a NaN norm that has no nan count") {
  // A dump written elsewhere: the NaN norm printed "norm min inf, max -inf" and "ok".
  const std::string dir = fresh_cli_dir("tmem_cli_grads_nan_norm");
  tmem::test::write_all(dir + "/d.jsonl", R"({"step": 0, "tensors": [{"name": "w", "norm": 2}]})"
                                          "\n"
                                          R"({"step": 1, "tensors": [{"name": "w", "norm": "NaN"}]})"
                                          "\n");
  const auto r = run_tmem({"grads", "summarize", "d.jsonl"}, dir);
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK(r.output.find("2.0000e+00          nan   2.0000e+00   2.0000e+00  norm NaN/Inf x1") != std::string::npos);
  CHECK(r.output.find("1 tensor flagged") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("cli: grads plot of a dump named .svg refuses to write the SVG over it") {
  // `cp g.jsonl dump.svg && tmem grads plot dump.svg` replaced the dump by the SVG.
  const std::string dir = fresh_cli_dir("tmem_cli_grads_plot_self");
  const std::string dump = R"({"step": 0, "loss": 1, "tensors": [{"name": "head.w", "norm": 2}]})" "\n";
  tmem::test::write_all(dir + "/dump.svg", dump);
  auto r = run_tmem({"grads", "plot", "dump.svg"}, dir);
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK(r.output.find("tmem: error: grads plot: the output dump.svg (the dump's name with .svg) is the dump dump.svg "
                      "itself: writing the SVG there would replace it; give --out another file") != std::string::npos);
  CHECK(tmem::test::read_all(dir + "/dump.svg") == dump);
  r = run_tmem({"grads", "plot", "dump.svg", "--out", "./dump.svg"}, dir);
  CHECK(r.status == 1);
  CHECK(r.output.find("--out ./dump.svg is the dump dump.svg itself") != std::string::npos);
  CHECK(tmem::test::read_all(dir + "/dump.svg") == dump);
  r = run_tmem({"grads", "plot", "dump.svg", "--out", "picture.svg"}, dir);
  CHECK(r.status == 0);
  CHECK(tmem::test::read_all(dir + "/picture.svg").rfind("<svg", 0) == 0);
  fs::remove_all(dir);
}

TEST_CASE("cli: grads plot and summarize name the file, the step and the missing field") {
  // It was "summarize_grad_dump: malformed gradient dump: [json.exception.out_of_range.403] key 'name' not found".
  const std::string dir = fresh_cli_dir("tmem_cli_grads_fields");
  tmem::test::write_all(dir + "/d.jsonl", R"({"step": 0, "tensors": [{"name": "w", "norm": 1}]})"
                                          "\n"
                                          R"({"step": 10, "tensors": [{"shape": [2], "norm": 1}]})"
                                          "\n");
  auto r = run_tmem({"grads", "plot", "d.jsonl"}, dir);
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK(r.output.find("tmem: error: grads plot: malformed gradient dump d.jsonl: step 10: tensors[0] has no \"name\" "
                      "field\n") != std::string::npos);
  CHECK(r.output.find("json.exception") == std::string::npos);
  CHECK(!fs::exists(dir + "/d.svg"));
  tmem::test::write_all(dir + "/d.jsonl", R"({"step": 3, "tensors": [{"name": "w"}]})");
  r = run_tmem({"grads", "plot", "d.jsonl"}, dir);
  CHECK(r.status == 1);
  CHECK(r.output.find("grads plot: malformed gradient dump d.jsonl: step 3, tensor \"w\" has no \"norm\" field") !=
        std::string::npos);
  r = run_tmem({"grads", "summarize", "d.jsonl"}, dir);
  CHECK(r.status == 1);
  CHECK(r.output.find("summarize_grad_dump: malformed gradient dump d.jsonl: step 3, tensor \"w\" has no \"norm\" "
                      "field") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("cli: grads summarize refuses a negative norm and a tensor twice in a step") {
  // -1e308 was summarized as "ok".
  const std::string dir = fresh_cli_dir("tmem_cli_grads_negative");
  tmem::test::write_all(dir + "/d.jsonl", R"({"step": 2, "tensors": [{"name": "w", "norm": -1e308}]})");
  auto r = run_tmem({"grads", "summarize", "d.jsonl"}, dir);
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK(r.output.find("tmem: error: summarize_grad_dump: malformed gradient dump d.jsonl: step 2, tensor \"w\": "
                      "\"norm\" is -1e+308, not a number >= 0, \"NaN\" or \"Infinity\"") != std::string::npos);
  CHECK(r.output.find("ok") == std::string::npos);
  tmem::test::write_all(dir + "/d.jsonl", R"({"step": 2, "tensors": [{"name": "w", "norm": 1}, {"name": "w", "norm": 2}]})");
  r = run_tmem({"grads", "summarize", "d.jsonl"}, dir);
  CHECK(r.status == 1);
  CHECK(r.output.find("d.jsonl: step 2: tensor \"w\" appears twice (tensors[0] and tensors[1])") != std::string::npos);
  r = run_tmem({"grads", "summarize", "nonexist.jsonl"}, dir);
  CHECK(r.status == 1);
  CHECK(r.output.find("tmem: error: read_grad_dump: nonexist.jsonl does not exist") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("cli: grads diff reports shapes, NaN losses and which dump lacks a tensor, and exits 1 when the dumps differ") {
  const std::string dir = fresh_cli_dir("tmem_cli_grads_diff");
  tmem::test::write_all(dir + "/a.jsonl",
                        R"({"step": 0, "loss": 1, "tensors": [{"name": "w", "shape": [16, 65], "norm": 1}, {"name": "v", "norm": 2}]})"
                        "\n");
  tmem::test::write_all(dir + "/b.jsonl",
                        R"({"step": 0, "loss": "NaN", "tensors": [{"name": "w", "shape": [99], "norm": 1}]})"
                        "\n");
  auto r = run_tmem({"grads", "diff", "a.jsonl", "b.jsonl"}, dir);
  INFO(r.output);
  CHECK(r.status == 1);  // they differ, as diff and cmp say with 1
  CHECK(r.output.find("differ: the largest relative difference is inf, above --rtol 0\n") != std::string::npos);
  CHECK(r.output.find("A = a.jsonl, B = b.jsonl\n") != std::string::npos);
  CHECK(r.output.find(" shape          1.040000e+03   9.900000e+01          inf  [16,65] in A, [99] in B\n") !=
        std::string::npos);
  CHECK(r.output.find(" loss           1.000000e+00            nan          inf\n") != std::string::npos);
  CHECK(r.output.find(" missing in B   2.000000e+00         absent          inf\n") != std::string::npos);
  // Exit 0 only when every relative difference is within --rtol, also with
  // --top 0 (no rows printed).
  tmem::test::write_all(dir + "/a.jsonl", R"({"step": 0, "loss": 2, "tensors": [{"name": "w", "norm": 1}]})" "\n");
  tmem::test::write_all(dir + "/b.jsonl", R"({"step": 0, "loss": 2, "tensors": [{"name": "w", "norm": 1.001}]})" "\n");
  r = run_tmem({"grads", "diff", "a.jsonl", "b.jsonl", "--top", "0"}, dir);
  CHECK(r.status == 1);
  CHECK(r.output.find("differ: the largest relative difference is 9.990e-04, above --rtol 0\n") != std::string::npos);
  r = run_tmem({"grads", "diff", "a.jsonl", "b.jsonl", "--rtol", "1e-3"}, dir);
  CHECK(r.status == 0);
  CHECK(r.output.find("agree: the largest relative difference is 9.990e-04, within --rtol 0.001\n") !=
        std::string::npos);
  r = run_tmem({"grads", "diff", "a.jsonl", "a.jsonl"}, dir);
  CHECK(r.status == 0);
  CHECK(r.output.find("agree: the largest relative difference is 0.000e+00, within --rtol 0\n") != std::string::npos);
  tmem::test::write_all(dir + "/b.jsonl",
                        R"({"step": 0, "tensors": [{"name": "w", "norm": 1}]})"
                        "\n"
                        R"({"step": 0, "tensors": [{"name": "w", "norm": 1}]})"
                        "\n");
  r = run_tmem({"grads", "diff", "a.jsonl", "b.jsonl"}, dir);
  CHECK(r.status == 1);
  CHECK(r.output.find("tmem: error: diff_grad_dumps: malformed gradient dump b.jsonl: step 0 appears twice (step "
                      "objects 1 and 2 of 2)") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("cli: frontier --report puts each cell at the state floats it measured on its carried tensors") {
  // The mqar cells kept in docs/ (tools/frontier_cells.sh), as a run folder.
  const std::string dir = fresh_cli_dir("tmem_cli_frontier_report");
  const fs::path kept = fs::path(TMEM_FIXTURE_DIR) / "../../docs/frontier/frontier-mqar";
  REQUIRE(fs::is_directory(kept));
  for (const auto& f : fs::directory_iterator(kept)) {
    if (f.path().extension() != ".json") continue;  // partial/: checkpoints of cells in progress
    const fs::path cell = fs::path(dir) / "runs/fr" / f.path().stem();
    fs::create_directories(cell);
    fs::copy_file(f.path(), cell / "result.json");
  }
  const auto r = run_tmem({"frontier", "mqar", "--name", "fr", "--report"}, dir);
  INFO(r.output);
  REQUIRE(r.status == 0);
  auto floats = [&](const std::string& method, const std::string& size) {  // the table's floats column
    std::istringstream lines(r.output);
    for (std::string line; std::getline(lines, line);) {
      std::istringstream words(line);
      std::string m, sz, f;
      if (words >> m >> sz >> f && m == method && sz == size) return f;
    }
    return std::string("(no row)");
  };
  // xl M 200's cache holds the whole 96-token input: 2 layers x 64 x 96
  // floats carried, not the nominal 2 x 64 x 200.
  CHECK(floats("xl", "M200") == "12288");
  CHECK(floats("xl", "M32") == "4096");
  CHECK(floats("full", "-") == "24576");  // its KV cache, 2 d T per layer
  CHECK(floats("none", "-") == "0");
  CHECK(fs::exists(fs::path(dir) / "runs/fr/frontier.svg"));
  fs::remove_all(dir);
}
