// The Moving Fashion-MNIST video models of docs/DESIGN.md §10: which items are in a
// clip (data/moving_fmnist.h), in three variants (`method`), all with the
// same width and depth, built on models::Backbone (pre-norm blocks,
// bidirectional attention, final LayerNorm):
//   joint      a joint space-time transformer: one Backbone over all T x N
//              patch tokens of the clip, each with a learned space position
//              (its patch) and a learned time position (its frame); the
//              classifier reads the mean over all T x N output tokens
//   registers  frame by frame: a Backbone over the frame's N patch tokens
//              followed by R register tokens (Darcet et al. 2023); frame t's
//              register inputs are frame t-1's register outputs (frame 0:
//              R learned initial registers), backpropagated through every
//              frame; the classifier reads the mean over the last frame's
//              N + R output tokens (patches and registers)
//   tensor     frame by frame: a Backbone with Tensor Memory (in every
//              memory_every-th block, by default every block; docs/DESIGN.md §7
//              video preset, gamma_init -2.0; here C = 16 at 4^3 and chunk 4)
//              whose state (BackboneState, one per layer) is carried from
//              frame to frame; the memory scans each frame's patches in
//              raster order, chunk by chunk; the classifier reads the mean
//              over the last frame's N output tokens
//              Why chunk 4: on a 64 x 64 frame at patch 16 a chunk of 4 is
//              one row of the 4 x 4 patch grid, so each frame makes 4 reads
//              and 4 writes at 4 addresses of its own; chunk 16 would be one
//              step per frame, whose read sees only earlier frames and gives
//              every patch of the frame the same vector, and chunk 1 would
//              be 16 sequential ConvLSTM steps per frame and layer. Why 4^3:
//              64 cells x 16 channels is ample for two items, and 6^3 costs
//              3.4 times the ConvLSTM work of every step.
// The frame-recurrent methods (registers, tensor) see frame t only through
// the state they carry after it, so what they computed for frames before t
// never depends on frame t, and the classifier sees earlier frames only
// through that state: an item hidden in the last frame must be remembered.
// Patch tokens: PatchEmbed (patch P) + the space positions N(0, 0.02).
// Parameter matching: joint and registers get MLPs widened by the parameters
// of tensor's memory layers (parameter_matched_mlp_hidden), as the ViTs do.
// Shapes: B clips, T frames, S = frame size (pixels), P patch size,
// G = S / P, N = G^2 patches per frame, R registers, M tokens per frame in
// the output (N, or N + R for registers), C width, K classes, I items per
// clip.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "tmem/models/transformer.h"
#include "tmem/nn/patch_embed.h"

