// tmem.nn (Module, subclassable from Python; the built-in layers including
// TensorMemory with its state; clip_grad_norm_) and tmem.optim (SGD, AdamW,
// warmup_cosine_lr). Forward passes and optimizer steps release the GIL.
#include <algorithm>
#include <optional>
#include <type_traits>
#include <unordered_set>
#include <utility>

#include "common.h"
#include "tmem/nn/container.h"
#include "tmem/nn/layers.h"
#include "tmem/nn/linear.h"
#include "tmem/nn/module.h"
#include "tmem/nn/optim.h"
#include "tmem/nn/tensor_memory.h"

namespace tmem::py_bind {

namespace {

using release_gil = py::call_guard<py::gil_scoped_release>;
using nn::Module;

/// Module's protected registration functions, reachable from the bindings
/// for any Module (their member pointers are Module's own).
struct ModuleAccess : Module {
  static Tensor add_parameter(Module& m, const std::string& name, const Tensor& t) {
    return (m.*&ModuleAccess::register_parameter)(name, t);
  }
  static Tensor add_buffer(Module& m, const std::string& name, const Tensor& t) {
    return (m.*&ModuleAccess::register_buffer)(name, t);
  }
  static void add_module(Module& m, const std::string& name, std::shared_ptr<Module> child) {
    using Register = std::shared_ptr<Module> (Module::*)(const std::string&, std::shared_ptr<Module>);
    const Register reg = &ModuleAccess::register_module<Module>;
    (m.*reg)(name, std::move(child));
  }
  static void remove(Module& m, const std::string& name) { (m.*&ModuleAccess::unregister)(name); }
  static void put_tensor(Module& m, const std::string& name, const Tensor& t) {
    (m.*static_cast<void (Module::*)(const std::string&, Tensor)>(&ModuleAccess::replace))(name, t);
  }
  static void put_module(Module& m, const std::string& name, std::shared_ptr<Module> child) {
    (m.*static_cast<void (Module::*)(const std::string&, std::shared_ptr<Module>)>(&ModuleAccess::replace))(
        name, std::move(child));
  }
};

/// The name of a Python object's type, for error messages.
std::string type_name(py::handle obj) { return py::str(py::type::of(obj).attr("__name__")); }

/// The setter of a built-in layer's parameter member `name` (torch's
/// `lin.weight = other.weight`, as weight tying does): t takes the member's
/// place and the registered parameter's, so forward, parameters() and
/// state_dict all see it. Throws TypeError unless t is a leaf that requires
/// grad (torch's "Parameter or None expected"; None too), ShapeError, DtypeError or
/// DeviceError for a shape, dtype or device other than the member's (the
/// layer's sizes stay), ValueError when the layer has no such parameter
/// (a Linear built without bias).
template <class L>
auto param_setter(Tensor L::*member, const char* layer_name, const char* name) {
  return [member, layer_name, name](L& layer, const py::object& value) {
    const std::string who = std::string(layer_name) + "." + name;
    if (value.is_none() && !(layer.*member).defined()) return;  // Linear(bias=False).bias = None: as it is
    if (!py::isinstance<Tensor>(value) || !value.cast<Tensor>().requires_grad() || !value.cast<Tensor>().is_leaf())
      throw py::type_error("cannot assign " + type_name(value) + " as parameter " + who +
                           " (a leaf tensor that requires grad, such as another layer's weight, expected; a built-in "
                           "layer's parameter cannot be None)");
    const Tensor t = value.cast<Tensor>();
    const Tensor& old = layer.*member;
    check<ValueError>(old.defined(), who, ": this layer has no such parameter (built without it)");
    check<ShapeError>(t.shape() == old.shape(), who, ": expected a parameter of shape ", shape_str(old.shape()),
                      ", but got ", shape_str(t.shape()));
    check<DtypeError>(t.dtype() == old.dtype(), who, ": expected a ", dtype_name(old.dtype()), " parameter, but got ",
                      dtype_name(t.dtype()));
    check<DeviceError>(t.device() == old.device(), who, ": expected a parameter on ", old.device().str(),
                       ", but got one on ", t.device().str());
    ModuleAccess::put_tensor(layer, name, t);
    layer.*member = t;
  };
}

/// The tensors of `params`: one tensor (as torch's clip_grad_norm_ and a
/// parameter group's "params" take it; iterating it would give its rows), or
/// an iterable of tensors (a list, a generator of parameters). Throws
/// TypeError naming `who` for anything else.
std::vector<Tensor> tensor_list(const py::handle& params, const std::string& who) {
  if (py::isinstance<Tensor>(params)) return {params.cast<Tensor>()};
  if (!py::isinstance<py::iterable>(params))
    throw py::type_error(who + ": expected a tensor or an iterable of tensors, but got " + type_name(params));
  std::vector<Tensor> out;
  for (auto p : params) {
    if (!py::isinstance<Tensor>(p))
      throw py::type_error(who + ": expected tensors, but one of the params is " + type_name(p));
    out.push_back(p.cast<Tensor>());
  }
  return out;
}

/// torch.optim's `params`: tensors (one group), or dicts {"params": tensors,
/// "lr": x, "weight_decay": y} (one group each; an option left out takes the
/// optimizer's default). Throws ValueError for a mix of the two, no params at all, a dict
/// without "params" or with another key, TypeError for a single tensor (as
/// torch.optim) or an item that is neither a tensor nor a dict.
std::vector<nn::ParamGroup> param_groups_arg(const py::iterable& params, const std::string& who) {
  if (py::isinstance<Tensor>(params))
    throw py::type_error(who + ": params should be an iterable of Tensors or dicts, but got a Tensor (pass [tensor])");
  std::vector<nn::ParamGroup> groups;
  std::vector<Tensor> loose;
  for (auto item : params) {
    if (!py::isinstance<py::dict>(item)) {
      if (!py::isinstance<Tensor>(item))
        throw py::type_error(who + ": optimizer can only optimize Tensors, but one of the params is " +
                             type_name(item));
      loose.push_back(item.cast<Tensor>());
      continue;
    }
    const auto d = item.cast<py::dict>();
    for (auto kv : d) {
      const std::string key = py::str(kv.first);
      check<ValueError>(key == "params" || key == "lr" || key == "weight_decay", who,
                        ": a parameter group takes params, lr and weight_decay, but got '", printable(key), "'");
    }
    check<ValueError>(d.contains("params"), who, ": parameter group ", groups.size(), " has no 'params'");
    nn::ParamGroup g;
    g.params = tensor_list(d["params"], who);
    if (d.contains("lr")) g.lr = number_from_py(d["lr"], who, "a parameter group's lr");
    if (d.contains("weight_decay"))
      g.weight_decay = number_from_py(d["weight_decay"], who, "a parameter group's weight_decay");
    groups.push_back(std::move(g));
  }
  check<ValueError>(groups.empty() || loose.empty(), who,
                    ": params must be all tensors or all parameter groups (dicts), not a mix");
  check<ValueError>(!groups.empty() || !loose.empty(), who, ": optimizer got an empty parameter list");
  if (groups.empty()) groups.push_back({std::move(loose), std::nullopt, std::nullopt});
  return groups;
}

/// d as a read-only mapping (types.MappingProxyType): an optimizer's
/// defaults, which a change would not reach (torch's dict is live).
py::object read_only(const py::dict& d) { return py::module_::import("types").attr("MappingProxyType")(d); }

/// optimizer.add_param_group(param_group) (torch's): one dict of params, lr
/// and weight_decay. Throws TypeError for anything else, ValueError as the
/// constructor's groups.
template <class Opt>
void add_param_group(Opt& opt, const py::object& group, const std::string& who) {
  if (!py::isinstance<py::dict>(group))
    throw py::type_error(who + ": expected a parameter group (a dict of params, lr and weight_decay), but got " +
                         type_name(group));
  opt.add_param_group(param_groups_arg(py::make_tuple(group), who).front());
}

/// (beta1, beta2) from a Python pair of numbers; TypeError naming `who`
/// otherwise (pybind11 refused anything else with its incompatible-arguments
/// message).
std::pair<double, double> betas_from_py(const py::object& betas, const std::string& who) {
  const bool pair = py::isinstance<py::sequence>(betas) && !py::isinstance<py::str>(betas) && py::len(betas) == 2;
  if (!pair)
    throw py::type_error(who + ": expected betas to be a pair of numbers (beta1, beta2), but got " +
                         printable(py::repr(betas).cast<std::string>()));
  return {number_from_py(betas[py::int_(0)], who, "beta1"), number_from_py(betas[py::int_(1)], who, "beta2")};
}

/// One parameter group of an optimizer as torch.optim shows it: a mapping
/// of params, lr, weight_decay and the group's momentum (SGD's "momentum",
/// AdamW's "betas" = (beta1, beta2)), all but params settable
/// (`opt.param_groups[0]["lr"] = x`, as learning-rate schedules do; a
/// beta2 other than the optimizer's is refused), and the setting reaches
/// the optimizer. Setting params or another key is a ValueError (a key tmem
/// would not read must not look applied).
template <class Opt>
struct GroupView : Bound {
  static constexpr bool kAdamW = std::is_same_v<Opt, nn::AdamW>;
  static constexpr const char* kMomentum = kAdamW ? "betas" : "momentum";
  py::object opt;  // keeps the optimizer alive
  size_t index;

