#include "tmem/models/diagnostic.h"

#include <algorithm>

#include "tmem/ops/elementwise.h"
#include "tmem/ops/shape.h"

namespace tmem::models {

const std::vector<BackboneMethod>& segmented_methods() {
  using enum BackboneMethod;
  static const std::vector<BackboneMethod> m = {none, full, xl, linear, ssm, rmt, tensor};
  return m;
}

namespace {

// "none, full, xl, linear, ssm, rmt or tensor".
std::string segmented_method_names() {
  const auto& valid = segmented_methods();
  std::string names;
  for (size_t i = 0; i < valid.size(); ++i)
    names += (i == 0 ? "" : i + 1 == valid.size() ? " or " : ", ") + to_string(valid[i]);
  return names;
}

}  // namespace

BackboneMethod parse_segmented_method(const std::string& name) {
  for (const auto m : segmented_methods())
    if (to_string(m) == name) return m;
  throw ValueError("unknown segmented method \"" + printable(name) + "\" (expected " + segmented_method_names() + ")");
}

BackboneConfig backbone_config_for(const Task& task, const BackboneConfig& cfg) {
  using enum BackboneMethod;
  BackboneConfig b = cfg;
  b.max_len = std::max(b.max_len, task.seq_len());
  if (task.segment() == 0) return b;
  const auto& valid = segmented_methods();
  check<ValueError>(std::find(valid.begin(), valid.end(), cfg.method) != valid.end(),
                    "segmented tasks take the methods ", segmented_method_names(), ", but got \"", to_string(cfg.method),
                    "\"");
  if (cfg.method == none || cfg.method == full) b.method = base;
  if (cfg.method == xl) {
    check<ValueError>(cfg.cache_len >= 0, "xl: expected a cache of >= 0 tokens (0: one segment), but got ",
                      cfg.cache_len);
    if (cfg.cache_len == 0) b.cache_len = task.segment();
    b.method = base;
    b.attention = Attention::xl;
    b.cache_grad = true;
  }
  if (cfg.method != full)
    b.max_len = std::max(cfg.max_len, task.segment() + (cfg.method == rmt ? 2 * cfg.memory_tokens : 0));
  return b;
}

DiagnosticModel::DiagnosticModel(const Task& task, const BackboneConfig& cfg, Generator& gen)
    : segment(cfg.method == BackboneMethod::full ? 0 : task.segment()) {
  const BackboneConfig b = backbone_config_for(task, cfg);
  if (task.feature_dim() > 0)
    input_proj = register_module("input_proj", std::make_shared<nn::Linear>(task.feature_dim(), b.dim, true, gen));
  if (task.vocab() > 0) id_emb = register_module("id_emb", std::make_shared<nn::Embedding>(task.vocab(), b.dim, gen));
  backbone = register_module("backbone", std::make_shared<Backbone>(b, gen));
  head = register_module("head", std::make_shared<nn::Linear>(b.dim, task.classes(), true, gen));
}

Tensor DiagnosticModel::embed(const TaskBatch& batch) const {
  Tensor x;
  if (input_proj) x = input_proj->forward(batch.features);
  if (id_emb) x = x.defined() ? x + id_emb->forward(batch.ids) : id_emb->forward(batch.ids);
  return x;
}

Tensor DiagnosticModel::forward(const TaskBatch& batch) const {
  BackboneState state;
  return forward(batch, state);
}

Tensor DiagnosticModel::forward(const TaskBatch& batch, BackboneState& state) const {
  Tensor x = embed(batch);
  if (segment == 0) return head->forward(backbone->forward(x, state));
  std::vector<Tensor> outs;
  for (const Tensor& seg : split(x, segment, 1)) outs.push_back(backbone->forward(seg, state));
  return head->forward(outs.size() == 1 ? outs[0] : cat(outs, 1));
}

}  // namespace tmem::models
