// The trainers of the LM, ViT and video families data-parallel (issue 17):
// 2 ranks x half the batch against one process with the whole batch, on the
// tiny models and synthetic data of tests/model_fixtures.h. CTest runs
// "trainers on one process*" as a plain process first: it writes the
// reference (the losses and evaluation of each run, and a one-process LM
// checkpoint) into the working directory; the "trainers on 2 ranks*" cases
// run under `mpirun -np 2` and compare with it (tests/CMakeLists.txt).
//
// Every data-parallel train_loop ends with dist::check_replicas_match, which
// throws unless both ranks' parameters are bit-identical, so each run below
// that returns also passed that check.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <nlohmann/json.hpp>

#include "model_fixtures.h"
#include "tmem/core/file_io.h"
#include "tmem/dist/dist.h"
#include "tmem/models/train_loop.h"
#include "tmem/nn/linear.h"
#include "tmem/ops/reduction.h"

using namespace tmem;
using namespace tmem::models;
using nlohmann::json;

namespace {

constexpr const char* kReference = "dist_trainers_reference.json";
// The LM's step-3 checkpoints of one process and of 2 ranks.
const std::string kOneProcessLM = "dist_trainers/lm_one_process", kTwoRanksLM = "dist_trainers/lm_two_ranks";

// 6 steps of tiny_lm "tensor" (carried memory state) on 4 streams.
LMTrainConfig lm_run(double dropout = 0) {
  LMTrainConfig c = test::tiny_lm_run(LMMethod::tensor, "cpu");
  c.steps = 6;
  c.model.dropout = dropout;
  return c;
}
// The training stream and the validation stream (its first 100 tokens). 603
// tokens: the 4 streams of 151 start at different phases of the period 10,
// so each carries its own state and a mix-up of the streams shows.
const std::vector<int64_t> kStream = test::periodic_stream(603);
const std::vector<int64_t> kValid(kStream.begin(), kStream.begin() + 100);

// 6 steps of the spatial ViT (Tensor Memory) on 8 of 32 images per step:
// a reshuffle after 4 steps.
ViTTrainConfig vit_run(const std::string& task) {
  ViTTrainConfig c = test::tiny_vit_run(task, ViTMethod::spatial, "cpu");
  c.steps = 6;
  return c;
}
// The training and test images (made on first use, not at static
// initialisation, which may precede the tensor library's).
const ImageDataset& images(bool train) {
  static const ImageDataset train_set = test::halves(32, 12, 20), test_set = test::halves(16, 12, 21);
  return train ? train_set : test_set;
}

// tiny_video_run's tensor model, 4 steps on frames of 32 x 32 (patch 8).
VideoTrainConfig video_run() {
  VideoTrainConfig c = test::tiny_video_run(VideoMethod::tensor, "cpu");
  c.model.size = c.data.size = 32;
  c.model.patch = 8;
  c.steps = 4;
  c.eval_clips = 8;
  return c;
}
const ImageDataset& items() {
  static const ImageDataset set = test::pattern_items(8);
  return set;
}

// Every run's losses and evaluation.
json run_all() {
  const LMTrainResult lm = train_lm(lm_run(), kStream, kValid, {});
  const ViTTrainResult vit = train_vit(vit_run("classify"), images(true), images(false));
  const ViTTrainResult mae = train_vit(vit_run("mae"), images(true), images(false));
  const VideoTrainResult video = train_video(video_run(), items(), items());
  return {{"lm", {{"losses", lm.losses}, {"eval", lm.valid.nll()}}},
          {"vit", {{"losses", vit.losses}, {"eval", vit.test_accuracy}}},
          {"mae", {{"losses", mae.losses}, {"eval", mae.reconstruction.at(0).psnr}}},
          {"video", {{"losses", video.losses}, {"eval", video.test.accuracy}}}};
}

double max_rel_diff(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]) / std::max(std::abs(b[i]), 1e-30));
  return m;
}

