"""torch's everyday tensor functions that tmem's C++ op library does not
have as ops, written over the ops (so they differentiate through them):
factories (linspace, eye, the *_like and new_* families), element-wise
(square, maximum, minimum, isnan, isinf, isfinite), reductions (std, norm,
logsumexp, amax, amin, all, any), shape (flip, roll, repeat, chunk, tril,
triu, view_as, expand_as, mT), products (mm, dot, outer), Tensor methods
(type_as, is_floating_point, in-place forms such as masked_fill_ and
clamp_, uniform_ and normal_) and tmem.nn.init. Each follows torch 1.13's
definition (values, result dtypes, the gradient at ties and at zero) and
raises the error of the op it is written over, or one naming itself.
tmem has no bool dtype: what torch returns as bool (isnan, all) is int64
0/1, as tmem's comparisons."""
import builtins as _builtins
import collections as _collections
import functools as _functools
import inspect as _inspect
import math as _math
import numbers as _numbers

import numpy as _np

from . import _tmem
from ._tmem import Tensor

_FLOAT = (_tmem.float32, _tmem.float64)


def _dims(dim, ndim, who):
    """dim (None: all, an int or a sequence of ints) as sorted, distinct,
    non-negative dims of a tensor of ndim dims."""
    if dim is None:
        return list(range(ndim))
    dims = [dim] if isinstance(dim, int) else list(dim)
    out = []
    for d in dims:
        if not isinstance(d, int) or isinstance(d, bool) or not -max(ndim, 1) <= d < max(ndim, 1):
            raise _tmem.IndexError(f"{who}: dim {d!r} is out of range for a tensor of {ndim} dims")
        out.append(d % max(ndim, 1))
    if len(set(out)) != len(out):
        raise _tmem.ValueError(f"{who}: dim {dim!r} names a dim twice")
    return sorted(out) if ndim else []  # a 0-d tensor takes dim 0 or -1, as torch's sum: nothing to reduce


def _reduce(x, dims, keepdim, fn):
    """fn(x, d, keepdim=True) applied over each dim of dims, then the dims
    dropped unless keepdim."""
    for d in dims:
        x = fn(x, d)
    if not keepdim:
        for d in reversed(dims):
            x = x.squeeze(d) if x.dim() else x
    return x


# ---- grad modes ----

def decorate(make_context, fn):
    """fn run inside make_context() (a fresh context manager per call), as
    torch's grad-mode decorators: a generator function's body runs inside it
    at each step, not only while the generator object is made (torch's
    _wrap_generator)."""
    if not _inspect.isgeneratorfunction(fn):
        @_functools.wraps(fn)
        def inside(*args, **kwargs):
            with make_context():
                return fn(*args, **kwargs)
        return inside

    @_functools.wraps(fn)
    def generator(*args, **kwargs):
        gen = fn(*args, **kwargs)
        try:
            with make_context():
                response = gen.send(None)
            while True:
                try:
                    request = yield response
                except GeneratorExit:
                    with make_context():
                        gen.close()
                    raise
                except BaseException as e:
                    with make_context():
                        response = gen.throw(e)
                else:
                    with make_context():
                        response = gen.send(request)
        except StopIteration as e:
            return e.value
    return generator


class enable_grad:
    """Context manager and decorator: ops inside record on the tape, also
    inside no_grad (torch.enable_grad); the mode found is restored after."""

    def __init__(self):
        self._found = []

    def __enter__(self):
        self._found.append(_tmem.is_grad_enabled())
        _tmem._set_grad_enabled(True)

    def __exit__(self, *exc):
        _tmem._set_grad_enabled(self._found.pop())
        return False

    def __call__(self, fn):
        return decorate(type(self), fn)


class set_grad_enabled(enable_grad):
    """torch.set_grad_enabled(mode): sets the mode at once, so that a call
    on its own keeps it; as a context manager (``with
    set_grad_enabled(training):``) it restores the mode it found on exit.
    TypeError for a mode that is not a bool."""

    def __init__(self, mode):
        if not isinstance(mode, bool):
            raise TypeError(f"set_grad_enabled: expected mode to be a bool, but got {mode!r}")
        self._mode, self._before, self._found = mode, _tmem.is_grad_enabled(), []
        _tmem._set_grad_enabled(mode)

    def __enter__(self):
        # The first block restores the mode before the call; a later one (the object reused) the mode it finds.
        self._found.append(self._before if self._before is not None else _tmem.is_grad_enabled())
        self._before = None
        _tmem._set_grad_enabled(self._mode)

    def __call__(self, fn):
        _tmem._set_grad_enabled(self._before if self._before is not None else _tmem.is_grad_enabled())
        self._before = None
        return decorate(lambda: set_grad_enabled(self._mode), fn)


class inference_mode(set_grad_enabled):
    """torch.inference_mode(mode=True): no_grad inside (mode True) or
    nothing (False); tmem has no separate inference tensors."""

    def __init__(self, mode=True):
        if not isinstance(mode, bool):
            raise TypeError(f"inference_mode: expected mode to be a bool, but got {mode!r}")
        self._mode, self._found = not mode, []

    def __enter__(self):
        self._found.append(_tmem.is_grad_enabled())
        _tmem._set_grad_enabled(self._mode and self._found[-1])

    def __call__(self, fn):
        return decorate(lambda: inference_mode(not self._mode), fn)


# ---- factories ----

