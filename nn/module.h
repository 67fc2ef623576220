// Module: the base of every layer and model (PyTorch nn.Module semantics).
// A module owns named parameters and buffers and named child modules;
// parameter names are dotted paths ("blocks.0.attn.qkv.weight").
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tmem/core/tensor.h"

namespace tmem::nn {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

class Module {
 public:
  Module() = default;
  /// A copy holds the same children (shared with the original).
  Module(const Module& other);
  Module& operator=(const Module& other);
  /// Releases the children one level at a time, not by recursion, so a
  /// chain of modules deeper than the C++ stack is freed as well.
  virtual ~Module();

  /// Every parameter of this module and its children, depth first, in
  /// registration order, with dotted names; a parameter shared under two
  /// names (weight tying) once, under its first (PyTorch's remove_duplicate;
  /// state_dict keeps both names).
  NamedTensors named_parameters() const;
  std::vector<Tensor> parameters() const;
  /// Every buffer of this module and its children, as named_parameters
  /// lists parameters (PyTorch's named_buffers: depth first, a buffer
  /// reached twice once, under its first name).
  NamedTensors named_buffers() const;
  std::vector<Tensor> buffers() const;
  /// This module's direct children with their names, in registration order;
  /// a child registered under two names once, under its first (PyTorch's
  /// named_children).
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const;
  /// Parameters and buffers by dotted name (PyTorch state_dict).
  std::map<std::string, Tensor> state_dict() const;
  /// state_dict's entries in PyTorch's order: each module's parameters, then
  /// its buffers, then its children's (a tensor shared by two names under
  /// both).
  NamedTensors named_state() const;
  /// The keys a load_state_dict did not match (PyTorch's _IncompatibleKeys):
  /// this module's keys the state lacks, in named_state's order (PyTorch's),
  /// and the state's keys it does not have, in the state's order.
  struct IncompatibleKeys {
    std::vector<std::string> missing_keys, unexpected_keys;
  };
  /// Copies values into this module's parameters and buffers. strict: every
  /// key must match both ways; otherwise the keys that did not are returned
  /// (under strict both lists are empty). Throws, having copied nothing,
  /// ValueError under strict listing every missing and unexpected key (and any
  /// shape mismatch), ShapeError listing every key whose shape differs (both
  /// shapes), or ValueError for a value an int64 buffer cannot hold (NaN, inf).
  IncompatibleKeys load_state_dict(const std::map<std::string, Tensor>& state, bool strict = true);
  /// Training mode (dropout active) for this module and all children.
  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  /// Sets this module's own mode, not its children's (PyTorch's
  /// `module.training = on`).
  void set_training(bool on) { training_ = on; }
  /// Clears the .grad of every parameter.
  void zero_grad();
  /// Whether this module itself (not a descendant) registers `name` as a
  /// parameter, buffer or child.
  bool has_own(const std::string& name) const;
  /// Total number of parameter elements.
  int64_t num_parameters() const;
  /// Moves every parameter, parameter gradient and buffer of this module and
  /// its children to `device` in place (Tensor::set_data): the tensors stay
  /// the same objects, so handles held elsewhere (layer members, optimizers)
  /// see the new device. State made from the parameters before the move
  /// (optimizer moments) stays where it was: move the model first, then build
  /// its optimizer. Tensors already on `device` stay as they are. Throws
  /// DeviceError when `device` is not available; ValueError, moving
  /// nothing, for a tensor to move that is not a leaf (a buffer registered
  /// as the output of an op).
  Module& to(Device device);
  /// Casts every floating parameter, its gradient and every floating buffer
  /// of this module and its children to `dtype` in place (Tensor::set_data;
  /// PyTorch's Module.to(dtype), .double(), .float()): the tensors stay the
  /// same objects; int64 buffers keep their dtype. An optimizer's state
  /// follows its parameters' dtype at its next step. A float64 module runs on
  /// the CPU (the CUDA kernels are float32). Throws DtypeError for a
  /// non-floating `dtype`; ValueError, casting nothing, as to(Device).
  Module& to(DType dtype);

 protected:
  /// Registers a parameter (marked requires_grad) and returns it. Throws
  /// ValueError naming register_parameter for an empty name, a name with a
  /// '.' (it would read as a child's parameter in state_dict), or a name
  /// this module already gives a parameter, buffer or child (PyTorch's
  /// "attribute 'bias' already exists").
  Tensor register_parameter(const std::string& name, Tensor t);
  /// Registers a buffer: state saved in state_dict that is not trained.
  /// Throws ValueError naming register_buffer for a name as register_parameter.
  Tensor register_buffer(const std::string& name, Tensor t);
  /// Registers a child module and returns it. Throws ValueError naming
  /// register_module and `name` for a name as register_parameter, a null
  /// module, or a module that is this one or has it anywhere among its
  /// descendants (the cycle would make every walk of the tree, state_dict
  /// included, recurse forever).
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> m) {
    check_child(name, m.get());
    children_.emplace_back(name, m);
    ++static_cast<Module&>(*m).parents_;
    return m;
  }
  /// Puts `t` in the place of the parameter (marked requires_grad) or buffer
  /// registered as `name`, or `m` in the place of the child, keeping its
  /// place in the order (Python's `module.name = value` on a registered name,
  /// as torch.nn.Module.__setattr__). Throws ValueError naming replace when
  /// no tensor (or no child) is registered as `name`, for a null module, or
  /// for a module that is this one or contains it.
  void replace(const std::string& name, Tensor t);
  void replace(const std::string& name, std::shared_ptr<Module> m);
  /// Removes the parameter, buffer or child registered as `name` (Python's
  /// `del module.name`, as torch.nn.Module.__delattr__). Throws ValueError
  /// naming unregister when nothing is registered under that name.
  void unregister(const std::string& name);

 private:
  /// Throws ValueError naming `op` when `name` is empty, has a '.', or is
  /// taken by a parameter, buffer or child of this module.
  void check_name(const char* op, const char* kind, const std::string& name) const;
  /// The checks of register_module: the name, a non-null child, no cycle.
  void check_child(const std::string& name, const Module* child) const;
  /// Throws ValueError "<op>: module "<name>" is this module or contains it;
  /// registering it would make a cycle" when it would. A module no slot
  /// holds (a root) is in no other module's subtree, so then only
  /// child == this needs checking: building a deep chain bottom-up stays
  /// linear, not quadratic.
  void check_no_cycle(const char* op, const std::string& name, const Module* child) const;
  /// Whether `target` is this module or one of its descendants.
  bool in_subtree(const Module* target) const;
  /// This module's and its descendants' parameters (and buffers, when
  /// `buffers` is given) with dotted names (empty ones without `names`: a
  /// deep chain's names cost the square of its depth), depth first in
  /// registration order; a tensor reached twice under each name.
  void collect(NamedTensors& params, NamedTensors* buffers, bool names = true) const;
  /// Module::to's body: every parameter, gradient and buffer of the tree
  /// for which `needs` holds gets cast(t) as its data (Tensor::set_data).
  /// Throws ValueError naming `op` and the tensor, before changing any, when
  /// such a tensor is not a leaf (set_data replaces only a leaf's data).
  void convert(const char* op, const std::function<bool(const Tensor&)>& needs,
               const std::function<Tensor(const Tensor&)>& cast);
  NamedTensors params_, buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
  int64_t parents_ = 0;  // the child slots, of any modules, that hold this one
};

}  // namespace tmem::nn