// Whether every rank passed the same bits of x.
bool same_on_every_rank(double x) {
  const std::vector<double> all = dist::all_gather(tensor({x}, {1}, DType::Float64)).to_vector();
  return std::all_of(all.begin(), all.end(), [&](double y) { return std::memcmp(&x, &y, sizeof x) == 0; });
}

// train_lm(lm_run()) checkpointing into run_dir every 3 steps; rank 0 keeps
// a copy of the step-3 checkpoint in keep_dir (its progress callback runs
// right after that checkpoint is written, before step 4).
LMTrainResult lm_run_keeping_step_3(const std::string& run_dir, const std::string& keep_dir, double dropout = 0) {
  LMTrainConfig c = lm_run(dropout);
  c.run_dir = run_dir;
  c.checkpoint_every = 3;
  return train_lm(c, kStream, kValid, {}, [&](const LMTrainProgress& p) {
    if (p.phase != "train" || p.step != 3) return;
    std::filesystem::create_directories(keep_dir);
    std::filesystem::copy_file(run_dir + "/" + kCheckpointFile, keep_dir + "/" + kCheckpointFile,
                               std::filesystem::copy_options::overwrite_existing);
  });
}

// lm_run() resumed from the checkpoint in run_dir.
LMTrainResult lm_resume(const std::string& run_dir, double dropout = 0) {
  LMTrainConfig c = lm_run(dropout);
  c.run_dir = run_dir;
  c.checkpoint_every = 3;
  c.resume = true;
  return train_lm(c, kStream, kValid, {});
}

json read_json(const std::string& path) {
  std::ifstream in(path);
  REQUIRE_MESSAGE(in.good(), path << " is missing: run the one-process case first (CTest does)");
  return json::parse(std::string(std::istreambuf_iterator<char>(in), {}));
}

}  // namespace

TEST_CASE("trainers on one process: the reference of the 2-rank runs") {
  REQUIRE(dist::world_size() == 1);
  const json ref = run_all();
  // The LM's checkpoint at step 3 (its carried state: all 4 streams); the
  // checkpoints change nothing.
  std::filesystem::remove_all("dist_trainers");
  CHECK(lm_run_keeping_step_3("dist_trainers/lm_one_process_run", kOneProcessLM).losses ==
        ref["lm"]["losses"].get<std::vector<double>>());
  write_file_atomic(kReference, ref.dump());
}

TEST_CASE("trainers on 2 ranks x half the batch follow one process with the whole batch") {
  REQUIRE(dist::world_size() == 2);
  const json ref = read_json(kReference), got = run_all();
  for (const std::string run : {"lm", "vit", "mae", "video"}) {
    INFO(run);
    const auto losses = got[run]["losses"].get<std::vector<double>>();
    const double d = max_rel_diff(losses, ref[run]["losses"].get<std::vector<double>>());
    // Not bit-exact: the ranks' mean losses and gradients are averaged over
    // the ranks, which rounds differently from the mean over the whole batch.
    MESSAGE(run << ": max relative loss difference " << d << (d == 0 ? " (exact)" : " (not bit-exact)"));
    CHECK(d <= 1e-6);
    // The evaluation runs on every rank's own parameters: the same bits.
    const double eval = got[run]["eval"].get<double>();
    CHECK(same_on_every_rank(eval));
    CHECK(eval == doctest::Approx(ref[run]["eval"].get<double>()).epsilon(1e-5));
  }
}

TEST_CASE("trainers on 2 ranks: train_lm resumes bit-exactly, also from a one-process checkpoint") {
  REQUIRE(dist::world_size() == 2);
  const json ref = read_json(kReference);
  if (dist::rank() == 0) std::filesystem::remove_all("dist_trainers/lm_two_ranks_run");
  dist::barrier();
  const LMTrainResult whole = lm_run_keeping_step_3("dist_trainers/lm_two_ranks_run", kTwoRanksLM);
  const LMTrainResult resumed = lm_resume(kTwoRanksLM);
  CHECK(resumed.losses == whole.losses);
  // The one-process checkpoint holds all 4 streams' state; each rank takes
  // its 2 (from a copy: the resumed run writes its own checkpoint).
  const std::string copy = "dist_trainers/lm_from_one_process";
  if (dist::rank() == 0) {
    std::filesystem::create_directories(copy);
    std::filesystem::copy_file(kOneProcessLM + "/" + kCheckpointFile, copy + "/" + kCheckpointFile,
                               std::filesystem::copy_options::overwrite_existing);
  }
  dist::barrier();
  const LMTrainResult from_one = lm_resume(copy);
  const auto ref_losses = ref["lm"]["losses"].get<std::vector<double>>();
  REQUIRE(from_one.losses.size() == 6);
  for (size_t i = 0; i < 3; ++i) CHECK(from_one.losses[i] == ref_losses[i]);  // from the checkpoint
  CHECK(max_rel_diff(from_one.losses, ref_losses) <= 1e-6);
}

