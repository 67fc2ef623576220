"""tmem from Python: tensors with tape autograd, the op library, nn modules
(TensorMemory included), optimizers, safetensors and gradient dumps, and the
diagnostic tasks, models and trainer of `tmem train`.

The compiled part lives in tmem._tmem; this package re-exports it, makes
``tmem.nn``, ``tmem.optim`` and ``tmem.models`` importable, and gives ``tmem.nn.Module`` its
PyTorch-style attribute registration.
"""
import builtins as _builtins  # tmem.float (a dtype) shadows the builtin below
import copy as _copy
import functools as _functools
import sys as _sys
import weakref as _weakref

import numpy as _np

from . import _hooks, _tmem
from ._tmem import *  # noqa: F401,F403
from ._tmem import models, nn, optim, Tensor

_sys.modules[__name__ + ".nn"] = nn
_sys.modules[__name__ + ".optim"] = optim
_sys.modules[__name__ + ".models"] = models


def _before_init_error(self, what):
    return AttributeError(f"{type(self).__name__}: cannot {what} before Module.__init__() call "
                          f"(call super().__init__() first)")


def _check_python_state(module, what):
    """Raises TypeError when module was made by another module's C++
    constructor (model.head, mha.qkv): C++ holds it, and its Python object,
    whose attributes and registration records would hold what Python gives
    it, goes when Python drops it, so they would be lost without a word."""
    if "_tmem_init" not in module.__dict__ and _tmem._is_built(module):
        raise TypeError(f"{type(module).__name__}: cannot {what}: this module was made by its parent's C++ "
                        f"constructor, and Python attributes and registrations on it would be lost when its "
                        f"Python object goes; keep them on a module built in Python")


def _module_setattr(self, name, value):
    """Registers modules and tensors that require grad assigned as attributes
    of a Module subclass (as torch.nn.Module does), then sets the attribute.
    A name registered from Python takes, as torch's, a new one of its kind (a
    module, a tensor that requires grad, any tensor for a buffer), which
    takes its place in the order, or None, which empties the slot (out of
    state_dict and parameters(); a later value of the kind fills it again,
    registered last); anything else raises TypeError. Assigning a module or
    parameter before super().__init__() raises AttributeError, as in
    PyTorch. A class attribute of that name (a default such as ``head =
    None``) does not stop the registration; a property does. A module that
    another module's C++ constructor made (model.head) refuses any but its
    properties (TypeError, _check_python_state)."""
    if not hasattr(type(getattr(type(self), name, None)), "__set__"):
        _check_python_state(self, f"set {name!r}")
    elif isinstance(value, Tensor) and _is_frozen(value):
        # A layer's parameter property (Linear.weight) takes only a tensor that requires grad: it takes the frozen
        # one that way, which then needs no grad again (lin.weight = nn.Parameter(w, requires_grad=False)).
        value.requires_grad_(True)
        try:
            object.__setattr__(self, name, value)
        finally:
            value.requires_grad_(False)
        return
    if not name.startswith("_tmem") and not hasattr(type(getattr(type(self), name, None)), "__set__"):
        is_module = isinstance(value, nn.Module)
        is_param = isinstance(value, Tensor) and ((value.requires_grad and value.is_leaf) or _is_frozen(value))
        if (is_module or is_param) and not _tmem._is_built(self):
            raise _before_init_error(self, f"assign {'module' if is_module else 'parameter'} '{name}'")
        kind = self.__dict__.get("_tmem_registered", {}).get(name)
        if kind is None and _tmem._is_built(self) and self._has_own(name):
            raise TypeError(f"cannot assign {type(value).__name__} to '{name}': {type(self).__name__}'s "
                            f"constructor registered it, and its forward uses it")
        if kind is not None:
            fits = {"module": is_module, "parameter": is_param, "buffer": isinstance(value, Tensor)}[kind]
            if value is not None and not fits and (is_module or is_param):
                # A module or parameter takes the name in the other kind's
                # place, as torch's __setattr__ does.
                if self.__dict__.get(name) is not None:
                    self.unregister(name)
                self.__dict__.get("_tmem_registered", {}).pop(name, None)
                kind = None
            elif value is not None and not fits:
                wanted = {"module": "a Module", "parameter": "a leaf tensor that requires grad",
                          "buffer": "a Tensor"}[kind]
                raise TypeError(f"nn.Module: cannot assign {type(value).__name__} as {kind} '{name}' ({wanted} "
                                f"or None expected)")
        if kind is not None:
            # A name registered from Python is registered in C++ exactly
            # while its attribute is not None (an empty slot's is None): no
            # walk of the tree on this path, which a training loop's buffer
            # updates take every step.
            filled = self.__dict__.get(name) is not None
            if value is None:
                if filled:
                    _unregister_slot(self, name)
            elif filled:
                if is_module:
                    _tmem._check_built(value)
                self._replace(name, value)
            else:
                getattr(self, "register_" + kind)(name, value, _replacing_attribute=True)
        elif is_module:
            self.__dict__.pop(name, None)  # a plain attribute of that name gives way, as in torch
            self.register_module(name, value, _replacing_attribute=True)
        elif is_param:
            self.__dict__.pop(name, None)
            self.register_parameter(name, value, _replacing_attribute=True)
        if is_param and _is_frozen(value):
            _unfreeze(value)
    object.__setattr__(self, name, value)


def _module_delattr(self, name):
    """Deleting a registered module or parameter attribute also removes its
    registration (torch.nn.Module.__delattr__): it left named_parameters and
    state_dict, and the name could not be assigned again."""
    if name in self.__dict__.get("_tmem_registered", {}) or (_tmem._is_built(self) and self._has_own(name)):
        self.unregister(name)  # the attribute goes with it; a name a constructor registered is refused
    else:
        object.__delattr__(self, name)


