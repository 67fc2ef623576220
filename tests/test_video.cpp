// The Moving Fashion-MNIST video models (models/video.h, models/video_trainer.h):
// shapes, causality over frames of the frame-recurrent methods, the state
// they carry, the set loss and set accuracy on hand-made logits, parameter
// matching, the fixed evaluation clips, a short training run on synthetic
// clips, and the error messages.
#include <algorithm>
#include <cmath>

#include "tmem/models/video_trainer.h"
#include "model_fixtures.h"
#include "test_util.h"

using namespace tmem;
using namespace tmem::models;
using tmem::test::check_close;
using tmem::test::pattern_items;
using tmem::test::tiny_video;

namespace {

Tensor random_clips(int64_t B, int64_t T, int64_t size, uint64_t seed) {
  Generator gen(seed);
  return rand({B, T, size, size}, 0.0, 1.0, DType::Float32, gen);
}

// clips [B, T, S, S] with frame t of every clip replaced by noise.
Tensor change_frame(const Tensor& clips, int64_t t, uint64_t seed) {
  Tensor out = tensor(contiguous_data(clips).to_vector(), clips.shape());
  const int64_t B = out.shape()[0], T = out.shape()[1], F = out.shape()[2] * out.shape()[3];
  Generator gen(seed);
  float* p = out.data<float>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < F; ++i) p[(b * T + t) * F + i] = static_cast<float>(gen.uniform());
  return out;
}

// max |a[:, t] - b[:, t]| of two [B, T, ...] tensors.
double frame_change(const Tensor& a, const Tensor& b, int64_t t) {
  return max(abs(slice(a, 1, t, t + 1) - slice(b, 1, t, t + 1))).item();
}


}  // namespace

TEST_CASE("video models: every method maps clips [B, T, S, S] to tokens [B, T, M, C] and logits [B, K]") {
  Tensor x = random_clips(2, 4, 16, 1);
  for (const auto& m : video_methods()) {
    INFO(to_string(m));
    Generator gen(2);
    VideoModel model(tiny_video(m), gen);
    NoGradGuard no_grad;
    CHECK(video_patches(model.cfg) == 16);
    CHECK(model.forward_tokens(x).shape() == Shape{2, 4, m == VideoMethod::registers ? 18 : 16, 16});
    CHECK(model.forward(x).shape() == Shape{2, 10});
    CHECK(model.forward(slice(x, 1, 0, 3)).shape() == Shape{2, 10});  // fewer frames
    CHECK(model.time_pos.defined() == (m == VideoMethod::joint));
    CHECK(model.registers.defined() == (m == VideoMethod::registers));
    CHECK((model.backbone->blocks()[0]->memory != nullptr) == (m == VideoMethod::tensor));
  }
  Generator gen(3);
  VideoModel tensor_model(tiny_video(VideoMethod::tensor), gen);
  CHECK(tensor_model.backbone->blocks()[1]->memory->gamma.item() == doctest::Approx(-2.0));
  CHECK(tensor_model.backbone->blocks()[1]->memory->opt.chunk == 4);
}

TEST_CASE("video models: registers and tensor are causal over frames (joint is not)") {
  Tensor x = random_clips(2, 4, 16, 4);
  Tensor x2 = change_frame(x, 2, 5);
  for (const auto& m : video_methods()) {
    INFO(to_string(m));
    Generator gen(6);
    VideoModel model(tiny_video(m), gen);
    NoGradGuard no_grad;
    Tensor a = model.forward_tokens(x), b = model.forward_tokens(x2);
    CHECK(frame_change(a, b, 2) > 1e-6);
    CHECK(frame_change(a, b, 3) > 1e-6);
    if (m == VideoMethod::joint) {
      CHECK(frame_change(a, b, 0) > 1e-6);  // bidirectional over the whole clip
    } else {
      CHECK(frame_change(a, b, 0) == 0.0);
      CHECK(frame_change(a, b, 1) == 0.0);
    }
  }
}