TEST_CASE("trainers on 2 ranks: train_lm with dropout resumes bit-exactly") {
  // Each rank draws its masks from its own stream (dist::RankStream), and the
  // shared generator stays equal on both: rank 0's checkpoint resumes both.
  REQUIRE(dist::world_size() == 2);
  if (dist::rank() == 0) std::filesystem::remove_all("dist_trainers/lm_dropout_run");
  dist::barrier();
  const LMTrainResult whole = lm_run_keeping_step_3("dist_trainers/lm_dropout_run", "dist_trainers/lm_dropout", 0.3);
  CHECK(lm_resume("dist_trainers/lm_dropout", 0.3).losses == whole.losses);
  // The masks count: not the run without dropout.
  CHECK(whole.losses != train_lm(lm_run(), kStream, kValid, {}).losses);
}

TEST_CASE("trainers on 2 ranks: a batch that does not split over the ranks is a clear error on every rank") {
  REQUIRE(dist::world_size() == 2);
  LMTrainConfig c = lm_run();
  c.batch = 3;
  CHECK_THROWS_WITH_AS(train_lm(c, kStream, kValid, {}),
                       doctest::Contains("train_lm: batch: the batch of 3 does not split evenly over 2 ranks"),
                       ValueError);
  VideoTrainConfig v = video_run();
  v.batch = 3;  // 3 clips x 2 items fit the 8 images but not 2 ranks
  CHECK_THROWS_WITH_AS(train_video(v, items(), items()), doctest::Contains("train_video: batch: the batch of 3"),
                       ValueError);
  dist::barrier();
}

TEST_CASE("trainers on 2 ranks: a step that trains the whole batch on every rank is a clear error") {
  REQUIRE(dist::world_size() == 2);
  Generator gen(1);
  nn::Linear model(3, 1, true, gen);
  LoopConfig cfg;
  cfg.steps = 2;
  cfg.batch = 4;
  cfg.data_parallel = true;
  LoopHooks hooks;
  hooks.step = [&](int64_t) {  // forgets dist::BatchShard: each rank trains all 4 rows
    const Tensor x = randn({4, 3}, 0.0, 1.0, DType::Float32, gen);
    return StepOutput{mean(model.forward(x)), x.size(0)};
  };
  CHECK_THROWS_WITH_AS(train_loop(model, cfg, hooks),
                       "train: step 0 trained 8 rows of a batch of 4 over 2 ranks; each process must train its share "
                       "of the batch (dist::BatchShard)",
                       ValueError);
  dist::barrier();
}

TEST_CASE("trainers on 2 ranks: check_ranks_agree leaves out each rank's device and names another key") {
  REQUIRE(dist::world_size() == 2);
  // One GPU per rank is a legitimate difference; other steps are not.
  const std::string dev = "cuda:" + std::to_string(dist::rank());
  CHECK_NOTHROW(check_ranks_agree({{"device", dev}, {"cell", {{"steps", 3}, {"device", dev}}}}, "test"));
  CHECK_THROWS_WITH_AS(check_ranks_agree({{"cell", {{"steps", 3 + dist::rank()}, {"device", dev}}}}, "test"),
                       "test: rank 1 of 2 was started with other options than rank 0 (every rank must be given the "
                       "same): /cell/steps: rank 0 3, rank 1 4",
                       ValueError);
  dist::barrier();
}
