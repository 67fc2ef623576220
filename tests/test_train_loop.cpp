// train_loop (models/train_loop.h): every model family resumes bit-exactly.
// A run of N steps straight and the same run stopped after its checkpoint at
// step N/2 (an exception from the progress callback, as a crash) and then
// resumed give the same losses, training metrics, parameters and optimizer
// state, bit for bit.
#include <filesystem>
#include <limits>

#include "model_fixtures.h"
#include "test_util.h"
#include "tmem/core/json_dump.h"
#include "tmem/core/safetensors.h"
#include "tmem/models/train_loop.h"
#include "tmem/models/trainer.h"
#include "tmem/nn/linear.h"

using namespace tmem;
namespace fs = std::filesystem;

namespace {

struct Stop {};  // thrown by the progress callback to stop a run after its checkpoint

// The tensors of two checkpoints (model, optimizer, extra state) and their
// losses, metrics and generator states are equal, bit for bit.
void check_same_checkpoint(const std::string& a, const std::string& b) {
  const SafetensorsFile fa = load_safetensors(a), fb = load_safetensors(b);
  CHECK(fa.tensors.size() == fb.tensors.size());
  for (const auto& kv : fa.tensors) {
    INFO(kv.first);
    REQUIRE(fb.tensors.count(kv.first) == 1);
    CHECK(kv.second.to_vector() == fb.tensors.at(kv.first).to_vector());
  }
  for (const char* key : {"step", "losses", "metrics", "recent_hits", "accuracy_curve", "skipped_steps"}) {
    INFO(key);
    CHECK(fa.metadata.at(key) == fb.metadata.at(key));
  }
  for (const auto& kv : fa.metadata)
    if (kv.first.find("rng") != std::string::npos) CHECK(kv.second == fb.metadata.at(kv.first));
}

// Trains `c` to `steps` straight (in <name>_full), then stopped at steps / 2
// and resumed (in <name>_half); checks the final checkpoints match and
// returns the two results. train(c, stop_at) trains c, throwing Stop from
// its progress callback when the step reaches stop_at (> 0).
template <class Config, class Train>
auto straight_and_resumed(Config c, const std::string& name, int64_t steps, Train train) {
  c.steps = steps;
  c.run_dir = test::tmp_path(name + "_full");
  fs::remove_all(c.run_dir);
  const auto full = train(c, 0);
  Config h = c;
  h.run_dir = test::tmp_path(name + "_half");
  fs::remove_all(h.run_dir);
  h.checkpoint_every = steps / 2;
  CHECK_THROWS_AS(train(h, steps / 2), Stop);
  CHECK(load_safetensors(h.run_dir + "/" + models::kCheckpointFile).metadata.at("step") == std::to_string(steps / 2));
  h.resume = true;
  const auto resumed = train(h, 0);
  check_same_checkpoint(c.run_dir + "/" + models::kCheckpointFile, h.run_dir + "/" + models::kCheckpointFile);
  fs::remove_all(c.run_dir);
  fs::remove_all(h.run_dir);
  return std::pair{full, resumed};
}

// The losses and per-step metrics of two results are equal, bit for bit
// (NaN metrics, of a family without one, at the same steps).
template <class Result>
void check_same_curves(const Result& a, const Result& b, size_t steps) {
  REQUIRE(a.losses.size() == steps);
  REQUIRE(b.losses.size() == steps);
  for (size_t i = 0; i < steps; ++i) {
    INFO(i);
    CHECK(a.losses[i] == b.losses[i]);
  }
}

// A coord-binding run small enough for a unit test: d = 16, 1 layer, 2
// heads, memory C = 2 at 3^3, W = 5 keys, 2 queries, batch 3.
models::TrainConfig tiny_diagnostic(models::BackboneMethod method) {
  models::TrainConfig c;
  c.model.method = method;
  c.model.dim = 16;
  c.model.layers = 1;
  c.model.heads = 2;
  c.model.memory.channels = 2;
  c.model.memory.D = c.model.memory.H = c.model.memory.W = 3;
  c.task_cfg.W = 5;
  c.task_cfg.queries = 2;
  c.batch = 3;
  c.eval_batches = 1;
  return c;
}

}  // namespace

TEST_CASE("train_loop: a diagnostic run resumed from its checkpoint matches the straight run bit for bit") {
  for (const auto method : {models::BackboneMethod::base, models::BackboneMethod::tensor}) {
    INFO(to_string(method));
    models::TrainConfig c = tiny_diagnostic(method);
    auto [full, resumed] = straight_and_resumed(c, "tmem_loop_diag", 8, [](const models::TrainConfig& t, int64_t stop) {
      return models::train_diagnostic(t, [stop](const models::TrainProgress& p) {
        if (p.step == stop) throw Stop{};
      });
    });
    check_same_curves(full, resumed, 8);
    CHECK(resumed.start_step == 4);
    CHECK(full.eval_accuracy == resumed.eval_accuracy);
    CHECK(full.train_accuracy == resumed.train_accuracy);
  }
}