def _register_as_attribute(method, kind):
    """Module.register_parameter, register_buffer or register_module (kind
    "parameter", "buffer" or "module") that also makes what it registers an
    attribute of the module, as torch.nn.Module's do
    (register_buffer("running_mean", ...), then self.running_mean), and
    records the name and kind in registration order (``_tmem_registered``,
    which copy.deepcopy replays). As torch's, a name that is already an
    attribute (a method such as forward, anything of the class such as
    __doc__, or a plain attribute) raises KeyError, as do "forward" (which
    __call__ calls) and a name starting with _tmem (tmem's own records),
    except from attribute assignment
    (``_replacing_attribute``),
    and None registers an empty slot (``register_buffer("mask", None)``),
    which no walk or state_dict lists until a value fills it."""
    @_functools.wraps(method)
    def register(self, name, value, *args, _replacing_attribute=False, **kwargs):
        persistent = _persistent_argument(kind, args, kwargs)
        _check_python_state(self, f"register_{kind}({name!r})")
        if not _replacing_attribute and isinstance(name, str) and not self._has_own(name):
            if name in self.__dict__ or hasattr(type(self), name) or name.startswith("_tmem") or name == "forward":
                raise KeyError(f"attribute '{name}' already exists")
        if isinstance(value, nn.Module):
            _tmem._check_built(value)
        if value is None:
            _tmem._check_built(self)
            if not isinstance(name, str) or not name or "." in name:
                raise ValueError(f"register_{kind}: expected a {kind} name without \".\", not empty, but got "
                                 f"{name!r}")
            if self._has_own(name) or name in self.__dict__.get("_tmem_registered", {}):
                raise ValueError(f"register_{kind}: attribute '{name}' already exists")
            out = None
        else:
            frozen = kind == "parameter" and _is_frozen(value)
            out = method(self, name, value)
            if frozen:
                _unfreeze(value)
        self.__dict__.setdefault("_tmem_registered", {})[name] = kind
        if kind == "buffer" and (persistent is not None or not _replacing_attribute):
            # An attribute filling the slot again (persistent not given) keeps the slot's persistence.
            nonpersistent = self.__dict__.setdefault("_tmem_nonpersistent", set())
            (nonpersistent.discard if persistent is not False else nonpersistent.add)(name)
        object.__setattr__(self, name, value if out is None else out)  # register_module returns None
        return out
    return register


def _persistent_argument(kind, args, kwargs):
    """register_buffer's persistent (positional or by keyword; None, not
    given, means True, or the slot's own when an attribute fills it);
    TypeError for it given to register_parameter or register_module, or
    for any other argument."""
    if kind != "buffer" and (args or kwargs):
        raise TypeError(f"register_{kind}() takes a name and a {kind}, but got more arguments")
    if len(args) > 1 or set(kwargs) - {"persistent"} or (args and kwargs):
        raise TypeError(f"register_buffer() takes name, tensor and persistent, but got {args} {kwargs}")
    persistent = args[0] if args else kwargs.get("persistent")
    if persistent is not None and not isinstance(persistent, bool):
        raise TypeError(f"register_buffer: expected persistent to be a bool, but got {persistent!r}")
    return persistent


def _nonpersistent_names(module, prefix=""):
    """The state_dict names of the buffers registered with persistent=False
    in module's tree, under every path that reaches them (a module held
    under two names is listed under both)."""
    if not _builtins.any("_tmem_nonpersistent" in m.__dict__ for m in module.modules()):
        return set()
    owners, out = {}, set()
    for key in _RAW_STATE_DICT(module, keep_vars=True):
        path, _, name = key.rpartition(".")
        if path not in owners:
            owners[path] = module.get_submodule(path).__dict__.get("_tmem_nonpersistent", ()) if path else \
                module.__dict__.get("_tmem_nonpersistent", ())
        if name in owners[path]:
            out.add(prefix + key)
    return out


def _module_state_dict(self, *, destination=None, prefix="", keep_vars=False):
    """Parameters and persistent buffers by dotted name (torch's
    state_dict; a buffer registered with persistent=False is left out)."""
    skip = _nonpersistent_names(self, prefix) if isinstance(prefix, str) else ()
    if not skip:
        return _RAW_STATE_DICT(self, destination=destination, prefix=prefix, keep_vars=keep_vars)
    out = _RAW_STATE_DICT(self, destination={}, prefix=prefix, keep_vars=keep_vars)
    kept = destination if destination is not None else {}
    for name, t in out.items():
        if name not in skip:
            kept[name] = t
    return kept


def _unregister(method):
    """Module.unregister that also forgets the name's registration record
    and the attribute registering made (as `del module.name`, so the name
    can be registered again). Only a name registered from Python can go: one
    a built-in layer's C++ constructor registered stays in its forward, so
    removing it left a layer that used a tensor no optimizer or state_dict
    saw."""
    @_functools.wraps(method)
    def unregister(self, name):
        registered = self.__dict__.get("_tmem_registered", {})
        if self._has_own(name) and name not in registered:
            raise ValueError(f"unregister: {type(self).__name__}'s constructor registered {name!r}, which its "
                             f"forward uses; only names registered from Python can be removed")
        if name not in registered or self._has_own(name):  # an empty slot has nothing in C++
            method(self, name)
        if registered.pop(name, None) is not None:
            self.__dict__.pop(name, None)
            self.__dict__.get("_tmem_nonpersistent", set()).discard(name)
    return unregister


