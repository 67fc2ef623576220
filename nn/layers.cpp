#include "tmem/nn/layers.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "tmem/ops/attention.h"
#include "tmem/ops/dropout.h"
#include "tmem/ops/elementwise.h"
#include "tmem/ops/embedding.h"
#include "tmem/ops/layer_norm.h"
#include "tmem/ops/linalg.h"
#include "tmem/ops/shape.h"

namespace tmem::nn {

Embedding::Embedding(int64_t n, int64_t dim, Generator& gen, std::optional<int64_t> pad) {
  check<ValueError>(n > 0 && dim > 0, "Embedding: expected positive sizes, but got ", n, " x ", dim);
  check<ValueError>(!pad || (*pad >= -n && *pad < n), "Embedding: padding_idx ", pad.value_or(0),
                    " is outside the ", n, " rows");
  Tensor w = randn({n, dim}, 0.0, 1.0, DType::Float32, gen);
  if (pad) {
    padding_idx = (*pad + n) % n;
    fill_data(make_view(w, {dim}, {1}, *padding_idx * dim), 0.0);
  }
  weight = register_parameter("weight", w);
}

Tensor Embedding::forward(const Tensor& indices) const { return embedding(weight, indices, padding_idx); }

LayerNorm::LayerNorm(int64_t dim_, double eps_, bool elementwise_affine, bool with_bias) : dim(dim_), eps(eps_) {
  check<ValueError>(dim >= 0, "LayerNorm: expected normalized_shape >= 0, but got ", dim);
  if (!elementwise_affine) return;
  weight = register_parameter("weight", ones({dim}));
  if (with_bias) bias = register_parameter("bias", zeros({dim}));
}

Tensor LayerNorm::forward(const Tensor& x) const { return layer_norm(x, weight, bias, eps); }

Dropout::Dropout(double p_, Generator& gen) : p(p_), gen_(&gen) {
  check<ValueError>(p >= 0 && p <= 1, "Dropout: expected p in [0, 1], but got ", p);
}

Tensor Dropout::forward(const Tensor& x) const {
  return p > 0 && is_training() ? dropout(x, p, true, *gen_) : x;
}

MultiheadAttention::MultiheadAttention(int64_t dim_, int64_t heads_, double dropout, Generator& gen,
                                       const AttentionOptions& o)
    : dim(dim_), heads(heads_), opt(o), dropout_(dropout), gen_(&gen) {
  check<ValueError>(dim > 0 && heads > 0, "MultiheadAttention: expected dim > 0 and heads > 0, but got dim ", dim,
                    ", heads ", heads);
  check<ValueError>(dim % heads == 0, "MultiheadAttention: dim ", dim, " is not divisible by heads ", heads);
  check<ValueError>(o.window >= 0 && o.rel_distances >= 0,
                    "MultiheadAttention: expected window >= 0 and rel_distances >= 0, but got window ",
                    o.window, " rel_distances ", o.rel_distances);
  check<ValueError>(dropout >= 0 && dropout <= 1, "MultiheadAttention: expected dropout in [0, 1], but got ", dropout);
  check<ValueError>(!o.linear || (o.window == 0 && o.rel_distances == 0),
                    "MultiheadAttention: linear attention takes no window or relative positions, but got window ",
                    o.window, " rel_distances ", o.rel_distances);
  qkv = register_module("qkv", std::make_shared<Linear>(dim, 3 * dim, true, gen));
  out = register_module("out", std::make_shared<Linear>(dim, dim, true, gen));
  if (o.rel_distances > 0) rel_bias = register_parameter("rel_bias", zeros({heads, o.rel_distances}));
}

namespace {

// ELU(x) + 1 = relu(x) + exp(-relu(-x)): positive, and exp never overflows.
Tensor elu_plus_one(const Tensor& x) { return relu(x) + exp(neg(relu(neg(x)))); }

// [B, T, C] -> [B, heads, T, C / heads].
Tensor split_heads(const Tensor& x, int64_t heads) {
  const int64_t B = x.shape()[0], T = x.shape()[1], C = x.shape()[2];
  return permute(reshape(x, {B, T, heads, C / heads}), {0, 2, 1, 3});
}

}  // namespace

Tensor MultiheadAttention::forward(const Tensor& x, bool causal, const Tensor& key_padding_mask,
                                   const Tensor& context, const Tensor& attn_mask) const {
  check<ShapeError>(x.dim() == 3 && x.shape()[2] == dim, "MultiheadAttention: expected x [B, T, ", dim,
                    "], but got ", shape_str(x.shape()));
  const int64_t B = x.shape()[0], T = x.shape()[1], Dh = dim / heads;
  const int64_t P = context.defined() ? context.shape()[1] : 0;
  const DType weights = qkv->weight.dtype();
  check<DtypeError>(x.dtype() == weights && (!context.defined() || context.dtype() == weights),
                    "MultiheadAttention: expected x", context.defined() ? " and context" : "", " of the weights' dtype ",
                    dtype_name(weights), ", but got ", dtype_name(x.dtype()),
                    context.defined() ? " and " + std::string(dtype_name(context.dtype())) : std::string(),
                    "; convert them (to_dtype)");
  if (context.defined()) {
    check<ShapeError>(context.dim() == 3 && context.shape()[0] == B && context.shape()[2] == dim,
                      "MultiheadAttention: expected context [", B, ", P, ", dim, "], but got ",
                      shape_str(context.shape()), " (x ", shape_str(x.shape()), ")");
    check<ValueError>(causal && !opt.linear && opt.window == 0 && !key_padding_mask.defined() &&
                          !attn_mask.defined(),
                      "MultiheadAttention: a context needs causal softmax attention without window, "
                      "key_padding_mask or attn_mask");
  }
  check<ValueError>(!opt.linear || (!key_padding_mask.defined() && !attn_mask.defined()),
                    "MultiheadAttention: linear attention takes no key_padding_mask or attn_mask");
  // The window is a causal sliding window: without causal it was dropped silently.
  check<ValueError>(causal || opt.window == 0, "MultiheadAttention: a window (", opt.window,
                    ") is a causal sliding window, but forward was called with causal false");
  Tensor qkv_t = permute(reshape(qkv->forward(x), {B, T, 3, heads, Dh}), {2, 0, 3, 1, 4});
  Tensor q = squeeze(slice(qkv_t, 0, 0, 1), 0);
  Tensor k = squeeze(slice(qkv_t, 0, 1, 2), 0);
  Tensor v = squeeze(slice(qkv_t, 0, 2, 3), 0);
  Tensor a;
  if (opt.linear) {
    a = causal_linear_attention(elu_plus_one(q), elu_plus_one(k), v, opt.linear_eps, opt.linear_chunk);
  } else {
    if (context.defined()) {
      // Only the k and v rows of the qkv projection: the context asks no queries.
      Tensor kv = matmul(context, transpose(slice(qkv->weight, 0, dim, 3 * dim), 0, 1)) +
                  slice(qkv->bias, 0, dim, 3 * dim);
      k = cat({split_heads(slice(kv, 2, 0, dim), heads), k}, 2);
      v = cat({split_heads(slice(kv, 2, dim, 2 * dim), heads), v}, 2);
    }
    const int64_t S = P + T;
    Tensor mask;
    if (key_padding_mask.defined()) {
      check<ShapeError>(key_padding_mask.shape() == Shape{B, T},
                        "MultiheadAttention: expected key_padding_mask [", B, ", ", T, "], but got ",
                        shape_str(key_padding_mask.shape()));
      mask = masked_fill(zeros({B, 1, 1, T}, x.dtype(), x.device()), reshape(key_padding_mask, {B, 1, 1, T}),
                         -std::numeric_limits<double>::infinity());
    }
    const bool offset_causal = causal && (P > 0 || rel_bias.defined());
    if (offset_causal) {  // query t at position P + t sees keys s <= P + t, with bias b[P + t - s]
      const int64_t R = opt.rel_distances;
      std::vector<int64_t> dist(static_cast<size_t>(T * S));
      Tensor hidden = zeros({T, S}, x.dtype());
      dispatch_floating(x.dtype(), "MultiheadAttention", [&]<class D>() {
        D* h = hidden.data<D>();
        for (int64_t t = 0; t < T; ++t)
          for (int64_t s = 0; s < S; ++s) {
            dist[t * S + s] = std::clamp<int64_t>(P + t - s, 0, std::max<int64_t>(R - 1, 0));
            h[t * S + s] = s > P + t ? D(1) : D(0);
          }
      });
      Tensor bias = rel_bias.defined()
                        ? reshape(index_select(rel_bias, 1, tensor_int(dist, {T * S})), {1, heads, T, S})
                        : zeros({1, 1, T, S}, x.dtype(), x.device());
      Tensor band = masked_fill(bias, hidden.to(x.device()), -std::numeric_limits<double>::infinity());
      mask = mask.defined() ? mask + band : band;
    }
    if (attn_mask.defined()) mask = mask.defined() ? mask + attn_mask : attn_mask;
    double p = is_training() ? dropout_ : 0.0;
    a = scaled_dot_product_attention(q, k, v, mask, causal && !offset_causal, opt.window, p,
                                     std::nullopt, *gen_);
  }
  return out->forward(reshape(permute(a, {0, 2, 1, 3}), {B, T, dim}));
}

MLP::MLP(int64_t dim, int64_t hidden, Generator& gen) {
  fc1 = register_module("fc1", std::make_shared<Linear>(dim, hidden, true, gen));
  fc2 = register_module("fc2", std::make_shared<Linear>(hidden, dim, true, gen));
}

Tensor MLP::forward(const Tensor& x) const { return fc2->forward(gelu(fc1->forward(x))); }

}  // namespace tmem::nn
