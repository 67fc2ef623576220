// The language-model family of docs/DESIGN.md §10 (Brown corpus): TransformerLM, a
// token embedding tied with the output projection around a models::Backbone,
// in six variants (`method`):
//   base    full causal attention, learned absolute positions
//   local   causal sliding-window attention (window 64 by default)
//   linear  causal linear attention, features ELU(x) + 1 (Katharopoulos et al.
//           2020), normalised by the causal sum of keys + eps
//   xl      Transformer-XL segment recurrence: every layer attends to its own
//           input over the previous segment (cached, detached) plus the
//           current segment (causal); learned per-head relative position
//           biases over the cache and the segment, no absolute positions
//   tensor  full causal attention + Tensor Memory in every block, one causal
//           state per layer, carried from segment to segment
//   leaky   tensor with the reference code's single state threaded through all
//           layers (BackboneConfig::leaky_memory): NOT causal, ablation only
// Streaming: forward(tokens, state) runs one segment of a long stream and
// advances the state (the xl cache, the memory states); base, local and
// linear carry nothing, so their segments are independent.
// Shapes: B batch (parallel streams), T segment length, V vocabulary,
// C = dim channels.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tmem/models/transformer.h"

namespace tmem::models {

/// The LM variants (see the file comment).
enum class LMMethod { base, local, linear, xl, tensor, leaky };

/// The name of an LM method as the CLI, JSON configs and checkpoints spell it.
std::string to_string(LMMethod method);

/// The LM method named `name`. Throws ValueError `unknown LM method "<name>"
/// (expected base, local, linear, xl, tensor or leaky)`.
LMMethod parse_lm_method(const std::string& name);

/// JSON form: the name (to_string); reading an unknown name throws
/// ValueError as parse_lm_method.
void to_json(nlohmann::json& j, LMMethod method);
void from_json(const nlohmann::json& j, LMMethod& method);

struct LMConfig {
  LMConfig();  // memory: the text configuration of docs/DESIGN.md §7 (C = 32, 8^3, chunk 16)
  LMMethod method = LMMethod::base;
  int64_t vocab = 0;            // V, set from the corpus
  int64_t dim = 256, layers = 4, heads = 4;
  int64_t seq = 256;            // segment length T (the longest forward)
  int64_t window = 64;          // local attention window
  int64_t cache_len = 0;        // xl: cached tokens per layer (BackboneConfig::cache_len; -1 grows)
  double dropout = 0.2;         // embedding, attention weights, residual branches
  /// MLP width of every method; 0: 4C for tensor and leaky, and the
  /// parameter-matched width of lm_backbone_config for the others.
  int64_t mlp_hidden = 0;
  nn::TensorMemoryOptions memory;
};

/// Every LM method, in table order: base, local, linear, xl, tensor, leaky.
const std::vector<LMMethod>& lm_methods();

/// The Backbone of an LM method. Parameter matching: methods without memory
/// (base, local, linear, xl) get an MLP widened by the parameters of one
/// Tensor Memory layer and its LayerNorm per block (hidden 4C + that count /
/// (2C + 1), the base_wide idea), so every method has the same width, depth
/// and (within 1%) parameter count; tensor and leaky keep hidden 4C.
/// cfg.mlp_hidden > 0 overrides both (the plain transformer of bench_lm).
/// Throws ValueError for mlp_hidden < 0, and for tensor and leaky when
/// memory.chunk > seq (every segment would be one zero-padded chunk).
BackboneConfig lm_backbone_config(const LMConfig& cfg);

/// Token embedding E[V, C] ~ N(0, 0.02) -> dropout -> Backbone -> logits
/// h @ E^T (tied output projection, no bias). Throws ValueError for vocab < 1
/// or a bad backbone config.
class TransformerLM : public nn::Module {
 public:
  TransformerLM(const LMConfig& cfg, Generator& gen);
  /// tokens int64 [B, T <= seq] -> logits [B, T, V], from a fresh state.
  Tensor forward(const Tensor& tokens) const;
  /// One segment of B parallel streams: starts from `state` (empty = stream
  /// start) and leaves in it the state after this segment. Throws ShapeError
  /// for tokens not [B, T <= seq] or a state of another batch size,
  /// DtypeError for non-int64 tokens, IndexError for a token outside [0, V).
  Tensor forward(const Tensor& tokens, BackboneState& state) const;
  LMConfig cfg;
  std::shared_ptr<nn::Embedding> tok;
  std::shared_ptr<nn::Dropout> drop;
  std::shared_ptr<Backbone> backbone;
};

/// A token stream cut into B parallel rows, read segment by segment
/// (Transformer-XL's ordered iterator, made to cover every token): with
/// N tokens, row b predicts targets b*L + 1 ... (b+1)*L (L = ceil((N - 1) / B),
/// the last row shorter), so every token but the first is a target exactly
/// once; segment i holds positions i*T ... i*T + T - 1 of every row. Rows
/// that run out are padded with input 0 and target -100 (ignored).
class StreamSegments {
 public:
  /// Throws ValueError for fewer than 2 tokens or batch, seq < 1.
  StreamSegments(const std::vector<int64_t>& tokens, int64_t batch, int64_t seq);
  /// Segments per pass over the stream: ceil(L / T).
  int64_t count() const { return count_; }
  /// Segment i on `device`: inputs int64 [B, T] and targets int64 [B, T]
  /// (the next token, -100 past a row's end). Throws IndexError for i outside
  /// [0, count()), DeviceError when `device` is not available.
  std::pair<Tensor, Tensor> segment(int64_t i, Device device = Device::cpu()) const;