def _checked_load_state_dict(method):
    """Module.load_state_dict that names the key of a value that is not a
    tmem Tensor (pybind11's incompatible-arguments TypeError named none)."""
    @_functools.wraps(method)
    def load_state_dict(self, state_dict, strict=True):
        items = getattr(state_dict, "items", None)
        if items is None:
            raise TypeError(f"load_state_dict: expected a mapping of names to tensors, but got "
                            f"{type(state_dict).__name__}")
        for key, value in items():
            if not isinstance(value, Tensor):
                raise TypeError(f"load_state_dict: the value of {key!r} is a {type(value).__name__}, not a tmem "
                                f"Tensor (convert arrays with tmem.tensor or tmem.from_numpy)")
        skip = _nonpersistent_names(self)
        if not skip:
            return method(self, state_dict, strict=strict)
        # A buffer registered with persistent=False is not in a state_dict: it keeps its value (given to the
        # C++ loader as itself), and its name in state_dict is an unexpected key, as in torch.
        unexpected = [key for key in state_dict if key in skip]
        if strict and unexpected:
            raise ValueError(f"load_state_dict: unexpected key(s) {', '.join(map(repr, unexpected))} (buffers "
                             f"registered with persistent=False).")
        current = _RAW_STATE_DICT(self, keep_vars=True)
        full = {key: value for key, value in state_dict.items() if key not in skip}
        full.update({key: current[key] for key in skip if key in current})
        result = method(self, full, strict=strict)
        return nn.IncompatibleKeys(result.missing_keys, list(result.unexpected_keys) + unexpected)
    return load_state_dict


def _module_apply(self, fn):
    """fn(m) for every submodule, children before their parent and in
    registration order, then for this module (torch.nn.Module.apply, as for
    initialisation); returns this module. A stack, not recursion, so a deep
    chain works too."""
    stack = [(self, False)]
    while stack:
        module, expanded = stack.pop()
        if expanded:
            fn(module)
            continue
        stack.append((module, True))
        stack.extend((child, False) for _, child in reversed(module.named_children()))
    return self


def _module_requires_grad_(self, requires_grad=True):
    """Sets requires_grad of every parameter (torch.nn.Module.requires_grad_,
    as for freezing a part of a model); returns this module."""
    for p in self.parameters():
        p.requires_grad_(requires_grad)
    return self


def _module_get_submodule(self, target):
    """The submodule at the dotted path `target` ("" is this module), as
    torch's; AttributeError naming the first part that is missing."""
    module = self
    for part in target.split(".") if target else []:
        if module.__dict__.get("_tmem_registered", {}).get(part) == "module" and module.__dict__[part] is not None:
            module = module.__dict__[part]  # also a module held under two names, which named_children lists once
            continue
        children = dict(module.named_children())
        if part not in children:
            raise AttributeError(f"{type(module).__name__} has no attribute `{part}` (get_submodule {target!r})")
        module = children[part]
    return module


_EXTRA_REPR = {
    "Linear": lambda m: f"in_features={m.in_features}, out_features={m.out_features}, bias={m.bias is not None}",
    "Embedding": lambda m: f"{m.weight.shape[0]}, {m.weight.shape[1]}"
                           + ("" if m.padding_idx is None else f", padding_idx={m.padding_idx}"),
    "LayerNorm": lambda m: f"{m.normalized_shape}, eps={m.eps}, elementwise_affine={m.elementwise_affine}",
    "Dropout": lambda m: f"p={m.p}",
    "MultiheadAttention": lambda m: f"embed_dim={m.embed_dim}, num_heads={m.num_heads}",
}


def _module_extra_repr(self):
    """The module's own settings in its repr line (torch's extra_repr): a
    built-in layer's sizes; "" for others unless a subclass defines it."""
    for cls in type(self).__mro__:
        if cls.__name__ in _EXTRA_REPR and cls.__module__.startswith("tmem"):
            return _EXTRA_REPR[cls.__name__](self)
    return ""


def _module_repr(self):
    """torch.nn.Module's repr: the class name, extra_repr(), and each child
    as "(name): <its repr>", indented."""
    if not _tmem._is_built(self):
        return f"<{type(self).__name__} (not built: super().__init__() was not called)>"
    lines = [line for line in self.extra_repr().split("\n") if line]
    for name, child in self.named_children():
        lines.append(f"({name}): " + repr(child).replace("\n", "\n  "))
    if not lines:
        return f"{type(self).__name__}()"
    if len(lines) == 1 and not self.named_children():
        return f"{type(self).__name__}({lines[0]})"
    return type(self).__name__ + "(\n  " + "\n  ".join(lines) + "\n)"


def _module_getattr(self, name):
    """The lookup of last resort (torch.nn.Module.__getattr__): a child,
    parameter or buffer a C++ constructor registered under a name that is
    no Python attribute (mha.out, mem.cell.pw), so every name of
    named_modules, named_parameters and state_dict is a path of attributes,
    as in torch; else an AttributeError, so a subclass's __getattr__ can
    fall back on super().__getattr__(name). For a module whose C++ part is
    not built (a property's getter failed for that), the error that says
    so."""
    _tmem._check_built(self)
    if self._has_own(name):
        for n, value in (*self.named_children(), *self.named_parameters(recurse=False),
                         *self.named_buffers(recurse=False)):
            if n == name:
                return value
    raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")


def _zero_grad_with_set_to_none(method):
    """zero_grad(set_to_none=True) of a module or optimizer, as torch's:
    the gradients go (None), or with set_to_none=False are filled with
    zeros in place (torch 1.x's default)."""
    @_functools.wraps(method)
    def zero_grad(self, set_to_none=True):
        if set_to_none:
            return method(self)
        params = self.parameters() if isinstance(self, nn.Module) else [
            p for g in self.param_groups for p in g["params"]]
        with no_grad():  # noqa: F405
            for p in params:
                if p.grad is not None:
                    p.grad.zero_()
        return None
    return zero_grad


class _Walk(list):
    """What parameters(), named_parameters(), buffers(), children() and
    modules() return: a list (len and indexing, as tmem always gave) that
    next() also steps through, as torch's generators, so that
    next(model.parameters()).device works."""

    def __next__(self):
        if "_tmem_next" not in self.__dict__:
            self.__dict__["_tmem_next"] = iter(list(self))
        return next(self.__dict__["_tmem_next"])


