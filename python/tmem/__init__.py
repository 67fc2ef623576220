"""tmem from Python: tensors with tape autograd, the op library, nn modules
(TensorMemory included), optimizers, safetensors and gradient dumps, and the
diagnostic tasks, models and trainer of `tmem train`.

The compiled part lives in tmem._tmem; this package re-exports it, makes
``tmem.nn``, ``tmem.optim`` and ``tmem.models`` importable, and gives ``tmem.nn.Module`` its
PyTorch-style attribute registration.
"""
import sys as _sys

from . import _tmem
from ._tmem import *  # noqa: F401,F403
from ._tmem import models, nn, optim, Tensor

_sys.modules[__name__ + ".nn"] = nn
_sys.modules[__name__ + ".optim"] = optim
_sys.modules[__name__ + ".models"] = models


def _module_setattr(self, name, value):
    """Registers modules and tensors that require grad assigned as attributes
    of a Module subclass (as torch.nn.Module does), then sets the attribute.
    Reassigning a registered name raises ValueError: change a parameter's
    values in place (copy_) instead."""
    if not name.startswith("_") and not hasattr(type(self), name):
        registered = self.__dict__.setdefault("_tmem_registered", set())
        is_module = isinstance(value, nn.Module)
        is_param = isinstance(value, Tensor) and value.requires_grad and value.is_leaf
        if (is_module or is_param) and name in registered:
            raise ValueError(f"nn.Module: '{name}' is already registered; change its values in place "
                             f"(copy_) instead of assigning a new one")
        if is_module:
            self.register_module(name, value)
            registered.add(name)
        elif is_param:
            self.register_parameter(name, value)
            registered.add(name)
    object.__setattr__(self, name, value)


def _parameter(data):
    """A leaf tensor that requires grad, sharing data's memory (torch.nn.Parameter)."""
    return data.detach().requires_grad_()


nn.Module.__setattr__ = _module_setattr
nn.Parameter = _parameter
