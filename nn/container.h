// Module containers (PyTorch torch.nn.Sequential, ModuleList, ModuleDict;
// libtorch torch::nn::Sequential, ModuleList, ModuleDict). Their children are
// registered like any submodule, so parameters get PyTorch's names: "0.weight"
// for the first module of a Sequential or ModuleList, "<key>.weight" in a
// ModuleDict, and state_dict / load_state_dict / to / train reach them.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tmem/nn/module.h"

namespace tmem::nn {

/// A parameterless module around a function Tensor -> Tensor (libtorch
/// torch::nn::Functional), e.g. Functional(relu) between two Linears of a
/// Sequential.
class Functional : public Module {
 public:
  explicit Functional(std::function<Tensor(const Tensor&)> f) : f_(std::move(f)) {}
  Tensor forward(const Tensor& x) const { return f_(x); }

 private:
  std::function<Tensor(const Tensor&)> f_;
};

/// An ordered list of submodules named "0", "1", ... in insertion order
/// (torch.nn.ModuleList). Holds any Module; forward is the user's.
class ModuleList : public Module {
 public:
  ModuleList() = default;
  template <class... Ms>
  explicit ModuleList(std::shared_ptr<Ms>... modules) {
    (push_back(std::move(modules)), ...);
  }
  /// Appends m under the name "<size()>". Throws ValueError for a null m.
  void push_back(std::shared_ptr<Module> m);
  size_t size() const { return modules_.size(); }
  bool empty() const { return modules_.empty(); }
  /// Module i. Throws IndexError for i >= size().
  const std::shared_ptr<Module>& operator[](size_t i) const;
  /// Module i as an M. Throws IndexError for i >= size(), ValueError when
  /// module i is not an M.
  template <class M>
  std::shared_ptr<M> at(size_t i) const {
    auto m = std::dynamic_pointer_cast<M>((*this)[i]);
    check<ValueError>(m != nullptr, "ModuleList::at: module ", i, " is not of the requested type");
    return m;
  }
  auto begin() const { return modules_.begin(); }
  auto end() const { return modules_.end(); }

 private:
  std::vector<std::shared_ptr<Module>> modules_;
};

/// Submodules by name in insertion order (torch.nn.ModuleDict).
class ModuleDict : public Module {
 public:
  ModuleDict() = default;
  /// Adds m under `key`. Throws ValueError for a null m, an empty key, a key
  /// containing '.' (it would break the dotted parameter names), or a key
  /// already present.
  void insert(const std::string& key, std::shared_ptr<Module> m);
  bool contains(const std::string& key) const;
  size_t size() const { return modules_.size(); }
  /// The keys in insertion order.
  std::vector<std::string> keys() const;
  /// The module under key. Throws IndexError naming a missing key.
  const std::shared_ptr<Module>& operator[](const std::string& key) const;
  /// The module under key as an M. Throws IndexError for a missing key,
  /// ValueError when it is not an M.
  template <class M>
  std::shared_ptr<M> at(const std::string& key) const {
    auto m = std::dynamic_pointer_cast<M>((*this)[key]);
    check<ValueError>(m != nullptr, "ModuleDict::at: module \"", key, "\" is not of the requested type");
    return m;
  }

 private:
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> modules_;
};

/// Modules applied one after the other (torch.nn.Sequential): forward(x) =
/// m_{n-1}(...m_1(m_0(x))). Each module is any Module with a `Tensor
/// forward(const Tensor&) const` (Linear, LayerNorm, MLP, Functional, another
/// Sequential, ...), named "0", "1", ... An empty Sequential is the identity.
class Sequential : public Module {
 public:
  Sequential() = default;
  template <class... Ms>
  explicit Sequential(std::shared_ptr<Ms>... modules) {
    (push_back(std::move(modules)), ...);
  }
  /// Appends m under the name "<size()>". Throws ValueError for a null m.
  template <class M>
  void push_back(std::shared_ptr<M> m) {
    check<ValueError>(m != nullptr, "Sequential::push_back: module ", size(), " is null");
    const M* raw = m.get();
    append(m, [raw](const Tensor& x) { return raw->forward(x); });
  }
  Tensor forward(const Tensor& x) const;
  size_t size() const { return modules_.size(); }
  /// Module i. Throws IndexError for i >= size().
  const std::shared_ptr<Module>& operator[](size_t i) const;

 private:
  void append(std::shared_ptr<Module> m, std::function<Tensor(const Tensor&)> forward);
  std::vector<std::shared_ptr<Module>> modules_;
  std::vector<std::function<Tensor(const Tensor&)>> forwards_;
};

}  // namespace tmem::nn
