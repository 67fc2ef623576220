// The model trained on every diagnostic task: an input encoder
// Linear(F -> C)(features) + Embedding(vocab, C)(ids), a Backbone
// (base / base_wide / tensor), and a Linear(C -> classes) head.
#pragma once
#include <memory>

#include "models/tasks.h"
#include "models/transformer.h"

namespace tmem::models {

class DiagnosticModel : public nn::Module {
 public:
  DiagnosticModel(const Task& task, const BackboneConfig& cfg, Generator& gen);
  /// The embedded tokens [B, T, C] (the backbone's input).
  Tensor embed(const TaskBatch& batch) const;
  /// Logits [B, T, classes].
  Tensor forward(const TaskBatch& batch) const;
  std::shared_ptr<nn::Linear> input_proj, head;  // input_proj null when F = 0
  std::shared_ptr<nn::Embedding> id_emb;         // null when vocab = 0
  std::shared_ptr<Backbone> backbone;
};

}  // namespace tmem::models