namespace tmem::models {

/// The Video variants (see the file comment).
enum class VideoMethod { joint, registers, tensor };

/// The name of a Video method as the CLI, JSON configs and checkpoints spell it.
std::string to_string(VideoMethod method);

/// The Video method named `name`. Throws ValueError `VideoModel: unknown method "<name>"
/// (expected joint, registers or tensor)`.
VideoMethod parse_video_method(const std::string& name);

/// JSON form: the name (to_string); reading an unknown name throws
/// ValueError as parse_video_method.
void to_json(nlohmann::json& j, VideoMethod method);
void from_json(const nlohmann::json& j, VideoMethod& method);

struct VideoConfig {
  VideoConfig();  // memory: C = 16, 4^3, chunk 4, gamma_init -2.0 (see the file comment)
  VideoMethod method = VideoMethod::tensor;
  int64_t frames = 16;            // T: joint's time positions (the frame-recurrent methods take any T)
  int64_t size = 64;              // S: frames are S x S
  int64_t patch = 16;             // P (16 on 64 x 64: N = 16)
  int64_t dim = 96, layers = 4, heads = 3;
  int64_t classes = 10;           // K
  int64_t registers = 4;          // registers: R
  int64_t memory_every = 1;       // tensor: memory in blocks memory_every - 1, 2 memory_every - 1, ...
  double dropout = 0.0;
  /// MLP width of every method; 0: 4C for tensor, and for joint and
  /// registers the width that matches tensor's parameters.
  int64_t mlp_hidden = 0;
  nn::TensorMemoryOptions memory;
};

/// Every Video method, in table order: joint, registers, tensor.
const std::vector<VideoMethod>& video_methods();

/// N, the patches of one frame: (size / patch)^2. Throws ValueError naming
/// "VideoModel" when patch < 1 or the frame size is not a positive multiple
/// of the patch size.
int64_t video_patches(const VideoConfig& cfg);

/// The Backbone of a method: bidirectional full attention, no positions of
/// its own; max_len T N (joint), N + R (registers) or N (tensor). tensor:
/// method tensor with the memory in every memory_every-th block; joint and
/// registers: MLPs widened by tensor's memory parameters, so the three
/// methods have the same width, depth and, within 1% (joint adds T C time
/// positions, registers R C initial registers), parameter count.
/// cfg.mlp_hidden > 0 overrides it. Throws ValueError (naming "VideoModel")
/// for an unknown method, a bad patch size, frames < 1, classes < 1,
/// mlp_hidden < 0, memory_every < 1 or R < 1 (registers).
BackboneConfig video_backbone_config(const VideoConfig& cfg);

/// The video classifier of every method (see the file comment):
/// frames -> per-frame output tokens -> pooled [B, C] -> Linear(C -> K).
/// Throws ValueError for a bad config (video_backbone_config).
class VideoModel : public nn::Module {
 public:
  VideoModel(const VideoConfig& cfg, Generator& gen);
  /// frames float32 [B, T, S, S] -> output tokens [B, T, M, C]: joint's T N
  /// output tokens grouped by frame (M = N); registers: frame t's N patch
  /// outputs then its R register outputs (M = N + R); tensor: frame t's N
  /// patch outputs. For registers and tensor, out[:, t] depends only on
  /// frames 0 ... t. Throws ShapeError naming "VideoModel" for frames not
  /// [B, T, S, S] with T >= 1 (joint: T <= cfg.frames).
  Tensor forward_tokens(const Tensor& frames) const;
  /// frames [B, T, S, S] -> logits [B, K]: the head over the mean of every
  /// output token (joint) or of the last frame's M output tokens (registers,
  /// tensor). Throws what forward_tokens throws.
  Tensor forward(const Tensor& frames) const;
  VideoConfig cfg;
  std::shared_ptr<nn::PatchEmbed> embed;
  Tensor space_pos;  // [N, C]
  Tensor time_pos;   // [T, C], defined for joint
  Tensor registers;  // [R, C], defined for registers: frame 0's register inputs
  std::shared_ptr<Backbone> backbone;
  std::shared_ptr<nn::Linear> head;
};

/// The soft target of each clip: labels int64 [B, I] (item classes) ->
/// float32 [B, K] on labels' device with target[b, c] = (the items of clip
/// b of class c) / I (two items: 0.5 on each class, 1.0 when both share one). Throws
/// ShapeError naming "set_targets" for labels not [B >= 1, I >= 1],
/// DtypeError for non-int64 labels, IndexError for a label outside [0, K).
Tensor set_targets(const Tensor& labels, int64_t classes);

/// The set loss: cross-entropy of logits [B, K] (float32 or float64) against
/// set_targets(labels), -(1 / B) sum_b sum_c target[b, c]
/// log_softmax(logits[b])[c] over the classes with target[b, c] > 0 only, so
/// a class of target 0 whose logit is -inf leaves the loss finite; a scalar
/// of logits' dtype on logits' device (labels may be on any device).
/// Differentiable in logits. Throws ShapeError naming "set_cross_entropy"
/// for logits not [B, K] or labels not [B, I], DtypeError for non-int64
/// labels, IndexError for a label outside [0, K).
Tensor set_cross_entropy(const Tensor& logits, const Tensor& labels);

/// The predicted set of each clip: the k_b classes with the highest logits
/// of row b (ties: the lower class first; NaN ranks last), k_b = the number
/// of distinct classes in labels[b] (two items: the top 2, or the top 1 when
/// both share a class), in descending logit order. Throws ShapeError naming
/// "predicted_sets" for logits not [B, K] or labels not [B, I], DtypeError
/// for non-int64 labels.
std::vector<std::vector<int64_t>> predicted_sets(const Tensor& logits, const Tensor& labels);

/// The clips whose predicted set (predicted_sets) equals the set of their
/// item classes. Throws what predicted_sets throws.
int64_t set_correct(const Tensor& logits, const Tensor& labels);

}  // namespace tmem::models
