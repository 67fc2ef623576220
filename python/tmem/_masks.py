"""Masks as torch code combines them. tmem has no bool dtype: its
comparisons give int64 0/1 masks, which where, masked_fill and
masked_select take. Here: the comparison methods (x.eq, x.gt, ...),
logical_not/and/or/xor (int64 0/1), the bitwise operators & | ^ on int64
(torch's int64 semantics, so on 0/1 masks they are the logical ones),
isclose/allclose/equal, and Tensor.bool/int/type. ``~mask`` is refused:
on an int64 mask it would be bitwise (~1 = -2, still non-zero)."""
import operator as _operator

import numpy as _np

from . import _tmem
from ._tensor_ops import copy_in_place
from ._tmem import Tensor

_FLOAT = (_tmem.float32, _tmem.float64)


def _mask(x):
    """x != 0 as an int64 0/1 tensor (a number as a 0-d one)."""
    return (x if isinstance(x, Tensor) else _tmem.tensor(x)) != 0


def logical_not(input):
    """1 where input is 0, else 0 (torch.logical_not; int64, tmem has no bool)."""
    return _mask(input) == 0


def logical_and(input, other):
    """1 where both are non-zero, else 0 (torch.logical_and; int64, broadcast)."""
    return _mask(input) * _mask(other)


def logical_or(input, other):
    """1 where either is non-zero, else 0 (torch.logical_or; int64, broadcast)."""
    return (_mask(input) + _mask(other)) != 0


def logical_xor(input, other):
    """1 where exactly one is non-zero, else 0 (torch.logical_xor; int64, broadcast)."""
    return _mask(input) != _mask(other)


def _bitwise(name, op, symbol, reflected=False):
    """Tensor.__<name>__: op of two int64 operands (tensors, ints or bools),
    broadcast, on self's device (torch's int64 bitwise op). TypeError for a
    floating operand, as torch."""
    def method(self, other):
        if isinstance(other, float) or (isinstance(other, Tensor) and other.dtype in _FLOAT) or self.dtype in _FLOAT:
            kinds = [o.dtype if isinstance(o, Tensor) else type(o).__name__ for o in (self, other)]
            raise TypeError(f"{symbol}: expected int64 operands (tmem's comparisons give int64 0/1 masks), but got "
                            f"{kinds[0]} and {kinds[1]}")
        if isinstance(other, _np.ndarray) and _np.issubdtype(other.dtype, _np.integer):
            other = _tmem.tensor(other)
        if not isinstance(other, (Tensor, int)):
            return NotImplemented
        a = self.cpu().numpy()
        try:
            b = other.cpu().numpy() if isinstance(other, Tensor) else _np.asarray(other, dtype=_np.int64)
            return _tmem.tensor(op(b, a) if reflected else op(a, b)).to(self.device)
        except OverflowError:
            raise _tmem.ValueError(f"{symbol}: {other!r} does not fit int64") from None
        except ValueError:
            raise _tmem.ShapeError(f"{symbol}: the shapes {list(self.shape)} and {list(_np.shape(b))} do not "
                                   f"broadcast") from None
    method.__name__ = name
    method.__doc__ = f"self {symbol} other for int64 operands (torch.Tensor.{name})."
    return method


def _invert(self):
    raise TypeError("~: tmem has no bool dtype, and its comparisons give int64 0/1 masks, on which ~ would be "
                    "bitwise (~1 = -2, still non-zero); use logical_not(mask) or 1 - mask")


