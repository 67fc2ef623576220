// The coord-binding diagnostic (DESIGN.md 5): W write tokens bind a value
// v in {0..31} to a key k ~ U[-1, 1]^3; then query tokens carry a written key
// plus N(0, s^2) noise (clamped to [-1, 1]); the target of a query is the
// value of the written key nearest to it. Metric: query accuracy (chance 1/32).
#pragma once
#include "core/rng.h"
#include "models/transformer.h"

namespace tmem::models {

inline constexpr int64_t kCoordValues = 32;

/// One batch: T = W + queries tokens per sequence.
struct CoordBindingBatch {
  Tensor keys;     // [B, T, 3] float32: written keys, then noisy query keys
  Tensor values;   // [B, T] int64: written values; kCoordValues ("none") at queries
  Tensor types;    // [B, T] int64: 0 write, 1 query
  Tensor targets;  // [B, T] int64: the answer at queries, -100 (ignored) elsewhere
};

/// Draws a batch from `gen`. Throws ValueError for B, W or queries < 1 or
/// noise < 0.
CoordBindingBatch coord_binding_batch(int64_t B, int64_t W, double noise, int64_t queries,
                                      Generator& gen);

/// Token embedding type_emb(type) + Linear(3 -> C)(key) + value_emb(value),
/// a Backbone, and a Linear(C -> 32) head: logits [B, T, 32].
class CoordBindingModel : public nn::Module {
 public:
  CoordBindingModel(const BackboneConfig& cfg, Generator& gen);
  Tensor forward(const CoordBindingBatch& batch) const;
  /// The embedded tokens [B, T, C] (the backbone's input), for causality tests.
  Tensor embed(const CoordBindingBatch& batch) const;
  std::shared_ptr<nn::Embedding> type_emb, value_emb;
  std::shared_ptr<nn::Linear> key_proj, head;
  std::shared_ptr<Backbone> backbone;
};

}  // namespace tmem::models
