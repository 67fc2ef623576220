"""Devices as torch names them: tmem.device, Tensor.device, the keyword
forms of Tensor.to, and device= / requires_grad= on every factory, so
device-agnostic torch code (``torch.arange(T, device=x.device)``,
``batch.to(device, non_blocking=True)``) runs unchanged."""
import functools as _functools
import operator as _operator

from . import _tmem
from ._tmem import Tensor


class device(str):
    """torch.device as tmem names devices: the string 'cpu', 'cuda' or
    'cuda:<index>' (device('cuda', 1) and device(1) give 'cuda:1'), with
    torch's .type and .index; anything that takes a device name takes it.
    ValueError for another type or a negative index."""

    def __new__(cls, type, index=None):
        if isinstance(type, int) and not isinstance(type, bool) and index is None:
            type, index = "cuda", type
        if not isinstance(type, str) or type.split(":")[0] not in ("cpu", "cuda"):
            raise ValueError(f"device: expected 'cpu' or 'cuda' (optionally ':<index>'), but got {type!r}")
        if index is not None and (not isinstance(index, int) or isinstance(index, bool) or index < 0
                                  or ":" in type):
            raise ValueError(f"device: expected an index >= 0 for {type!r}, but got {index!r}")
        name = type if index is None else f"{type}:{index}"
        kind, colon, number = name.partition(":")
        if colon and not (number.isascii() and number.isdigit()):
            raise ValueError(f"device: expected an index >= 0 for {kind!r}, but got {number!r}")
        return super().__new__(cls, name)

    @property
    def type(self):
        """'cpu' or 'cuda'."""
        return self.partition(":")[0]

    @property
    def index(self):
        """The GPU's index, or None where the name gives none."""
        number = self.partition(":")[2]
        return int(number) if number else None

    def __repr__(self):
        return f"device(type='{self.type}')" if self.index is None else \
            f"device(type='{self.type}', index={self.index})"

    def __reduce__(self):
        return device, (str(self),)


_Device, _RAW_TO, _RAW_DEVICE = device, Tensor.to, Tensor.device


def _to(self, *args, device=None, dtype=None, non_blocking=False, copy=False, memory_format=None):
    """This tensor on device and/or cast to dtype (torch.Tensor.to): to(dtype),
    to(device, dtype), to(other) (other's device and dtype), or the keywords.
    non_blocking is accepted (copies are synchronous); copy=True gives a new
    tensor even when nothing changes. TypeError for another argument."""
    if memory_format is not None and str(memory_format) not in ("torch.preserve_format", "preserve_format"):
        raise ValueError(f"to: memory_format {memory_format!r} is not supported (tmem tensors are row-major)")
    rest = list(args)
    if rest and isinstance(rest[0], Tensor):
        other = rest.pop(0)
        device, dtype = other.device, other.dtype
    elif rest and (isinstance(rest[0], str) or (isinstance(rest[0], int) and not isinstance(rest[0], bool))):
        device = rest.pop(0)
    if rest and not isinstance(rest[0], bool) and dtype is None:
        dtype = rest.pop(0)
    if rest and isinstance(rest[0], bool):
        non_blocking = rest.pop(0)
    if rest and isinstance(rest[0], bool):
        copy = rest.pop(0)
    if rest:
        raise TypeError(f"to: unexpected arguments {tuple(rest)!r}; expected to(dtype), to(device, dtype), "
                        f"to(other) or the keywords device=, dtype=, non_blocking=, copy=")
    out = self
    if device is not None:
        out = _RAW_TO(out, _Device(device))
    if dtype is not None:
        out = _RAW_TO(out, dtype)
    return out.clone() if copy and out is self else out


def with_device(factory):
    """factory taking torch's device= and requires_grad= as well: its
    tensor moved to device, then made a leaf that requires grad."""
    @_functools.wraps(factory)
    def made(*args, device=None, requires_grad=False, **kwargs):
        out = factory(*args, **kwargs)
        if device is not None:
            out = _to(out, device)
        return out.requires_grad_() if requires_grad else out
    return made


def is_tensor(obj):
    """Whether obj is a tmem Tensor (torch.is_tensor)."""
    return isinstance(obj, Tensor)


def as_tensor(data, dtype=None, device=None):
    """data as a tensor (torch.as_tensor): a tensor itself when it already
    has dtype and device, else a copy converted to them."""
    if isinstance(data, Tensor):
        return _to(data, device=device, dtype=dtype)
    return _to(_tmem.tensor(data, dtype=dtype), device=device)


def randperm(n, *, generator=None, dtype=None):
    """A random permutation of 0 .. n-1, int64 (torch.randperm), from the
    sort of n uniform draws of generator (the default one when None)."""
    try:
        n = _operator.index(n) if not isinstance(n, bool) else n + ""
    except TypeError:
        raise TypeError(f"randperm: expected n to be an int, but got {n!r}") from None
    if n < 0:
        raise ValueError(f"randperm: expected n >= 0, but got {n}")
    order = _tmem.rand(n, dtype=_tmem.float64, generator=generator).numpy().argsort(kind="stable")
    return _tmem.tensor(order) if dtype is None else _tmem.tensor(order, dtype=dtype)


Tensor.to = _to
Tensor.device = property(lambda self: device(_RAW_DEVICE.fget(self)),
                         doc="The device this tensor is on (torch.Tensor.device): 'cpu' or 'cuda:<index>'.")