TEST_CASE("video models: the carried registers and memory bring frame 0 to the last frame's output") {
  Tensor x = random_clips(2, 4, 16, 7);
  Tensor x0 = change_frame(x, 0, 8);
  for (const auto m : {VideoMethod::registers, VideoMethod::tensor}) {
    INFO(to_string(m));
    Generator gen(9);
    VideoModel model(tiny_video(m), gen);
    {
      NoGradGuard no_grad;
      CHECK(max(abs(model.forward(x) - model.forward(x0))).item() > 1e-6);
    }
    // Backpropagation through every frame: the loss reaches what only frame 0 uses.
    set_cross_entropy(model.forward(x), tensor_int({1, 2, 3, 3}, {2, 2})).backward();
    if (m == VideoMethod::registers) {
      REQUIRE(model.registers.grad().defined());
      CHECK(max(abs(model.registers.grad())).item() > 0);
    } else {
      for (const auto& blk : model.backbone->blocks()) {
        REQUIRE(blk->memory);
        for (const Tensor& t : {blk->memory->gamma, blk->memory->write_proj->weight, blk->memory->coord->weight,
                                blk->memory->cell->w.pw}) {
          REQUIRE(t.grad().defined());
          CHECK(max(abs(t.grad())).item() > 0);
        }
      }
    }
  }
}

TEST_CASE("set loss and set accuracy: exact values on hand-made logits") {
  Tensor labels = tensor_int({0, 1, 3, 3}, {2, 2});
  check_close(set_targets(labels, 4), {0.5, 0.5, 0, 0, 0, 0, 0, 1});
  Tensor logits = tensor({0, 0, 0, 0, 1, 2, 3, 4}, {2, 4}).requires_grad_();
  Tensor loss = set_cross_entropy(logits, labels);
  const double row1 = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0) + std::exp(4.0)) - 4.0;
  CHECK(loss.item() == doctest::Approx((std::log(4.0) + row1) / 2).epsilon(1e-6));
  loss.backward();
  // d loss / d logits = (softmax - target) / B
  const double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0) + std::exp(4.0);
  check_close(logits.grad(), {-0.125, -0.125, 0.125, 0.125, std::exp(1.0) / z / 2, std::exp(2.0) / z / 2,
                              std::exp(3.0) / z / 2, (std::exp(4.0) / z - 1) / 2});

  // Two items: the top 2 must be their classes; one shared class: the top 1.
  Tensor z6 = tensor({5, 4, 1, 0,    // {0, 1}: hit
                      5, 1, 4, 0,    // {0, 1}: predicted {0, 2}, miss
                      1, 5, 0, 0,    // {1}: hit
                      5, 4, 0, 0,    // {1}: predicted {0}, miss
                      4, 5, 0, 0,    // {1, 0}: hit (order does not matter)
                      1, 1, 1, 1},   // {0, 1}: ties go to the lower class, hit
                     {6, 4});
  Tensor y6 = tensor_int({0, 1, 0, 1, 1, 1, 1, 1, 1, 0, 0, 1}, {6, 2});
  CHECK(set_correct(z6, y6) == 4);
  const auto sets = predicted_sets(z6, y6);
  CHECK(sets[1] == std::vector<int64_t>{0, 2});
  CHECK(sets[3] == std::vector<int64_t>{0});
  CHECK(sets[4] == std::vector<int64_t>{1, 0});
  CHECK(sets[5] == std::vector<int64_t>{0, 1});
  CHECK_THROWS_WITH_AS(set_targets(tensor_int({0, 4}, {1, 2}), 4), doctest::Contains("set_targets"), IndexError);
  CHECK_THROWS_WITH_AS(set_cross_entropy(zeros({3, 4}), labels), doctest::Contains("set_cross_entropy"), ShapeError);
  CHECK_THROWS_WITH_AS(predicted_sets(zeros({2, 4}), zeros({2, 2})), doctest::Contains("predicted_sets"), DtypeError);
}

TEST_CASE("set loss: a target-0 class with logit -inf leaves the loss finite, and float64 logits work") {
  // target * log_softmax gave 0 * -inf = NaN (issue 15, defect 9).
  const double inf = std::numeric_limits<double>::infinity();
  Tensor labels = tensor_int({1, 2}, {1, 2});
  for (DType dt : {DType::Float32, DType::Float64}) {
    CAPTURE(dtype_name(dt));
    Tensor logits = tensor({-inf, 0, 0, 0}, {1, 4}, dt).requires_grad_();
    Tensor loss = set_cross_entropy(logits, labels);
    CHECK(loss.dtype() == dt);
    CHECK(loss.item() == doctest::Approx(std::log(3.0)));
    loss.backward();
    // softmax - target: {0, 1/3 - 1/2, 1/3 - 1/2, 1/3}
    check_close(logits.grad(), {0, -1.0 / 6, -1.0 / 6, 1.0 / 3}, 1e-6, 1e-6);
  }
  // A -inf logit on a target class is an infinite loss, not NaN.
  CHECK(set_cross_entropy(tensor({0, -inf, 0, 0}, {1, 4}), labels).item() == inf);
  CHECK_THROWS_WITH_AS(set_cross_entropy(zeros({1, 4}), tensor_int({1, 4}, {1, 2})),
                       doctest::Contains("set_cross_entropy: label 4 is outside [0, 4)"), IndexError);
}