def linspace(start, end, steps, *, dtype=None, requires_grad=False):
    """steps values from start to end, evenly spaced (torch.linspace): [steps],
    float32 unless dtype. ValueError for steps < 0."""
    if not isinstance(steps, int) or steps < 0:
        raise _tmem.ValueError(f"linspace: steps must be an int >= 0, but got {steps!r}")
    dtype = dtype or _tmem.float32
    # torch's kernel, in the dtype's arithmetic: start + i * step for the first half, end - (steps - 1 - i) * step
    # for the rest.
    real = _np.float64 if dtype == _tmem.float64 else _np.float32
    lo, hi = real(start), real(end)
    step = (hi - lo) / real(max(steps - 1, 1))
    i = _np.arange(steps).astype(real)
    values = _np.where(i < steps // 2, lo + step * i, hi - step * (real(steps - 1) - i)) if steps > 1 else \
        _np.full(steps, lo)
    return _tmem.tensor(values, dtype=dtype, requires_grad=requires_grad)


def eye(n, m=None, *, dtype=None, requires_grad=False):
    """The n x m identity matrix (torch.eye): [n, m] (m defaults to n),
    float32 unless dtype."""
    m = n if m is None else m
    for name, v in (("n", n), ("m", m)):
        if not isinstance(v, int) or v < 0:
            raise _tmem.ValueError(f"eye: {name} must be an int >= 0, but got {v!r}")
    out = _tmem.tensor(_np.eye(n, m), dtype=dtype or _tmem.float32)
    return out.requires_grad_() if requires_grad else out


def zeros_like(input, *, dtype=None, requires_grad=False):
    """Zeros of input's shape and device, of input's dtype unless dtype (torch.zeros_like)."""
    out = _ZEROS_LIKE(input) if dtype in (None, input.dtype) else _tmem.zeros(input.shape, dtype=dtype).to(input.device)
    return out.requires_grad_() if requires_grad else out


def ones_like(input, *, dtype=None, requires_grad=False):
    """Ones of input's shape and device, of input's dtype unless dtype (torch.ones_like)."""
    out = _ONES_LIKE(input) if dtype in (None, input.dtype) else _tmem.ones(input.shape, dtype=dtype).to(input.device)
    return out.requires_grad_() if requires_grad else out


def empty_like(input, *, dtype=None, requires_grad=False):
    """A tensor of input's shape and device, of input's dtype unless dtype
    (torch.empty_like; tmem fills it with zeros)."""
    return zeros_like(input, dtype=dtype, requires_grad=requires_grad)


def full_like(input, fill_value, *, dtype=None, requires_grad=False):
    """fill_value in input's shape and device, of input's dtype unless dtype (torch.full_like)."""
    out = _tmem.full(tuple(input.shape), fill_value, dtype=dtype or input.dtype).to(input.device)
    return out.requires_grad_() if requires_grad else out


def rand_like(input, *, dtype=None, requires_grad=False, generator=None):
    """U[0, 1) samples in input's shape and device (torch.rand_like); a floating dtype."""
    out = _tmem.rand(*input.shape, dtype=dtype or input.dtype, generator=generator).to(input.device)
    return out.requires_grad_() if requires_grad else out


def randn_like(input, *, dtype=None, requires_grad=False, generator=None):
    """N(0, 1) samples in input's shape and device (torch.randn_like); a floating dtype."""
    out = _tmem.randn(*input.shape, dtype=dtype or input.dtype, generator=generator).to(input.device)
    return out.requires_grad_() if requires_grad else out


def randint(*args, low=None, high=None, size=None, generator=None, dtype=None):
    """int64 samples uniform in [low, high) (torch.randint(low=0, high, size)):
    randint(high, size) or randint(low, high, size), positional or by
    keyword. ValueError for high <= low or a range over 2**63 - 1."""
    args = (*args, *(v for v in (low, high, size) if v is not None))
    if low is None and high is not None and len(args) == 2:
        args = (0, *args)
    if len(args) == 2:
        low, (high, size) = 0, args
    elif len(args) == 3:
        low, high, size = args
    else:
        raise TypeError(f"randint: expected (high, size) or (low, high, size), but got {len(args)} arguments")
    if not isinstance(low, int) or not isinstance(high, int) or high <= low:
        raise _tmem.ValueError(f"randint: expected ints low < high, but got low {low!r} and high {high!r}")
    if high - low >= 2**63 or low < -2**63 or high > 2**63:
        raise _tmem.ValueError(f"randint: the range [{low}, {high}) is wider than int64 can draw from (2**63 - 1)")
    out = _RANDINT(high - low, size, generator=generator)
    out = out + low if low else out
    return out if dtype in (None, _tmem.int64) else out.to(dtype)


def _new(method):
    def new(self, *args, dtype=None, requires_grad=False, **kwargs):
        out = method(self, *args, dtype=dtype or self.dtype, **kwargs).to(self.device)
        return out.requires_grad_() if requires_grad else out
    return new


# ---- element-wise ----

def square(input):
    """input * input (torch.square)."""
    return input * input


def isnan(input):
    """1 where input is NaN, else 0 (torch.isnan; int64: tmem has no bool)."""
    return input != input


def isinf(input):
    """1 where input is +-inf, else 0 (torch.isinf; int64)."""
    return abs(input) == _math.inf if input.dtype in _FLOAT else _tmem.zeros_like(input)


def isfinite(input):
    """1 where input is neither NaN nor +-inf, else 0 (torch.isfinite; int64)."""
    return (input == input) * (abs(input) != _math.inf) if input.dtype in _FLOAT else _tmem.ones_like(input)


def _extremum(input, other, greater, who):
    if not isinstance(input, Tensor) or not isinstance(other, Tensor):
        raise TypeError(f"{who}: expected two tensors, but got {type(input).__name__} and {type(other).__name__}")
    if input.dtype != other.dtype:  # torch's promotion: float64 over float32, a float over int64
        wide = _tmem.float64 if _tmem.float64 in (input.dtype, other.dtype) else _tmem.float32
        input, other = input.to(wide), other.to(wide)
    if input.dtype not in _FLOAT:
        return _tmem.where(greater(input, other), input, other)
    pick = greater(input, other) + isnan(input)
    tie = input == other
    # At a tie each side gets half the gradient, as torch's; the halves sum to the value exactly.
    return _tmem.where(tie, input * 0.5 + other * 0.5, _tmem.where(pick, input, other))


def maximum(input, other):
    """The element-wise maximum of two tensors, broadcast (torch.maximum):
    NaN where either is NaN; at a tie each gets half the gradient."""
    return _extremum(input, other, lambda a, b: a > b, "maximum")


def minimum(input, other):
    """The element-wise minimum of two tensors, broadcast (torch.minimum):
    NaN where either is NaN; at a tie each gets half the gradient."""
    return _extremum(input, other, lambda a, b: a < b, "minimum")


# ---- reductions ----

def std(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """The standard deviation over dim (torch.std): sqrt(var) with Bessel's
    correction (correction=1, or unbiased=True) unless correction=0 or
    unbiased=False; its gradient is 0 where it is 0, as torch's."""
    if unbiased is not None and correction is not None:
        raise _tmem.ValueError("std: give unbiased or correction, not both")
    c = correction if correction is not None else (0 if unbiased is False else 1)
    v = _VAR(input, dim, correction=c, keepdim=keepdim)
    zero = v == 0
    return _tmem.where(zero, 0.0, _tmem.sqrt(_tmem.where(zero, 1.0, v)))  # the gradient at std 0 is 0, as torch's


def _var(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """Variance over dims (torch.var): Bessel's correction (1) unless
    correction=0 or unbiased=False."""
    if unbiased is not None and correction is not None:
        raise _tmem.ValueError("var: give unbiased or correction, not both")
    c = correction if correction is not None else (0 if unbiased is False else 1)
    return _VAR(input, dim, correction=c, keepdim=keepdim)


def norm(input, p="fro", dim=None, keepdim=False):
    """The p-norm over dim (torch.norm; all elements when dim is None): p 2
    or 'fro' (whose gradient at a zero input is 0, as torch's), 1, inf or
    -inf, or another number > 0. ValueError for another p."""
    if p == "fro":
        p = 2
    if not isinstance(p, (int, float)) or isinstance(p, bool) or not (p > 0 or p in (_math.inf, -_math.inf)):
        raise _tmem.ValueError(f"norm: p must be 'fro', inf, -inf or a number > 0, but got {p!r}")
    dims = _dims(dim, input.dim(), "norm")
    a = abs(input)
    if p == _math.inf:
        return amax(a, dims, keepdim=keepdim)
    if p == -_math.inf:
        return amin(a, dims, keepdim=keepdim)
    if p == 1:
        return _tmem.sum(a, tuple(dims), keepdim=keepdim)
    s = _tmem.sum(a * a if p == 2 else a ** p, tuple(dims), keepdim=keepdim)
    zero = s == 0
    safe = _tmem.where(zero, 1.0, s)  # so that a zero norm's gradient is 0, not 0 * inf; NaN stays NaN
    root = _tmem.sqrt(safe) if p == 2 else safe ** (1.0 / p)
    return _tmem.where(zero, 0.0, root)


def logsumexp(input, dim, keepdim=False):
    """log(sum(exp(input))) over dim, computed stably (torch.logsumexp)."""
    if not isinstance(dim, int) and len(list(dim)) == 0:
        raise _tmem.ValueError("logsumexp: expected a dim or a non-empty sequence of dims")
    dims = _dims(dim, input.dim(), "logsumexp")
    m = amax(input.detach(), dims, keepdim=True)
    m = _tmem.where(isfinite(m), m, 0.0)
    out = _tmem.log(_tmem.sum(_tmem.exp(input - m), tuple(dims), keepdim=True)) + m
    return _reduce(out, dims, keepdim, lambda x, d: x)


def _amax(input, dim, keepdim, greatest, who):
    dims = _dims(None if dim is not None and not isinstance(dim, int) and len(list(dim)) == 0 else dim,
                 input.dim(), who)
    if input.numel() == 0 and (not dims or _builtins.any(input.shape[d] == 0 for d in dims)):
        raise _tmem.ShapeError(f"{who}: cannot reduce over a dim of size 0 (the input's shape is {input.shape})")

    def pick(x, d):
        return (x.max(d, keepdim=True) if greatest else x.min(d, keepdim=True)).values
    m = _reduce(input.detach(), dims, True, pick)
    if input.dtype not in _FLOAT or not input.requires_grad:
        return _reduce(m, dims, keepdim, lambda x, d: x)
    # The gradient is shared evenly among the elements at the extremum, as torch's amax: the mean of those
    # elements, each scaled before the sum so nothing overflows. Its value is m exactly for one or two of them
    # and for infinities; otherwise m + (mean - mean) keeps m's value and the mean's gradient.
    hit = input == m
    count = _tmem.sum(hit, tuple(dims), keepdim=True) if dims else hit
    share = 1.0 / _tmem.where(count == 0, 1, count).to(input.dtype)
    mean = _tmem.sum(_tmem.where(hit, input * share, 0.0), tuple(dims), keepdim=True) if dims else \
        _tmem.where(hit, input * share, 0.0)
    out = _tmem.where((count <= 2) + (1 - isfinite(m)), mean, m + (mean - mean.detach()))
    out = _tmem.where(isnan(m), m, out)
    return _reduce(out, dims, keepdim, lambda x, d: x)


def amax(input, dim=(), keepdim=False):
    """The maximum over dim (torch.amax; every dim for ()); the gradient is
    shared evenly among the elements at the maximum."""
    return _amax(input, None if dim == () else dim, keepdim, True, "amax")


def amin(input, dim=(), keepdim=False):
    """The minimum over dim (torch.amin; every dim for ()); the gradient is
    shared evenly among the elements at the minimum."""
    return _amax(input, None if dim == () else dim, keepdim, False, "amin")


def all(input, dim=None, keepdim=False):
    """1 where every element over dim is non-zero, else 0 (torch.all; int64, tmem has no bool)."""
    dims = _dims(dim, input.dim(), "all")
    zero = (input == 0).to(_tmem.int64)
    count = _tmem.sum(zero, tuple(dims), keepdim=keepdim) if dims else zero
    return count == 0


def any(input, dim=None, keepdim=False):
    """1 where some element over dim is non-zero, else 0 (torch.any; int64, tmem has no bool)."""
    dims = _dims(dim, input.dim(), "any")
    nonzero = (input != 0).to(_tmem.int64)
    count = _tmem.sum(nonzero, tuple(dims), keepdim=keepdim) if dims else nonzero
    return count > 0


def _extremum_or_reduction(reduction, elementwise, who):
    def function(input, dim=None, keepdim=False, *, other=None):
        if other is not None:
            dim = other
        if isinstance(dim, Tensor):  # torch.max(a, b): the element-wise maximum
            if keepdim is not False:
                raise TypeError(f"{who}: keepdim does not go with a second tensor")
            return elementwise(input, dim)
        return reduction(input, dim, keepdim)
    function.__name__ = who
    function.__doc__ = (f"torch.{who}: the {who}imum of input (0-d), or (values, indices) along dim; with a tensor "
                        f"for dim, the element-wise {who}imum of the two ({who}imum).")
    return function


def split(tensor, split_size_or_sections, dim=0):
    """tensor cut along dim into pieces of split_size_or_sections elements
    (the last may be smaller), or of the sizes in a list of them
    (torch.split). ValueError when the sizes do not add up to the dim's."""
    if tensor.dim() == 0:
        raise _tmem.ShapeError("split: expected a tensor of at least 1 dim, but got a 0-d tensor")
    if isinstance(split_size_or_sections, _numbers.Integral):
        return _SPLIT(tensor, int(split_size_or_sections), dim)
    sizes = list(split_size_or_sections)
    d = _dims(dim, tensor.dim(), "split")[0]
    integral = _builtins.all(isinstance(n, _numbers.Integral) and n >= 0 for n in sizes)
    if not integral or sum(sizes) != tensor.shape[d]:
        raise _tmem.ValueError(f"split: the sizes {sizes} do not add up to the {tensor.shape[d]} elements of dim {dim}")
    out, start = [], 0
    for n in map(int, sizes):
        out.append(tensor.narrow(d, start, n))
        start += n
    return out


_SortResult = _collections.namedtuple("sort", ["values", "indices"])


def _order(input, dim, descending, who):
    """The int64 indices that sort input along dim (stable; NaN greatest, as torch's)."""
    dims = _dims(dim, input.dim(), who)
    d = dims[0] if dims else 0
    x = _np.moveaxis(input.detach().cpu().numpy(), d, -1) if input.dim() else input.detach().numpy().reshape(1)
    if x.size == 0:
        return _tmem.zeros(tuple(input.shape), dtype=_tmem.int64).to(input.device), d
    nan = _np.isnan(x) if x.dtype.kind == "f" else _np.zeros(x.shape, bool)
    key = _np.where(nan, 0, x)
    # lexsort sorts by the last key first: NaN last ascending, first descending; ties keep their order. An
    # integer key is reversed by ~ (-x overflows at -2**63).
    reversed_key = -key if x.dtype.kind == "f" else ~key
    keys = (reversed_key if descending else key, ~nan if descending else nan)
    flat = [_np.lexsort(tuple(k[i] for k in keys)) for i in _np.ndindex(x.shape[:-1])] if x.ndim > 1 else \
        [_np.lexsort(keys)]
    order = _np.stack(flat).reshape(x.shape) if x.ndim > 1 else flat[0]
    order = _np.moveaxis(order, -1, d) if input.dim() else order.reshape(())
    return _tmem.tensor(_np.ascontiguousarray(order, dtype=_np.int64)).to(input.device), d


def sort(input, dim=-1, descending=False, stable=False):
    """(values, indices) of input sorted along dim (torch.sort): ascending
    unless descending, NaN as the greatest value, equal values in their
    order (stable, whatever `stable` says); values differentiate through a
    gather."""
    if input.dim() == 0:
        _dims(dim, 0, "sort")
        return _SortResult(input, _tmem.zeros((), dtype=_tmem.int64))
    indices, d = _order(input, dim, descending, "sort")
    return _SortResult(_tmem.gather(input, d, indices), indices)


def argsort(input, dim=-1, descending=False, stable=False):
    """The int64 indices that sort input along dim (torch.argsort; as sort's)."""
    return sort(input, dim, descending, stable).indices


def topk(input, k, dim=-1, largest=True, sorted=True):
    """(values, indices) of the k largest (or smallest) elements along dim
    (torch.topk), in sorted order. ValueError for k outside [0, size]."""
    dims = _dims(dim, input.dim(), "topk")
    d = dims[0] if dims else 0
    size = input.shape[d] if input.dim() else 1
    if not isinstance(k, int) or not 0 <= k <= size:
        raise _tmem.ValueError(f"topk: k ({k!r}) is out of range for a dim of size {size}")
    values, indices = sort(input, d, descending=largest)
    if input.dim():
        values, indices = values.narrow(d, 0, k), indices.narrow(d, 0, k)
    return _SortResult(values, indices)


def cumsum(input, dim, *, dtype=None):
    """Running sums along dim (torch.cumsum). The values are NumPy's, added
    up in float64 as torch's kernel does for float32 (so inf and NaN stay
    where they start, and float32 overflow happens only in the result); a
    floating input's gradient (the reversed running sum of the output's)
    flows through products with triangles of ones in blocks of 1024, over
    the input with non-finite values zeroed (their own gradient is 0 where
    torch passes it)."""
    if dim is None or isinstance(dim, bool) or not isinstance(dim, int):
        raise TypeError(f"cumsum: expected dim to be an int, but got {dim!r}")
    x = input if dtype is None else input.to(dtype)
    dims = _dims(dim, x.dim(), "cumsum")
    if x.dim() == 0 or x.numel() == 0:
        return x * 1
    d = dims[0]
    raw = x.detach().cpu().numpy()
    if x.dtype not in _FLOAT:
        if x.requires_grad:
            raise _tmem.DtypeError("cumsum: an int64 tensor that requires grad")
        return _tmem.tensor(_np.cumsum(raw, axis=d)).to(x.device)
    with _np.errstate(over="ignore"):  # a float32 sum beyond its range is inf, as torch's
        values = _tmem.tensor(_np.cumsum(raw, axis=d, dtype=_np.float64).astype(raw.dtype)).to(x.device)
    if not x.requires_grad or not _tmem.is_grad_enabled():
        return values
    finite = _tmem.where(isfinite(x), x, 0.0).to(_tmem.float64)
    moved = _tmem.transpose(finite, d, x.dim() - 1) if d != x.dim() - 1 else finite
    n, block, pieces, carry = moved.shape[-1], 1024, [], None
    for start in range(0, n, block):
        width = min(block, n - start)
        tri = _tmem.tensor(_np.triu(_np.ones((width, width))), dtype=_tmem.float64).to(x.device)
        piece = moved.narrow(-1, start, width) @ tri
        piece = piece if carry is None else piece + carry
        carry = piece.narrow(-1, width - 1, 1)
        pieces.append(piece)
    carrier = pieces[0] if len(pieces) == 1 else _tmem.cat(pieces, -1)
    carrier = _tmem.transpose(carrier, d, x.dim() - 1) if d != x.dim() - 1 else carrier
    return values + (carrier - carrier.detach()).to(x.dtype)  # the values, and the running sums' gradient


def prod(input, dim=None, keepdim=False, *, dtype=None):
    """The product over dim (torch.prod; of every element, a 0-d result,
    for dim None), of input cast to dtype first when given; 1 over an empty
    dim. A floating input is multiplied as a pairwise tree of muls, so its
    gradient is the product of the other elements, exact where some are 0
    (torch's); int64 products wrap around as torch's (NumPy's). Raises
    TypeError for a dim that is not an int, IndexError for one out of
    range, DtypeError for an int64 tensor that requires grad."""
    if dim is not None and (isinstance(dim, bool) or not isinstance(dim, int)):
        raise TypeError(f"prod: expected dim to be an int or None, but got {dim!r}")
    x = input if dtype is None else input.to(dtype)
    if dim is None:
        x, keepdim = x.reshape(-1), False
    d = _dims(0 if dim is None else dim, x.dim(), "prod")
    if not d:  # a 0-d tensor: its own product
        return x * 1
    d = d[0]
    if x.dtype not in _FLOAT:
        if x.requires_grad:
            raise _tmem.DtypeError("prod: an int64 tensor that requires grad")
        return _tmem.tensor(_np.prod(x.cpu().numpy(), axis=d, keepdims=keepdim)).to(x.device)
    if x.shape[d] == 0:  # 1, connected to x (its gradient is empty)
        return _tmem.sum(x, (d,), keepdim=keepdim) * 0.0 + 1.0
    lead = (slice(None),) * d
    while x.shape[d] > 1:
        if x.shape[d] % 2:
            x = _tmem.cat([x, _tmem.ones_like(x.narrow(d, 0, 1))], d)
        x = x[lead + (slice(0, None, 2),)] * x[lead + (slice(1, None, 2),)]
    return x if keepdim else x.squeeze(d)


def multinomial(input, num_samples, replacement=False, *, generator=None):
    """num_samples int64 category indices per row of the non-negative
    weights input ([C] or [N, C]; torch.multinomial), drawn by inverse CDF
    from uniform draws of generator (the default one when None); without
    replacement a drawn category's weight is set to 0 before the next draw.
    ValueError for weights that are negative, NaN or infinite, a row whose
    sum is 0, or (without replacement) more samples than non-zero weights."""
    if not isinstance(input, Tensor):
        raise TypeError(f"multinomial: expected input to be a tmem.Tensor, but got {type(input).__name__}")
    if input.dim() not in (1, 2):
        raise _tmem.ShapeError(f"multinomial: expected weights of shape [C] or [N, C], but got {tuple(input.shape)}")
    if isinstance(num_samples, bool) or not isinstance(num_samples, int) or num_samples <= 0:
        raise _tmem.ValueError(f"multinomial: expected num_samples to be an int > 0, but got {num_samples!r}")
    weights = _np.array(input.detach().cpu().numpy(), dtype=_np.float64, ndmin=2)
    if not _np.isfinite(weights).all() or (weights < 0).any():
        raise _tmem.ValueError("multinomial: expected finite, non-negative weights, but got negative, NaN or "
                               "infinite ones")
    if (weights.sum(1) == 0).any():
        raise _tmem.ValueError("multinomial: a row of weights sums to 0")
    if not replacement and ((weights > 0).sum(1) < num_samples).any():
        raise _tmem.ValueError(f"multinomial: cannot draw {num_samples} samples without replacement from a row "
                               f"with fewer non-zero weights")
    rows = weights.shape[0]
    if replacement:
        draws = _tmem.rand(rows, num_samples, dtype=_tmem.float64, generator=generator).numpy()
        cdf = _np.cumsum(weights, 1)
        out = _np.stack([_np.searchsorted(c, d * c[-1], side="right") for c, d in zip(cdf, draws)])
        out = _np.minimum(out, weights.shape[1] - 1)
        last = _np.maximum.accumulate(_np.where(weights > 0, _np.arange(weights.shape[1]), 0), 1)
        out = _np.take_along_axis(last, out, 1)  # a draw on the edge of zero weights: the category before
    else:  # Efraimidis and Spirakis: the num_samples largest u^(1/w) are a draw without replacement
        u = _tmem.rand(rows, weights.shape[1], dtype=_tmem.float64, generator=generator).numpy()
        with _np.errstate(divide="ignore"):
            keys = _np.where(weights > 0, _np.log(_np.maximum(u, 1e-300)) / weights, -_np.inf)
        out = _np.argsort(-keys, 1, kind="stable")[:, :num_samples]
    return _tmem.tensor(out.astype(_np.int64) if input.dim() == 2 else out[0].astype(_np.int64)).to(input.device)


def nan_to_num(input, nan=0.0, posinf=None, neginf=None):
    """input with NaN replaced by nan (None: 0) and +-inf by posinf / neginf (by
    default the dtype's largest and lowest finite values; torch.nan_to_num);
    the gradient flows where input is finite."""
    if input.dtype not in _FLOAT:
        return input * 1
    kind = _np.float32 if input.dtype == _tmem.float32 else _np.float64
    info = _np.finfo(kind)
    for name, value in (("nan", nan), ("posinf", posinf), ("neginf", neginf)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, _numbers.Real)):
            raise TypeError(f"nan_to_num: expected {name} to be a number, but got {value!r}")
    with _np.errstate(over="ignore"):  # 1e39 is inf in float32, as torch's
        nan, high, low = (float(kind(v)) for v in (0.0 if nan is None else nan,
                                                   info.max if posinf is None else posinf,
                                                   info.min if neginf is None else neginf))
    out = _tmem.where(input != input, nan, input)
    return _tmem.where(input == _math.inf, high, _tmem.where(input == -_math.inf, low, out))


_RAW_SUM, _RAW_ROUND = _tmem.sum, _tmem.round
_RAW_ADD, _RAW_SUB, _RAW_POW, _RAW_CLAMP = _tmem.add, _tmem.sub, _tmem.pow, _tmem.clamp
_RAW_REPEAT_INTERLEAVE, _RAW_CAT, _RAW_STACK = _tmem.repeat_interleave, _tmem.cat, _tmem.stack


def _add(input, other, *, alpha=1):
    """input + alpha other (torch.add)."""
    return _RAW_ADD(input, other if alpha == 1 else other * alpha)


def _sub(input, other, *, alpha=1):
    """input - alpha other (torch.sub)."""
    return _RAW_SUB(input, other if alpha == 1 else other * alpha)


def _pow(input, exponent):
    """input ** exponent (torch.pow), input a tensor or a number (2.0 ** x)."""
    return exponent.__rpow__(input) if not isinstance(input, Tensor) else _RAW_POW(input, exponent)


def _clamp(input, min=None, max=None):
    """input clamped to [min, max] (torch.clamp, clip): numbers, or tensors
    broadcast against input (maximum and minimum then)."""
    if not isinstance(min, Tensor) and not isinstance(max, Tensor):
        return _RAW_CLAMP(input, min, max)
    out = input if min is None else maximum(input, min) if isinstance(min, Tensor) else _RAW_CLAMP(input, min, None)
    return out if max is None else minimum(out, max) if isinstance(max, Tensor) else _RAW_CLAMP(out, None, max)


def _repeat_interleave(input, repeats, dim=None, *, output_size=None):
    """Each element repeated along dim (torch.repeat_interleave; of the
    flattened input for dim None): repeats an int, or an int64 tensor of one
    count per element of that dim."""
    if dim is None:
        input, dim = input.reshape(-1), 0
    if isinstance(repeats, Tensor):
        counts = repeats.cpu().numpy().reshape(-1)
        size = input.shape[dim % max(input.dim(), 1)]
        if counts.size not in (1, size) or (counts < 0).any():
            raise _tmem.ValueError(f"repeat_interleave: expected 1 or {size} non-negative repeats, but got "
                                   f"{counts.tolist()}")
        index = _np.repeat(_np.arange(size), counts if counts.size == size else int(counts[0]))
        return _tmem.index_select(input, dim, _tmem.tensor(index.astype(_np.int64)).to(input.device))
    return _RAW_REPEAT_INTERLEAVE(input, repeats, dim)


def _of_common_dtype(tensors):
    """tensors (a sequence) cast to torch's result type: float64 if any is,
    else float32 if any is floating, else int64; one tensor as it is (the
    op's TypeError names it)."""
    if isinstance(tensors, Tensor):
        return tensors
    tensors = list(tensors)
    dtypes = {t.dtype for t in tensors if isinstance(t, Tensor)}
    if len(dtypes) < 2 or not _builtins.all(isinstance(t, Tensor) for t in tensors):
        return tensors
    common = _tmem.float64 if _tmem.float64 in dtypes else _tmem.float32 if _tmem.float32 in dtypes else _tmem.int64
    return [t.to(common) for t in tensors]


def _cat(tensors, dim=0):
    """tensors joined along dim (torch.cat), of their common dtype (float32
    with int64 gives float32, as torch)."""
    return _RAW_CAT(_of_common_dtype(tensors), dim)


def _stack(tensors, dim=0):
    """tensors stacked on a new dim (torch.stack), of their common dtype."""
    return _RAW_STACK(_of_common_dtype(tensors), dim)


def lerp(input, end, weight):
    """input + weight (end - input) (torch.lerp); weight a number or a tensor."""
    return input + weight * (end - input)


def cumprod(input, dim, *, dtype=None):
    """Running products along dim (torch.cumprod), by a Hillis-Steele scan
    of muls (log2 n steps), so the gradient is exact where elements are 0."""
    x = input if dtype is None else input.to(dtype)
    d = _dims(dim, x.dim(), "cumprod")
    if not d or x.numel() == 0:
        return x * 1
    d, shift = d[0], 1
    while shift < x.shape[d]:
        ones = _tmem.ones_like(x.narrow(d, 0, shift))
        x = x * _tmem.cat([ones, x.narrow(d, 0, x.shape[d] - shift)], d)
        shift *= 2
    return x


def _round(input, decimals=0):
    """input rounded half to even to `decimals` digits after the point
    (torch.round: round(x 10^d) / 10^d; negative decimals round to tens,
    hundreds, ...). TypeError for decimals that is not an int."""
    if isinstance(decimals, bool) or not isinstance(decimals, int):
        raise TypeError(f"round: expected decimals to be an int, but got {decimals!r}")
    if decimals == 0:
        return _RAW_ROUND(input)
    scale = 10.0 ** decimals
    return _RAW_ROUND(input * scale) / scale


def _sum(input, dim=None, keepdim=False, *, dtype=None, axis=None):
    """The sum over dim (torch.sum; every element for None; axis is
    NumPy's name for it), of input cast to dtype first when given. TypeError
    for a dtype that is not a tmem dtype."""
    if dtype is not None and not isinstance(dtype, _tmem.dtype):
        raise TypeError(f"sum: expected dtype to be a tmem dtype (tmem.float64, ...), but got {dtype!r}")
    return _RAW_SUM(input if dtype is None else input.to(dtype), dim if axis is None else axis, keepdim)


def broadcast_shape(a, b, who):
    """The shape tensors a and b broadcast to; ShapeError naming who and
    both shapes when they do not."""
    try:
        return tuple(_np.broadcast_shapes(tuple(a.shape), tuple(b.shape)))
    except ValueError:
        raise _tmem.ShapeError(f"{who}: the shapes {list(a.shape)} and {list(b.shape)} do not broadcast") from None


def masked_select(input, mask):
    """The elements of input where mask is non-zero, the two broadcast to
    one shape, as a 1-D tensor in row-major order (torch.masked_select; x[mask]
    in torch): differentiable through index_select. ShapeError for shapes
    that do not broadcast."""
    if not isinstance(mask, Tensor):
        raise TypeError(f"masked_select: expected mask to be a Tensor, but got {type(mask).__name__}")
    shape = broadcast_shape(mask, input, "masked_select: the mask and the input")
    x = input if tuple(input.shape) == shape else input.expand(*shape)
    where = _np.flatnonzero(_np.broadcast_to(mask.detach().cpu().numpy() != 0, shape))
    return _tmem.index_select(x.reshape(-1), 0, _tmem.tensor(where.astype(_np.int64)).to(input.device))


def nonzero(input, *, as_tuple=False):
    """The indices of input's non-zero elements (torch.nonzero): [n, dims]
    int64, or one [n] tensor per dim with as_tuple."""
    found = _np.nonzero(input.detach().cpu().numpy().reshape(tuple(input.shape)) != 0) if input.dim() else \
        ((_np.zeros(int(input.item() != 0), dtype=_np.int64)),)
    parts = [_tmem.tensor(_np.ascontiguousarray(i, dtype=_np.int64)).to(input.device) for i in found]
    if as_tuple:
        return tuple(parts)
    return _tmem.stack(parts, 1) if parts and input.dim() else _tmem.zeros(len(found[0]), 0, dtype=_tmem.int64)


def argwhere(input):
    """The indices of input's non-zero elements, [n, dims] (torch.argwhere)."""
    return nonzero(input)


def count_nonzero(input, dim=None):
    """How many elements are non-zero over dim (torch.count_nonzero; int64)."""
    dims = _dims(dim, input.dim(), "count_nonzero")
    nonzero_ = (input != 0).to(_tmem.int64)
    return _tmem.sum(nonzero_, tuple(dims)) if dims else nonzero_


def _where(condition, input=None, other=None):
    """torch.where: input where condition is non-zero, else other
    (broadcast; either may be a number); with the condition alone, the
    indices of its non-zero elements, one tensor per dim."""
    if input is None and other is None:
        return nonzero(condition, as_tuple=True)
    if input is None or other is None:
        raise TypeError("where: expected both input and other, or neither")
    return _WHERE(condition, input, other)


# ---- shape ----

def flip(input, dims):
    """input with the order of its elements along dims reversed (torch.flip; a copy)."""
    for d in _dims(dims, input.dim(), "flip"):
        n = input.shape[d]
        input = _tmem.index_select(input, d, _tmem.arange(n - 1, -1, -1)) if n > 1 else input
    return input


def roll(input, shifts, dims=None):
    """input rolled by shifts along dims (torch.roll; the flattened tensor,
    reshaped back, when dims is None)."""
    if dims is None:
        if not isinstance(shifts, int) and len(list(shifts)) == 1:
            shifts = list(shifts)[0]
        if not isinstance(shifts, int):
            raise _tmem.ValueError(f"roll: without dims, shifts must be one int, but got {shifts!r}")
        return roll(input.flatten(), shifts, 0).reshape(tuple(input.shape)) if input.dim() else input
    shifts = [shifts] if isinstance(shifts, int) else list(shifts)
    dims = [dims] if isinstance(dims, int) else list(dims)
    if len(shifts) != len(dims):
        raise _tmem.ValueError(f"roll: shifts {shifts} and dims {dims} differ in length")
    if input.dim() == 0:
        _dims(dims, 0, "roll")
        return input
    for s, d in zip(shifts, dims):
        d = _dims(d, input.dim(), "roll")[0]
        n = input.shape[d]
        s = s % n if n else 0
        if s:
            input = _tmem.cat([input.narrow(d, n - s, s), input.narrow(d, 0, n - s)], d)
    return input


def repeat(input, *sizes):
    """input tiled sizes[i] times along each dim (torch.Tensor.repeat; more
    sizes than dims add leading dims)."""
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = tuple(sizes[0])
    if len(sizes) < input.dim() or not _builtins.all(isinstance(r, int) and r >= 0 for r in sizes):
        raise _tmem.ValueError(f"repeat: expected at least {input.dim()} sizes >= 0, but got {sizes}")
    x = input.reshape((1,) * (len(sizes) - input.dim()) + tuple(input.shape))
    for d, r in enumerate(sizes):
        if r != 1:
            shape = list(x.shape)
            x = x.unsqueeze(d).expand(*shape[:d], r, *shape[d:]).reshape(*shape[:d], r * shape[d], *shape[d + 1:])
    return x


def chunk(input, chunks, dim=0):
    """input split into chunks pieces along dim, each of ceil(n / chunks)
    elements but the last (torch.chunk; fewer pieces when n is small)."""
    if not isinstance(chunks, int) or chunks < 1:
        raise _tmem.ValueError(f"chunk: chunks must be an int >= 1, but got {chunks!r}")
    if input.dim() == 0:
        raise _tmem.ShapeError("chunk: expected a tensor of at least 1 dim, but got a 0-d tensor")
    d = _dims(dim, input.dim(), "chunk")[0]
    n = input.shape[d]
    if n == 0:
        return [input] * chunks  # torch gives chunks empty pieces
    return _SPLIT(input, -(-n // chunks), d)


def _triangle(input, diagonal, lower, who):
    if input.dim() < 2:
        raise _tmem.ShapeError(f"{who}: expected a tensor of at least 2 dims, but got {input.dim()}")
    rows, cols = input.shape[-2:]
    mask = (_np.tril if lower else _np.triu)(_np.ones((rows, cols), dtype=_np.int64), diagonal)
    return _tmem.where(_tmem.tensor(mask).to(input.device), input, 0 if input.dtype == _tmem.int64 else 0.0)


def tril(input, diagonal=0):
    """The lower triangle of the last two dims, the rest 0 (torch.tril)."""
    return _triangle(input, diagonal, True, "tril")


def triu(input, diagonal=0):
    """The upper triangle of the last two dims, the rest 0 (torch.triu)."""
    return _triangle(input, diagonal, False, "triu")


# ---- products ----

def _einsum_terms(equation, operands):
    """The index letters of each operand and of the output of an einsum
    equation, '...' spelled out as letters that are not in it."""
    if not isinstance(equation, str):
        raise TypeError(f"einsum: expected the equation as a str, but got {type(equation).__name__}")
    eq = equation.replace(" ", "")
    lhs, arrow, out = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(operands):
        raise _tmem.ValueError(f"einsum: the equation {equation!r} names {len(terms)} operands, but got "
                               f"{len(operands)}")
    letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
    spare = [c for c in letters if c not in eq]
    for term in terms:
        if not _builtins.all(c in letters for c in term.replace("...", "")) or term.count("...") > 1:
            raise _tmem.ValueError(f"einsum: {term!r} in {equation!r} must be ASCII letters with at most one '...'")
    widths = [x.dim() - (len(t) - 3) for t, x in zip(terms, operands) if "..." in t]
    if _builtins.any(n < 0 for n in widths):
        raise _tmem.ShapeError(f"einsum: an operand of {equation!r} has fewer dims than its term names")
    ell = "".join(spare[:max(widths, default=0)])  # '...' dims line up from the right, as broadcasting does
    spelled = []
    for term, x in zip(terms, operands):
        if "..." in term:
            n = x.dim() - (len(term) - 3)
            term = term.replace("...", ell[len(ell) - n:] if n else "")
        if len(term) != x.dim():
            raise _tmem.ShapeError(f"einsum: {term!r} in {equation!r} names {len(term)} dims, but the operand has "
                                   f"{x.dim()}")
        if len(set(term)) != len(term):
            raise _tmem.ValueError(f"einsum: an index repeated within {term!r} (a diagonal) is not supported")
        spelled.append(term)
    if arrow:
        if "..." in out:
            out = out.replace("...", ell)
        if not _builtins.all(c in letters for c in out) or len(set(out)) != len(out):
            raise _tmem.ValueError(f"einsum: the output {out!r} of {equation!r} must be distinct letters")
        missing = [c for c in out if not _builtins.any(c in t for t in spelled)]
        if missing:
            raise _tmem.ValueError(f"einsum: the output index {missing[0]!r} of {equation!r} is in no operand")
    else:  # implicit output: the letters that appear once, in alphabetical order, after '...'
        counts = _collections.Counter("".join(spelled))
        out = ell + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in ell))
    return spelled, out


def _einsum_pair(a, ta, b, tb, keep):
    """a (letters ta) times b (letters tb), summed over the letters in both
    that keep does not hold: one batched matrix product. Returns the result
    and its letters (batch, a's own, b's own)."""
    sizes = {}
    for t, x in ((ta, a), (tb, b)):
        for c, n in zip(t, x.shape):
            if sizes.setdefault(c, n) != n and n != 1 and sizes[c] != 1:
                raise _tmem.ShapeError(f"einsum: index {c!r} has sizes {sizes[c]} and {n}")
            sizes[c] = max(sizes[c], n)
    batch = [c for c in ta if c in tb and c in keep]
    summed = [c for c in ta if c in tb and c not in keep]
    left = [c for c in ta if c not in tb]
    right = [c for c in tb if c not in ta]

    def arranged(x, t, order):
        x = x.permute(*[t.index(c) for c in order]) if list(t) != order else x
        shape = [sizes[c] for c in order]
        return x.expand(*shape) if tuple(x.shape) != tuple(shape) else x

    def size(letters):
        n = 1
        for c in letters:
            n *= sizes[c]
        return n
    am = arranged(a, ta, batch + left + summed).reshape(size(batch), size(left), size(summed))
    bm = arranged(b, tb, batch + summed + right).reshape(size(batch), size(summed), size(right))
    out = (am @ bm).reshape(*[sizes[c] for c in batch + left + right])
    return out, "".join(batch + left + right)


def einsum(equation, *operands):
    """Sums of products over the indices an equation names (torch.einsum):
    'ij,jk->ik', 'bhqd,bhkd->bhqk', '...ij->...ji', implicit outputs; the
    operands as arguments or one list. Computed left to right, two operands
    at a time, as one batched matrix product each (differentiable through
    permute, reshape and @). ValueError for a malformed equation or a
    repeated index within one operand (a diagonal), ShapeError for sizes
    that do not match."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not operands or not _builtins.all(isinstance(x, Tensor) for x in operands):
        raise TypeError("einsum: expected one or more tensors after the equation")
    terms, out = _einsum_terms(equation, operands)
    x, t = operands[0], terms[0]
    for i in range(1, len(operands)):
        later = out + "".join(terms[i + 1:])
        own = [c for c in t if c not in terms[i] and c not in later]  # summed in x alone, before the product
        if own:
            x = _tmem.sum(x, tuple(t.index(c) for c in own))
            t = "".join(c for c in t if c not in own)
        x, t = _einsum_pair(x, t, operands[i], terms[i], later)
    gone = [c for c in t if c not in out]
    if gone:
        x = _tmem.sum(x, tuple(t.index(c) for c in gone))
        t = "".join(c for c in t if c not in gone)
    if t != out:
        x = x.permute(*[t.index(c) for c in out]) if out else x
    return x


def mm(input, mat2):
    """The product of two matrices [n, m] @ [m, p] (torch.mm); ShapeError for other ranks."""
    if input.dim() != 2 or mat2.dim() != 2:
        raise _tmem.ShapeError(f"mm: expected two matrices, but got {input.dim()} and {mat2.dim()} dims")
    return input @ mat2


def dot(input, other):
    """The inner product of two vectors of one length (torch.dot): 0-d."""
    if input.dim() != 1 or other.dim() != 1 or input.shape != other.shape:
        raise _tmem.ShapeError(f"dot: expected two vectors of one length, but got shapes {input.shape} and "
                               f"{other.shape}")
    return _tmem.sum(input * other)


def outer(input, vec2):
    """The outer product [n] x [m] -> [n, m] (torch.outer)."""
    if input.dim() != 1 or vec2.dim() != 1:
        raise _tmem.ShapeError(f"outer: expected two vectors, but got {input.dim()} and {vec2.dim()} dims")
    return input.unsqueeze(1) * vec2.unsqueeze(0)


# ---- Tensor methods ----

def refuse(op, **given):
    """ValueError naming op's first argument (name=(value, default)) that is
    not its default: an option tmem does not implement."""
    for name, (value, default) in given.items():
        if value is not default and value != default:
            raise _tmem.ValueError(f"{op}: {name}={value!r} is not supported by tmem (leave it at {default!r})")


def copy_in_place(target, value, name):
    """target.copy_(value) (its history goes through), an error of the
    write naming name instead of copy_."""
    try:
        return target.copy_(value)
    except _tmem.ValueError as e:
        if str(e).startswith("copy_:"):
            raise type(e)(name + str(e)[len("copy_"):]) from None
        raise


def _in_place(name, fn):
    """Tensor.<name>: self = fn(self, ...) written in place through copy_
    (autograd as torch's in-place op: where it needs grad, fn reads a copy
    of self with self's history, so the write does not change what fn's
    backward saved), errors naming name."""
    def method(self, *args, **kwargs):
        tracked = _tmem.is_grad_enabled() and self.requires_grad and self.dtype in _FLOAT
        return copy_in_place(self, fn(self * 1 if tracked else self, *args, **kwargs), name)
    method.__name__ = name
    method.__doc__ = f"In place: self = {fn.__name__}(self, ...) (torch.Tensor.{name})."
    return method


def _uniform(self, a=0.0, b=1.0, *, generator=None):
    return _tmem.rand(*self.shape, dtype=self.dtype, generator=generator).to(self.device) * (b - a) + a


def _normal(self, mean=0.0, std=1.0, *, generator=None):
    return _tmem.randn(*self.shape, dtype=self.dtype, generator=generator).to(self.device) * std + mean


_RANDINT, _VAR, _ZEROS_LIKE, _ONES_LIKE = _tmem.randint, _tmem.var, _tmem.zeros_like, _tmem.ones_like
_SPLIT, _WHERE = _tmem.split, _tmem.where
_max = _extremum_or_reduction(_tmem.max, maximum, "max")
_min = _extremum_or_reduction(_tmem.min, minimum, "min")

# Both tmem.<name> and Tensor.<name>.
_BOTH = {"square": square, "isnan": isnan, "isinf": isinf, "isfinite": isfinite, "maximum": maximum,
         "minimum": minimum, "std": std, "var": _var, "norm": norm, "logsumexp": logsumexp, "amax": amax,
         "amin": amin, "all": all, "any": any, "roll": roll, "chunk": chunk, "tril": tril, "triu": triu, "mm": mm,
         "dot": dot, "outer": outer, "max": _max, "min": _min, "split": split, "sort": sort, "argsort": argsort,
         "topk": topk, "cumsum": cumsum, "prod": prod, "masked_select": masked_select, "nonzero": nonzero,
         "argwhere": argwhere, "count_nonzero": count_nonzero, "multinomial": multinomial, "nan_to_num": nan_to_num,
         "sum": _sum, "clip": _clamp, "clamp": _clamp, "round": _round, "add": _add, "sub": _sub, "pow": _pow,
         "repeat_interleave": _repeat_interleave, "lerp": lerp, "cumprod": cumprod}

# tmem.<name>, put in the package's namespace by __init__.py.
FUNCTIONS = {**_BOTH, "linspace": linspace, "eye": eye, "zeros_like": zeros_like, "ones_like": ones_like,
             "empty_like": empty_like, "full_like": full_like, "rand_like": rand_like, "randn_like": randn_like,
             "randint": randint, "flip": flip, "einsum": einsum, "enable_grad": enable_grad,
             "set_grad_enabled": set_grad_enabled, "inference_mode": inference_mode, "where": _where, "cat": _cat,
             "stack": _stack}


def _flip_method(self, *args, dims=None):
    return flip(self, dims if dims is not None else args[0] if len(args) == 1 else args)


for _name, _fn in {**_BOTH, "flip": _flip_method, "repeat": repeat,
                   "view_as": lambda self, other: self.view(*other.shape),
                   "expand_as": lambda self, other: self.expand(*other.shape),
                   "type_as": lambda self, other: self.to(other.dtype),
                   "is_floating_point": lambda self: self.dtype in _FLOAT,
                   "new_zeros": _new(lambda self, *size, dtype: _tmem.zeros(*size, dtype=dtype)),
                   "new_ones": _new(lambda self, *size, dtype: _tmem.ones(*size, dtype=dtype)),
                   "new_empty": _new(lambda self, *size, dtype: _tmem.zeros(*size, dtype=dtype)),
                   "new_full": _new(lambda self, size, fill_value, dtype: _tmem.full(size, fill_value, dtype=dtype)),
                   "new_tensor": _new(lambda self, data, dtype: _tmem.tensor(data, dtype=dtype)),
                   "masked_fill_": _in_place("masked_fill_", _tmem.masked_fill),
                   "clamp_": _in_place("clamp_", _tmem.clamp),
                   "exp_": _in_place("exp_", _tmem.exp), "log_": _in_place("log_", _tmem.log),
                   "sqrt_": _in_place("sqrt_", _tmem.sqrt), "abs_": _in_place("abs_", abs),
                   "neg_": _in_place("neg_", lambda x: -x), "relu_": _in_place("relu_", _tmem.relu),
                   "sigmoid_": _in_place("sigmoid_", _tmem.sigmoid), "tanh_": _in_place("tanh_", _tmem.tanh),
                   "sin_": _in_place("sin_", _tmem.sin), "cos_": _in_place("cos_", _tmem.cos),
                   "uniform_": _in_place("uniform_", _uniform), "normal_": _in_place("normal_", _normal)}.items():
    setattr(Tensor, _name, _fn)
Tensor.mT = property(lambda self: self.transpose(-2, -1), doc="The last two dims swapped (a view; torch's mT).")
