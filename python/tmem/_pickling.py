"""pickle of tmem's modules (torch.save(model)'s pickling), and of what
their constructors take: generators, the configurations and tasks.

A module pickles as its class, the arguments its C++ part was built with
(``_tmem_init``), its Python attributes and registrations, and its
tensors, requires_grad flags and training modes; a Python-registered child
pickles itself the same way.
Unpickling builds it again, as copy.deepcopy does, then restores all of
that. A tensor under several names (``head.weight = emb.weight``) stays
one. Where a layer can take a tensor (a Python-registered one, or a
parameter with a setter such as Linear.weight), it takes the pickled one
itself, so another object of the same pickle that refers to it refers to
the module's tensor; a tensor a layer cannot replace gets the pickled
values, and such a reference comes back as a copy. A Python attribute
naming a module or tensor of the tree (``self.w = self.lin.weight``),
directly or inside lists, tuples, sets and dicts, names the rebuilt one;
inside another object it comes back as a copy. Optimizers still refuse
pickling: save their state_dict()."""
import weakref as _weakref

from collections import OrderedDict as _OrderedDict

from . import _RAW_LOAD_STATE_DICT, _RAW_STATE_DICT, _registered_in_order, _tmem
from ._tmem import Generator, default_generator, models, nn

_CONFIGS = (models.TaskConfig, models.BackboneConfig, models.TensorMemoryOptions, models.TrainConfig)


def _rebuild_generator(cls, state, attributes):
    """A generator of class cls in the pickled state, with its attributes."""
    g = cls.__new__(cls)
    if cls is not Generator:
        Generator.__init__(g)
        g.__dict__.update(attributes)
    g.set_state(state)
    return g


def _default_generator():
    """The default generator (pickle cannot name pybind11's function)."""
    return default_generator()


def _generator_reduce_ex(self, protocol):
    """Pickles a generator as its state (and a subclass's attributes): the
    copy draws the same numbers from there on, as copy.deepcopy's. The
    default generator pickles as the default generator of the process that
    loads it, as a module deep-copied with it stays on it."""
    _tmem._check_built(self)
    if self is default_generator():
        return _default_generator, ()
    return _rebuild_generator, (type(self), self.get_state(), dict(getattr(self, "__dict__", {})))


def _config_fields(cls):
    return [name for name, attr in vars(cls).items() if isinstance(attr, property) and attr.fset is not None]


def _rebuild_config(cls, fields):
    """The configuration of class cls with these field values."""
    config = cls({}) if cls is models.TrainConfig else cls()
    for name, value in fields.items():
        setattr(config, name, value)
    return config


def _config_reduce_ex(self, protocol):
    """Pickles a configuration as its fields. TypeError for a Python
    subclass, whose own attributes would be lost (copy refuses it alike)."""
    cls = type(self)
    if cls not in _CONFIGS:
        raise TypeError(f"cannot pickle an instance of a subclass of {cls.__mro__[1].__name__} (its own attributes "
                        f"would be lost); pickle a {cls.__mro__[1].__name__}")
    return _rebuild_config, (cls, {name: getattr(self, name) for name in _config_fields(cls)})


_TASK_ARGS = _weakref.WeakKeyDictionary()  # Task -> (name, TaskConfig) it was made from
_make_task = models.make_task


def make_task(name, config=None, **keys):
    """The task named name (coord-binding, map-building, occlusion,
    occlusion-visible, no-harm, mqar, map-recall, coord-recall) with the
    parameters of a TaskConfig, or with TaskConfig keys as keywords. Raises
    tmem.ValueError for an unknown name or bad parameters, TypeError for
    both a config and keywords."""
    if config is not None and keys:
        raise TypeError("make_task: give a TaskConfig or keywords, not both")
    if config is None:
        config = models.TaskConfig(**keys)
    task = _make_task(name, config)
    _TASK_ARGS[task] = (name, _rebuild_config(models.TaskConfig, {k: getattr(config, k) for k in
                                                                  _config_fields(models.TaskConfig)}))
    return task


def _task_reduce_ex(self, protocol):
    """Pickles a task as the name and config make_task made it from."""
    args = _TASK_ARGS.get(self)
    if args is None:
        raise TypeError("cannot pickle this 'Task' object: it was not made by tmem.models.make_task")
    return make_task, args