TEST_CASE("train_loop: a stop request ends the run between steps with its checkpoint, and --resume continues bit for bit") {
  models::TrainConfig c = tiny_diagnostic(models::BackboneMethod::base);
  c.steps = 8;
  c.run_dir = test::tmp_path("tmem_loop_stop_full");
  fs::remove_all(c.run_dir);
  const models::TrainResult full = models::train_diagnostic(c, {});
  models::TrainConfig h = c;
  h.run_dir = test::tmp_path("tmem_loop_stop_half");
  fs::remove_all(h.run_dir);
  // As Ctrl-C does (tools/tmem.cpp), from inside step 3's progress report.
  CHECK_THROWS_WITH_AS(models::train_diagnostic(h, [](const models::TrainProgress& p) {
                         if (p.step == 3) models::request_stop();
                       }),
                       doctest::Contains("interrupted after step 3 of 8; the checkpoint"), models::Interrupted);
  CHECK(load_safetensors(h.run_dir + "/" + models::kCheckpointFile).metadata.at("step") == "3");
  h.resume = true;
  const models::TrainResult resumed = models::train_diagnostic(h, {});
  CHECK(resumed.start_step == 3);
  check_same_curves(full, resumed, 8);
  check_same_checkpoint(c.run_dir + "/" + models::kCheckpointFile, h.run_dir + "/" + models::kCheckpointFile);
  fs::remove_all(c.run_dir);
  fs::remove_all(h.run_dir);
}

TEST_CASE("train_loop: a language model resumed mid-pass carries its segment state bit for bit") {
  // 200 tokens in 4 streams of segments of 8: 6 segments a pass, so the
  // checkpoint at step 5 holds the state carried into step 5.
  const std::vector<int64_t> stream = test::periodic_stream(200);
  for (const auto method : {models::LMMethod::tensor, models::LMMethod::xl, models::LMMethod::linear}) {
    INFO(to_string(method));
    auto [full, resumed] =
        straight_and_resumed(test::tiny_lm_run(method, "cpu"), "tmem_loop_lm_" + to_string(method), 10,
                             [&](const models::LMTrainConfig& t, int64_t stop) {
                               return models::train_lm(t, stream, {}, {}, [stop](const models::LMTrainProgress& p) {
                                 if (p.phase == "train" && p.step == stop) throw Stop{};
                               });
                             });
    check_same_curves(full, resumed, 10);
  }
}

TEST_CASE("train_loop: a ViT resumed mid-epoch continues the data order and masks bit for bit") {
  // 24 images in batches of 8: 3 steps an epoch, so step 4 is inside the second.
  const ImageDataset train = test::halves(24, 12, 20), test_set = test::halves(12, 12, 21);
  for (const char* task : {"classify", "mae"}) {
    INFO(task);
    auto [full, resumed] =
        straight_and_resumed(test::tiny_vit_run(task, models::ViTMethod::spatial, "cpu"), std::string("tmem_loop_vit_") + task, 8,
                             [&](const models::ViTTrainConfig& t, int64_t stop) {
                               return models::train_vit(t, train, test_set, [stop](const models::ViTTrainProgress& p) {
                                 if (p.phase == "train" && p.step == stop) throw Stop{};
                               });
                             });
    check_same_curves(full, resumed, 8);
    CHECK(full.metrics == resumed.metrics);
    CHECK(full.test_accuracy == resumed.test_accuracy);
  }
}

TEST_CASE("train_loop: a video model resumed from its checkpoint matches the straight run bit for bit") {
  const ImageDataset items = test::pattern_items(8);
  models::VideoTrainConfig cfg = test::tiny_video_run(models::VideoMethod::tensor, "cpu");
  cfg.batch = 2;  // 2 clips x 2 items: an epoch of the 8 images is 2 steps, so the resume lands mid-epoch
  auto [full, resumed] = straight_and_resumed(cfg, "tmem_loop_video", 6,
                                              [&](const models::VideoTrainConfig& t, int64_t stop) {
                                                return models::train_video(
                                                    t, items, items, [stop](const models::VideoTrainProgress& p) {
                                                      if (p.phase == "train" && p.step == stop) throw Stop{};
                                                    });
                                              });
  check_same_curves(full, resumed, 6);
  CHECK(full.metrics == resumed.metrics);
  CHECK(full.test.accuracy == resumed.test.accuracy);
  cfg.batch = 5;
  CHECK_THROWS_WITH_AS(models::train_video(cfg, items, items),
                       doctest::Contains("batch x items = 5 x 2 = 10 distinct training images, but the set has 8"),
                       ValueError);
}

