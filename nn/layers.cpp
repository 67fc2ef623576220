#include "nn/layers.h"

#include <cmath>
#include <limits>

#include "ops/attention.h"
#include "ops/dropout.h"
#include "ops/elementwise.h"
#include "ops/embedding.h"
#include "ops/layer_norm.h"
#include "ops/shape.h"

namespace tmem::nn {

Embedding::Embedding(int64_t n, int64_t dim, Generator& gen) {
  check<ValueError>(n > 0 && dim > 0, "Embedding: expected positive sizes, but got ", n, " x ", dim);
  weight = register_parameter("weight", randn({n, dim}, 0.0, 1.0, DType::Float32, gen));
}

Tensor Embedding::forward(const Tensor& indices) const { return embedding(weight, indices); }

LayerNorm::LayerNorm(int64_t dim, double eps_) : eps(eps_) {
  weight = register_parameter("weight", ones({dim}));
  bias = register_parameter("bias", zeros({dim}));
}

Tensor LayerNorm::forward(const Tensor& x) const { return layer_norm(x, weight, bias, eps); }

Dropout::Dropout(double p_, Generator& gen) : p(p_), gen_(&gen) {
  check<ValueError>(p >= 0 && p <= 1, "Dropout: expected p in [0, 1], but got ", p);
}

Tensor Dropout::forward(const Tensor& x) const {
  return p > 0 && is_training() ? dropout(x, p, true, *gen_) : x;
}

MultiheadAttention::MultiheadAttention(int64_t dim_, int64_t heads_, double dropout, Generator& gen)
    : dim(dim_), heads(heads_), dropout_(dropout), gen_(&gen) {
  check<ValueError>(heads > 0 && dim % heads == 0, "MultiheadAttention: dim ", dim,
                    " is not divisible by heads ", heads);
  qkv = register_module("qkv", std::make_shared<Linear>(dim, 3 * dim, true, gen));
  out = register_module("out", std::make_shared<Linear>(dim, dim, true, gen));
}

Tensor MultiheadAttention::forward(const Tensor& x, bool causal, const Tensor& key_padding_mask) const {
  check<ShapeError>(x.dim() == 3 && x.shape()[2] == dim, "MultiheadAttention: expected x [B, T, ", dim,
                    "], but got ", shape_str(x.shape()));
  const int64_t B = x.shape()[0], T = x.shape()[1], Dh = dim / heads;
  Tensor qkv_t = permute(reshape(qkv->forward(x), {B, T, 3, heads, Dh}), {2, 0, 3, 1, 4});
  Tensor q = squeeze(slice(qkv_t, 0, 0, 1), 0);
  Tensor k = squeeze(slice(qkv_t, 0, 1, 2), 0);
  Tensor v = squeeze(slice(qkv_t, 0, 2, 3), 0);
  Tensor mask;
  if (key_padding_mask.defined()) {
    check<ShapeError>(key_padding_mask.shape() == Shape{B, T},
                      "MultiheadAttention: expected key_padding_mask [", B, ", ", T, "], but got ",
                      shape_str(key_padding_mask.shape()));
    mask = masked_fill(zeros({B, 1, 1, T}, x.dtype()), reshape(key_padding_mask, {B, 1, 1, T}),
                       -std::numeric_limits<double>::infinity());
  }
  double p = is_training() ? dropout_ : 0.0;
  Tensor a = scaled_dot_product_attention(q, k, v, mask, causal, 0, p, std::nullopt, *gen_);
  return out->forward(reshape(permute(a, {0, 2, 1, 3}), {B, T, dim}));
}

MLP::MLP(int64_t dim, int64_t hidden, Generator& gen) {
  fc1 = register_module("fc1", std::make_shared<Linear>(dim, hidden, true, gen));
  fc2 = register_module("fc2", std::make_shared<Linear>(hidden, dim, true, gen));
}

Tensor MLP::forward(const Tensor& x) const { return fc2->forward(gelu(fc1->forward(x))); }

}  // namespace tmem::nn