def _as_walk(method):
    @_functools.wraps(method)
    def walk(self, *args, **kwargs):
        return _Walk(method(self, *args, **kwargs))
    return walk


def _named_walk(method):
    """named_parameters / named_buffers with torch's prefix (prepended with
    a dot) and recurse (False: this module's own only)."""
    @_functools.wraps(method)
    def walk(self, prefix="", recurse=True):
        return [(f"{prefix}.{n}" if prefix else n, t) for n, t in method(self) if recurse or "." not in n]
    return walk


def _walk(method, named):
    """parameters / buffers with torch's recurse, from the named walk."""
    @_functools.wraps(method)
    def walk(self, recurse=True):
        return method(self) if recurse else [t for _, t in named(self, recurse=False)]
    return walk


def _unregister_slot(module, name):
    """Removes name's C++ registration but keeps its slot's kind (``module.name = None``)."""
    kind = module.__dict__["_tmem_registered"][name]
    module.unregister(name)
    module.__dict__["_tmem_registered"][name] = kind


# The tensors nn.Parameter(..., requires_grad=False) made, by id, each as a
# weak reference (the entry goes with its tensor, so an id is never taken for
# another object's): assigned to a module attribute or to register_parameter,
# such a tensor is a parameter that needs no grad, as torch's, also when it
# moves on to another module (m2.w = m.w).
_FROZEN_PARAMETERS = {}


def _is_frozen(t):
    ref = _FROZEN_PARAMETERS.get(id(t))
    return ref is not None and ref() is t


def _freeze(t):
    """Marks t as an nn.Parameter that needs no grad."""
    key = id(t)
    _FROZEN_PARAMETERS[key] = _weakref.ref(t, lambda _: _FROZEN_PARAMETERS.pop(key, None))


def _unfreeze(t):
    """t, just registered as a parameter (which marks it requires_grad), as
    the nn.Parameter(..., requires_grad=False) it was made."""
    t.requires_grad_(False)


class _ParameterType(type):
    """isinstance(t, nn.Parameter): t is a leaf tensor that requires grad,
    or an nn.Parameter(..., requires_grad=False) no module has taken yet."""
    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor) and ((obj.requires_grad and obj.is_leaf) or _is_frozen(obj))


class _Parameter(metaclass=_ParameterType):
    """torch.nn.Parameter(data=None, requires_grad=True): data detached, as
    a leaf that requires grad, sharing its memory (an empty tensor for
    None). tmem has no Parameter type: this gives a Tensor, and
    isinstance(t, nn.Parameter) holds for every leaf that requires grad (a
    module's parameters). With requires_grad=False, a module attribute or
    register_parameter takes it as a parameter that needs no grad (in
    parameters() and state_dict()), as torch's. TypeError for data that is
    not a Tensor, as torch."""
    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            data = empty(0)  # noqa: F405
        if not isinstance(data, Tensor):
            raise TypeError(f"nn.Parameter: expected data to be a Tensor, but got {type(data).__name__}")
        if type(requires_grad) is not _builtins.bool:
            raise TypeError(f"nn.Parameter: expected requires_grad to be a bool, but got {requires_grad!r}")
        out = data.detach().requires_grad_(requires_grad)
        if not requires_grad:
            _freeze(out)
        return out


def _guard_call(self, fn):
    """Decorates fn to run inside a fresh guard of this kind, as
    ``@torch.no_grad()`` does (a generator function's body at each step)."""
    from ._tensor_ops import decorate
    return decorate(type(self), fn)


_PICKLED_DTYPES = {"float32": "<f4", "float64": "<f8", "int64": "<i8"}  # a pickled tensor's dtype names


def _rebuild_tensor(data, dtype, shape, requires_grad, device):
    """The tensor Tensor.__reduce__ pickled: data, the little-endian bytes of
    its values in row-major order, as a tensor of dtype (its name) and shape
    on device, a leaf that requires grad when the pickled tensor did. Raises
    tmem.ValueError, before allocating anything, when the pieces do not fit
    together (a damaged or crafted pickle)."""
    is_bytes = isinstance(data, (bytes, bytearray))
    fits = (is_bytes and dtype in _PICKLED_DTYPES and type(shape) is tuple
            and _builtins.all(type(n) is _builtins.int and 0 <= n < 2**62 for n in shape)
            and type(requires_grad) is _builtins.bool and type(device) is str)
    if fits:  # Python ints: exact, no int64 overflow
        span, numel = _functools.reduce(lambda a, n: (a[0] * _builtins.max(n, 1), a[1] * n), shape, (1, 1))
        fits = span < 2**62 and len(data) == numel * _builtins.int(_PICKLED_DTYPES[dtype][2])
    if not fits:
        size = f"{len(data)} bytes" if is_bytes else f"a {type(data).__name__}"
        raise ValueError(f"a pickled tensor's pieces do not fit together: {size} of data, dtype {dtype!r}, "  # noqa: F405
                         f"shape {shape!r}, requires_grad {requires_grad!r}, device {device!r} (a damaged or "
                         f"crafted pickle)")
    t = tensor(_np.frombuffer(data, dtype=_PICKLED_DTYPES[dtype]).reshape(shape)).to(device)  # noqa: F405
    return t.requires_grad_() if requires_grad else t


def _tensor_reduce(self):
    """Pickling and copy.copy: the values as little-endian bytes, the dtype's
    name, the shape, requires_grad and the device (no NumPy object, so a
    weights-only tmem.load needs no NumPy globals)."""
    values = self.detach().cpu().numpy().astype(_PICKLED_DTYPES[self.dtype.name], order="C", copy=False)
    return _rebuild_tensor, (values.tobytes(), self.dtype.name, tuple(self.shape), self.requires_grad, str(self.device))


