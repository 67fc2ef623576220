#include "tmem/models/video.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>

#include "tmem/core/autograd.h"
#include "tmem/core/enum_names.h"
#include "tmem/ops/elementwise.h"
#include "tmem/ops/reduction.h"
#include "tmem/ops/shape.h"
#include "tmem/ops/softmax.h"

namespace tmem::models {

VideoConfig::VideoConfig() {
  memory.channels = 16;
  memory.D = memory.H = memory.W = 4;
  memory.chunk = 4;
  memory.gamma_init = -2.0;
}

namespace {

constexpr std::array<std::string_view, 3> kVideoMethods = {"joint", "registers", "tensor"};

}  // namespace

std::string to_string(VideoMethod method) { return enum_name(kVideoMethods, method); }

VideoMethod parse_video_method(const std::string& name) {
  return parse_enum<VideoMethod>(kVideoMethods, name, "VideoModel: unknown method");
}

void to_json(nlohmann::json& j, VideoMethod method) { j = to_string(method); }

void from_json(const nlohmann::json& j, VideoMethod& method) { method = parse_video_method(j.get<std::string>()); }

const std::vector<VideoMethod>& video_methods() {
  using enum VideoMethod;
  static const std::vector<VideoMethod> m = {joint, registers, tensor};
  return m;
}

int64_t video_patches(const VideoConfig& cfg) {
  check<ValueError>(cfg.patch >= 1 && cfg.size >= 1 && cfg.size % cfg.patch == 0, "VideoModel: frame size ",
                    cfg.size, " is not a positive multiple of the patch size ", cfg.patch);
  const int64_t g = cfg.size / cfg.patch;
  return g * g;
}

BackboneConfig video_backbone_config(const VideoConfig& cfg) {
  const int64_t N = video_patches(cfg);
  check<ValueError>(cfg.frames >= 1 && cfg.classes >= 1 && cfg.mlp_hidden >= 0 && cfg.memory_every >= 1,
                    "VideoModel: expected frames >= 1, classes >= 1, mlp_hidden >= 0 and memory_every >= 1, but got ",
                    cfg.frames, ", ", cfg.classes, ", ", cfg.mlp_hidden, " and ", cfg.memory_every);
  check<ValueError>(cfg.method != VideoMethod::registers || cfg.registers >= 1, "VideoModel: expected registers >= 1, but got ",
                    cfg.registers);
  const int64_t tokens = cfg.method == VideoMethod::joint ? cfg.frames * N : N + (cfg.method == VideoMethod::registers ? cfg.registers : 0);
  return bidirectional_backbone_config(cfg.method == VideoMethod::tensor, cfg.dim, cfg.layers, cfg.heads, tokens, cfg.dropout,
                                       cfg.memory, cfg.memory_every, cfg.mlp_hidden);
}

VideoModel::VideoModel(const VideoConfig& c, Generator& gen) : cfg(c) {
  const BackboneConfig bc = video_backbone_config(cfg);
  const int64_t N = video_patches(cfg);
  embed = register_module("embed", std::make_shared<nn::PatchEmbed>(cfg.patch, cfg.dim, gen));
  space_pos = register_parameter("space_pos", randn({N, cfg.dim}, 0.0, 0.02, DType::Float32, gen));
  if (cfg.method == VideoMethod::joint)
    time_pos = register_parameter("time_pos", randn({cfg.frames, cfg.dim}, 0.0, 0.02, DType::Float32, gen));
  if (cfg.method == VideoMethod::registers)
    registers = register_parameter("registers", randn({cfg.registers, cfg.dim}, 0.0, 0.02, DType::Float32, gen));
  backbone = register_module("backbone", std::make_shared<Backbone>(bc, gen));
  head = register_module("head", std::make_shared<nn::Linear>(cfg.dim, cfg.classes, true, gen));
}

Tensor VideoModel::forward_tokens(const Tensor& frames) const {
  const int64_t S = cfg.size, N = video_patches(cfg), C = cfg.dim;
  const bool joint = cfg.method == VideoMethod::joint;
  check<ShapeError>(frames.dim() == 4 && frames.shape()[1] >= 1 && (!joint || frames.shape()[1] <= cfg.frames) &&
                        frames.shape()[2] == S && frames.shape()[3] == S,
                    "VideoModel: expected frames [B, 1 <= T", joint ? " <= " + std::to_string(cfg.frames) : "",
                    ", ", S, ", ", S, "], but got ", shape_str(frames.shape()));
  const int64_t B = frames.shape()[0], T = frames.shape()[1];
  // Every frame's patch tokens with their space positions: [B, T, N, C].
  Tensor x = reshape(embed->forward(reshape(frames, {B * T, S, S})), {B, T, N, C}) + space_pos;
  if (joint) {
    x = x + unsqueeze(slice(time_pos, 0, 0, T), 1);
    return reshape(backbone->forward(reshape(x, {B, T * N, C})), {B, T, N, C});
  }
  std::vector<Tensor> out;
  BackboneState state;  // tensor: the memory carried from frame to frame
  Tensor regs = registers.defined() ? expand(unsqueeze(registers, 0), {B, cfg.registers, C}) : Tensor();
  for (const Tensor& xt : unbind(x, 1)) {
    if (regs.defined()) {
      Tensor y = backbone->forward(cat({xt, regs}, 1));
      regs = slice(y, 1, N, N + cfg.registers);
      out.push_back(y);
    } else {
      out.push_back(backbone->forward(xt, state));
    }
  }
  return stack(out, 1);
}

Tensor VideoModel::forward(const Tensor& frames) const {
  Tensor y = forward_tokens(frames);
  const int64_t T = y.shape()[1];
  Tensor pooled = cfg.method == VideoMethod::joint ? mean(y, {1, 2}) : mean(squeeze(slice(y, 1, T - 1, T), 1), {1});
  return head->forward(pooled);
}

namespace {

void check_labels(const char* op, const Tensor& labels) {
  check<ShapeError>(labels.dim() == 2 && labels.shape()[0] >= 1 && labels.shape()[1] >= 1, op,
                    ": expected labels [B >= 1, I >= 1], but got ", shape_str(labels.shape()));
  check<DtypeError>(labels.dtype() == DType::Int64, op, ": expected int64 labels, but got ",
                    dtype_name(labels.dtype()));
}

void check_logits(const char* op, const Tensor& logits, const Tensor& labels) {
  check_labels(op, labels);
  check<ShapeError>(logits.dim() == 2 && logits.shape()[0] == labels.shape()[0] && logits.shape()[1] >= 1, op,
                    ": expected logits [B, K] and labels [B, I], but got logits ", shape_str(logits.shape()),
                    " labels ", shape_str(labels.shape()));
}

// The labels' values, each checked to lie in [0, classes).
std::vector<int64_t> label_values(const char* op, const Tensor& labels, int64_t classes) {
  std::vector<int64_t> y = labels.to_int_vector();
  for (int64_t c : y) check<IndexError>(c >= 0 && c < classes, op, ": label ", c, " is outside [0, ", classes, ")");
  return y;
}

}  // namespace

Tensor set_targets(const Tensor& labels, int64_t classes) {
  check_labels("set_targets", labels);
  const int64_t B = labels.shape()[0], I = labels.shape()[1];
  const std::vector<int64_t> y = label_values("set_targets", labels, classes);
  std::vector<double> target(static_cast<size_t>(B * classes), 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < I; ++i) target[b * classes + y[b * I + i]] += 1.0 / static_cast<double>(I);
  return tensor(target, {B, classes}).to(labels.device());
}

Tensor set_cross_entropy(const Tensor& logits, const Tensor& labels) {
  check_logits("set_cross_entropy", logits, labels);
  label_values("set_cross_entropy", labels, logits.shape()[1]);
  // sum_c target[b, c] log_softmax[b, c] = (1 / I) sum_i log_softmax[b, y[b, i]]:
  // only the classes with a target > 0 are read, so a class with target 0
  // may have logit -inf (target * log_softmax would be 0 * -inf = NaN).
  return -mean(gather(log_softmax(logits, 1), 1, labels.to(logits.device())));
}

std::vector<std::vector<int64_t>> predicted_sets(const Tensor& logits, const Tensor& labels) {
  check_logits("predicted_sets", logits, labels);
  const int64_t B = labels.shape()[0], I = labels.shape()[1], K = logits.shape()[1];
  std::vector<double> z = logits.detach().to_vector();
  for (double& v : z)
    if (std::isnan(v)) v = -std::numeric_limits<double>::infinity();  // NaN ranks last
  const std::vector<int64_t> y = labels.to_int_vector();
  std::vector<std::vector<int64_t>> sets(static_cast<size_t>(B));
  std::vector<int64_t> order(static_cast<size_t>(K));
  for (int64_t b = 0; b < B; ++b) {
    const auto k = static_cast<int64_t>(std::set<int64_t>(y.begin() + b * I, y.begin() + (b + 1) * I).size());
    std::iota(order.begin(), order.end(), int64_t{0});
    std::stable_sort(order.begin(), order.end(), [&](int64_t i, int64_t j) { return z[b * K + i] > z[b * K + j]; });
    sets[b].assign(order.begin(), order.begin() + std::min(k, K));
  }
  return sets;
}

int64_t set_correct(const Tensor& logits, const Tensor& labels) {
  const std::vector<std::vector<int64_t>> sets = predicted_sets(logits, labels);
  const int64_t I = labels.shape()[1];
  const std::vector<int64_t> y = labels.to_int_vector();
  int64_t hit = 0;
  for (size_t b = 0; b < sets.size(); ++b) {
    const auto first = y.begin() + static_cast<int64_t>(b) * I;
    hit += std::set<int64_t>(sets[b].begin(), sets[b].end()) == std::set<int64_t>(first, first + I);
  }
  return hit;
}

}  // namespace tmem::models
