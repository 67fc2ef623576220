"""Reading with integer arrays as indices (torch's and NumPy's advanced
indexing): ``emb[ids]``, ``x[perm]``, ``logits[arange(B), targets]``,
``x[:, [2, 0]]``, as one index_select over the indexed dims (so the
gradient scatter-adds back). The other indices (ints, slices, None, ...)
are views, taken first. Index arrays broadcast together; their dims take
the place of the dims they index when those are adjacent, else they come
first (NumPy's rule). tmem has no bool dtype, so a mask cannot be told
from indices by its dtype: a single int64 tensor of 0s and 1s shaped like
the dims it indexes is refused (use masked_select for a mask)."""
import functools as _functools
import math as _math
import weakref as _weakref

import numpy as _np

from . import _tmem
from ._tmem import Tensor

_RAW_GETITEM, _RAW_SETITEM = Tensor.__getitem__, Tensor.__setitem__
# Tensors that functions made as indices (randperm, argsort, ...): x[randperm(2)] reads them as indices, never
# as a mask. By id (a WeakSet compares members with ==, elementwise for tensors); an entry leaves with its tensor.
_INDICES = _weakref.WeakValueDictionary()


def making_indices(fn):
    """fn, whose result (or its .indices) is remembered as indices."""
    @_functools.wraps(fn)
    def made(*args, **kwargs):
        out = fn(*args, **kwargs)
        indices = getattr(out, "indices", out)
        _INDICES[id(indices)] = indices
        return out
    return made


def _is_array(item):
    return (isinstance(item, Tensor) and item.dim() > 0) or isinstance(item, list) or \
        (isinstance(item, _np.ndarray) and item.ndim > 0)


def _as_index(item, device):
    """item (an int64 tensor, a list or an array of ints) as an int64 tensor on device."""
    if isinstance(item, Tensor):
        if item.dtype != _tmem.int64:
            raise _tmem.IndexError(f"index: tensors used as indices must be int64, but got {item.dtype}")
        return item.to(device)
    array = _np.asarray(item)
    if array.dtype == _np.bool_:
        raise _tmem.IndexError("index: bool masks are not supported (tmem has no bool dtype); use masked_select "
                               "(reading) or masked_fill / where (writing)")
    if array.size and not _np.issubdtype(array.dtype, _np.integer):
        raise _tmem.IndexError(f"index: index arrays must hold ints, but got {array.dtype} values {item!r}")
    return _tmem.tensor(array.astype(_np.int64)).to(device)


def _items(index):
    """index as a tuple of items; a list holding sequences, slices, None or
    ... is a tuple (x[[rows, cols]] is x[rows, cols], as torch reads it:
    NumPy's old rule)."""
    if isinstance(index, list) and any(it is None or it is Ellipsis
                                       or isinstance(it, (list, slice, Tensor, _np.ndarray)) for it in index):
        return tuple(index)
    return index if isinstance(index, tuple) else (index,)


def setitem(self, index, value):
    """self[index] = value (torch.Tensor.__setitem__): through views for
    ints, slices, None and ...; with integer arrays, NumPy's assignment of
    value (a number, an array or a tensor, broadcast) at the indexed
    elements, written into self (copy_). IndexError as getitem's, and for
    an integer-array write that would need a gradient (self or value
    requires grad in grad mode): tmem has no differentiable index_put."""
    items = _items(index)
    if not any(_is_array(it) for it in items):
        return _RAW_SETITEM(self, index, value)
    _plan(self, items)  # getitem's checks: bounds, dtypes, broadcasting, masks
    if _tmem.is_grad_enabled() and (self.requires_grad or (isinstance(value, Tensor) and value.requires_grad)):
        raise _tmem.IndexError("index: writing through integer-array indices is not differentiable in tmem (no "
                               "index_put); write under no_grad, or build the result with where, index_select or cat")
    data = self.detach().cpu().numpy().copy()
    data[tuple(it.cpu().numpy() if isinstance(it, Tensor) else it for it in items)] = \
        value.detach().cpu().numpy() if isinstance(value, Tensor) else value
    with _tmem.no_grad():
        self.copy_(_tmem.tensor(data).to(self.device))


