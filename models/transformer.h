// The transformer backbones: a pre-norm causal transformer (`base`), the same
// with MLP ratio 4.5 (`base_wide`, parameter-matched), and the same with a
// Tensor Memory layer (`tensor`) or slot memory (`slots`) in every block (or
// every memory_every-th), for the diagnostics of docs/DESIGN.md §8; the attention
// kinds (full, local sliding window, causal linear, Transformer-XL cache) and
// the streaming state serve the language models of models/lm.h; bidirectional
// attention, an additive attention mask and caller-supplied positions serve
// the ViTs of models/vit.h. Shapes: B batch, T tokens, P cached tokens,
// C = dim channels.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tmem/nn/layers.h"
#include "tmem/nn/recurrent.h"
#include "tmem/nn/slot_memory.h"
#include "tmem/nn/tensor_memory.h"

namespace tmem::models {

/// The mechanism a Backbone's blocks carry: base (none), base_wide (MLP
/// ratio 4.5, parameter-matched), slots, tensor, and the state mechanisms of
/// the segment-recurrent comparison (docs/DESIGN.md §9): linear
/// (LinearAttentionMemory in every block), ssm (SelectiveSSM in every
/// block), rmt (recurrent memory tokens around each segment). none, full and
/// xl are names of that comparison only: backbone_config_for
/// (models/diagnostic.h) turns them into base; a Backbone refuses them.
enum class BackboneMethod { base, base_wide, slots, tensor, linear, ssm, rmt, none, full, xl };

/// The name of a method as the CLI, JSON configs and checkpoints spell it.
std::string to_string(BackboneMethod method);

/// The method named `name`. Throws ValueError `unknown method "<name>"
/// (expected base, base_wide, ... or xl)`.
BackboneMethod parse_backbone_method(const std::string& name);

/// JSON form: the name (to_string); reading an unknown name throws
/// ValueError as parse_backbone_method, a non-string nlohmann's type_error.
void to_json(nlohmann::json& j, BackboneMethod method);
void from_json(const nlohmann::json& j, BackboneMethod& method);

/// Attention kinds: full: causal softmax attention; local: causal sliding
/// window of `window` tokens; linear: causal linear attention, ELU + 1
/// features; xl: causal attention over a cache of the previous segment plus
/// the current one, with learned relative position biases instead of
/// absolute positions.
enum class Attention { full, local, linear, xl };

/// The name of an attention kind ("full", "local", "linear", "xl").
std::string to_string(Attention attention);

/// The attention kind named `name`. Throws ValueError `unknown attention
/// "<name>" (expected full, local, linear or xl)`.
Attention parse_attention(const std::string& name);

struct BackboneConfig {
  BackboneMethod method = BackboneMethod::tensor;
  Attention attention = Attention::full;
  int64_t window = 64;            // local attention window
  int64_t dim = 64, layers = 2, heads = 4;
  int64_t max_len = 256;          // learned positions (xl: relative distances up to 2 * max_len)
  /// xl: cached tokens per layer. 0: the previous segment (Transformer-XL
  /// with memory length = segment length); n > 0: the last n tokens; -1:
  /// every earlier token (a KV cache that grows with the stream; distances
  /// beyond 2 * max_len share the last relative bias).
  int64_t cache_len = 0;
  /// xl: gradients flow into the cache (false: detached, Transformer-XL's
  /// stop-gradient).
  bool cache_grad = false;
  int64_t linear_features = 16;   // linear: feature dimension f per head
  int64_t ssm_state = 16;         // ssm: state dimension N
  /// rmt (Bulatov et al. 2022): R memory tokens read at the start of each
  /// segment and written at its end; the written tokens' outputs are the next
  /// segment's memory (the first segment's is learned).
  int64_t memory_tokens = 8;
  int64_t mlp_hidden = 0;         // MLP width; 0: mlp_ratio_of(method) * dim
  double dropout = 0.0;
  /// false: bidirectional softmax attention (images; full or with the
  /// caller's attention mask). The memory layers stay causal over chunks
  /// whatever this says. Only full attention can be bidirectional.
  bool causal = true;
  /// false: no learned absolute positions (the caller adds its own).
  bool positions = true;
  /// tensor / slots: blocks l with (l + 1) % memory_every == 0 have the
  /// memory (1: every block; 2: blocks 1, 3, ...).
  int64_t memory_every = 1;
  nn::TensorMemoryOptions memory;
  /// Reproduces the reference code's threading of ONE memory state through
  /// all layers (layer l+1 starts from the state layer l left after the whole
  /// sequence), which lets tokens read what later tokens wrote. Ablation only.
  bool leaky_memory = false;
};

/// MLP ratio of a method: 4.5 for base_wide, 4 for the others. Throws
/// ValueError for none, full and xl (names of the segment-recurrent
/// comparison that backbone_config_for turns into base).
double mlp_ratio_of(BackboneMethod method);

/// The parameters one Tensor Memory layer adds to a block of width `dim`:
/// the TensorMemory module and its LayerNorm (2 dim).
int64_t memory_layer_parameters(int64_t dim, const nn::TensorMemoryOptions& memory);

/// Parameter matching by widening the MLPs (the base_wide idea): the MLP
/// width 4 dim + round(extra / (blocks (2 dim + 1))) that gives `blocks`
/// blocks `extra` more parameters in total (an MLP dim -> hidden -> dim costs
/// 2 dim + 1 per hidden unit). Throws ValueError for dim < 1, blocks < 1 or
/// extra < 0.
int64_t parameter_matched_mlp_hidden(int64_t dim, int64_t extra, int64_t blocks);

/// The encoder of patch tokens shared by the ViTs (models/vit.h) and the
/// video models (models/video.h): bidirectional full attention, no positions
/// of its own (the caller adds them), max_len tokens; with_memory: method
/// tensor with `memory` in every memory_every-th block, else method base with
/// MLPs widened (parameter_matched_mlp_hidden) to the memory variant's
/// parameter count. mlp_hidden > 0 sets every method's MLP width instead.
/// Throws ValueError for memory_every < 1 or mlp_hidden < 0.
BackboneConfig bidirectional_backbone_config(bool with_memory, int64_t dim, int64_t layers, int64_t heads,
                                             int64_t max_len, double dropout, const nn::TensorMemoryOptions& memory,
                                             int64_t memory_every, int64_t mlp_hidden);

/// The recurrent state a Backbone carries from one segment of a token stream
/// to the next. Empty (default) = the start of a stream; Backbone::forward
/// fills it on first use and advances it in place.
struct BackboneState {
  /// tensor: one (h, c) per layer; leaky_memory: one shared by every layer.
  std::vector<ConvLSTM3DState> memory;
  /// slots: one slot state [B, M, C] per layer.
  std::vector<Tensor> slots;
  /// xl: per layer, that layer's input over the previous segment [B, P, C],
  /// detached (stop-gradient) unless cache_grad, as Transformer-XL's memory.
  std::vector<Tensor> cache;
  /// linear: one LinearAttentionState per layer.
  std::vector<nn::LinearAttentionState> linear;
  /// ssm: one state [B, C, N] per layer.
  std::vector<Tensor> ssm;
  /// rmt: the memory tokens' embeddings [B, R, C] (undefined before the first segment).
  Tensor tokens;
  bool empty() const { return tensors().empty(); }
  /// Every tensor the state carries.
  std::vector<Tensor> tensors() const;
  /// The floats the state carries per sequence: the numel of tensors() over
  /// the batch size (0 when empty).
  int64_t floats_per_sequence() const;
  /// Cuts the autograd history of the memory and slot states (truncated
  /// backpropagation between training segments); the cache is always detached.
  void detach();
  /// Every defined tensor by name, for checkpoints: "memory.<i>.h",
  /// "memory.<i>.c", "slots.<i>", "cache.<i>", "linear.<i>.S", "linear.<i>.z",
  /// "ssm.<i>", "tokens".
  std::map<std::string, Tensor> named_tensors() const;
  /// The state whose named_tensors() are `named`, moved to `device`. Throws
  /// ValueError naming a key of another form.
  static BackboneState from_named_tensors(const std::map<std::string, Tensor>& named, Device device);
};

/// The floats per sequence a segment-recurrent Backbone of `cfg` carries
/// from one segment to the next (what BackboneState::floats_per_sequence
/// gives after a segment): tensor 2 C D H W, linear heads f (dim / heads + 1),
/// ssm dim N, xl dim cache_len (layer inputs, from which keys and values are
/// recomputed), each per memory layer; rmt R dim; 0 for base.
int64_t state_floats(const BackboneConfig& cfg);

/// Pre-norm block: x += attn(ln1(x) [, context ln1(cache)]);
/// [x += mem(ln_m(x))]; x += mlp(ln2(x)), the memory being TensorMemory
/// (method tensor) or SlotMemory (slots) when with_memory. Attention is
/// causal unless cfg.causal is false.
class Block : public nn::Module {
 public:
  Block(const BackboneConfig& cfg, Generator& gen, bool with_memory = true);
  /// memory_state / slot_state / linear_state / ssm_state: this layer's
  /// recurrent state (used when the block has that mechanism), advanced in place. cache [B, P, C]: earlier
  /// tokens' layer inputs that attention sees before x's (xl), or undefined.
  /// attn_mask: additive attention mask broadcastable to [B, heads, T, T]
  /// (0 = seen, -inf = hidden), or undefined. Throws what
  /// MultiheadAttention::forward throws.
  Tensor forward(const Tensor& x, ConvLSTM3DState* memory_state, Tensor* slot_state = nullptr,
                 const Tensor& cache = Tensor(), const Tensor& attn_mask = Tensor(),
                 nn::LinearAttentionState* linear_state = nullptr, Tensor* ssm_state = nullptr) const;
  std::shared_ptr<nn::LayerNorm> ln1, ln2, ln_mem;
  std::shared_ptr<nn::MultiheadAttention> attn;
  std::shared_ptr<nn::MLP> mlp;
  std::shared_ptr<nn::TensorMemory> memory;  // null unless method == tensor
  std::shared_ptr<nn::SlotMemory> slots;     // null unless method == slots
  std::shared_ptr<nn::LinearAttentionMemory> linear;  // null unless method == linear
  std::shared_ptr<nn::SelectiveSSM> ssm;              // null unless method == ssm
  std::shared_ptr<nn::Dropout> drop;
  bool causal;
};

/// Learned positions (none for xl or without cfg.positions) + blocks + final
/// LayerNorm: x[B, T, C] -> [B, T, C]. Causal for every method (each layer
/// keeps its own memory state) unless leaky_memory or cfg.causal is false.
/// Throws ValueError for an unknown method or attention kind, memory_every
/// < 1 (or above layers for tensor without leaky_memory: no memory layer),
/// rmt with max_len <= 2 memory_tokens (no room for a segment),
/// bidirectional (causal false) attention other than full, or a
/// tensor or slots memory chunk above max_len;
/// ShapeError when T > max_len or C != dim.
class Backbone : public nn::Module {
 public:
  Backbone(const BackboneConfig& cfg, Generator& gen);
  /// One sequence from a fresh state.
  Tensor forward(const Tensor& x) const;
  /// One segment of a stream: starts from `state` (empty = stream start) and
  /// leaves in it the state after this segment. Positions restart at 0 in
  /// every segment; xl's relative positions span the cache and the segment.
  /// attn_mask: an additive mask broadcastable to [B, heads, T, T] given to
  /// every layer's attention (0 = seen, -inf = hidden), or undefined.
  /// rmt: the segment runs as [memory, x, memory] and returns x's outputs.
  /// Throws ShapeError when the state was made for another batch size or the
  /// mask does not broadcast; ValueError for a mask with linear or xl
  /// attention or with rmt.
  Tensor forward(const Tensor& x, BackboneState& state, const Tensor& attn_mask = Tensor()) const;
  const std::vector<std::shared_ptr<Block>>& blocks() const { return blocks_; }
  BackboneConfig cfg;

 private:
  Tensor pos_;
  Tensor memory_init_;  // rmt: the first segment's memory tokens [R, C]
  std::vector<std::shared_ptr<Block>> blocks_;
  std::shared_ptr<nn::LayerNorm> ln_f_;
  // xl: the cache after a segment, from the layer's cache before it and its
  // input h [B, T, C] over the segment (cfg.cache_len says how much is kept).
  Tensor extend_cache(const Tensor& cache, const Tensor& h) const;
};

/// sigmoid(gamma) of each Tensor Memory layer of `backbone`, in block order
/// (empty without memory layers).
std::vector<double> memory_gates(const Backbone& backbone);
/// The Tensor Memory layers' internals for gradient dumps: per memory layer
/// {"layer", "gate" (sigmoid(gamma) as number_to_json: "NaN" when gamma is
/// NaN, where a plain double would be written as null), and, from the layer's last forward
/// recorded by `probe`, the tensor_summary of "write_sigma", "read_coords",
/// "write_coords"}.
nlohmann::json memory_internals(const Backbone& backbone, const nn::TensorMemoryProbe& probe);

}  // namespace tmem::models
