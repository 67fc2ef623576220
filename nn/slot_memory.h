// The `slots` baseline of the diagnostics (docs/DESIGN.md §8): 8 learned memory
// slots updated by attention, made causal by scanning the sequence chunk by
// chunk exactly like TensorMemory (read before write). tmem's construction:
// the reference code's slots attend to the whole sequence, which leaks.
#pragma once
#include <memory>

#include "tmem/core/rng.h"
#include "tmem/nn/linear.h"
#include "tmem/nn/module.h"

namespace tmem::nn {

/// x[B, N, C] (layer-normed) and a slot state S[B, M, C] (M slots). For each
/// chunk k of K tokens (r_k = first token, w_k = mean of the chunk):
///   read:  a = softmax_j(q(r_k) . key(S_j) / sqrt(C)); out_k = o(sum_j a_j val(S_j))
///   write: b = softmax_j(q_w(w_k) . key(S_j) / sqrt(C)); S_j += b_j u(w_k)
/// out_k goes to every token of chunk k; returns sigmoid(gamma) * out [B, N, C].
/// The initial state is the learned slots [M, C] (N(0, 0.02)) for every
/// sequence. Throws ShapeError for a bad x or state shape.
class SlotMemory : public Module {
 public:
  SlotMemory(int64_t dim, int64_t slots = 8, int64_t chunk = 1, double gamma_init = 0.0,
             Generator& gen = default_generator());
  Tensor initial_state(int64_t B) const;
  Tensor forward(const Tensor& x, Tensor& state) const;
  int64_t dim, slots, chunk;
  Tensor init, gamma;
  std::shared_ptr<Linear> q, key, val, out, q_write, update;
};

}  // namespace tmem::nn
