// Standard layers (PyTorch nn semantics): Embedding, LayerNorm, Dropout,
// MultiheadAttention, MLP, TransformerBlock. Shapes: B batch, T tokens,
// C = d_model channels.
#pragma once
#include <memory>
#include <optional>

#include "tmem/core/rng.h"
#include "tmem/nn/linear.h"
#include "tmem/nn/module.h"

namespace tmem::nn {

/// Lookup table weight[V, C] ~ N(0, 1) (PyTorch init); indices int64 of any
/// shape -> [..., C]. With padding_idx (negative: from the end) that row
/// starts at zeros and gets no gradient (torch.nn.Embedding). Throws
/// ValueError for non-positive sizes or a padding_idx outside [-V, V),
/// IndexError (in forward) for an index outside [0, V).
class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t dim, Generator& gen = default_generator(),
            std::optional<int64_t> padding_idx = std::nullopt);
  Tensor forward(const Tensor& indices) const;
  Tensor weight;
  /// The row that gets no gradient, in [0, V).
  std::optional<int64_t> padding_idx;
};

/// Layer normalisation over the last dim C (Ba et al. 2016), weight ones,
/// bias zeros, eps 1e-5; without elementwise_affine neither parameter, with
/// it but without bias no bias (torch.nn.LayerNorm). Throws ValueError for
/// a negative dim.
class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t dim, double eps = 1e-5, bool elementwise_affine = true, bool bias = true);
  Tensor forward(const Tensor& x) const;
  /// [C] each, or undefined where elementwise_affine or bias is off.
  Tensor weight, bias;
  int64_t dim;
  double eps;
};

/// Inverted dropout with probability p, active only in training mode.
class Dropout : public Module {
 public:
  explicit Dropout(double p, Generator& gen = default_generator());
  Tensor forward(const Tensor& x) const;
  double p;

 private:
  Generator* gen_;
};

/// How a MultiheadAttention mixes tokens (every kind is causal when asked to
/// be; see MultiheadAttention::forward).
struct AttentionOptions {
  /// > 0: causal sliding window, query t sees keys (t - window, t] (local
  /// attention; a forward without causal refuses it); 0: unlimited.
  int64_t window = 0;
  /// Causal linear attention (Katharopoulos et al. 2020) with the feature map
  /// phi(x) = ELU(x) + 1 on queries and keys, normalised by
  /// phi(q_t) . sum_{s<=t} phi(k_s) + linear_eps (ops/attention.h); no softmax,
  /// no scale, no attention dropout. Always causal.
  bool linear = false;
  double linear_eps = 1e-6;
  int64_t linear_chunk = 64;  // tokens per chunk of causal_linear_attention
  /// > 0: a learned relative position bias b[head, distance] added to the
  /// scores (distance = query position - key position, counted over the
  /// context and x together, clamped to rel_distances - 1), initialised to 0;
  /// the positions of Transformer-XL-style attention over a cache.
  int64_t rel_distances = 0;
};

/// Multi-head self-attention (Vaswani et al. 2017): one Linear(C, 3C) for
/// q, k, v, heads of width C / heads, scaled dot-product attention (or the
/// kinds of AttentionOptions), and an output Linear(C, C). Throws ValueError
/// for C or heads <= 0, when C % heads != 0, for a negative window or rel_distances, dropout
/// outside [0, 1], and for linear together with a window or rel_distances.
class MultiheadAttention : public Module {
 public:
  MultiheadAttention(int64_t dim, int64_t heads, double dropout = 0.0,
                     Generator& gen = default_generator(), const AttentionOptions& opt = {});
  /// x[B, T, C] -> [B, T, C]. causal: token t attends to tokens <= t (linear
  /// attention is causal whatever `causal` says). key_padding_mask [B, T]
  /// (non-zero = padding, PyTorch convention) hides padded keys (softmax
  /// attention only). context [B, P, C]: P earlier tokens (e.g. a
  /// Transformer-XL cache) whose keys and values every query sees before x's
  /// own (causal) keys; query t sits at position P + t. attn_mask: an
  /// additive float mask broadcastable to [B, heads, T, P + T] (e.g. [T, T] or
  /// [B, 1, T, T] of 0 = seen and -inf = hidden; softmax attention only),
  /// added to the scores together with the other masks. Throws ShapeError for
  /// a bad x, mask or context shape, ValueError for a context or either mask
  /// with linear attention, a context without causal, a context with a
  /// window, key_padding_mask or attn_mask, or a window without causal;
  /// DtypeError for an x or context of another dtype than the weights.
  Tensor forward(const Tensor& x, bool causal = true, const Tensor& key_padding_mask = Tensor(),
                 const Tensor& context = Tensor(), const Tensor& attn_mask = Tensor()) const;
  int64_t dim, heads;
  AttentionOptions opt;
  std::shared_ptr<Linear> qkv, out;
  Tensor rel_bias;  // [heads, rel_distances], defined when opt.rel_distances > 0

 private:
  double dropout_;
  Generator* gen_;
};

/// Two-layer perceptron C -> hidden -> C with GELU (erf form).
class MLP : public Module {
 public:
  MLP(int64_t dim, int64_t hidden, Generator& gen = default_generator());
  Tensor forward(const Tensor& x) const;
  std::shared_ptr<Linear> fc1, fc2;
};

}  // namespace tmem::nn