def _rebuild_dtype(name):
    """The dtype a pickle names (tmem.float32, ...); ValueError for another name."""
    if name not in _PICKLED_DTYPES:
        raise ValueError(f"a pickled dtype must be one of {sorted(_PICKLED_DTYPES)}, but got {name!r}")  # noqa: F405
    return getattr(dtype, name)  # noqa: F405


def _tensor_deepcopy(self, memo):
    """copy.deepcopy (of a state_dict, say): a new tensor with its own copy of
    the values and of its .grad; two handles of one tensor (a module's weight and an attribute
    naming it) give one copy. As in torch, only a leaf can be deep-copied
    when it requires grad (a copy of a computed tensor could not keep its
    history)."""
    if self.requires_grad and not self.is_leaf:
        raise RuntimeError("deepcopy: only tensors created by the user (graph leaves) can be deep-copied when they "
                           "require grad; detach() it first")
    impls = memo.setdefault(_IMPLS, {})
    if self._impl_id not in impls:
        _keep_alive(self, memo)
        out = impls[self._impl_id] = _rebuild_tensor(*_tensor_reduce(self)[1])
        if self.grad is not None:
            out.grad = _copy.deepcopy(self.grad, memo)
    return impls[self._impl_id]


def _construct_in_new(cls):
    """Makes cls.__new__ build the C++ object too (through cls's own
    __init__), so that cls.__new__(cls) alone never gives an instance without
    one: pybind11 leaves its memory unset, and a method called on such an
    instance crashed the interpreter. The type call's __init__ that follows
    does nothing for cls itself; a Python subclass builds the C++ object in
    its own __init__ through super().__init__(...), as before."""
    init = vars(cls)["__init__"]
    new = _pybind_object.__new__

    def __new__(klass, *args, **kwargs):
        obj = new(klass)
        if klass is cls:
            init(obj, *args, **kwargs)
            _built_in_new.add(id(obj))
            _record_init(obj, cls, args, kwargs)
        return obj

    def __init__(self, *args, **kwargs):
        if type(self) is not cls:
            if _tmem._is_built(self):
                raise TypeError(f"{cls.__name__}.__init__: the object is built already (super().__init__() ran "
                                f"before); make a new one")
            init(self, *args, **kwargs)
            _record_init(self, cls, args, kwargs)
        elif id(self) in _built_in_new:
            _built_in_new.discard(id(self))  # the type call's own __init__
        else:
            raise TypeError(f"{cls.__name__}.__init__: the object is built already; make a new one "
                            f"(pybind11 would build another over it)")

    __init__.__doc__ = init.__doc__
    cls.__new__ = staticmethod(__new__)
    cls.__init__ = __init__


def _take_torch_arguments(cls, convert):
    """cls built from torch's arguments, converted by convert(*args,
    **kwargs) -> (args, kwargs) before they reach its C++ constructor
    (through __new__ for cls itself, through __init__ for a subclass's
    super().__init__; _construct_in_new above)."""
    new, init = cls.__new__, cls.__init__
    convert.__qualname__ = f"{cls.__module__.rpartition('.')[2]}.{cls.__name__}"  # its TypeErrors name cls

    def __new__(klass, *args, **kwargs):
        if klass is cls:
            args, kwargs = convert(*args, **kwargs)
        return new(klass, *args, **kwargs)

    def __init__(self, *args, **kwargs):
        if type(self) is not cls:
            args, kwargs = convert(*args, **kwargs)
        init(self, *args, **kwargs)

    __new__.__doc__ = __init__.__doc__ = convert.__doc__
    cls.__new__, cls.__init__ = staticmethod(__new__), __init__


def _record_init(obj, cls, args, kwargs):
    """Keeps the arguments a module's C++ part (of the bound class cls) was
    built with, for copy.deepcopy to build it again: copies of configurations
    and containers (a later change to them must not reach the copy), the
    generators and tasks themselves."""
    if isinstance(obj, nn.Module):
        def kept(a):
            return _copy.deepcopy(a) if isinstance(a, (list, dict, *_CONFIGS)) else a
        obj.__dict__["_tmem_init"] = (cls, tuple(map(kept, args)), {k: kept(v) for k, v in kwargs.items()})


def _generator_deepcopy(self, memo=None):
    """copy.copy and copy.deepcopy of a Generator (or of a Python subclass):
    a new one in the same state, drawing the same numbers from here on,
    independently, with deep copies of a subclass's attributes."""
    out = type(self).__new__(type(self))
    if type(self) is not Generator:  # noqa: F405
        Generator.__init__(out)  # noqa: F405
        out.__dict__.update(_copy.deepcopy(self.__dict__, memo))
    out.set_state(self.get_state())
    return out


def _module_copy(self):
    """copy.copy(module): refused with a pointer to deepcopy (pickling's
    message said only that the module cannot be pickled)."""
    raise TypeError(f"copy.copy: a {type(self).__name__} has no shallow copy in tmem (its C++ layers own their "
                    f"tensors); use copy.deepcopy, or share the module itself")


def _optimizer_deepcopy(self, memo):
    """copy.deepcopy of an optimizer (or of a Python subclass), as torch's:
    one of the same class over deep copies of its parameters (in one
    deepcopy call with their model, the model copy's own), with each group's
    lr and weight_decay, its defaults (a later group's options), its state (moments, step count,
    momentum buffers) and deep copies of a subclass's attributes."""
    bound = optim.SGD if isinstance(self, optim.SGD) else optim.AdamW
    groups = [{"params": [_copy.deepcopy(p, memo) for p in g["params"]], "lr": g["lr"],
               "weight_decay": g["weight_decay"]} for g in self.param_groups]
    options = self.defaults
    if type(self) is bound:
        out = bound(groups, **options)
    else:
        out = type(self).__new__(type(self))
        bound.__init__(out, groups, **options)
    memo[id(self)] = out
    if type(self) is not bound:
        out.__dict__.update(_copy.deepcopy(self.__dict__, memo))
    out.load_state_dict({k: _copy.deepcopy(v, memo) for k, v in self.state_dict().items()})
    return out


