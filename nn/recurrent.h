// The fixed-size recurrent mechanisms that carry state across segments in
// the segment-recurrent comparison (docs/DESIGN.md §9), next to TensorMemory and
// SlotMemory: causal linear attention carried as its running sums, and a
// diagonal selective state-space layer in the style of Mamba. Shapes: B
// batch, T tokens of a segment, C = dim channels, h heads, f feature
// dimension, N state dimension.
#pragma once
#include <memory>

#include "tmem/core/rng.h"
#include "tmem/nn/linear.h"
#include "tmem/nn/module.h"

namespace tmem::nn {

/// The running sums of causal linear attention: S[B, h, f, C/h] = sum
/// phi(k) v^T and z[B, h, f] = sum phi(k) over every token so far.
struct LinearAttentionState {
  Tensor S, z;
};

/// Causal linear attention whose state crosses segments (Katharopoulos et al.
/// 2020, "Transformers are RNNs"; the recurrent half of Based, Arora et al.
/// 2024). Per head, q = phi(Wq x), k = phi(Wk x) in f dims with phi(x) =
/// ELU(x) + 1, v = Wv x in C/h dims; for token t of the segment
///   out_t = (q_t (S + sum_{s<=t} k_s^T v_s)) / (q_t . (z + sum_{s<=t} k_s) + eps)
/// then Wo; the state becomes S + sum_s k_s^T v_s, z + sum_s k_s. The state
/// holds h f (C/h + 1) floats per sequence. Throws ValueError when C % heads
/// != 0 or features < 1; ShapeError for x not [B, T, C] or a state of
/// another shape.
class LinearAttentionMemory : public Module {
 public:
  LinearAttentionMemory(int64_t dim, int64_t heads, int64_t features, Generator& gen = default_generator());
  /// The zero state for a batch of B sequences, on the layer's device and of its dtype.
  LinearAttentionState initial_state(int64_t B) const;
  /// x[B, T, C] -> [B, T, C]; advances `state` past the T tokens.
  Tensor forward(const Tensor& x, LinearAttentionState& state) const;
  int64_t dim, heads, features;
  double eps = 1e-6;
  std::shared_ptr<Linear> q, k, v, out;
};

/// A diagonal selective state-space layer (Gu & Dao 2023, "Mamba", without
/// its short convolution): u = Wu x, gate g = Wg x, delta = softplus(Wd x +
/// bd), B = WB x, Cc = WC x [B, T, N], A = -exp(A_log) [C, N] (S4D-real
/// init A_log[c, n] = log(n + 1)), then
///   (y, h) = selective_scan(u, delta, A, B, Cc, D, h)   (ops/selective_scan.h)
///   out = Wo(y * silu(g))
/// The state h[B, C, N] holds C N floats per sequence. bd starts so that
/// softplus(bd) spans [0.001, 0.1] log-uniformly over the channels, as
/// Mamba's dt init. Throws ValueError for state < 1; ShapeError for x not
/// [B, T, C] or a state of another shape.
class SelectiveSSM : public Module {
 public:
  SelectiveSSM(int64_t dim, int64_t state, Generator& gen = default_generator());
  /// The zero state [B, C, N], on the layer's device and of its dtype.
  Tensor initial_state(int64_t B) const;
  /// x[B, T, C] -> [B, T, C]; advances `state` past the T tokens.
  Tensor forward(const Tensor& x, Tensor& state) const;
  int64_t dim, state_dim;
  std::shared_ptr<Linear> in, gate, dt, b_proj, c_proj, out;
  Tensor A_log, D;
};

}  // namespace tmem::nn
