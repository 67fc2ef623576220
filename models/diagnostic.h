// The model trained on every diagnostic task: an input encoder
// Linear(F -> C)(features) + Embedding(vocab, C)(ids), a Backbone, and a
// Linear(C -> classes) head. On the segmented tasks (Task::segment() > 0,
// docs/DESIGN.md §9) the backbone runs segment by segment and only its
// BackboneState crosses segment boundaries, with gradients through every
// segment.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "tmem/models/tasks.h"
#include "tmem/models/transformer.h"

namespace tmem::models {

/// The methods of the segment-recurrent comparison: none, full, xl, linear,
/// ssm, rmt, tensor.
const std::vector<BackboneMethod>& segmented_methods();

/// The segmented method named `name` (`tmem frontier --methods`). Throws
/// ValueError `unknown segmented method "<name>" (expected none, full, xl,
/// linear, ssm, rmt or tensor)` for any other name.
BackboneMethod parse_segmented_method(const std::string& name);

/// The Backbone configuration that `cfg.method` stands for on `task`. On a
/// segmented task: none -> base (nothing crosses segments); full -> base over
/// the whole input (no segmenting); xl -> base with attention xl over a cache
/// of cfg.cache_len tokens per layer (0: one segment, Transformer-XL's
/// default), gradients into the cache; linear, ssm,
/// rmt, tensor -> that method; max_len grows to fit a segment (plus rmt's
/// 2 R memory tokens) or the whole input. Elsewhere cfg unchanged but for
/// max_len >= the task's length. Throws ValueError for a method the task does
/// not take (naming the valid ones) and for xl with cache_len < 0.
BackboneConfig backbone_config_for(const Task& task, const BackboneConfig& cfg);

class DiagnosticModel : public nn::Module {
 public:
  /// cfg.method as backbone_config_for takes it.
  DiagnosticModel(const Task& task, const BackboneConfig& cfg, Generator& gen);
  /// The embedded tokens [B, T, C] (the backbone's input).
  Tensor embed(const TaskBatch& batch) const;
  /// Logits [B, T, classes].
  Tensor forward(const TaskBatch& batch) const;
  /// Logits [B, T, classes]; `state` ends as the state carried out of the
  /// last segment (empty for unsegmented models and methods without state).
  Tensor forward(const TaskBatch& batch, BackboneState& state) const;
  std::shared_ptr<nn::Linear> input_proj, head;  // input_proj null when F = 0
  std::shared_ptr<nn::Embedding> id_emb;         // null when vocab = 0
  std::shared_ptr<Backbone> backbone;
  int64_t segment = 0;  // tokens per segment; 0: the whole input at once
};

}  // namespace tmem::models