class _Ref:
    """In a pickled module's attributes: the module or tensor of its tree
    under this dotted name, looked up again when it is unpickled."""
    __slots__ = ("kind", "name")

    def __init__(self, kind, name):
        self.kind, self.name = kind, name

    def __reduce__(self):
        return _Ref, (self.kind, self.name)


_CONTAINERS = (list, tuple, set, frozenset)


def _to_refs(value, refs):
    ref = refs.get(id(value))
    if ref is not None:
        return _Ref(*ref)
    if type(value) in _CONTAINERS:
        return type(value)(_to_refs(v, refs) for v in value)
    if type(value) in (dict, _OrderedDict):
        return type(value)((k, _to_refs(v, refs)) for k, v in value.items())
    return value


def _from_refs(value, modules, tensors):
    if isinstance(value, _Ref):
        return (modules if value.kind == "module" else tensors)[value.name]
    if type(value) in _CONTAINERS:
        return type(value)(_from_refs(v, modules, tensors) for v in value)
    if type(value) in (dict, _OrderedDict):
        return type(value)((k, _from_refs(v, modules, tensors)) for k, v in value.items())
    return value


def _registered_value(module, name, kind, refs):
    """What module registered from Python as name, as pickled: a module that
    another module's C++ constructor made (self.classifier = self.head),
    which cannot pickle alone, as a reference to where that constructor put
    it. TypeError when it has no other name in the tree."""
    value = module.__dict__[name]
    if kind != "module" or value is None or "_tmem_init" in value.__dict__:
        return value
    ref = refs.get(id(value))
    if ref is None or ref[1] == name:
        raise TypeError(f"cannot pickle this {type(module).__name__}: {name!r} is a {type(value).__name__} that "
                        f"another module's C++ constructor made, registered before that module (or without it); "
                        f"register the module that made it first")
    return _Ref(*ref)


def _own_part(module):
    """The names (in named_modules) of module and of the descendants its own
    pickle restores: those reached without entering a module built by its
    own constructor call (``_tmem_init``), which pickles itself."""
    own = {"": None}  # ordered, and a set for the lookups
    for name, m in module.named_modules():
        if name and name.rpartition(".")[0] in own and "_tmem_init" not in m.__dict__:
            own[name] = None
    return own


def _replaceable(module, attr):
    """Whether module can take another tensor as attr: one Python
    registered, or a layer's parameter with a setter (Linear.weight)."""
    return attr in module.__dict__.get("_tmem_registered", {}) or \
        getattr(getattr(type(module), attr, None), "fset", None) is not None


def _module_reduce_ex(self, protocol):
    """Pickles a module (see the module's docstring) as its rebuilt shell
    and a state that __setstate__ restores, so that attributes leading back
    to the module pickle as references. TypeError for a module made by
    another module's C++ constructor (model.backbone) pickled on its own:
    pickle the module that made it."""
    _tmem._check_built(self)
    recorded = self.__dict__.get("_tmem_init")
    if recorded is None:
        raise TypeError(f"cannot pickle this {type(self).__name__}: it was made inside another module, not by its "
                        f"constructor, so it cannot be built again alone; pickle the module that made it")
    tree = _RAW_STATE_DICT(self, keep_vars=True)
    refs = {}
    for name, m in self.named_modules():
        if name:
            refs.setdefault(id(m), ("module", name))
    for name, t in tree.items():
        refs.setdefault(id(t), ("tensor", name))
    own = _own_part(self)
    modules = dict(self.named_modules())
    registered = self.__dict__.get("_tmem_registered", {})
    attributes = {name: _to_refs(value, refs) for name, value in self.__dict__.items()
                  if name not in registered and name not in ("_tmem_init", "_tmem_registered")}
    state = {name: t for name, t in tree.items() if name.rpartition(".")[0] in own}
    groups = {}  # the names of each tensor of the tree
    for name, t in tree.items():
        groups.setdefault(t._impl_id, []).append(name)
    return _rebuild_module, (type(self), recorded), {
        "attributes": attributes,
        "registered": [(name, kind, _registered_value(self, name, kind, refs))
                       for name, kind in _registered_in_order(self)],
        "state": state,
        "groups": [names for names in groups.values() if len(names) > 1 or names[0] in state],
        "requires_grad": {name: p.requires_grad for name, p in self.named_parameters() if name in state},
        "training": {name: modules[name].training for name in own}}