TEST_CASE("train_loop: every family dumps gradients with its memory internals") {
  models::LMTrainConfig c = test::tiny_lm_run(models::LMMethod::tensor, "cpu");
  c.steps = 4;
  c.dump_grads = test::tmp_path("tmem_loop_lm_grads.jsonl");
  c.dump_every = 2;
  models::train_lm(c, test::periodic_stream(200), {}, {});
  const std::vector<nlohmann::json> steps = read_grad_dump(c.dump_grads);
  REQUIRE(steps.size() == 3);  // steps 0 and 2, and the last
  CHECK(steps[2]["step"] == 3);
  REQUIRE(!steps[0]["memory"].empty());
  CHECK(steps[0]["memory"][0]["read_coords"]["shape"] == nlohmann::json{4, 8, 3});
  fs::remove(c.dump_grads);
}

TEST_CASE("train_loop: a checkpoint of another config or past the steps asked for is refused") {
  models::VideoTrainConfig c = test::tiny_video_run(models::VideoMethod::joint, "cpu");
  c.run_dir = test::tmp_path("tmem_loop_refuse");
  fs::remove_all(c.run_dir);
  models::train_video(c, test::pattern_items(8), test::pattern_items(8));
  c.resume = true;
  c.lr *= 2;
  CHECK_THROWS_WITH_AS(models::train_video(c, test::pattern_items(8), test::pattern_items(8)),
                       doctest::Contains("it was written with another config:\n  lr: saved 0.003, now 0.006"),
                       ValueError);
  c.lr /= 2;
  c.steps = 2;
  CHECK_THROWS_WITH_AS(models::train_video(c, test::pattern_items(8), test::pattern_items(8)),
                       doctest::Contains("it is at step 3, past the 2 steps asked for"), ValueError);
  fs::remove_all(c.run_dir);
}

TEST_CASE("train_loop: a checkpoint whose weights hold NaN is refused by name, not trained on") {
  // Resuming one trained on, skipping every step, and reported an accuracy of NaN logits.
  models::TrainConfig c = tiny_diagnostic(models::BackboneMethod::base);
  c.steps = 2;
  c.run_dir = test::tmp_path("tmem_loop_nan_weights");
  fs::remove_all(c.run_dir);
  models::train_diagnostic(c, {});
  const std::string ckpt = c.run_dir + "/" + models::kCheckpointFile;
  SafetensorsFile f = load_safetensors(ckpt);
  f.metadata.erase(kChecksumKey);
  Tensor& w = f.tensors.at("model.head.weight");
  std::vector<double> values = w.to_vector();
  values[3] = std::numeric_limits<double>::quiet_NaN();
  w = tensor(values, w.shape(), DType::Float32);
  save_safetensors(ckpt, f.tensors, f.metadata);
  c.resume = true;
  c.steps = 4;
  CHECK_THROWS_WITH_AS(models::train_diagnostic(c, {}),
                       ("train: cannot resume from " + ckpt +
                        ": model.head.weight holds nan at element 3, and tmem saves only finite weights").c_str(),
                       IOError);
  fs::remove_all(c.run_dir);
}

TEST_CASE("train_loop: a step that trains more or fewer rows than the batch is a clear error") {
  Generator gen(1);
  nn::Linear model(3, 1, true, gen);
  models::LoopConfig cfg;
  cfg.steps = 2;
  cfg.batch = 4;
  models::LoopHooks hooks;
  int64_t rows = 4;
  hooks.step = [&](int64_t) {
    const Tensor x = randn({rows, 3}, 0.0, 1.0, DType::Float32, gen);
    return models::StepOutput{mean(model.forward(x)), x.size(0)};
  };
  CHECK(models::train_loop(model, cfg, hooks).losses.size() == 2);
  rows = 2;
  CHECK_THROWS_WITH_AS(models::train_loop(model, cfg, hooks),
                       "train: step 0 trained 2 rows of a batch of 4; each process must train its share of the batch "
                       "(dist::BatchShard)",
                       ValueError);
  cfg.batch = 0;
  CHECK_THROWS_WITH_AS(models::train_loop(model, cfg, hooks), "train: expected a batch >= 1, but got 0", ValueError);
}

TEST_CASE("config_differences: a key an older checkpoint lacks matches only at its default") {
  const nlohmann::json now = {{"lr", 0.001}, {"steps", 20}, {"forget_bias", 0.0}};
  const nlohmann::json defaults = {{"lr", 0.0003}, {"steps", 2000}, {"forget_bias", 0.0}};
  CHECK(models::config_differences({{"lr", 0.001}, {"steps", 10}}, now, defaults, "steps").empty());
  CHECK(models::config_differences({{"lr", 0.001}, {"steps", 10}}, now, defaults) ==
        "\n  steps: saved 10, now 20");
  nlohmann::json moved = now;
  moved["forget_bias"] = 3.0;
  CHECK(models::config_differences({{"lr", 0.001}, {"steps", 20}}, moved, defaults) ==
        "\n  forget_bias: saved (missing), now 3.0");
  CHECK(models::config_differences({{"lr", 0.001}, {"steps", 20}}, now, nlohmann::json::object()) ==
        "\n  forget_bias: saved (missing), now 0.0");
  CHECK(models::config_differences({{"lr", 0.003}, {"steps", 20}, {"forget_bias", 0.0}}, now, defaults) ==
        "\n  lr: saved 0.003, now 0.001");
}