def getitem(self, index):
    """self[index] (torch.Tensor.__getitem__): views for ints, slices, None
    and ..., and an index_select for integer arrays (see the module's
    docstring). IndexError for an index out of range (naming it, its dim
    and the size), a float or bool array, or a 0/1 tensor that could be a
    mask; ShapeError for index arrays that do not broadcast."""
    items = _items(index)
    if not any(_is_array(it) for it in items):
        return _RAW_GETITEM(self, index)
    base, first, count, linear, shape = _plan(self, items)
    merged = base.reshape(*base.shape[:first], _math.prod(base.shape[first:first + count]), *base.shape[first + count:])
    picked = _tmem.index_select(merged, first, linear.reshape(-1))
    return picked.reshape(*base.shape[:first], *shape, *base.shape[first + count:])


def _plan(self, items):
    """What reading self[items] takes, after every check: the view of the
    other indices (base), the first of the `count` adjacent dims of base the
    index arrays index, their row-major linear indices into those dims
    merged, and the arrays' broadcast shape."""
    # The views first, each index array standing in as a full slice; where
    # each array's dim lands in that view.
    consumed = sum(1 for it in items if it is not None and it is not Ellipsis)
    basic, positions, arrays, out_dim = [], [], [], 0
    for it in items:
        if it is Ellipsis:
            out_dim += self.dim() - consumed
            basic.append(it)
        elif it is None:
            out_dim += 1
            basic.append(it)
        elif _is_array(it):
            positions.append(out_dim)
            arrays.append(_as_index(it, self.device))
            out_dim += 1
            basic.append(slice(None))
        else:
            out_dim += 1 if isinstance(it, slice) else 0  # an int (or a 0-d tensor or array) drops its dim
            basic.append(it)
    base = _RAW_GETITEM(self, tuple(basic))
    tensors = [it for it in items if _is_array(it) and isinstance(it, Tensor)]
    if len(arrays) == 1 and tensors:
        _refuse_mask(tensors[0], arrays[0], base, positions[0])
    try:
        shape = tuple(_np.broadcast_shapes(*(tuple(a.shape) for a in arrays)))
    except ValueError:
        raise _tmem.ShapeError(f"index: index arrays of shapes {[tuple(a.shape) for a in arrays]} do not "
                               f"broadcast together") from None
    if positions != list(range(positions[0], positions[0] + len(positions))):  # apart: their dims come first
        rest = [d for d in range(base.dim()) if d not in positions]
        base = base.permute(*positions, *rest)
        positions = list(range(len(positions)))
    linear = None
    for a, p in zip(arrays, positions):
        size = base.shape[p]
        if a.numel() and (int(a.min().item()) < -size or int(a.max().item()) >= size):
            bad = next(int(v) for v in a.reshape(-1).tolist() if not -size <= v < size)
            raise _tmem.IndexError(f"index: {bad} is out of range for dim {p} of size {size}")
        a = (a + (a < 0) * size).expand(*shape)
        linear = a if linear is None else linear * size + a
    return base, positions[0], len(positions), linear, shape


def _refuse_mask(given, index, base, position):
    """IndexError for a lone int64 tensor index of 0s and 1s with the shape
    of the dims it indexes, unless a function made it as indices (given, the
    tensor as passed): torch code means a bool mask by it, which tmem's
    int64 comparisons cannot be told from."""
    if _INDICES.get(id(given)) is given:
        return
    if tuple(index.shape) == tuple(base.shape[position:position + index.dim()]) and index.numel() > 1 and \
            int(((index != 0) * (index != 1)).sum().item()) == 0:
        raise _tmem.IndexError(f"index: an int64 tensor of 0s and 1s shaped like the dims it indexes "
                               f"{tuple(index.shape)} reads as a mask (tmem has no bool dtype, so x[x > 0] cannot be "
                               f"told from indices); use masked_select(x, mask) for a mask, or "
                               f"index_select(x, dim, indices) for indices")


Tensor.__getitem__, Tensor.__setitem__ = getitem, setitem