def _rebuild_module(cls, recorded):
    """A module built again from the arguments its C++ part was built with,
    drawing nothing from the default generator or from the generators it is
    built with; __setstate__ gives it the rest."""
    bound, args, kwargs = recorded
    default = default_generator()
    generators = [(g, g.get_state()) for g in (*args, *kwargs.values()) if isinstance(g, Generator)]
    default_state = default.get_state()
    try:
        if cls is bound:
            out = bound(*args, **kwargs)
        else:
            out = cls.__new__(cls)
            bound.__init__(out, *args, **kwargs)
    finally:
        default.set_state(default_state)
    for g, g_state in generators:
        g.set_state(g_state)
    return out


def _module_setstate(self, pickled):
    """Restores a rebuilt module (_module_reduce_ex's state): its
    registrations, then each tensor of the tree under all its names (a
    layer that can take a tensor takes the pickled one itself, so ties and
    outside references hold; a tensor no layer can give up is kept and
    gets the pickled values), attributes, requires_grad flags and training
    modes. RuntimeError for a name the rebuilt module lacks, or names of one
    tensor that it keeps apart and cannot join."""
    for name, kind, value in pickled["registered"]:
        if isinstance(value, _Ref):
            value = self.get_submodule(value.name)
        getattr(self, "register_" + kind)(name, value, _replacing_attribute=True)
    state = pickled["state"]
    tree = _RAW_STATE_DICT(self, keep_vars=True)
    missing = [name for names in pickled["groups"] for name in names if name not in tree]
    if missing:
        raise RuntimeError(f"unpickle: the rebuilt {type(self).__name__} has no {', '.join(map(repr, missing))}")
    if state:
        self.to(next(iter(state.values())).device)
    for name, t in state.items():
        if tree[name].dtype != t.dtype:
            tree[name].data = tree[name].to(t.dtype)
    values = {}
    for names in pickled["groups"]:
        owners = [name.rpartition(".") for name in names]
        fixed = [name for name, (owner, _, attr) in zip(names, owners)
                 if not _replaceable(self.get_submodule(owner), attr)]
        pickled_t = next((state[name] for name in names if name in state), None)
        canonical = tree[fixed[0]] if fixed else tree[names[0]] if pickled_t is None else pickled_t
        for name in fixed:
            if tree[name]._impl_id != canonical._impl_id:
                raise RuntimeError(f"unpickle: {name!r} and {fixed[0]!r} shared a tensor, which the rebuilt "
                                   f"{type(self).__name__} keeps apart and cannot join")
        for name, (owner, _, attr) in zip(names, owners):
            if tree[name] is not canonical:
                grad = canonical.requires_grad
                canonical.requires_grad_(True)  # a layer's setter takes a leaf that requires grad
                setattr(self.get_submodule(owner), attr, canonical)
                canonical.requires_grad_(grad)
        if pickled_t is not None and canonical is not pickled_t:
            values[fixed[0]] = pickled_t
    _RAW_LOAD_STATE_DICT(self, values, strict=False)
    modules = dict(self.named_modules())
    tensors = _RAW_STATE_DICT(self, keep_vars=True)
    for name, value in pickled["attributes"].items():
        object.__setattr__(self, name, _from_refs(value, modules, tensors))
    for name, flag in pickled["requires_grad"].items():
        tensors[name].requires_grad_(flag)
    for name, flag in pickled["training"].items():
        modules[name].training = flag


_classes = [nn.Module]
while _classes:  # the bound layers, each of which the package gave a refusing __reduce_ex__
    _cls = _classes.pop()
    _classes.extend(_cls.__subclasses__())
    if "__reduce_ex__" in vars(_cls) or _cls is nn.Module:
        _cls.__reduce_ex__ = _module_reduce_ex
nn.Module.__setstate__ = _module_setstate
Generator.__reduce_ex__ = _generator_reduce_ex
for _cls in _CONFIGS:
    _cls.__reduce_ex__ = _config_reduce_ex
models.Task.__reduce_ex__ = _task_reduce_ex
models.make_task = make_task
