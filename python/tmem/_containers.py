"""tmem.nn.Sequential, ModuleList, ModuleDict, ParameterList and
ParameterDict, as torch.nn's: Python modules whose children (parameters)
are registered like any submodule (parameter) (names "0", "1", ... or the
dict's keys), so parameters get torch's names, and state_dict, to, train,
hooks and copy.deepcopy reach them. Each keeps its own list of
names (`_tmem_keys`), so a module held twice (Sequential(f, f)) runs twice,
where named_children lists it once."""
import operator as _operator
from collections import OrderedDict as _OrderedDict

from ._tmem import Tensor, nn


def _check_module(who, value):
    if not isinstance(value, nn.Module):
        raise TypeError(f"{who}: expected a tmem.nn.Module, but got {type(value).__name__}")


class _Container(nn.Module):
    """The shared part: the names in order, and adding one."""

    def __init__(self):
        super().__init__()
        self._tmem_keys = []

    def _add(self, who, key, module):
        _check_module(who, module)
        if not isinstance(key, str):
            raise TypeError(f"{who}: keys must be str, not {type(key).__name__}")
        self.register_module(key, module)
        self._tmem_keys.append(key)

    def unregister(self, name):
        """Module.unregister (also `del container.name`), which takes the
        name out of the container's list too."""
        super().unregister(name)
        self._tmem_keys = [k for k in self._tmem_keys if k != name]

    def __len__(self):
        return len(self._tmem_keys)

    def _modules_in_order(self):
        return [getattr(self, k) for k in self._tmem_keys]


class _Indexed(_Container):
    """Sequential and ModuleList: modules by position, named "0", "1", ..."""

    def _key(self, index):
        try:
            i = _operator.index(index)
        except TypeError:
            raise TypeError(f"{type(self).__name__} indices must be integers or slices, not "
                            f"{type(index).__name__}") from None
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"index {i} is out of range for a {type(self).__name__} of {n} modules")
        return self._tmem_keys[i % n]

    def __getitem__(self, index):
        if isinstance(index, slice):
            if isinstance(self, Sequential):  # its names kept, as torch's
                return Sequential(_OrderedDict(list(zip(self._tmem_keys, self._modules_in_order()))[index]))
            return ModuleList(self._modules_in_order()[index])
        return getattr(self, self._key(index))

    def __setitem__(self, index, module):
        if isinstance(index, slice):
            raise TypeError(f"{type(self).__name__} takes one module per index, not a slice assignment")
        _check_module(f"{type(self).__name__}.__setitem__", module)
        setattr(self, self._key(index), module)

    def _renumber(self, modules):
        """Registers `modules` again under "0", "1", ... (torch's del and
        insert renumber the names)."""
        for key in list(self._tmem_keys):
            super().unregister(key)
        self._tmem_keys = []
        for module in modules:
            self._add(type(self).__name__, str(len(self)), module)

    def unregister(self, name):
        """Module.unregister (also `del container.name`): the later modules
        are renumbered, as by del container[i]."""
        if name in self._tmem_keys:
            del self[self._tmem_keys.index(name)]
        else:
            super().unregister(name)

    def __delitem__(self, index):
        modules = self._modules_in_order()
        if isinstance(index, slice):
            del modules[index]
        else:
            del modules[self._tmem_keys.index(self._key(index))]
        self._renumber(modules)

    def pop(self, index=-1):
        """Removes and returns the module at index (the last by default)."""
        module = self[index]
        del self[index]
        return module

    def insert(self, index, module):
        """Puts module before position index (the later ones renumbered)."""
        _check_module(f"{type(self).__name__}.insert", module)
        modules = self._modules_in_order()
        modules.insert(_operator.index(index), module)
        self._renumber(modules)

    def extend(self, modules):
        """Appends each module in order; returns self."""
        for module in modules:
            self.append(module)
        return self

    def __iadd__(self, modules):
        return self.extend(modules)

    def __add__(self, other):
        return Sequential(*self, *other) if isinstance(self, Sequential) else ModuleList([*self, *other])

    def __iter__(self):
        return iter(self._modules_in_order())

    def append(self, module):
        """Adds module last, under the name str(len(self)); returns self."""
        self._add(f"{type(self).__name__}.append", str(len(self)), module)
        return self


class Sequential(_Indexed):
    """torch.nn.Sequential: forward(x) = m_{n-1}(...m_1(m_0(x))), each
    module called as a module (its hooks run); built from modules (named
    "0", "1", ...) or one OrderedDict (named by its keys), with
    ModuleList's methods. An empty Sequential is the identity. Raises
    TypeError for an argument that is not a module."""

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], _OrderedDict):
            for key, module in args[0].items():
                self._add("Sequential", key, module)
        else:
            for module in args:
                self._add("Sequential", str(len(self)), module)

    def forward(self, input):
        for module in self:
            input = module(input)
        return input


