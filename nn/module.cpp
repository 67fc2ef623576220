#include "tmem/nn/module.h"

#include <algorithm>
#include <unordered_set>

#include <fmt/format.h>

#include "tmem/core/autograd.h"
#include "tmem/ops/elementwise.h"

namespace tmem::nn {

// The walks of the tree below keep their own stack rather than recurse: a
// chain of modules (one registered in the next) deeper than the C++ stack is
// walked, and freed, as well as a shallow one.

Module::Module(const Module& other)
    : params_(other.params_), buffers_(other.buffers_), children_(other.children_), training_(other.training_) {
  for (auto& [n, c] : children_) ++c->parents_;
}

Module& Module::operator=(const Module& other) {
  if (this == &other) return *this;
  for (auto& [n, c] : other.children_) ++c->parents_;
  for (auto& [n, c] : children_) --c->parents_;
  params_ = other.params_;
  buffers_ = other.buffers_;
  children_ = other.children_;
  training_ = other.training_;
  return *this;
}

Module::~Module() {
  std::vector<std::shared_ptr<Module>> pending;
  // Moves m's children to `pending` (a module released here has none left
  // when its own destructor runs).
  const auto release = [&pending](Module& m) {
    for (auto& [n, c] : m.children_)
      if (c) {
        --c->parents_;
        pending.push_back(std::move(c));
      }
  };
  release(*this);
  while (!pending.empty()) {
    std::shared_ptr<Module> m = std::move(pending.back());
    pending.pop_back();
    if (m.use_count() == 1) release(*m);  // its last owner: take its children before it goes
  }
}

void Module::collect(NamedTensors& params, NamedTensors* buffers, bool names) const {
  // Each module reached keeps the index of the one it was reached from and
  // its name there; a dotted name is built only for a module that has
  // tensors, so a deep chain costs its length, not its square.
  struct Reached {
    const Module* module;
    size_t parent;
    const std::string* name;
  };
  std::vector<Reached> reached{{this, 0, nullptr}};
  std::vector<size_t> stack{0};
  while (!stack.empty()) {
    const size_t i = stack.back();
    stack.pop_back();
    const Module* m = reached[i].module;
    if (names && (!m->params_.empty() || (buffers && !m->buffers_.empty()))) {
      std::vector<const std::string*> path;
      for (size_t j = i; reached[j].name; j = reached[j].parent) path.push_back(reached[j].name);
      std::string prefix;
      for (auto it = path.rbegin(); it != path.rend(); ++it) prefix += **it + ".";
      for (const auto& [n, t] : m->params_) params.emplace_back(prefix + n, t);
      if (buffers)
        for (const auto& [n, t] : m->buffers_) buffers->emplace_back(prefix + n, t);
    } else if (!names) {
      for (const auto& [n, t] : m->params_) params.emplace_back(std::string(), t);
      if (buffers)
        for (const auto& [n, t] : m->buffers_) buffers->emplace_back(std::string(), t);
    }
    for (auto it = m->children_.rbegin(); it != m->children_.rend(); ++it) {
      reached.push_back({it->second.get(), i, &it->first});
      stack.push_back(reached.size() - 1);
    }
  }
}

namespace {

// The tensors of `all` reached twice (a module or tensor shared by two
// names: weight tying) once, under their first name, as PyTorch's
// remove_duplicate: counted twice, a parameter was clipped too hard and
// refused by the optimizers.
NamedTensors first_names(const NamedTensors& all) {
  NamedTensors out;
  std::unordered_set<const TensorImpl*> seen;
  for (const auto& [n, t] : all)
    if (seen.insert(t.impl_ptr().get()).second) out.emplace_back(n, t);
  return out;
}

std::vector<Tensor> tensors_of(const NamedTensors& named) {
  std::vector<Tensor> out;
  for (const auto& [n, t] : named) out.push_back(t);
  return out;
}

}  // namespace

NamedTensors Module::named_parameters() const {
  NamedTensors params;
  collect(params, nullptr);
  return first_names(params);
}

std::vector<Tensor> Module::parameters() const {
  NamedTensors params;
  collect(params, nullptr, false);
  return tensors_of(first_names(params));
}

NamedTensors Module::named_buffers() const {
  NamedTensors params, buffers;
  collect(params, &buffers);
  return first_names(buffers);
}

std::vector<Tensor> Module::buffers() const {
  NamedTensors params, buffers;
  collect(params, &buffers, false);
  return tensors_of(first_names(buffers));
}

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_children() const {
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> out;
  std::unordered_set<const Module*> seen;
  for (const auto& [n, c] : children_)
    if (seen.insert(c.get()).second) out.emplace_back(n, c);
  return out;
}

std::map<std::string, Tensor> Module::state_dict() const {
  NamedTensors params, buffers;
  collect(params, &buffers);
  std::map<std::string, Tensor> out;
  for (auto& [n, t] : params) out[n] = t;
  for (auto& [n, t] : buffers) out[n] = t;
  return out;
}

NamedTensors Module::named_state() const {
  NamedTensors all;
  collect(all, &all);
  return all;
}

Module::IncompatibleKeys Module::load_state_dict(const std::map<std::string, Tensor>& state, bool strict) {
  std::map<std::string, Tensor> own = state_dict();
  // Every fault is listed (as PyTorch does) before anything is copied, so a
  // state that does not fit leaves the module as it was.
  IncompatibleKeys keys;
  std::string shapes;
  auto quoted = [](const std::string& name) { return fmt::format("\"{}\"", printable(name)); };
  for (const auto& kv : state)
    if (own.count(kv.first) == 0) keys.unexpected_keys.push_back(kv.first);
  for (const auto& [n, t] : named_state()) {
    auto it = state.find(n);
    if (it == state.end()) {
      keys.missing_keys.push_back(n);
    } else if (it->second.shape() != t.shape()) {
      shapes += fmt::format("{}{} expected shape {}, but got {}", shapes.empty() ? "" : ", ", quoted(n),
                            shape_str(t.shape()), shape_str(it->second.shape()));
    }
  }
  auto list = [&](const std::vector<std::string>& names) {
    std::string out;
    for (const std::string& n : names) out += (out.empty() ? "" : ", ") + quoted(n);
    return out;
  };
  const bool mismatch = strict && (!keys.missing_keys.empty() || !keys.unexpected_keys.empty());
  std::string faults;
  if (strict && !keys.missing_keys.empty()) faults += " missing key(s) " + list(keys.missing_keys) + ".";
  if (strict && !keys.unexpected_keys.empty()) faults += " unexpected key(s) " + list(keys.unexpected_keys) + ".";
  if (!shapes.empty()) faults += " size mismatch for " + shapes + ".";
  if (mismatch) throw ValueError("load_state_dict:" + faults);
  if (!shapes.empty()) throw ShapeError("load_state_dict:" + faults);
  // Every value is first converted whole into fresh memory of the module's
  // dtype (copy_data refuses a NaN, an inf or a value beyond int64's range
  // for an int64 buffer), so a refused value leaves the module as it was,
  // and a value that shares memory with the module (m.weight.T) is not
  // overwritten while it is read.
  NoGradGuard no_grad;
  std::vector<std::pair<Tensor, Tensor>> writes;
  for (auto& [n, t] : own)
    if (auto it = state.find(n); it != state.end()) {
      Tensor v = empty(t.shape(), t.dtype(), t.device());
      try {
        copy_data(v, it->second);
      } catch (const ValueError& e) {
        throw ValueError(fmt::format("load_state_dict: {}: {}", quoted(n), e.what()));
      }
      writes.emplace_back(t, v);
    }
  for (const auto& [t, v] : writes) copy_data(t, v);
  return keys;
}

void Module::train(bool on) {
  std::vector<Module*> stack{this};
  while (!stack.empty()) {
    Module* m = stack.back();
    stack.pop_back();
    m->training_ = on;
    for (auto& [n, c] : m->children_) stack.push_back(c.get());
  }
}

void Module::zero_grad() {
  for (Tensor& t : parameters()) t.zero_grad();
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (const Tensor& t : parameters()) n += t.numel();
  return n;
}

bool Module::has_own(const std::string& name) const {
  const auto named = [&name](const auto& e) { return e.first == name; };
  return std::ranges::any_of(params_, named) || std::ranges::any_of(buffers_, named) ||
         std::ranges::any_of(children_, named);
}

void Module::convert(const char* op, const std::function<bool(const Tensor&)>& needs,
                     const std::function<Tensor(const Tensor&)>& cast) {
  NamedTensors params, buffers;
  collect(params, &buffers, false);
  const auto refused = [&](const Tensor& t) { return needs(t) && !t.is_leaf(); };
  bool any_refused = false;
  for (auto* list : {&params, &buffers})
    for (auto& [n, t] : *list) any_refused = any_refused || refused(t);
  if (any_refused) {  // the names only now: a deep chain's names cost the square of its depth
    params.clear();
    buffers.clear();
    collect(params, &buffers);
    for (auto* list : {&params, &buffers})
      for (auto& [n, t] : *list)
        check<ValueError>(!refused(t), op, ": \"", printable(n), "\" is the output of an op, not a leaf (a buffer ",
                          "registered as x * 2 rather than a detached tensor), so it cannot be changed in place; ",
                          "register its detach()");
  }
  NoGradGuard no_grad;
  for (auto* list : {&params, &buffers})
    for (auto& [n, t] : *list) {
      if (needs(t)) t.set_data(cast(t));
      if (Tensor g = t.grad(); g.defined() && needs(g)) g.set_data(cast(g));
    }
}

Module& Module::to(Device device) {
  convert("Module::to", [device](const Tensor& t) { return t.device() != device; },
          [device](const Tensor& t) { return t.to(device); });
  return *this;
}

Module& Module::to(DType dtype) {
  check<DtypeError>(is_floating(dtype), "Module::to: expected a floating dtype (float32 or float64), but got ",
                    dtype_name(dtype));
  convert("Module::to", [dtype](const Tensor& t) { return is_floating(t.dtype()) && t.dtype() != dtype; },
          [dtype](const Tensor& t) { return to_dtype(t, dtype); });
  return *this;
}

void Module::unregister(const std::string& name) {
  const auto named = [&name](const auto& e) { return e.first == name; };
  for (auto& [n, c] : children_)
    if (n == name) --c->parents_;
  const size_t removed = std::erase_if(params_, named) + std::erase_if(buffers_, named) +
                         std::erase_if(children_, named);
  check<ValueError>(removed > 0, "unregister: no parameter, buffer or module is registered as '", printable(name), "'");
}

namespace {

// Sets the value of the entry of `list` named `name`; whether there is one.
template <class List, class V>
bool put(List& list, const std::string& name, V value) {
  for (auto& [n, v] : list)
    if (n == name) {
      v = std::move(value);
      return true;
    }
  return false;
}

}  // namespace

void Module::replace(const std::string& name, Tensor t) {
  for (auto& [n, v] : params_)
    if (n == name) {
      t.requires_grad_();  // as register_parameter marks it
      v = t;
      return;
    }
  check<ValueError>(put(buffers_, name, t), "replace: no parameter or buffer is registered as '", printable(name), "'");
}

void Module::replace(const std::string& name, std::shared_ptr<Module> m) {
  check<ValueError>(m != nullptr, "replace: module \"", printable(name), "\" is null");
  check_no_cycle("replace", name, m.get());
  for (auto& [n, c] : children_)
    if (n == name) {
      --c->parents_;
      ++m->parents_;
      c = std::move(m);
      return;
    }
  throw ValueError(fmt::format("replace: no module is registered as '{}'", printable(name)));
}

void Module::check_name(const char* op, const char* kind, const std::string& name) const {
  check<ValueError>(!name.empty(), op, ": ", kind, " name can't be empty string \"\"");
  check<ValueError>(name.find('.') == std::string::npos, op, ": ", kind, " name can't contain \".\", but got \"",
                    printable(name), "\"");
  auto taken = [&](const auto& list) {
    return std::any_of(list.begin(), list.end(), [&](const auto& e) { return e.first == name; });
  };
  check<ValueError>(!taken(params_) && !taken(buffers_) && !taken(children_), op, ": attribute '", printable(name),
                    "' already exists");
}

// Every registration checks, so the tree it walks has no cycle.
bool Module::in_subtree(const Module* target) const {
  std::vector<const Module*> stack{this};
  std::unordered_set<const Module*> seen;
  while (!stack.empty()) {
    const Module* m = stack.back();
    stack.pop_back();
    if (m == target) return true;
    if (seen.insert(m).second)
      for (const auto& [n, c] : m->children_) stack.push_back(c.get());
  }
  return false;
}

void Module::check_child(const std::string& name, const Module* child) const {
  check_name("register_module", "module", name);
  check<ValueError>(child != nullptr, "register_module: module \"", printable(name), "\" is null");
  check_no_cycle("register_module", name, child);
}

void Module::check_no_cycle(const char* op, const std::string& name, const Module* child) const {
  check<ValueError>(child != this && (parents_ == 0 || !child->in_subtree(this)), op, ": module \"", printable(name),
                    "\" is this module or contains it; registering it would make a cycle");
}

Tensor Module::register_parameter(const std::string& name, Tensor t) {
  check_name("register_parameter", "parameter", name);
  t.requires_grad_();
  params_.emplace_back(name, t);
  return t;
}

Tensor Module::register_buffer(const std::string& name, Tensor t) {
  check_name("register_buffer", "buffer", name);
  buffers_.emplace_back(name, t);
  return t;
}

}  // namespace tmem::nn