def _state_deepcopy(self, memo):
    """copy.deepcopy of a TensorMemoryState: deep copies of h and c."""
    return type(self)(_copy.deepcopy(self.h, memo), _copy.deepcopy(self.c, memo))


_IMPLS = "tmem: tensor copies by TensorImpl"  # a key of deepcopy's memo no id() can be


def _keep_alive(obj, memo):
    """Keeps obj alive while memo lives, as copy.deepcopy does with what it
    copies: a memo keyed by id() must not see that id reused."""
    memo.setdefault(id(memo), []).append(obj)


def _module_deepcopy(self, memo):
    """copy.deepcopy(module), as torch's: a module of the same class built
    again from the arguments its C++ part was built with, holding copies of
    every parameter and buffer (values, requires_grad, device, sharing), the
    training modes, and deep copies of its other attributes. A generator it
    was built with is copied in its state; building the copy draws nothing
    from it or from the default generator, whose state it restores. Raises
    TypeError for a module made by another module's C++ (model.backbone)
    copied on its own: it has no arguments of its own; copy the module that
    made it. A module whose constructor made no tensor or child (a Python
    module) walks only itself: its children's copies load their own state,
    so a deep chain costs its depth, not its cube."""
    _tmem._check_built(self)
    recorded = self.__dict__.get("_tmem_init")
    if recorded is None:
        raise TypeError(f"deepcopy: this {type(self).__name__} was made inside another module, not by its "
                        f"constructor, so it cannot be built again alone; deep-copy the module that made it")
    bound, args, kwargs = recorded
    default = default_generator()  # noqa: F405
    memo.setdefault(id(default), default)  # dropout from the default generator stays on it
    default_state = default.get_state()
    generators = [a for a in (*args, *kwargs.values()) if isinstance(a, Generator)]  # noqa: F405
    for g in generators:
        _copy.deepcopy(g, memo)
    args = tuple(memo[id(a)] if isinstance(a, Generator) else a for a in args)  # noqa: F405
    kwargs = {k: memo[id(v)] if isinstance(v, Generator) else v for k, v in kwargs.items()}  # noqa: F405
    try:
        if type(self) is bound:
            out = bound(*args, **kwargs)
        else:
            out = type(self).__new__(type(self))
            bound.__init__(out, *args, **kwargs)
    finally:
        default.set_state(default_state)
    for g in generators:
        memo[id(g)].set_state(g.get_state())
    memo[id(self)] = out
    # What the constructor made stands in, by name, for the original's
    # modules and tensors, so that Python attributes aliasing them
    # (self.w = self.lin.weight) stay aliases in the copy.
    made_modules = dict(out.named_modules())
    made = _RAW_STATE_DICT(out, keep_vars=True)
    constructed = len(made_modules) > 1 or bool(made)
    own = self.named_modules() if constructed else [("", self)]
    for name, module in own:
        if name and name in made_modules:
            _keep_alive(module, memo)
            memo.setdefault(id(module), made_modules[name])
    impls = memo.setdefault(_IMPLS, {})
    for name, t in _RAW_STATE_DICT(self, keep_vars=True).items() if constructed else ():  # every name of a tied tensor
        if name not in made:
            continue
        copied = impls.setdefault(t._impl_id, made[name])
        if copied._impl_id == made[name]._impl_id:
            continue
        # Copied already: a tensor tied to another module's (head.weight =
        # emb.weight) or an optimizer's copy ahead of the module in one
        # deepcopy call. The copy's layer takes that copy, so the tie holds,
        # where its setter allows (Linear, Embedding, LayerNorm).
        owner, _, attr = name.rpartition(".")
        setter = getattr(getattr(type(made_modules[owner]), attr, None), "fset", None)
        if setter is None:
            raise RuntimeError(f"deepcopy: {name!r} of this {type(self).__name__} was copied already (shared with a "
                               f"module or optimizer copied ahead of it in one deepcopy call), and its layer cannot "
                               f"take that copy; deep-copy the module first: copy.deepcopy((model, optimizer))")
        setter(made_modules[owner], copied)
    registered = self.__dict__.get("_tmem_registered", {})
    # The modules their constructors built first, so that one another of
    # them made (self.q = mha.qkv, assigned ahead of self.attn = mha) is found
    # as its copy's in the memo, whatever the order of assignment.
    for name, kind in registered.items():
        child = self.__dict__[name]
        if kind == "module" and child is not None and "_tmem_init" in child.__dict__:
            _copy.deepcopy(child, memo)
    for name, value in self.__dict__.items():
        if name not in registered and name not in ("_tmem_init", "_tmem_registered"):
            object.__setattr__(out, name, _copy.deepcopy(value, memo))
    nonpersistent = self.__dict__.get("_tmem_nonpersistent", ())
    for name, kind in _registered_in_order(self):  # each as it was registered
        persistent = (name not in nonpersistent,) if kind == "buffer" else ()
        getattr(out, "register_" + kind)(name, _copy.deepcopy(self.__dict__[name], memo), *persistent,
                                         _replacing_attribute=True)
    if not constructed:
        out.training = self.training
        for name, kind in registered.items():  # registering marked them requires_grad
            if kind == "parameter" and self.__dict__[name] is not None:
                out.__dict__[name].requires_grad_(self.__dict__[name].requires_grad)
        return out
    _load_copied_state(out, _RAW_STATE_DICT(self), {name: p.requires_grad for name, p in self.named_parameters()},
                       {name: module.training for name, module in own})
    return out


