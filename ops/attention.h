// Scaled dot-product attention (docs/DESIGN.md §4), PyTorch semantics
// (torch.nn.functional.scaled_dot_product_attention): one fused op with a
// FlashAttention backward when there is no dropout, else composed of
// differentiable ops. Shapes: B batch, H heads, T queries, S keys, Dh
// query/key width, Dv value width.
#pragma once
#include <cstdint>
#include <optional>

#include "tmem/core/rng.h"
#include "tmem/core/tensor.h"

namespace tmem {

/// out = dropout(softmax(q k^T * scale + attn_mask + band), dropout_p) v
/// (Vaswani et al. 2017; torch.nn.functional.scaled_dot_product_attention):
///   q[B, H, T, Dh], k[B, H, S, Dh], v[B, H, S, Dv] -> out[B, H, T, Dv].
/// attn_mask: an additive float tensor broadcastable to [B, H, T, S] (e.g. [T, S]
/// with 0 and -inf), or undefined. is_causal: query t sees keys s <= t (PyTorch's
/// top-left alignment, tril of a [T, S] ones matrix). window > 0: query t sees
/// only keys in (t - window, t] (a causal sliding window, with or without
/// is_causal); window == 0 is unlimited. Masked-out scores are -inf; a query
/// that sees no key at all gets a zero output row and zero gradient, not NaN.
/// dropout_p > 0 applies dropout (drawn from `gen`) to the attention weights,
/// as PyTorch does whenever dropout_p > 0. scale defaults to 1/sqrt(Dh).
/// Without dropout (and with a mask that needs no gradient) this is one
/// fused op on every device that has its kernel: tiled, online softmax, no
/// [T, S] buffer, backward by recomputation (Dao et al. 2022,
/// "FlashAttention"; docs/OPS.md §5); otherwise matmul, softmax and dropout.
/// Throws ShapeError when q, k, v are not 4-D with matching B, H, Dh and S, or
/// when attn_mask does not broadcast to [B, H, T, S] (naming both shapes);
/// DtypeError for mixed dtypes; ValueError for window < 0, dropout_p
/// outside [0, 1] or a non-finite scale (NaN or inf would give NaN or zero
/// outputs silently).
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& attn_mask = Tensor(), bool is_causal = false,
                                    int64_t window = 0, double dropout_p = 0.0,
                                    std::optional<double> scale = std::nullopt,
                                    Generator& gen = default_generator());

/// Causal linear attention (Katharopoulos et al. 2020, "Transformers are
/// RNNs"), for feature-mapped (non-negative) queries and keys:
///   out[t] = q[t] S_t / (q[t] . z_t + eps),  S_t = sum_{s<=t} k[s]^T v[s],
///   z_t = sum_{s<=t} k[s],
/// q[B, H, T, Dh], k[B, H, T, Dh], v[B, H, T, Dv] -> out[B, H, T, Dv]. The
/// feature map (e.g. ELU(x) + 1) is the caller's. Computed chunk by chunk:
/// inside a chunk of `chunk` tokens the masked quadratic form, across chunks
/// the running sums S and z, so memory is O(T * chunk + Dh * Dv) per head,
/// never O(T^2); the result equals the masked O(T^2) form for any chunk.
/// Composed of differentiable ops (matmul, mul, sum, div, cat).
/// Throws ShapeError when q, k, v are not 4-D with equal B, H, T and q, k
/// with equal Dh (naming the shapes); DtypeError for mixed dtypes;
/// ValueError for chunk < 1 or eps < 0.
Tensor causal_linear_attention(const Tensor& q, const Tensor& k, const Tensor& v, double eps = 1e-6,
                               int64_t chunk = 64);

}  // namespace tmem
