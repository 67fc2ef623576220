#include "tmem/nn/container.h"

#include <algorithm>

namespace tmem::nn {

void ModuleList::push_back(std::shared_ptr<Module> m) {
  check<ValueError>(m != nullptr, "ModuleList::push_back: module ", size(), " is null");
  register_module(std::to_string(size()), m);
  modules_.push_back(std::move(m));
}

const std::shared_ptr<Module>& ModuleList::operator[](size_t i) const {
  check<IndexError>(i < size(), "ModuleList: index ", i, " is out of range for ", size(), " modules");
  return modules_[i];
}

void ModuleDict::insert(const std::string& key, std::shared_ptr<Module> m) {
  check<ValueError>(m != nullptr, "ModuleDict::insert: module \"", printable(key), "\" is null");
  check<ValueError>(!key.empty() && key.find('.') == std::string::npos,
                    "ModuleDict::insert: a key must be non-empty and contain no '.', but got \"",
                    printable(key), "\"");
  check<ValueError>(!contains(key), "ModuleDict::insert: key \"", printable(key), "\" is already present");
  register_module(key, m);
  modules_.emplace_back(key, std::move(m));
}

bool ModuleDict::contains(const std::string& key) const {
  return std::any_of(modules_.begin(), modules_.end(), [&](const auto& e) { return e.first == key; });
}

std::vector<std::string> ModuleDict::keys() const {
  std::vector<std::string> out;
  for (const auto& e : modules_) out.push_back(e.first);
  return out;
}

const std::shared_ptr<Module>& ModuleDict::operator[](const std::string& key) const {
  for (const auto& e : modules_)
    if (e.first == key) return e.second;
  throw IndexError("ModuleDict: no module under key \"" + printable(key) + "\"");
}

void Sequential::append(std::shared_ptr<Module> m, std::function<Tensor(const Tensor&)> forward) {
  register_module(std::to_string(size()), m);
  modules_.push_back(std::move(m));
  forwards_.push_back(std::move(forward));
}

Tensor Sequential::forward(const Tensor& x) const {
  Tensor y = x;
  for (const auto& f : forwards_) y = f(y);
  return y;
}

const std::shared_ptr<Module>& Sequential::operator[](size_t i) const {
  check<IndexError>(i < size(), "Sequential: index ", i, " is out of range for ", size(), " modules");
  return modules_[i];
}

}  // namespace tmem::nn