def _registered_in_order(module):
    """module's Python registrations (name, kind) in the order its C++ part
    lists them (where a slot emptied and filled again comes last), then its
    empty slots: a copy that registers them in this order lists its
    parameters, buffers and children in the original's order, which an
    optimizer's state_dict relies on."""
    registered = module.__dict__.get("_tmem_registered", {})
    listed = [name for name, _ in (*module.named_parameters(recurse=False), *module.named_buffers(recurse=False),
                                   *module.named_children())]
    rank = {name: i for i, name in enumerate(listed)}
    return sorted(registered.items(), key=lambda item: rank.get(item[0], len(rank)))


def _load_copied_state(out, state, requires_grad, training):
    """Gives out, a module copy.deepcopy built again, the copied state (its
    device, dtypes and values), the requires_grad flags of its parameters
    and the training modes of its modules, each by name."""
    if state:
        out.to(next(iter(state.values())).device)
    for name, t in (*out.named_parameters(), *out.named_buffers()):  # a float64 copy stays float64
        if t.dtype != state[name].dtype:
            t.data = t.to(state[name].dtype)
    _RAW_LOAD_STATE_DICT(out, state)
    params = dict(out.named_parameters())
    for name, flag in requires_grad.items():
        params[name].requires_grad_(flag)
    modules = dict(out.named_modules())
    for name, flag in training.items():
        modules[name].training = flag


_pybind_object = Tensor.__mro__[-2]
_CONFIGS = (models.TaskConfig, models.BackboneConfig, models.TensorMemoryOptions, models.TrainConfig)
_built_in_new = set()  # ids of objects __new__ built, until the type call's __init__


def _reduce_ex_from_state(self, protocol):
    """__reduce_ex__ of a class pickled by its __getstate__ (the enums, the
    configs): protocol 2's reduction at every protocol. Protocols 0 and 1
    rebuilt the object through object.__new__, which pybind11 cannot take:
    it aborted the interpreter."""
    return object.__reduce_ex__(self, _builtins.max(protocol, 2))


def _refuse_pickle(self, protocol):
    """__reduce_ex__ of a class with no pickled form: the TypeError of
    protocol 2 at every protocol (0 and 1 aborted the interpreter); save a
    module or optimizer with state_dict()."""
    raise TypeError(f"cannot pickle {type(self).__name__!r} object (save a module's or optimizer's state_dict())")


for _module in (_tmem, nn, optim, models):
    for _cls in list(vars(_module).values()):
        if isinstance(_cls, type) and issubclass(_cls, _pybind_object) and not hasattr(_cls, "__members__"):
            _construct_in_new(_cls)


def _tensor_format(self, format_spec):
    """format(t, spec) and f"{loss:.4f}": a 0-d tensor formats as its
    number, as torch's; another tensor as object.__format__ (TypeError for
    a non-empty spec)."""
    if self.dim() == 0:
        return self.item().__format__(format_spec)
    return object.__format__(self, format_spec)


Tensor.__format__ = _tensor_format


def _tensor_contains(self, element):
    """``element in tensor``: whether any element equals it (torch's
    Tensor.__contains__); a 0-d tensor too, which refuses iteration."""
    if not isinstance(element, (Tensor, _builtins.int, _builtins.float, _np.number, _np.bool_)):
        raise TypeError(f"Tensor.__contains__ only supports Tensor or scalar, but got {type(element).__name__}")
    return bool((self == element).numpy().any())


Tensor.__contains__ = _tensor_contains
Tensor.__reduce__ = _tensor_reduce
Tensor.__deepcopy__ = _tensor_deepcopy
Generator.__deepcopy__ = _generator_deepcopy  # noqa: F405
Generator.__copy__ = _generator_deepcopy  # noqa: F405
nn.Module.__deepcopy__ = _module_deepcopy
nn.Module.__copy__ = _module_copy
nn.TensorMemoryState.__deepcopy__ = _state_deepcopy
optim.SGD.__deepcopy__ = _optimizer_deepcopy
optim.AdamW.__deepcopy__ = _optimizer_deepcopy
models.Task.__deepcopy__ = lambda self, memo: self  # immutable: its parameters are read-only

for _guard in (no_grad, detect_anomaly):  # noqa: F405
    _guard.__call__ = _guard_call

nn.Module.__setattr__ = _module_setattr
nn.Module.__delattr__ = _module_delattr
for _kind in ("parameter", "buffer", "module"):
    setattr(nn.Module, "register_" + _kind, _register_as_attribute(getattr(nn.Module, "register_" + _kind), _kind))
nn.Module.unregister = _unregister(nn.Module.unregister)
_RAW_STATE_DICT, _RAW_LOAD_STATE_DICT = nn.Module.state_dict, nn.Module.load_state_dict  # the whole state
nn.Module.load_state_dict = _checked_load_state_dict(nn.Module.load_state_dict)
nn.Module.state_dict = _module_state_dict
nn.Module.apply = _module_apply
for _name in ("parameters", "buffers"):
    setattr(nn.Module, "named_" + _name, _named_walk(getattr(nn.Module, "named_" + _name)))
    setattr(nn.Module, _name, _walk(getattr(nn.Module, _name), getattr(nn.Module, "named_" + _name)))
for _name in ("parameters", "buffers", "children", "modules"):
    for _method in (_name, "named_" + _name):
        setattr(nn.Module, _method, _as_walk(getattr(nn.Module, _method)))
for _owner in (nn.Module, optim.SGD, optim.AdamW):
    _owner.zero_grad = _zero_grad_with_set_to_none(_owner.zero_grad)