class ModuleList(_Indexed):
    """torch.nn.ModuleList: modules by position (named "0", "1", ...);
    append, extend, insert, pop, del, += and +, indexing (negative and
    slices; a slice is a new ModuleList of the same modules), assignment to
    an index, len and iteration (del, insert and pop renumber the names, as
    torch's). Its forward is the user's. Raises TypeError for an item that
    is not a module."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.extend(modules)


class _Keyed:
    """What ModuleDict and ParameterDict share: str keys in `_tmem_keys`
    (insertion order), each an attribute of the module."""

    def _check_key(self, key):
        if not isinstance(key, str):
            raise TypeError(f"{type(self).__name__} keys must be str, not {type(key).__name__}")

    def __getitem__(self, key):
        self._check_key(key)
        if key not in self._tmem_keys:
            raise KeyError(key)
        return getattr(self, key)

    def __contains__(self, key):
        return key in self._tmem_keys

    def __len__(self):
        return len(self._tmem_keys)

    def __iter__(self):
        return iter(list(self._tmem_keys))

    def keys(self):
        return list(self._tmem_keys)

    def values(self):
        return [getattr(self, k) for k in self._tmem_keys]

    def items(self):
        return list(zip(self._tmem_keys, self.values()))

    def update(self, pairs):
        """Adds or replaces each (key, value) of a mapping or of an iterable of pairs, in order."""
        for key, value in (pairs.items() if hasattr(pairs, "items") else pairs):
            self[key] = value


class ModuleDict(_Keyed, _Container):
    """torch.nn.ModuleDict: modules by str key in insertion order;
    d[key], d[key] = module (a new key goes last, a present one is replaced
    in its place), del d[key], pop, in, len, iteration over the keys,
    keys(), values(), items(), update(mapping or pairs) and clear(). A key
    that is a method's name ("keys") is refused with KeyError, as torch's;
    a missing key is a KeyError."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __setitem__(self, key, module):
        self._check_key(key)
        if key in self._tmem_keys:
            _check_module("ModuleDict.__setitem__", module)
            setattr(self, key, module)
        else:
            self._add("ModuleDict.__setitem__", key, module)

    def __delitem__(self, key):
        self._check_key(key)
        if key not in self._tmem_keys:
            raise KeyError(key)
        self.unregister(key)

    def pop(self, key):
        module = self[key]
        del self[key]
        return module

    def clear(self):
        for key in list(self._tmem_keys):
            del self[key]


def _parameter(who, value):
    """value as a parameter: a tensor that requires grad stays itself (as
    torch keeps a Parameter), another tensor becomes nn.Parameter(value)."""
    if not isinstance(value, Tensor):
        raise TypeError(f"{who}: expected a tmem.Tensor, but got {type(value).__name__}")
    return value if value.requires_grad and value.is_leaf else nn.Parameter(value)


class ParameterList(nn.Module):
    """torch.nn.ParameterList: parameters by position (named "0", "1",
    ...), a tensor that does not require grad made a parameter; append,
    extend, indexing (negative too), assignment to an index, len and
    iteration. Raises TypeError for an item that is not a tensor,
    IndexError for an index out of range."""

    def __init__(self, values=None):
        super().__init__()
        self._tmem_keys = []
        if values is not None:
            self.extend(values)

    def _key(self, index):
        i, n = _operator.index(index), len(self._tmem_keys)
        if not -n <= i < n:
            raise IndexError(f"index {i} is out of range for a ParameterList of {n} parameters")
        return self._tmem_keys[i % n]

    def __len__(self):
        return len(self._tmem_keys)

    def __iter__(self):
        return iter([getattr(self, k) for k in self._tmem_keys])

    def __getitem__(self, index):
        if isinstance(index, slice):
            return ParameterList([getattr(self, k) for k in self._tmem_keys[index]])
        return getattr(self, self._key(index))

    def __setitem__(self, index, value):
        setattr(self, self._key(index), _parameter("ParameterList.__setitem__", value))

    def append(self, value):
        """Adds value (as a parameter) last, named str(len(self)); returns self."""
        key = str(len(self))
        self.register_parameter(key, _parameter("ParameterList.append", value))
        self._tmem_keys.append(key)
        return self

    def extend(self, values):
        """Appends each value in order; returns self."""
        for value in values:
            self.append(value)
        return self


class ParameterDict(_Keyed, nn.Module):
    """torch.nn.ParameterDict: parameters by str key in insertion order (a
    tensor that does not require grad made a parameter); d[key] = value,
    d[key], del d[key], in, len, iteration over the keys, keys(), values(),
    items() and update(mapping or pairs). KeyError for a missing key,
    TypeError for a key that is not a str or a value that is not a tensor."""

    def __init__(self, parameters=None):
        super().__init__()
        self._tmem_keys = []
        if parameters is not None:
            self.update(parameters)

    def __setitem__(self, key, value):
        self._check_key(key)
        value = _parameter("ParameterDict.__setitem__", value)
        if key in self._tmem_keys:
            setattr(self, key, value)
        else:
            self.register_parameter(key, value)
            self._tmem_keys.append(key)

    def __delitem__(self, key):
        self._check_key(key)
        if key not in self._tmem_keys:
            raise KeyError(key)
        self.unregister(key)
        self._tmem_keys.remove(key)