 private:
  std::vector<int64_t> tokens_;
  int64_t batch_, seq_, row_, count_;
};

struct PerplexityResult {
  double nll_sum = 0;   // summed negative log-likelihood (nats)
  int64_t tokens = 0;   // targets scored
  double nll() const { return tokens ? nll_sum / static_cast<double>(tokens) : 0.0; }
  double perplexity() const;  // exp(nll())
};

/// Perplexity per token of `stream` (every token but the first is predicted
/// once, see StreamSegments), on the model's device, in eval mode (dropout
/// off) and without autograd. Segments run in order with the state carried
/// from each to the next, so xl sees the previous segment and tensor / leaky
/// their memories;
/// base, local and linear carry no state: each segment is evaluated on its
/// own (independent segments, the context of a token is its segment so far).
/// The model's training mode is restored afterwards. progress(so_far, done,
/// total) is called after each of the `total` segments. Throws ValueError for a stream of fewer
/// than 2 tokens or batch < 1; IndexError for a token outside [0, V).
PerplexityResult evaluate_perplexity(TransformerLM& model, const std::vector<int64_t>& stream, int64_t batch,
                                     const std::function<void(const PerplexityResult&, int64_t, int64_t)>& progress = {});

/// One report of stream_lm, after `tokens` tokens of the stream.
struct StreamReport {
  int64_t tokens = 0;
  double seconds = 0;              // since the stream started
  int64_t state_bytes = 0;         // the carried state: memory states, slots, xl cache
  size_t bytes_in_use = 0;         // tensors alive on the model's device (allocator)
  size_t peak_bytes = 0;           // most bytes alive at once since the stream started
};

/// Streams `tokens` uniformly random token ids in [0, V) (seeded; the memory
/// a stream needs does not depend on the ids or the weights) through `model`
/// as one stream (B = 1), segment by segment of cfg.seq tokens (the last one
/// shorter), in eval mode without autograd, carrying the state from each
/// segment to the next: Tensor Memory's fixed-size states stay the same size,
/// an xl cache with cache_len -1 (a KV cache) grows by every segment.
/// report(r) is called after every segment and may return false to stop the
/// stream there. Returns the last report. Throws ValueError for tokens < 1.
StreamReport stream_lm(TransformerLM& model, int64_t tokens, uint64_t seed,
                       const std::function<bool(const StreamReport&)>& report = {});

}  // namespace tmem::models