TEST_CASE("video parameter matching: the three methods within 5% (joint and registers get wider MLPs)") {
  for (int64_t dim : {64, 96})
    for (int64_t every : {1, 2}) {
      INFO("dim " << dim << " memory every " << every);
      std::vector<int64_t> counts;
      for (const auto& m : video_methods()) {
        VideoConfig c;
        c.method = m;
        c.dim = dim;
        c.heads = 4;
        c.frames = 10;
        c.memory_every = every;
        Generator gen(0);
        counts.push_back(VideoModel(c, gen).num_parameters());
      }
      const auto [lo, hi] = std::minmax_element(counts.begin(), counts.end());
      CHECK(static_cast<double>(*hi - *lo) / static_cast<double>(*hi) < 0.05);
    }
  VideoConfig c;
  c.method = VideoMethod::joint;
  CHECK(video_backbone_config(c).mlp_hidden > 4 * c.dim);
  CHECK(video_backbone_config(c).max_len == c.frames * 16);
  c.method = VideoMethod::registers;
  CHECK(video_backbone_config(c).max_len == 20);
  c.method = VideoMethod::tensor;
  CHECK(video_backbone_config(c).mlp_hidden == 0);
  CHECK(!video_backbone_config(c).causal);
}

TEST_CASE("evaluation_clips: fixed, independent of batching, the same items and motion with and without occlusion") {
  MovingFashionMNISTOptions opt;
  opt.frames = 4;
  opt.size = 32;
  opt.occluded_frames = 2;
  MovingFashionMNIST plain(pattern_items(8), opt);
  opt.occlusion = true;
  MovingFashionMNIST occluded(pattern_items(8), opt);
  MovingFashionMNISTBatch all = evaluation_clips(plain, 5, 0, 4);
  MovingFashionMNISTBatch tail = evaluation_clips(plain, 5, 2, 2);
  REQUIRE(all.frames.shape() == Shape{4, 4, 32, 32});
  CHECK(contiguous_data(slice(all.frames, 0, 2, 4)).to_vector() == tail.frames.to_vector());
  CHECK(evaluation_clips(plain, 5, 0, 4).frames.to_vector() == all.frames.to_vector());
  CHECK(evaluation_clips(plain, 6, 0, 4).frames.to_vector() != all.frames.to_vector());
  MovingFashionMNISTBatch occ = evaluation_clips(occluded, 5, 0, 4);
  CHECK(occ.labels.to_int_vector() == all.labels.to_int_vector());
  CHECK(occ.positions.to_vector() == all.positions.to_vector());
  CHECK(occ.frames.to_vector() != all.frames.to_vector());
  CHECK(contiguous_data(slice(occ.frames, 1, 0, 2)).to_vector() == contiguous_data(slice(all.frames, 1, 0, 2)).to_vector());
  for (int64_t k : occ.occluded.to_int_vector()) CHECK((k == 0 || k == 1));
  CHECK_THROWS_WITH_AS(evaluation_clips(plain, 5, 0, 0), doctest::Contains("evaluation_clips"), ValueError);
}

namespace {

// A short training run of `method` on synthetic clips of pattern_items
// (2 frames of 64 x 64, patch 16, d = 32): the set loss falls below the
// uniform guess, and the result is complete.
void smoke_train(VideoMethod method) {
  VideoTrainConfig c;
  c.model = tiny_video(method, 2);
  c.model.size = 64;
  c.model.patch = 16;  // 16 patches per frame
  c.model.dim = 32;
  c.model.heads = 4;
  c.model.classes = 4;
  c.data.frames = 2;
  c.data.size = 64;
  c.data.occluded_frames = 1;
  c.steps = 100;
  c.batch = 16;
  c.warmup = 4;
  c.lr = 3e-3;
  c.eval_clips = 24;
  c.eval_batch = 10;
  int64_t train_reports = 0, test_reports = 0;
  const ImageDataset items = pattern_items(32);
  VideoTrainResult r = train_video(c, items, items, [&](const VideoTrainProgress& p) {
    (p.phase == "train" ? train_reports : test_reports) += 1;
  });
  REQUIRE(r.losses.size() == 100);
  CHECK(train_reports == 100);
  CHECK(test_reports == 3);
  double first = 0, last = 0;
  for (int i = 0; i < 10; ++i) first += r.losses[i] / 10, last += r.losses[90 + i] / 10;
  CHECK(last < first - 0.1);
  CHECK(last < std::log(4.0) - 0.05);  // below the uniform guess
  CHECK(r.test.clips == 24);
  CHECK(r.test.occluded_clips == 0);
  CHECK(r.gates.size() == (method == VideoMethod::tensor ? 2u : 0u));
  CHECK(r.parameters == video_parameters(c));
  CHECK(video_config_to_json(c)["method"] == to_string(method));
}

}  // namespace