  Opt& get() const { return opt.cast<Opt&>(); }
  const nn::ParamGroup& group() const { return get().param_groups().at(index); }
  py::object item(const std::string& key) const {
    if (key == "params") return py::cast(group().params);
    if (key == "lr") return py::float_(*group().lr);
    if (key == "weight_decay") return py::float_(*group().weight_decay);
    if (key == kMomentum) {
      if constexpr (kAdamW) return py::make_tuple(*group().momentum, get().beta2());
      else return py::float_(*group().momentum);
    }
    throw py::key_error(key);
  }
  void set(const std::string& key, const py::object& value) const {
    const std::string who = "param_groups[" + std::to_string(index) + "]";
    if (key != "lr" && key != "weight_decay" && key != kMomentum)
      throw ValueError(who + ": only lr, weight_decay and " + kMomentum + " can be set, but got '" + printable(key) +
                       "'");
    if (key == kMomentum) {
      if constexpr (kAdamW) {
        const auto [beta1, beta2] = betas_from_py(value, who);
        check<ValueError>(beta2 == get().beta2(), who, ": beta2 ", beta2, " is not this AdamW's ", get().beta2(),
                          "; tmem's AdamW keeps one beta2 (only beta1 is per group)");
        return get().set_beta1(index, beta1);
      } else {
        return get().set_momentum(index, number_from_py(value, who, key));
      }
    }
    const double v = number_from_py(value, who, key);
    if (key == "lr") return get().set_lr(index, v);
    get().set_weight_decay(index, v);
  }
};

template <class Opt>
void bind_group_view(py::module_& optim, const char* name) {
  using View = GroupView<Opt>;
  const std::vector<std::string> keys = {"params", "lr", "weight_decay", View::kMomentum};
  py::class_<View>(optim, name, "One parameter group: params, lr, weight_decay and momentum (SGD) or betas "
                                "(AdamW), all but params settable.")
      .def("__getitem__", &View::item, py::arg("key"))
      .def("__setitem__", &View::set, py::arg("key"), py::arg("value"))
      .def("__contains__", [keys](const View&, const std::string& key) {
        return std::find(keys.begin(), keys.end(), key) != keys.end();
      })
      .def("__len__", [keys](const View&) { return keys.size(); })
      .def("__iter__", [keys](const View&) { return py::iter(py::cast(keys)); })
      .def("keys", [keys](const View&) { return keys; })
      .def("items", [keys](const View& v) {
        py::list out;
        for (const std::string& k : keys) out.append(py::make_tuple(k, v.item(k)));
        return out;
      })
      .def("get", [keys](const View& v, const std::string& key, const py::object& fallback) -> py::object {
        return std::find(keys.begin(), keys.end(), key) != keys.end() ? v.item(key) : fallback;
      }, py::arg("key"), py::arg("default") = py::none())
      .def("__repr__", [](const View& v) {
        return "{'params': [" + std::to_string(v.group().params.size()) + " tensors], 'lr': " +
               py::repr(v.item("lr")).template cast<std::string>() + ", 'weight_decay': " +
               py::repr(v.item("weight_decay")).template cast<std::string>() + ", '" + View::kMomentum + "': " +
               py::repr(v.item(View::kMomentum)).template cast<std::string>() + "}";
      });
}

/// An optimizer's param_groups as torch.optim shows them: one GroupView per
/// group, in a tuple: a list made here took an appended group and dropped it.
template <class Opt>
py::tuple param_groups_out(const py::object& opt) {
  py::list out;
  for (size_t i = 0; i < opt.cast<const Opt&>().param_groups().size(); ++i) out.append(GroupView<Opt>{{}, opt, i});
  return py::tuple(out);
}

/// tmem.nn.TensorMemoryProbe: a TensorMemoryProbe alive inside `with`, its
/// records kept after it.
struct ProbeScope : Bound {
  std::unique_ptr<nn::TensorMemoryProbe> live;
  std::vector<nn::TensorMemoryProbe::Record> kept;
  const std::vector<nn::TensorMemoryProbe::Record>& records() const { return live ? live->records() : kept; }
};

/// `root` and its descendants, depth first, each once (where first reached),
/// with the index in the list of the module it was reached from and its name
/// there (the root's parent is itself). Not recursive: a chain deeper than
/// the C++ stack is walked as well.
struct Reached {
  py::object module;
  size_t parent;
  std::string name;
};
std::vector<Reached> reach_modules(const py::object& root) {
  std::vector<Reached> out;
  std::unordered_set<const Module*> seen;
  std::vector<Reached> stack{{root, 0, ""}};
  while (!stack.empty()) {
    Reached r = std::move(stack.back());
    stack.pop_back();
    const Module& mod = r.module.cast<const Module&>();
    if (!seen.insert(&mod).second) continue;
    out.push_back(std::move(r));
    const auto children = mod.named_children();
    for (auto it = children.rbegin(); it != children.rend(); ++it)
      stack.push_back({py::cast(it->second), out.size() - 1, it->first});
  }
  return out;
}

/// (dotted name, module) tuples of `root` (named "") and its descendants,
/// depth first, each module once under its first name (PyTorch's
/// named_modules).
std::vector<py::tuple> named_modules(const py::object& root) {
  const std::vector<Reached> reached = reach_modules(root);
  std::vector<std::string> names(reached.size());
  std::vector<py::tuple> out;
  for (size_t i = 0; i < reached.size(); ++i) {
    const std::string& up = names[reached[i].parent];
    if (i > 0) names[i] = up.empty() ? reached[i].name : up + "." + reached[i].name;
    out.push_back(py::make_tuple(names[i], reached[i].module));
  }
  return out;
}

/// The Generator argument of a layer: the given one, or the default one.
Generator& gen_arg(Generator* g) { return g ? *g : default_generator(); }

/// The device and dtype of Module.to(*args, **kwargs), as torch.nn.Module.to
/// takes them: positional arguments in any order, a str (or a Device's
/// text) a device and a tmem or NumPy dtype a dtype, or the keywords device=
/// and dtype=; None is no change. Throws TypeError for another argument, a
/// device or dtype given twice, or another keyword; DtypeError for a dtype
/// that is not floating (before anything moves).
std::pair<std::optional<Device>, std::optional<DType>> module_to_args(const py::args& args,
                                                                       const py::kwargs& kwargs) {
  std::optional<Device> device;
  std::optional<DType> dtype;
  const auto take = [&](py::handle v, bool as_device) {
    if (v.is_none()) return;
    const std::string text = printable(py::repr(v).cast<std::string>());
    if (as_device) {
      if (device) throw py::type_error("Module.to: the device was given twice");
      try {
        device = device_from_py(v);
      } catch (const ValueError& e) {
        const std::string s = py::str(v).cast<std::string>();
        const bool dtype_name = s == "float32" || s == "float64" || s == "int64" || s == "float" || s == "double";
        throw ValueError("Module.to: " + std::string(e.what()) +
                         (dtype_name ? " (a str is read as a device, as in torch; pass tmem." +
                                           std::string(s == "float" ? "float32" : s == "double" ? "float64" : s) +
                                           " or dtype=" + text + ")"
                                     : ""));
      }
    } else {
      if (dtype) throw py::type_error("Module.to: the dtype was given twice");
      try {
        dtype = dtype_from_py(v);
      } catch (const DtypeError& e) {
        throw DtypeError("Module.to: " + std::string(e.what()));
      }
      check<DtypeError>(is_floating(*dtype), "Module.to: expected a floating dtype (float32 or float64), but got ",
                        dtype_name(*dtype));
    }
  };
  const auto is_dtype = [](py::handle v) {
    return py::isinstance<DType>(v) || py::isinstance<py::dtype>(v) || PyType_Check(v.ptr());
  };
  if (args.size() > 2)
    throw py::type_error("Module.to: expected at most a device and a dtype, but got " + std::to_string(args.size()) +
                         " arguments");
  for (py::handle a : args) {
    if (!py::isinstance<py::str>(a) && !is_dtype(a) && !a.is_none())
      throw py::type_error("Module.to: expected a device (\"cpu\", \"cuda:0\") or a tmem or NumPy dtype, but got " +
                           printable(py::repr(a).cast<std::string>()) + " (" + type_name(a) + ")");
    take(a, py::isinstance<py::str>(a));
  }
  for (auto [k, v] : kwargs) {
    const auto key = py::str(k).cast<std::string>();
    if (key != "device" && key != "dtype")
      throw py::type_error("Module.to: unexpected keyword argument '" + key + "'");
    take(v, key == "device");
  }
  return {device, dtype};
}

}  // namespace

void bind_nn(py::module_& m) {
  py::module_ nnm = m.def_submodule("nn", "Modules, layers and gradient clipping.");
  nnm.attr("IncompatibleKeys") = py::module_::import("collections").attr("namedtuple")(
      "IncompatibleKeys", py::make_tuple("missing_keys", "unexpected_keys"), py::arg("module") = "tmem.nn");
  py::module_ optim = m.def_submodule("optim", "Optimizers and learning-rate schedules.");
  py::class_<Module, std::shared_ptr<Module>>(nnm, "Module", py::dynamic_attr(),
      "Base of every layer. Subclass it in Python: call super().__init__(), assign modules and tensors that "
      "require grad as attributes (they are registered), define forward.")
      .def(py::init<>())
      .def("register_parameter", &ModuleAccess::add_parameter, py::arg("name"), py::arg("tensor"),
           "Registers a parameter (marked requires_grad) and returns it.")
      .def("register_buffer", &ModuleAccess::add_buffer, py::arg("name"), py::arg("tensor"),
           "Registers a buffer: saved in state_dict, not trained.")
      .def("register_module", &ModuleAccess::add_module, py::arg("name"), py::arg("module"),
           "Registers a child module.")
      .def("_replace", &ModuleAccess::put_tensor, py::arg("name"), py::arg("tensor"),
           "Puts a tensor in the place of the parameter or buffer registered as name (module.name = tensor).")
      .def("_replace", &ModuleAccess::put_module, py::arg("name"), py::arg("module"),
           "Puts a module in the place of the child registered as name (module.name = child).")
      .def("unregister", &ModuleAccess::remove, py::arg("name"),
           "Removes the parameter, buffer or module registered as name (del module.name calls it).")
      .def("parameters", &Module::parameters, "Every parameter, depth first, in registration order.")
      .def("named_parameters", &Module::named_parameters, "(dotted name, parameter) pairs.")
      .def("buffers", &Module::buffers, "Every buffer, depth first, in registration order.")
      .def("named_buffers", &Module::named_buffers, "(dotted name, buffer) pairs.")
      .def("children", [](const Module& mod) {
             py::list out;
             for (const auto& named : mod.named_children()) out.append(py::cast(named.second));
             return out;
           }, "The direct children, in registration order, each once.")
      .def("named_children", &Module::named_children, "(name, child) pairs of the direct children.")
      .def("modules", [](const py::object& self) {
             py::list out;
             for (const Reached& r : reach_modules(self)) out.append(r.module);
             return out;
           }, "This module and every descendant, depth first, each once.")
      .def("named_modules", &named_modules,
           "(dotted name, module) pairs of this module (named \"\") and every descendant, depth first, each once "
           "(PyTorch's named_modules).")
      .def("state_dict", [](const Module& mod, const py::object& destination, const py::object& prefix,
                            const py::object& keep_vars) {
             if (!py::isinstance<py::str>(prefix))
               throw py::type_error("state_dict: expected prefix to be a str, but got " + type_name(prefix));
             if (!py::isinstance<py::bool_>(keep_vars))
               throw py::type_error("state_dict: expected keep_vars to be a bool, but got " + type_name(keep_vars));
             if (!destination.is_none() &&
                 !py::isinstance(destination, py::module_::import("collections.abc").attr("MutableMapping")))
               throw py::type_error("state_dict: expected destination to be a mapping, but got " +
                                    type_name(destination));
             const std::string pre = prefix.cast<std::string>();
             const bool keep = keep_vars.cast<bool>();
             py::object out = destination.is_none() ? py::dict() : destination;
             for (const auto& [n, t] : mod.named_state()) out[py::str(pre + n)] = py::cast(keep ? t : t.detach());
             return out;
           }, py::kw_only(), py::arg("destination") = py::none(), py::arg("prefix") = "",
           py::arg("keep_vars") = false,
           "Parameters and buffers by dotted name, each name after `prefix`, detached: they share storage with "
           "the module's tensors but record no gradient, as PyTorch's (keep_vars=True: the tensors themselves); "
           "in PyTorch's order (each module's parameters, then its buffers, then its children's); into "
           "`destination` (any mapping) when given, else a new dict.")
      .def("load_state_dict", [](Module& mod, const std::map<std::string, Tensor>& state, bool strict) {
             const Module::IncompatibleKeys keys = mod.load_state_dict(state, strict);
             return py::module_::import("tmem._tmem").attr("nn").attr("IncompatibleKeys")(keys.missing_keys,
                                                                                         keys.unexpected_keys);
           }, py::arg("state_dict"), py::arg("strict").noconvert() = true,
           "Copies values into the parameters and buffers (strict: the keys must match both ways); returns "
           "IncompatibleKeys(missing_keys, unexpected_keys), as PyTorch's.")
      .def("train", [](Module& mod, bool mode) -> Module& {
             mod.train(mode);
             return mod;
           }, py::arg("mode").noconvert() = true, "Training mode for this module and its children; returns it.")
      .def("eval", [](Module& mod) -> Module& {
             mod.eval();
             return mod;
           }, "Evaluation mode (dropout off); returns the module.")
      .def_property("training", &Module::is_training, [](Module& mod, const py::object& on) {
             py::detail::make_caster<bool> flag;  // without conversion: True, False or a NumPy bool
             if (!flag.load(on, false))
               throw py::type_error("Module.training: expected a bool, but got " + type_name(on));
             mod.set_training(py::detail::cast_op<bool>(flag));
           }, "Whether the module is in training mode; setting it changes this module only, not its children "
              "(train() sets them all).")
      .def("zero_grad", &Module::zero_grad, "Clears every parameter's gradient.")
      .def("num_parameters", &Module::num_parameters, "The number of parameter elements.")
      .def("_has_own", &Module::has_own, py::arg("name"),
           "Whether this module itself registers name (a parameter, buffer or child) in C++.")
      .def("to", [](Module& mod, const py::args& args, const py::kwargs& kwargs) -> Module& {
             const auto [device, dtype] = module_to_args(args, kwargs);
             if (device) mod.to(*device);
             if (dtype) mod.to(*dtype);
             return mod;
           }, "to(device), to(dtype) or to(device, dtype), also as keywords: moves and/or casts parameters, "
              "gradients and floating buffers in place (int64 buffers keep their dtype); returns the module.")
      .def("double", [](Module& mod) -> Module& { return mod.to(DType::Float64); },
           "Casts floating parameters, gradients and buffers to float64 in place; returns the module.")
      .def("float", [](Module& mod) -> Module& { return mod.to(DType::Float32); },
           "Casts floating parameters, gradients and buffers to float32 in place; returns the module.");

  // Bound under its own name for the type's __name__ (repr prints
  // "ModuleList(" as torch's); tmem.nn.ModuleList is then replaced by the
  // Python one (python/tmem/_containers.py) that users build.
  py::class_<nn::ModuleList, Module, std::shared_ptr<nn::ModuleList>>(
      nnm, "ModuleList",
      "A ModuleList a C++ constructor made (backbone.blocks): len(), indexing (negative and slices too), iteration "
      "and getattr of \"0\", \"1\", ... as torch's, read-only; build one in Python with tmem.nn.ModuleList.")
      .def("__len__", &nn::ModuleList::size)
      .def("__getitem__", [](const nn::ModuleList& l, const py::object& index) -> py::object {
             const auto n = static_cast<int64_t>(l.size());
             if (py::isinstance<py::slice>(index)) {
               size_t start = 0, stop = 0, step = 0, len = 0;
               if (!index.cast<py::slice>().compute(l.size(), &start, &stop, &step, &len)) throw py::error_already_set();
               py::list out;
               for (size_t k = 0; k < len; ++k) out.append(py::cast(l[start + k * step]));
               return out;
             }
             const std::optional<int64_t> i = exact_int(index, "ModuleList", "index");
             if (!i)
               throw py::type_error("ModuleList indices must be integers or slices, not " +
                                    py::str(py::type::of(index).attr("__name__")).cast<std::string>());
             if (*i < -n || *i >= n)
               throw py::index_error("index " + std::to_string(*i) + " is out of range for a ModuleList of " +
                                     std::to_string(n) + " modules");
             return py::cast(l[static_cast<size_t>(*i < 0 ? *i + n : *i)]);
           }, py::arg("index"), "Module i (IndexError past either end), or a list of the modules of a slice.")
      .def("__iter__", [](const nn::ModuleList& l) {
             py::list out;
             for (size_t i = 0; i < l.size(); ++i) out.append(py::cast(l[i]));
             return out.attr("__iter__")();
           }, "The modules in order.");

  py::class_<nn::Linear, Module, std::shared_ptr<nn::Linear>>(nnm, "Linear", "y = x @ weight^T + bias.")
      .def(py::init([](int64_t in, int64_t out, bool bias, Generator* g) {
             return std::make_shared<nn::Linear>(in, out, bias, gen_arg(g));
           }), py::arg("in_features"), py::arg("out_features"), py::arg("bias").noconvert() = true, py::kw_only(),
           py::arg("generator") = nullptr)
      .def("forward", &nn::Linear::forward, py::arg("input"), release_gil())
      .def_readonly("in_features", &nn::Linear::in_features)
      .def_readonly("out_features", &nn::Linear::out_features)
      .def_property("weight", [](const nn::Linear& l) { return l.weight; }, param_setter(&nn::Linear::weight, "Linear", "weight"),
                    "[out_features, in_features]; settable to another parameter of that shape (weight tying).")
      .def_property("bias", [](const nn::Linear& l) { return tensor_or_none(l.bias); },
                    param_setter(&nn::Linear::bias, "Linear", "bias"), "[out_features] or None; settable as weight.");

  py::class_<nn::Embedding, Module, std::shared_ptr<nn::Embedding>>(
      nnm, "Embedding", "A lookup table weight[V, C]; the row padding_idx starts at zeros and gets no gradient.")
      .def(py::init([](int64_t num, int64_t dim, std::optional<int64_t> padding_idx, Generator* g) {
             return std::make_shared<nn::Embedding>(num, dim, gen_arg(g), padding_idx);
           }), py::arg("num_embeddings"), py::arg("embedding_dim"), py::arg("padding_idx") = py::none(), py::kw_only(),
           py::arg("generator") = nullptr)
      .def("forward", &nn::Embedding::forward, py::arg("input"), release_gil())
      .def_readonly("padding_idx", &nn::Embedding::padding_idx, "The row that gets no gradient, in [0, V), or None.")
      .def_property("weight", [](const nn::Embedding& e) { return e.weight; },
                    param_setter(&nn::Embedding::weight, "Embedding", "weight"),
                    "[num_embeddings, embedding_dim]; settable to another parameter of that shape (weight tying).");

  py::class_<nn::LayerNorm, Module, std::shared_ptr<nn::LayerNorm>>(nnm, "LayerNorm",
                                                                    "Layer normalisation over the last dim.")
      .def(py::init([](const py::object& shape, double eps, bool elementwise_affine, bool bias) {
             const Shape s = ints_from_py(shape, "LayerNorm", "normalized_shape to be an int or a sequence of ints");
             check<ShapeError>(s.size() == 1, "LayerNorm: tmem normalises over the last dim only, but got "
                               "normalized_shape ", shape_str(s));
             return std::make_shared<nn::LayerNorm>(s[0], eps, elementwise_affine, bias);
           }), py::arg("normalized_shape"), py::arg("eps") = 1e-5, py::arg("elementwise_affine") = true,
           py::arg("bias") = true)
      .def("forward", &nn::LayerNorm::forward, py::arg("input"), release_gil())
      .def_property("weight", [](const nn::LayerNorm& n) { return tensor_or_none(n.weight); },
                    param_setter(&nn::LayerNorm::weight, "LayerNorm", "weight"),
                    "[C] gain or None; settable to another parameter of that shape.")
      .def_property("bias", [](const nn::LayerNorm& n) { return tensor_or_none(n.bias); },
                    param_setter(&nn::LayerNorm::bias, "LayerNorm", "bias"), "[C] or None; settable as weight.")
      .def_property_readonly("normalized_shape", [](const nn::LayerNorm& n) { return py::make_tuple(n.dim); })
      .def_property_readonly("elementwise_affine", [](const nn::LayerNorm& n) { return n.weight.defined(); })
      .def_readonly("eps", &nn::LayerNorm::eps);

  py::class_<nn::Dropout, Module, std::shared_ptr<nn::Dropout>>(nnm, "Dropout", "Inverted dropout in training mode.")
      .def(py::init([](double p, Generator* g) { return std::make_shared<nn::Dropout>(p, gen_arg(g)); }),
           py::arg("p") = 0.5, py::kw_only(), py::arg("generator") = nullptr, py::keep_alive<1, 3>())
      .def("forward", &nn::Dropout::forward, py::arg("input"))
      .def_readonly("p", &nn::Dropout::p);

  py::class_<nn::MultiheadAttention, Module, std::shared_ptr<nn::MultiheadAttention>>(nnm, "MultiheadAttention",
      "Multi-head self-attention over x [B, T, C] (one qkv Linear, one output Linear).")
      .def(py::init([](int64_t dim, int64_t heads, double dropout, int64_t window, bool linear, int64_t rel_distances,
                       Generator* g) {
             nn::AttentionOptions opt;
             opt.window = window;
             opt.linear = linear;
             opt.rel_distances = rel_distances;
             return std::make_shared<nn::MultiheadAttention>(dim, heads, dropout, gen_arg(g), opt);
           }), py::arg("embed_dim"), py::arg("num_heads"), py::arg("dropout") = 0.0, py::kw_only(),
           py::arg("window") = 0, py::arg("linear").noconvert() = false, py::arg("rel_distances") = 0,
           py::arg("generator") = nullptr, py::keep_alive<1, 8>())
      .def("forward", [](const nn::MultiheadAttention& mha, const Tensor& x, bool causal, const py::object& kpm,
                         const py::object& context, const py::object& attn_mask) {
             const Tensor k = optional_tensor(kpm, "MultiheadAttention: expected key_padding_mask"),
                          c = optional_tensor(context, "MultiheadAttention: expected context"),
                          am = optional_tensor(attn_mask, "MultiheadAttention: expected attn_mask");
             py::gil_scoped_release release;
             return mha.forward(x, causal, k, c, am);
           }, py::arg("x"), py::arg("causal").noconvert() = true, py::arg("key_padding_mask") = py::none(),
           py::arg("context") = py::none(), py::arg("attn_mask") = py::none(),
           "x [B, T, C] -> [B, T, C]; causal, key_padding_mask [B, T] (non-zero = padding), context [B, P, C] "
           "(earlier tokens), additive attn_mask.")
      .def_readonly("embed_dim", &nn::MultiheadAttention::dim)
      .def_readonly("num_heads", &nn::MultiheadAttention::heads)
      .def_readonly("qkv", &nn::MultiheadAttention::qkv)
      .def_readonly("out_proj", &nn::MultiheadAttention::out);

  py::class_<nn::MLP, Module, std::shared_ptr<nn::MLP>>(nnm, "MLP", "C -> hidden -> C with GELU.")
      .def(py::init([](int64_t dim, int64_t hidden, Generator* g) {
             return std::make_shared<nn::MLP>(dim, hidden, gen_arg(g));
           }), py::arg("dim"), py::arg("hidden"), py::kw_only(), py::arg("generator") = nullptr)
      .def("forward", &nn::MLP::forward, py::arg("input"), release_gil())
      .def_readonly("fc1", &nn::MLP::fc1)
      .def_readonly("fc2", &nn::MLP::fc2);

  py::class_<ConvLSTM3DState>(nnm, "TensorMemoryState",
      "The recurrent state (h, c) of a TensorMemory or ConvLSTM3D, each [B, Cm, D, H, W].")
      .def(py::init([](const Tensor& h, const Tensor& c) { return ConvLSTM3DState{h, c}; }), py::arg("h"), py::arg("c"))
      // By value: a handle read before a forward keeps the old state.
      .def_property("h", [](const ConvLSTM3DState& s) { return s.h; },
                    [](ConvLSTM3DState& s, const Tensor& t) { s.h = t; }, "The hidden state [B, Cm, D, H, W].")
      .def_property("c", [](const ConvLSTM3DState& s) { return s.c; },
                    [](ConvLSTM3DState& s, const Tensor& t) { s.c = t; }, "The cell state [B, Cm, D, H, W].")
      .def("detach", [](const ConvLSTM3DState& s) { return ConvLSTM3DState{s.h.detach(), s.c.detach()}; },
           "The same state without autograd history (truncated backpropagation).")
      .def("__iter__", [](const ConvLSTM3DState& s) { return py::iter(py::make_tuple(s.h, s.c)); });

  py::class_<nn::ConvLSTM3D, Module, std::shared_ptr<nn::ConvLSTM3D>>(nnm, "ConvLSTM3D",
      "The ConvLSTM3D update as a module (factorised depthwise taps and a pointwise conv).")
      .def(py::init([](int64_t in, int64_t ch, bool factorized, Generator* g) {
             return std::make_shared<nn::ConvLSTM3D>(in, ch, factorized, gen_arg(g));
           }), py::arg("in_channels"), py::arg("channels"), py::arg("factorized").noconvert() = true, py::kw_only(),
           py::arg("generator") = nullptr)
      .def("forward", &nn::ConvLSTM3D::forward, py::arg("x"), py::arg("state"), release_gil(),
           "One step: x [B, Cx, D, H, W] and a state -> the new state.");

  py::class_<nn::TensorMemory, Module, std::shared_ptr<nn::TensorMemory>>(nnm, "TensorMemory",
      "Tensor Memory (Swain et al. 2026): a fixed-size 3-D recurrent state read by trilinear sampling and "
      "written with Gaussian splats, updated by a ConvLSTM3D once per chunk of tokens.")
      .def(py::init([](int64_t dim, int64_t channels, int64_t D, int64_t H, int64_t W, int64_t chunk,
                       double sigma_scale, double gamma_init, double dropout, bool shared_coords, bool hard_write,
                       bool factorized, Generator* g) {
             nn::TensorMemoryOptions o;
             o.channels = channels;
             o.D = D;
             o.H = H;
             o.W = W;
             o.chunk = chunk;
             o.sigma_scale = sigma_scale;
             o.gamma_init = gamma_init;
             o.dropout = dropout;
             o.shared_coords = shared_coords;
             o.hard_write = hard_write;
             o.factorized = factorized;
             return std::make_shared<nn::TensorMemory>(dim, o, gen_arg(g));
           }), py::arg("dim"), py::kw_only(), py::arg("channels") = 16, py::arg("D") = 6, py::arg("H") = 6,
           py::arg("W") = 6, py::arg("chunk") = 1, py::arg("sigma_scale") = 0.25, py::arg("gamma_init") = 0.0,
           py::arg("dropout") = 0.0, py::arg("shared_coords").noconvert() = true, py::arg("hard_write").noconvert() = false,
           py::arg("factorized").noconvert() = true, py::arg("generator") = nullptr, py::keep_alive<1, 14>())
      .def("initial_state", &nn::TensorMemory::initial_state, py::arg("batch_size"),
           "The zero state for a batch, on the layer's device.")
      .def("forward", [](const nn::TensorMemory& m, const Tensor& x, const ConvLSTM3DState& state) {
             nn::TensorMemoryOutput o;
             {
               py::gil_scoped_release release;
               o = m.forward(x, state);
             }
             return py::make_tuple(o.out, o.state);
           }, py::arg("x"), py::arg("state"),
           "x [B, N, C], state -> (the gated read [B, N, C], the state ceil(N / chunk) steps later).")
      .def_readonly("dim", &nn::TensorMemory::dim)
      .def_readonly("gamma", &nn::TensorMemory::gamma)
      .def_readonly("cell", &nn::TensorMemory::cell);

  py::class_<ProbeScope>(nnm, "TensorMemoryProbe",
      "Records the internals of every TensorMemory forward run inside `with TensorMemoryProbe() as probe:`; "
      "the records stay readable after the block.")
      .def(py::init<>())
      .def("__enter__", [](ProbeScope& p) -> ProbeScope& {
             check<ValueError>(!p.live, "TensorMemoryProbe: this probe is already recording");
             p.kept.clear();
             p.live = std::make_unique<nn::TensorMemoryProbe>();
             return p;
           }, py::return_value_policy::reference)
      .def("__exit__", [](ProbeScope& p, const py::args&) {
             if (p.live) p.kept = p.live->records();
             p.live.reset();
             return false;
           })
      .def("__len__", [](const ProbeScope& p) { return p.records().size(); }, "The number of forwards recorded.")
      .def("last", [](const ProbeScope& p, const nn::TensorMemory& layer) -> py::object {
             const auto& recs = p.records();
             for (auto r = recs.rbegin(); r != recs.rend(); ++r)
               if (r->layer == &layer)
                 return py::dict(py::arg("mu_read") = r->mu_read, py::arg("mu_write") = r->mu_write,
                                 py::arg("sigma") = r->sigma);
             return py::none();
           }, py::arg("layer"),
           "The layer's last recorded forward as a dict of detached tensors: mu_read and mu_write "
           "[B, nchunks, 3], sigma [B, nchunks, 1]; None if it did not run.");

  nnm.def("clip_grad_norm_", [](const py::iterable& params, double max_norm) {
            const auto ps = tensor_list(params, "clip_grad_norm_");
            py::gil_scoped_release release;
            return nn::clip_grad_norm_(ps, max_norm);
          }, py::arg("parameters"), py::arg("max_norm"),
          "Scales the gradients to a joint L2 norm of at most max_norm; returns the norm before clipping.");

  bind_group_view<nn::SGD>(optim, "SGDParamGroup");
  bind_group_view<nn::AdamW>(optim, "AdamWParamGroup");
  py::class_<nn::SGD>(optim, "SGD", "SGD with momentum and weight decay (torch.optim.SGD).")
      .def(py::init([](const py::iterable& params, const py::object& lr, double momentum, double weight_decay) {
             // As torch.optim.SGD, lr has no default: every group without its
             // own lr needs one (nn::SGD checks, here and in add_param_group).
             const std::optional<double> base =
                 lr.is_none() ? std::nullopt : std::optional<double>(number_from_py(lr, "optim.SGD", "lr"));
             return nn::SGD(param_groups_arg(params, "optim.SGD"), base, momentum, weight_decay);
           }), py::arg("params"), py::arg("lr") = py::none(), py::arg("momentum") = 0.0, py::arg("weight_decay") = 0.0,
           "params: tensors, or parameter groups (dicts of params, lr, weight_decay) as torch.optim takes them. "
           "lr is required unless every group has its own (also a group added later); ValueError otherwise.")
      .def_property_readonly("param_groups", &param_groups_out<nn::SGD>,
                             "The groups as mappings of params, lr and weight_decay; setting a group's lr or "
                             "weight_decay sets the optimizer's.")
      .def("step", &nn::SGD::step, release_gil(), "One update from the parameters' gradients.")
      .def("zero_grad", &nn::SGD::zero_grad, "Clears the parameters' gradients.")
      .def_property("lr", [](const nn::SGD& o) { return *o.param_groups().at(0).lr; },
                    [](nn::SGD& o, double lr) { o.set_lr(lr); }, "The first group's learning rate; setting it sets every group's.")
      .def_property_readonly("momentum", &nn::SGD::momentum, "The momentum factor.")
      .def_property_readonly("defaults", [](const nn::SGD& o) {
             return read_only(py::dict(py::arg("lr") = o.default_lr(), py::arg("momentum") = o.momentum(),
                                       py::arg("weight_decay") = o.default_weight_decay()));
           }, "The constructor's options, a new group's defaults (torch's defaults; lr None when it had none), "
              "read-only.")
      .def("add_param_group", [](nn::SGD& o, const py::object& g) { add_param_group(o, g, "SGD.add_param_group"); },
           py::arg("param_group"),
           "Appends a parameter group (a dict of params and, optionally, lr and weight_decay; unset ones take the "
           "constructor's), as torch's.")
      .def("state_dict", &nn::SGD::state_dict,
           "Each parameter's momentum buffer (from its first step with momentum) and the group sizes, for "
           "checkpoints.")
      .def("load_state_dict", &nn::SGD::load_state_dict, py::arg("state_dict"), "Restores a state_dict().");

  py::class_<nn::AdamW>(optim, "AdamW", "AdamW with decoupled weight decay (torch.optim.AdamW).")
      .def(py::init([](const py::iterable& params, double lr, const py::object& betas, double eps,
                       double weight_decay) {
             const auto [b1, b2] = betas_from_py(betas, "optim.AdamW");
             return nn::AdamW(param_groups_arg(params, "optim.AdamW"), lr, b1, b2, eps, weight_decay);
           }), py::arg("params"), py::arg("lr") = 1e-3, py::arg("betas") = py::make_tuple(0.9, 0.999),
           py::arg("eps") = 1e-8, py::arg("weight_decay") = 0.01,
           "params: tensors, or parameter groups (dicts of params, lr, weight_decay) as torch.optim takes them.")
      .def_property_readonly("param_groups", &param_groups_out<nn::AdamW>,
                             "The groups as mappings of params, lr and weight_decay; setting a group's lr or "
                             "weight_decay sets the optimizer's.")
      .def("step", &nn::AdamW::step, release_gil(), "One update from the parameters' gradients.")
      .def("zero_grad", &nn::AdamW::zero_grad, "Clears the parameters' gradients.")
      .def_property("lr", [](const nn::AdamW& o) { return *o.param_groups().at(0).lr; },
                    [](nn::AdamW& o, double lr) { o.set_lr(lr); }, "The first group's learning rate; setting it sets every group's.")
      .def_property_readonly("steps", &nn::AdamW::steps, "The number of steps taken.")
      .def_property_readonly("betas", [](const nn::AdamW& o) { return py::make_tuple(o.beta1(), o.beta2()); },
                             "(beta1, beta2): the moments' decay rates.")
      .def_property_readonly("eps", &nn::AdamW::eps, "The term added to the denominator.")
      .def_property_readonly("defaults", [](const nn::AdamW& o) {
             return read_only(py::dict(py::arg("lr") = o.default_lr(),
                                       py::arg("betas") = py::make_tuple(o.beta1(), o.beta2()), py::arg("eps") = o.eps(),
                                       py::arg("weight_decay") = o.default_weight_decay()));
           }, "The constructor's options, a new group's defaults (torch's defaults), read-only.")
      .def("add_param_group", [](nn::AdamW& o, const py::object& g) { add_param_group(o, g, "AdamW.add_param_group"); },
           py::arg("param_group"),
           "Appends a parameter group (a dict of params and, optionally, lr and weight_decay; unset ones take the "
           "constructor's) with zero moments, as torch's.")
      .def("state_dict", &nn::AdamW::state_dict, "Moments and step count, for checkpoints.")
      .def("load_state_dict", &nn::AdamW::load_state_dict, py::arg("state_dict"), "Restores a state_dict().");

  optim.def("weight_decay_groups", [](const py::iterable& params, double weight_decay) {
              py::list out;
              for (const nn::ParamGroup& g : nn::weight_decay_groups(tensor_list(params, "weight_decay_groups"), weight_decay))
                out.append(py::dict(py::arg("params") = g.params, py::arg("weight_decay") = *g.weight_decay));
              return out;
            }, py::arg("params"), py::arg("weight_decay"),
            "The usual two groups (nn::weight_decay_groups): tensors of rank >= 2 with weight_decay, the rest "
            "(biases, gains, gates) with 0, as dicts for an optimizer's params.");
  optim.def("warmup_cosine_lr", &nn::warmup_cosine_lr, py::arg("step"), py::arg("warmup"), py::arg("total"),
            py::arg("base_lr"), py::arg("min_lr") = 0.0,
            "Linear warmup then cosine decay to min_lr at step total.");
}

}  // namespace tmem::py_bind
