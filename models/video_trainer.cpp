#include "tmem/models/video_trainer.h"

#include <algorithm>
#include <chrono>

#include "tmem/core/autograd.h"
#include "tmem/core/device_backend.h"
#include "tmem/dist/sampler.h"
#include "tmem/models/train_stats.h"
#include "tmem/nn/data_loader.h"
#include "tmem/ops/shape.h"

namespace tmem::models {

using nlohmann::json;

void check_video_train_config(const VideoTrainConfig& c) {
  video_backbone_config(c.model);
  check<ValueError>(c.steps >= 1 && c.batch >= 1 && c.eval_clips >= 1 && c.eval_batch >= 1,
                    "train_video: expected steps, batch, eval_clips and eval_batch >= 1, but got ", c.steps, ", ",
                    c.batch, ", ", c.eval_clips, " and ", c.eval_batch);
  check<ValueError>(c.model.frames == c.data.frames && c.model.size == c.data.size,
                    "train_video: the model expects ", c.model.frames, " frames of ", c.model.size, " x ",
                    c.model.size, ", but the clips have ", c.data.frames, " frames of ", c.data.size, " x ",
                    c.data.size);
}

json video_config_to_json(const VideoTrainConfig& c) {
  check_video_train_config(c);
  const VideoConfig& m = c.model;
  const int64_t matched = video_backbone_config(m).mlp_hidden, mlp_hidden = matched > 0 ? matched : 4 * m.dim;
  const MovingFashionMNISTOptions& d = c.data;
  json j = {{"method", m.method}, {"frames", m.frames}, {"size", m.size}, {"patch", m.patch},
            {"patches_per_frame", video_patches(m)}, {"dim", m.dim}, {"layers", m.layers}, {"heads", m.heads},
            {"mlp_hidden", mlp_hidden}, {"classes", m.classes}, {"dropout", m.dropout},
            {"clips", {{"items", d.items}, {"min_speed", d.min_speed}, {"max_speed", d.max_speed},
                       {"occlusion", d.occlusion}, {"occluder_width", d.occluder_width},
                       {"occluder_value", d.occluder_value}, {"occluded_frames", d.occluded_frames}}},
            {"steps", c.steps}, {"batch", c.batch}, {"lr", c.lr}, {"min_lr", c.min_lr}, {"warmup", c.warmup},
            {"weight_decay", c.weight_decay}, {"clip", c.clip}, {"seed", c.seed}, {"eval_clips", c.eval_clips},
            {"eval_seed", c.eval_seed}, {"eval_batch", c.eval_batch}, {"device", c.device}};
  if (m.method == VideoMethod::joint) j["pooling"] = "mean of all T x N output tokens";
  if (m.method == VideoMethod::registers) {
    j["registers"] = m.registers;
    j["pooling"] = "mean of the last frame's N patch and R register output tokens";
  }
  if (m.method == VideoMethod::tensor) {
    j["memory"] = {{"channels", m.memory.channels}, {"grid", {m.memory.D, m.memory.H, m.memory.W}},
                   {"chunk", m.memory.chunk}, {"every", m.memory_every}, {"gamma_init", m.memory.gamma_init},
                   {"sigma_scale", m.memory.sigma_scale}};
    j["pooling"] = "mean of the last frame's N output tokens";
  }
  return j;
}

int64_t video_parameters(const VideoTrainConfig& c) {
  Generator gen(0);
  return VideoModel(c.model, gen).num_parameters();
}

MovingFashionMNISTBatch evaluation_clips(const MovingFashionMNIST& data, uint64_t seed, int64_t first, int64_t count) {
  check<ValueError>(first >= 0 && count >= 1, "evaluation_clips: expected first >= 0 and count >= 1, but got ", first,
                    " and ", count);
  Generator seeds(seed);
  for (int64_t i = 0; i < first; ++i) seeds.next_u64();
  std::vector<Tensor> frames, labels, positions, occluded;
  for (int64_t i = 0; i < count; ++i) {
    Generator gen(seeds.next_u64());
    MovingFashionMNISTBatch clip = data.sample(1, gen);
    frames.push_back(clip.frames);
    labels.push_back(clip.labels);
    positions.push_back(clip.positions);
    occluded.push_back(clip.occluded);
  }
  NoGradGuard no_grad;
  return {cat(frames, 0), cat(labels, 0), cat(positions, 0), cat(occluded, 0)};
}

VideoScore evaluate_video(VideoModel& model, const MovingFashionMNIST& data, int64_t clips, uint64_t seed,
                          int64_t batch, const std::function<void(const VideoScore&)>& progress) {
  check<ValueError>(clips >= 1 && batch >= 1, "evaluate_video: expected clips >= 1 and batch >= 1, but got ", clips,
                    " and ", batch);
  const Device device = model.space_pos.device();
  const bool was_training = model.is_training();
  model.eval();
  NoGradGuard no_grad;
  int64_t hit = 0, occluded_hit = 0;
  VideoScore score;
  for (int64_t c0 = 0; c0 < clips; c0 += batch) {
    const MovingFashionMNISTBatch b = evaluation_clips(data, seed, c0, std::min(batch, clips - c0));
    const Tensor logits = model.forward(b.frames.to(device));
    hit += set_correct(logits, b.labels);
    const std::vector<std::vector<int64_t>> sets = predicted_sets(logits, b.labels);
    const std::vector<int64_t> labels = b.labels.to_int_vector(), occ = b.occluded.to_int_vector();
    const int64_t I = b.labels.shape()[1];
    for (size_t k = 0; k < occ.size(); ++k) {
      if (occ[k] < 0) continue;
      ++score.occluded_clips;
      const int64_t cls = labels[k * static_cast<size_t>(I) + static_cast<size_t>(occ[k])];
      occluded_hit += std::find(sets[k].begin(), sets[k].end(), cls) != sets[k].end();
    }
    score.clips += static_cast<int64_t>(occ.size());
    score.accuracy = static_cast<double>(hit) / static_cast<double>(score.clips);
    score.occluded_item =
        score.occluded_clips ? static_cast<double>(occluded_hit) / static_cast<double>(score.occluded_clips) : 0.0;
    if (progress) progress(score);
  }
  model.train(was_training);
  return score;
}

VideoTrainResult train_video(const VideoTrainConfig& cfg, const ImageDataset& train, const ImageDataset& test,
                             const std::function<void(const VideoTrainProgress&)>& progress) {
  check_video_train_config(cfg);
  const Device device = parse_device(cfg.device);
  if (!device.is_cpu()) device_backend(device, "train");  // a clear error before any work
  const MovingFashionMNIST train_clips(train, cfg.data), test_clips(test, cfg.data);
  Generator gen(cfg.seed), clip_gen(cfg.seed + 1);
  // Every training image is an item once per epoch: a DataLoader over the
  // image indices hands each step batch x items distinct images (reshuffled
  // every epoch, the last partial batch dropped), and clip_gen then draws
  // their motion. The loader draws from clip_gen when an epoch starts.
  const int64_t M = train.images.shape()[0], per_step = cfg.batch * cfg.data.items;
  check<ValueError>(per_step <= M, "train_video: a step needs batch x items = ", cfg.batch, " x ", cfg.data.items,
                    " = ", per_step, " distinct training images, but the set has ", M);
  nn::DataLoader items(std::vector<Tensor>{arange(static_cast<double>(M), DType::Int64)}, {per_step, true, true}, clip_gen);
  VideoModel model(cfg.model, gen);
  model.to(device);
  LoopConfig loop{cfg.steps, cfg.batch, {cfg.steps, cfg.lr, cfg.min_lr, cfg.warmup, cfg.weight_decay, cfg.clip}, cfg,
                  video_config_to_json(cfg), "tmem::models::VideoModel"};
  loop.window = 50;
  // Data parallel over the ranks of a tmem::dist job: every rank draws the
  // whole batch of clips from clip_gen and trains its rows.
  const dist::BatchShard shard(cfg.batch, "train_video: batch");
  loop.data_parallel = shard.sharded();
  LoopHooks hooks;
  hooks.generators = {{"model_rng", &gen}, {"data_rng", &clip_gen}};
  hooks.step = [&](int64_t step) {
    const MovingFashionMNISTBatch b = train_clips.clips_of(items.next()[0].to_int_vector(), clip_gen);
    const Tensor labels = shard.take(b.labels);
    const dist::RankStream own_dropout(gen, step);  // data parallel: this rank's dropout masks
    const Tensor frames = shard.take(b.frames).to(device);
    Tensor logits = model.forward(frames);
    return StepOutput{set_cross_entropy(logits, labels), frames.size(0),
                      static_cast<double>(set_correct(logits, labels)), static_cast<double>(frames.size(0))};
  };
  hooks.save_state = [&] { return items.state_dict(); };
  hooks.load_state = [&](const std::map<std::string, Tensor>& state) { items.load_state_dict(state); };
  hooks.probe = [&](const nn::TensorMemoryProbe& probe) {
    return json{{"memory", memory_internals(*model.backbone, probe)}};
  };
  VideoTrainResult res;
  res.clips_per_second = train_and_report(model, loop, hooks, cfg.batch, progress, res);

  const int64_t batches = (cfg.eval_clips + cfg.eval_batch - 1) / cfg.eval_batch;
  const auto e0 = std::chrono::steady_clock::now();
  res.test = evaluate_video(model, test_clips, cfg.eval_clips, cfg.eval_seed, cfg.eval_batch, [&](const VideoScore& s) {
    if (!progress) return;
    const double secs = seconds_since(e0);
    progress({"test", (s.clips + cfg.eval_batch - 1) / cfg.eval_batch, batches, 0.0, s.accuracy, 0.0,
              static_cast<double>(s.clips) / std::max(secs, 1e-9), secs});
  });
  res.gates = memory_gates(*model.backbone);
  return res;
}

}  // namespace tmem::models