TEST_CASE("video training smoke test: the set loss falls on synthetic clips (joint)") { smoke_train(VideoMethod::joint); }
TEST_CASE("video training smoke test: the set loss falls on synthetic clips (registers)") { smoke_train(VideoMethod::registers); }
TEST_CASE("video training smoke test: the set loss falls on synthetic clips (tensor)") { smoke_train(VideoMethod::tensor); }

TEST_CASE("evaluate_video: the same fixed clips whatever the batch, and the occluded item scored") {
  MovingFashionMNISTOptions opt;
  opt.frames = 2;
  opt.occluded_frames = 1;
  opt.occlusion = true;
  MovingFashionMNIST clips(pattern_items(8), opt);
  VideoConfig c = tiny_video(VideoMethod::registers, 2);
  c.size = 64;
  c.patch = 16;
  c.classes = 4;
  Generator gen(12);
  VideoModel model(c, gen);
  const VideoScore a = evaluate_video(model, clips, 10, 3, 4), b = evaluate_video(model, clips, 10, 3, 10);
  CHECK(a.accuracy == b.accuracy);
  CHECK(a.occluded_item == b.occluded_item);
  CHECK(a.clips == 10);
  CHECK(a.occluded_clips == 10);
  CHECK(model.is_training());
  MovingFashionMNISTBatch set = evaluation_clips(clips, 3, 0, 10);
  NoGradGuard no_grad;
  model.eval();
  CHECK(a.accuracy == static_cast<double>(set_correct(model.forward(set.frames), set.labels)) / 10);
  CHECK_THROWS_WITH_AS(evaluate_video(model, clips, 0, 3, 4), doctest::Contains("evaluate_video"), ValueError);
}

TEST_CASE("video errors name the op") {
  Generator gen(11);
  VideoConfig bad = tiny_video(VideoMethod::joint);
  bad.patch = 5;
  CHECK_THROWS_WITH_AS(VideoModel(bad, gen), doctest::Contains("VideoModel: frame size 16"), ValueError);
  CHECK_THROWS_WITH_AS(parse_video_method("slowfast"), doctest::Contains("VideoModel: unknown method \"slowfast\""),
                       ValueError);
  CHECK_THROWS_WITH_AS(parse_video_method("slowfast"),
                       "VideoModel: unknown method \"slowfast\" (expected joint, registers or tensor)", ValueError);
  for (const auto m : video_methods()) {
    CHECK(parse_video_method(to_string(m)) == m);
    CHECK(nlohmann::json(to_string(m)).get<VideoMethod>() == m);
  }
  VideoModel joint(tiny_video(VideoMethod::joint, 2), gen);
  CHECK_THROWS_WITH_AS(joint.forward(random_clips(1, 3, 16, 1)), doctest::Contains("VideoModel"), ShapeError);
  VideoModel rec(tiny_video(VideoMethod::tensor), gen);
  CHECK_THROWS_WITH_AS(rec.forward(random_clips(1, 2, 20, 1)), doctest::Contains("[1,2,20,20]"), ShapeError);
  CHECK_THROWS_WITH_AS(rec.forward(zeros({2, 16, 16})), doctest::Contains("VideoModel"), ShapeError);
  VideoTrainConfig t;
  t.model.frames = 12;  // the clips have 16
  CHECK_THROWS_WITH_AS(check_video_train_config(t), doctest::Contains("train_video"), ValueError);
  t.model.frames = t.data.frames;
  t.steps = 0;
  CHECK_THROWS_WITH_AS(check_video_train_config(t), doctest::Contains("train_video"), ValueError);
}
