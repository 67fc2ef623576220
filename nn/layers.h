// Standard layers (PyTorch nn semantics): Embedding, LayerNorm, Dropout,
// MultiheadAttention, MLP, TransformerBlock. Shapes: B batch, T tokens,
// C = d_model channels.
#pragma once
#include <memory>

#include "core/rng.h"
#include "nn/linear.h"
#include "nn/module.h"

namespace tmem::nn {

/// Lookup table weight[V, C] ~ N(0, 1) (PyTorch init); indices int64 of any
/// shape -> [..., C]. Throws IndexError for an index outside [0, V).
class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t dim, Generator& gen = default_generator());
  Tensor forward(const Tensor& indices) const;
  Tensor weight;
};

/// Layer normalisation over the last dim C (Ba et al. 2016), weight ones,
/// bias zeros, eps 1e-5.
class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t dim, double eps = 1e-5);
  Tensor forward(const Tensor& x) const;
  Tensor weight, bias;
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

/// Multi-head self-attention (Vaswani et al. 2017): one Linear(C, 3C) for
/// q, k, v, heads of width C / heads, scaled dot-product attention, and an
/// output Linear(C, C). x[B, T, C] -> [B, T, C]. causal: token t attends to
/// tokens <= t. key_padding_mask [B, T] (non-zero = padding, PyTorch
/// convention) hides padded keys. Throws ValueError when C % heads != 0 and
/// ShapeError for a bad x or mask shape.
class MultiheadAttention : public Module {
 public:
  MultiheadAttention(int64_t dim, int64_t heads, double dropout = 0.0,
                     Generator& gen = default_generator());
  Tensor forward(const Tensor& x, bool causal = true, const Tensor& key_padding_mask = Tensor()) const;
  int64_t dim, heads;
  std::shared_ptr<Linear> qkv, out;

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