nn.Module.__getattr__ = _module_getattr
nn.Module.extra_repr = _module_extra_repr
nn.Module.__repr__ = _module_repr
nn.Module.requires_grad_ = _module_requires_grad_
nn.Module.get_submodule = _module_get_submodule
nn.Module.add_module = lambda self, name, module: self.register_module(name, module)
nn.Module.add_module.__doc__ = "register_module under torch's other name."
nn.Module.__call__ = _hooks.module_call
nn.Module.register_forward_pre_hook = _hooks.register_forward_pre_hook
nn.Module.register_forward_hook = _hooks.register_forward_hook
nn.Module.cpu = lambda self: self.to("cpu")
nn.Module.cuda = lambda self, device=None: self.to("cuda" if device is None else _device.device(device))
nn.Module.cpu.__doc__ = "to('cpu'): moves every parameter and buffer to the CPU; returns the module."
nn.Parameter = _Parameter
_Parameter.__name__ = _Parameter.__qualname__ = "Parameter"
for _module in (_tmem, nn, optim, models):  # after Tensor.__reduce__ is set
    for _cls in list(vars(_module).values()):
        if isinstance(_cls, type) and issubclass(_cls, _pybind_object) and "__reduce__" not in vars(_cls):
            _cls.__reduce_ex__ = _reduce_ex_from_state if "__getstate__" in vars(_cls) else _refuse_pickle

dtype.__reduce_ex__ = lambda self, protocol: (_rebuild_dtype, (self.name,))  # noqa: F405  (pickled by name)

from . import _containers  # noqa: E402  (after the Module patches and the bound-class loops above)

# The bound type of C++-made ModuleLists (backbone.blocks) loses its name to
# the Python one; this reference keeps it alive, for pybind11 forgets a type
# the collector frees and would give such lists as plain Modules.
_CPP_MODULE_LIST = nn.ModuleList

nn.Sequential, nn.ModuleList, nn.ModuleDict = _containers.Sequential, _containers.ModuleList, _containers.ModuleDict
nn.ParameterList, nn.ParameterDict = _containers.ParameterList, _containers.ParameterDict

from . import _pickling  # noqa: E402,F401  (patches __reduce_ex__ after the loops above)
from . import _optim  # noqa: E402,F401  (the optimizers' state_dict in torch.optim's layout, and optim.Adam)
from . import _lr_scheduler  # noqa: E402,F401  (tmem.optim.lr_scheduler)
from . import _tensor_ops  # noqa: E402  (torch's functions written over the ops, and their Tensor methods)

globals().update(_tensor_ops.FUNCTIONS)
from . import _device  # noqa: E402  (tmem.device, Tensor.to's keyword forms, device= on the factories)

device, is_tensor, as_tensor, randperm = _device.device, _device.is_tensor, _device.as_tensor, _device.randperm
from . import _masks  # noqa: E402  (x.eq, logical_not, & | ^ on int64 masks, isclose, Tensor.bool)
from . import _indexing  # noqa: E402  (x[ids], x[rows, cols]: integer arrays as indices)

for _name in ("randperm", "argsort", "sort", "topk", "arange", "multinomial"):
    globals()[_name] = _indexing.making_indices(globals()[_name])
    if hasattr(Tensor, _name):
        setattr(Tensor, _name, _indexing.making_indices(getattr(Tensor, _name)))

globals().update(_masks.FUNCTIONS)
for _name in ("tensor", "arange", "rand", "randn", "randint", "eye", "linspace", "zeros_like", "ones_like",
              "empty_like", "full_like", "rand_like", "randn_like", "randperm"):
    globals()[_name] = _device.with_device(globals()[_name])
from . import _init  # noqa: E402

nn.init = _init.init
_sys.modules[__name__ + ".nn.init"] = nn.init

from . import _functional, _serialization  # noqa: E402  (they use _rebuild_tensor above)
from . import _layers  # noqa: E402  (torch's parameter-free layers and losses in nn and nn.functional)
from . import _recurrent  # noqa: E402,F401  (nn.RNN, LSTM, GRU and their cells)
from . import _transformer  # noqa: E402,F401  (nn.TransformerEncoderLayer and TransformerEncoder)
from . import _conv  # noqa: E402,F401  (nn.Conv1d/2d, pooling and BatchNorm1d/2d, and their functions)
from . import _data  # noqa: E402

from . import _autograd  # noqa: E402

autograd = _autograd.autograd
_sys.modules[__name__ + ".autograd"] = autograd
nn.utils, utils = _layers.utils, _data.utils
_sys.modules.update({__name__ + ".nn.utils": nn.utils, __name__ + ".nn.utils.rnn": nn.utils.rnn,
                     __name__ + ".utils": utils,
                     __name__ + ".utils.data": utils.data})


def _dtype_repr(self):
    """tmem.float32, as torch prints torch.float32."""
    return f"tmem.{self.name}"


dtype.__repr__ = dtype.__str__ = _dtype_repr  # noqa: F405
class _Cuda:
    """tmem.cuda: what torch.cuda tells of the GPUs (is_available, device_count)."""

    @staticmethod
    def is_available():
        """Whether this build has the CUDA backend and a GPU to run it."""
        return _tmem._cuda_device_count() > 0

    @staticmethod
    def device_count():
        """How many GPUs this build can use (0 without the CUDA backend or a GPU)."""
        return _tmem._cuda_device_count()


cuda = _Cuda()


def _abs(input):
    """|input| (torch.abs; Tensor.abs): an int64 tensor's exactly (it raised
    DtypeError while abs(t) worked), a floating one differentiable
    (gradient 0 at 0). TypeError for anything but a tensor."""
    if not isinstance(input, Tensor):
        raise TypeError(f"abs: expected a Tensor, but got {type(input).__name__}")
    return input.__abs__()


_abs.__name__ = "abs"
Tensor.abs = _abs
globals()["abs"] = _abs  # tmem.abs, defined last: this module's own code has no use of the builtin below

nn.functional = _functional
_sys.modules[__name__ + ".nn.functional"] = _functional
save, load = _serialization.save, _serialization.load
