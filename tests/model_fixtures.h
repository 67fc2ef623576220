// Tiny models and synthetic data shared by the model tests (test_lm,
// test_vit, test_video, test_device_models): configurations that train in
// milliseconds and data with an easy, learnable signal.
#pragma once
#include <string>
#include <vector>

#include "tmem/data/idx.h"
#include "tmem/models/lm_trainer.h"
#include "tmem/models/video_trainer.h"
#include "tmem/models/vit_trainer.h"

namespace tmem::test {

/// A language model of V = 11 tokens, d = 16, 2 layers of 2 heads,
/// segments of 12, window 3, no dropout, memory C = 4 at 3^3, chunk 1.
inline models::LMConfig tiny_lm(models::LMMethod method) {
  models::LMConfig c;
  c.method = method;
  c.vocab = 11;
  c.dim = 16;
  c.layers = 2;
  c.heads = 2;
  c.seq = 12;
  c.window = 3;
  c.dropout = 0.0;
  c.memory.channels = 4;
  c.memory.D = c.memory.H = c.memory.W = 3;
  c.memory.chunk = 1;
  return c;
}

/// n tokens of a stream of period 10 over the ids 0..9.
inline std::vector<int64_t> periodic_stream(int64_t n) {
  std::vector<int64_t> s(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) s[i] = (i % 5) * 2 + (i / 5) % 2;
  return s;
}

/// A small ViT on 28 x 28 images, patch 4 (a 7 x 7 grid of 49 patches).
inline models::ViTConfig tiny_vit(models::ViTMethod method, int64_t layers = 2) {
  models::ViTConfig c;
  c.method = method;
  c.dim = 16;
  c.layers = layers;
  c.heads = 2;
  c.registers = 2;
  c.memory.channels = 4;
  c.memory.D = c.memory.H = c.memory.W = 3;
  return c;
}

/// n labelled size x size images: class 0 bright on the left half, class 1
/// on the right, plus noise.
inline ImageDataset halves(int64_t n, int64_t size, uint64_t seed) {
  Generator gen(seed);
  std::vector<double> px(static_cast<size_t>(n * size * size));
  std::vector<int64_t> labels(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) {
    labels[k] = k % 2;
    for (int64_t i = 0; i < size; ++i)
      for (int64_t j = 0; j < size; ++j)
        px[(k * size + i) * size + j] = ((j < size / 2) == (labels[k] == 0) ? 0.8 : 0.1) + 0.1 * gen.uniform();
  }
  return {tensor(px, {n, size, size}), tensor_int(labels, {n})};
}

/// A small video model on 16 x 16 frames, patch 4 (a 4 x 4 grid of 16
/// patches, chunk 4: 4 memory steps per frame).
inline models::VideoConfig tiny_video(models::VideoMethod method, int64_t frames = 4) {
  models::VideoConfig c;
  c.method = method;
  c.frames = frames;
  c.size = 16;
  c.patch = 4;
  c.dim = 16;
  c.layers = 2;
  c.heads = 2;
  c.registers = 2;
  c.memory.channels = 4;
  c.memory.D = c.memory.H = c.memory.W = 3;
  return c;
}

/// M synthetic 28 x 28 items of 4 classes, item m of class m % 4, each class
/// a pattern: horizontal stripes, vertical stripes, a checkerboard, or solid
/// (pixels 0 or 1, so LayerNorm cannot wash the difference out as it would
/// brightness levels).
inline ImageDataset pattern_items(int64_t M) {
  std::vector<double> px(static_cast<size_t>(M * 28 * 28));
  std::vector<int64_t> labels(static_cast<size_t>(M));
  for (int64_t m = 0; m < M; ++m) {
    labels[m] = m % 4;
    for (int64_t y = 0; y < 28; ++y)
      for (int64_t x = 0; x < 28; ++x) {
        const bool on = m % 4 == 0 ? y % 4 < 2 : m % 4 == 1 ? x % 4 < 2 : m % 4 == 2 ? (y / 4 + x / 4) % 2 == 0 : true;
        px[(m * 28 + y) * 28 + x] = on ? 1.0 : 0.0;
      }
  }
  return {tensor(px, {M, 28, 28}), tensor_int(labels, {M})};
}

/// The language models of tiny_lm (V = 11, d = 16, 2
/// layers, segments of 8, memory C = 4 at 3^3, chunk 1), 3 steps of 4 streams
/// on `device`.
inline models::LMTrainConfig tiny_lm_run(models::LMMethod method, const std::string& device) {
  models::LMTrainConfig c;
  c.model = tiny_lm(method);
  c.model.seq = 8;
  c.batch = 4;
  c.steps = 3;
  c.warmup = 1;
  c.lr = 2e-2;
  c.eval_batch = 2;
  c.device = device;
  return c;
}

/// tiny_vit on 12 x 12 images (patch 4, d = 16, 2
/// layers, memory C = 4 at 3^3, chunk 2; MAE decoder d = 8, 1 layer), 3 steps
/// of 8 images on `device`.
inline models::ViTTrainConfig tiny_vit_run(const std::string& task, models::ViTMethod method, const std::string& device) {
  models::ViTTrainConfig c;
  c.task = task;
  models::ViTConfig& e = c.model.encoder;
  e = tiny_vit(method);
  e.image = 12;
  e.classes = 2;
  e.memory.chunk = 2;
  c.model.decoder_dim = 8;
  c.model.decoder_layers = 1;
  c.model.decoder_heads = 2;
  c.steps = 3;
  c.batch = 8;
  c.warmup = 1;
  c.lr = 5e-3;
  c.eval_batch = 8;
  c.device = device;
  return c;
}

/// tiny_video on 2 frames of 64 x 64 (patch 16, d = 32,
/// 2 layers, memory C = 4 at 3^3), 3 steps of 4 clips and 6 evaluation
/// clips, occlusion on, on `device`.
inline models::VideoTrainConfig tiny_video_run(models::VideoMethod method, const std::string& device) {
  models::VideoTrainConfig c;
  c.model = tiny_video(method, 2);
  c.data.frames = 2;
  c.model.size = c.data.size = 64;
  c.model.patch = 16;
  c.model.dim = 32;
  c.model.heads = 4;
  c.model.classes = 4;
  c.data.occlusion = true;
  c.data.occluded_frames = 1;
  c.steps = 3;
  c.batch = 4;
  c.warmup = 1;
  c.lr = 3e-3;
  c.eval_clips = 6;
  c.eval_batch = 4;
  c.device = device;
  return c;
}

}  // namespace tmem::test