def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """1 where both are finite and |input - other| <= atol + rtol |other|,
    or they are equal (the same infinity), or with equal_nan both NaN, else
    0 (torch.isclose; int64, tmem has no bool)."""
    a, b = (x if isinstance(x, Tensor) else _tmem.tensor(x) for x in (input, other))
    if rtol < 0 or atol < 0:
        raise _tmem.ValueError(f"isclose: expected rtol and atol >= 0, but got rtol={rtol}, atol={atol}")
    if a.dtype not in _FLOAT and b.dtype not in _FLOAT:  # exactly, as Python ints (a - b would wrap)
        x, y = (t.cpu().numpy().astype(object) for t in (a, b))
        return _tmem.tensor((abs(x - y) <= atol + rtol * abs(y)).astype(_np.int64)).to(a.device)
    finite = ((a - a) == 0) * ((b - b) == 0)  # inf - inf and NaN - NaN are NaN
    close = ((a == b) + finite * ((a - b).abs() <= (b.abs() * rtol + atol))) != 0
    if equal_nan:
        close = (close + (a != a) * (b != b)) != 0
    return close


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Whether every element of input is close to other's (torch.allclose; a Python bool)."""
    close = isclose(input, other, rtol, atol, equal_nan)
    return close.numel() == 0 or bool(close.min().item())


def equal(input, other):
    """Whether input and other have the same shape and elements (torch.equal; a Python bool)."""
    return tuple(input.shape) == tuple(other.shape) and (input.numel() == 0 or
                                                         bool((input == other).min().item()))


def _type(self, dtype=None):
    """This tensor cast to dtype, or with none its type's name as torch
    names it ('tmem.FloatTensor', 'tmem.DoubleTensor', 'tmem.LongTensor')."""
    names = {"FloatTensor": _tmem.float32, "DoubleTensor": _tmem.float64, "LongTensor": _tmem.int64}
    if dtype is None:
        return "tmem." + next(k for k, v in names.items() if v == self.dtype)
    if isinstance(dtype, str):
        if dtype.rpartition(".")[2] not in names:
            raise TypeError(f"type: expected a dtype or one of {sorted(names)} (as 'torch.FloatTensor'), but got "
                            f"{dtype!r}")
        dtype = names[dtype.rpartition(".")[2]]
    return self.to(dtype)


def _compare(name, symbol, op):
    def compare(input, other):
        if not isinstance(input, Tensor):
            raise TypeError(f"{name}: expected input to be a tmem.Tensor, but got {type(input).__name__}")
        if isinstance(other, (list, tuple, _np.ndarray)):
            other = _tmem.tensor(other)
        out = op(input, other)
        if not isinstance(out, Tensor):  # the operator declined other: Python compared identities
            raise TypeError(f"{name}: expected other to be a tensor or a number, but got {type(other).__name__}")
        return out
    compare.__name__ = name
    compare.__doc__ = f"input {symbol} other as an int64 0/1 mask (torch.{name}; tmem has no bool)."
    return compare


def _in_place(name, method):
    """Tensor.__i<op>__: self = self <op> other written into self."""
    def write(self, other):
        return copy_in_place(self, method(self, other), name)
    write.__name__ = name
    return write


_AND, _OR, _XOR = (_bitwise(f"__{n}__", op, symbol) for n, op, symbol in
                   (("and", _np.bitwise_and, "&"), ("or", _np.bitwise_or, "|"), ("xor", _np.bitwise_xor, "^")))

FUNCTIONS = {"logical_not": logical_not, "logical_and": logical_and, "logical_or": logical_or,
             "logical_xor": logical_xor, "isclose": isclose, "allclose": allclose, "equal": equal,
             **{name: _compare(name, symbol, op) for name, symbol, op in
                (("eq", "==", _operator.eq), ("ne", "!=", _operator.ne), ("gt", ">", _operator.gt),
                 ("ge", ">=", _operator.ge), ("lt", "<", _operator.lt), ("le", "<=", _operator.le))}}

for _name, _fn in {**FUNCTIONS,
                   "__and__": _AND, "__or__": _OR, "__xor__": _XOR,
                   "__rand__": _bitwise("__rand__", _np.bitwise_and, "&", True),
                   "__ror__": _bitwise("__ror__", _np.bitwise_or, "|", True),
                   "__rxor__": _bitwise("__rxor__", _np.bitwise_xor, "^", True),
                   "__iand__": _in_place("&=", _AND), "__ior__": _in_place("|=", _OR),
                   "__ixor__": _in_place("^=", _XOR),
                   "__invert__": _invert,
                   "bool": lambda self: _mask(self),
                   "int": lambda self: self.long(),
                   "type": _type}.items():
    setattr(Tensor, _name, _fn)
