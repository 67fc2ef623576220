// A checkpoint's metadata is validated on resume: every bad entry is an
// IOError naming the file and the entry. Only regular files are read as
// checkpoints (a directory or a FIFO is refused without opening it).
#include <filesystem>

#include <sys/stat.h>

#include "tmem/core/json_dump.h"
#include "tmem/core/safetensors.h"
#include "tmem/models/trainer.h"
#include "test_util.h"

using namespace tmem;
namespace fs = std::filesystem;

namespace {

models::TrainConfig tiny_checkpointed_run(const std::string& dir_name) {
  models::TrainConfig c;
  c.model.method = models::BackboneMethod::base;
  c.model.dim = 16;
  c.model.layers = 1;
  c.model.heads = 2;
  c.task_cfg.W = 5;
  c.task_cfg.queries = 2;
  c.batch = 2;
  c.eval_batches = 1;
  c.steps = 4;
  c.run_dir = (fs::temp_directory_path() / dir_name).string();
  fs::remove_all(c.run_dir);
  return c;
}

}  // namespace

TEST_CASE("checkpoint: each malformed metadata entry is an IOError naming the file and the entry") {
  models::TrainConfig c = tiny_checkpointed_run("tmem_ckpt_meta");
  models::train_diagnostic(c);
  const std::string ckpt = c.run_dir + "/checkpoint.safetensors";
  const SafetensorsFile good = load_safetensors(ckpt);
  struct Case {
    std::string key, value;
  };
  const std::vector<Case> cases = {
      {"step", "-5"},
      {"step", "abc"},
      {"step", "99999999999999999999"},
      {"losses", "[0.5, 0.25]"},  // 2 losses for 4 steps
      {"losses", "[1, 2, 3, \"x\"]"},
      {"losses", "[1, "},
      {"recent_hits", "[[5, 2]]"},
      {"recent_hits", "{}"},
      {"accuracy_curve", "[[1]]"},
      {"data_rng", "garbage"},
      {"model_rng", ""},
      {"seconds", "nan"},
      {"config", "{"},
  };
  c.steps = 8;
  c.resume = true;
  for (const Case& k : cases) {
    CAPTURE(k.key);
    CAPTURE(k.value);
    StringMap meta = good.metadata;
    meta[k.key] = k.value;
    save_safetensors(ckpt, good.tensors, meta);
    const std::string err = test::error_of<IOError>([&] { models::train_diagnostic(c); });
    CHECK(err.find(ckpt) != std::string::npos);
    CHECK(err.find("\"" + k.key + "\" entry") != std::string::npos);
  }
  StringMap missing = good.metadata;
  missing.erase("losses");
  save_safetensors(ckpt, good.tensors, missing);
  CHECK(test::error_of<IOError>([&] { models::train_diagnostic(c); }).find("\"losses\" entry is missing") !=
        std::string::npos);
  save_safetensors(ckpt, good.tensors, good.metadata);  // the untouched checkpoint resumes
  CHECK(models::train_diagnostic(c).start_step == 4);
  fs::remove_all(c.run_dir);
}

TEST_CASE("checkpoint: a directory or a FIFO in place of the file is refused without reading it") {
  const std::string dir = test::tmp_path("tmem_ckpt_special");
  fs::remove_all(dir);
  fs::create_directories(dir + "/ckpt_dir.safetensors");
  CHECK_THROWS_WITH_AS(load_safetensors(dir + "/ckpt_dir.safetensors"), doctest::Contains("not a regular file"),
                       IOError);
  const std::string fifo = dir + "/ckpt_fifo.safetensors";
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  CHECK_THROWS_WITH_AS(load_safetensors(fifo), doctest::Contains("not a regular file"), IOError);
  CHECK_THROWS_WITH_AS(load_safetensors(dir + "/absent.safetensors"), doctest::Contains("absent.safetensors"),
                       IOError);
  fs::remove_all(dir);
}

TEST_CASE("checkpoint: a gradient dump that is the checkpoint file, however spelled, is refused") {
  // --dump-grads checkpoint.safetensors was overwritten by the checkpoint
  // (issue 15, defect 5); tmem train refuses the name, train_diagnostic the file.
  models::TrainConfig c = tiny_checkpointed_run("tmem_ckpt_dump");
  c.dump_grads = c.run_dir + "/./checkpoint.safetensors";
  CHECK_THROWS_WITH_AS(models::train_diagnostic(c), doctest::Contains("is the checkpoint"), ValueError);
  CHECK(!fs::exists(c.run_dir + "/checkpoint.safetensors"));
  c.dump_grads = c.run_dir + "/grads.jsonl";
  CHECK(models::train_diagnostic(c).losses.size() == 4);
  CHECK(read_grad_dump(c.dump_grads).size() == 2);  // steps 0 and 3 (dump_every 100, and the last)
  fs::remove_all(c.run_dir);
}

TEST_CASE("checkpoint: the metadata names the model and its config - one from before weight-decay groups is refused") {
  models::TrainConfig c = tiny_checkpointed_run("tmem_ckpt_groups");
  models::train_diagnostic(c);
  const std::string ckpt = c.run_dir + "/checkpoint.safetensors";
  SafetensorsFile f = load_safetensors(ckpt);
  CHECK(f.metadata.at("model") == "tmem::models::DiagnosticModel");
  const auto config = nlohmann::json::parse(f.metadata.at("config"));
  CHECK(config.at("method") == "base");
  CHECK(config.at("dim") == 16);
  // Two groups: the matrices, then the vectors (biases, gains).
  const std::vector<int64_t> sizes = f.tensors.at("optim.group_sizes").to_int_vector();
  REQUIRE(sizes.size() == 2);
  int64_t total = 0;
  for (const auto& kv : f.tensors)
    if (kv.first.rfind("optim.m.", 0) == 0) ++total;
  CHECK(sizes[0] + sizes[1] == total);
  CHECK(sizes[1] > 0);
  for (int64_t i = 0; i < total; ++i) {
    INFO(i);
    CHECK((f.tensors.at("optim.m." + std::to_string(i)).dim() >= 2) == (i < sizes[0]));
  }
  // The layout of an older checkpoint (one group, no "group_sizes").
  f.tensors.erase("optim.group_sizes");
  save_safetensors(ckpt, f.tensors, f.metadata);
  c.steps = 6;
  c.resume = true;
  const std::string expected = "does not fit the model: AdamW::load_state_dict: the state has groups of [" +
                               std::to_string(total) + "] parameters";
  CHECK_THROWS_WITH_AS(models::train_diagnostic(c), doctest::Contains(expected.c_str()), IOError);
  fs::remove_all(c.run_dir);
}
