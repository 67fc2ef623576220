#include "models/diagnostic.h"

#include "ops/elementwise.h"

namespace tmem::models {

DiagnosticModel::DiagnosticModel(const Task& task, const BackboneConfig& cfg, Generator& gen) {
  if (task.feature_dim() > 0)
    input_proj = register_module("input_proj", std::make_shared<nn::Linear>(task.feature_dim(), cfg.dim, true, gen));
  if (task.vocab() > 0) id_emb = register_module("id_emb", std::make_shared<nn::Embedding>(task.vocab(), cfg.dim, gen));
  backbone = register_module("backbone", std::make_shared<Backbone>(cfg, gen));
  head = register_module("head", std::make_shared<nn::Linear>(cfg.dim, task.classes(), true, gen));
}

Tensor DiagnosticModel::embed(const TaskBatch& batch) const {
  Tensor x;
  if (input_proj) x = input_proj->forward(batch.features);
  if (id_emb) x = x.defined() ? x + id_emb->forward(batch.ids) : id_emb->forward(batch.ids);
  return x;
}

Tensor DiagnosticModel::forward(const TaskBatch& batch) const {
  return head->forward(backbone->forward(embed(batch)));
}

}  // namespace tmem::models
