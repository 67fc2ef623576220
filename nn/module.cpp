#include "tmem/nn/module.h"

#include <set>

#include "tmem/core/autograd.h"

namespace tmem::nn {

void Module::collect(const std::string& prefix, NamedTensors& params, NamedTensors* buffers) const {
  for (const auto& [n, t] : params_) params.emplace_back(prefix + n, t);
  if (buffers)
    for (const auto& [n, t] : buffers_) buffers->emplace_back(prefix + n, t);
  for (const auto& [n, c] : children_) c->collect(prefix + n + ".", params, buffers);
}

NamedTensors Module::named_parameters() const {
  NamedTensors out;
  collect("", out, nullptr);
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_parameters()) out.push_back(t);
  return out;
}

std::map<std::string, Tensor> Module::state_dict() const {
  NamedTensors params, buffers;
  collect("", params, &buffers);
  std::map<std::string, Tensor> out;
  for (auto& [n, t] : params) out[n] = t;
  for (auto& [n, t] : buffers) out[n] = t;
  return out;
}

void Module::load_state_dict(const std::map<std::string, Tensor>& state, bool strict) {
  std::map<std::string, Tensor> own = state_dict();
  if (strict)
    for (const auto& [n, t] : state)
      check<ValueError>(own.count(n) > 0, "load_state_dict: unexpected key \"", n, "\"");
  NoGradGuard no_grad;
  for (auto& [n, t] : own) {
    auto it = state.find(n);
    if (it == state.end()) {
      check<ValueError>(!strict, "load_state_dict: missing key \"", n, "\"");
      continue;
    }
    check<ShapeError>(it->second.shape() == t.shape(), "load_state_dict: \"", n, "\" expected shape ",
                      shape_str(t.shape()), ", but got ", shape_str(it->second.shape()));
    copy_data(t, it->second);
  }
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [n, c] : children_) c->train(on);
}

void Module::zero_grad() {
  for (auto& [n, t] : named_parameters()) t.zero_grad();
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (auto& [name, t] : named_parameters()) n += t.numel();
  return n;
}

Module& Module::to(Device device) {
  NamedTensors params, buffers;
  collect("", params, &buffers);
  NoGradGuard no_grad;
  for (auto* list : {&params, &buffers})
    for (auto& [n, t] : *list) {
      t.set_data(t.to(device));
      if (Tensor g = t.grad(); g.defined()) g.set_data(g.to(device));
    }
  return *this;
}

Tensor Module::register_parameter(const std::string& name, Tensor t) {
  for (const auto& [n, p] : params_)
    check<ValueError>(n != name, "register_parameter: \"", name, "\" is already registered");
  t.requires_grad_();
  params_.emplace_back(name, t);
  return t;
}

Tensor Module::register_buffer(const std::string& name, Tensor t) {
  buffers_.emplace_back(name, t);
  return t;
}

}  // namespace tmem::nn
