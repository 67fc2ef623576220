"""tmem.nn.functional: torch.nn.functional's names and signatures for
tmem's ops, so that ``import tmem.nn.functional as F`` runs code written
against torch's. Where tmem's op already has torch's signature it is the
op itself; the others are written here over tmem's ops, and an argument
tmem does not implement raises ValueError naming it."""
from . import _tmem
from ._tensor_ops import copy_in_place, refuse as _refuse
from ._tmem import (gelu, grid_sample, layer_norm, log_softmax, scaled_dot_product_attention,  # noqa: F401
                    sigmoid, silu, tanh)


def _in_place(input, out, inplace, op="relu"):
    """out, or input overwritten with it (copy_: its history goes through);
    an error of the write names op."""
    return copy_in_place(input, out, f"{op}(inplace=True)") if inplace else out


def weighted_mean(total, weight_sum):
    """total / weight_sum, NaN where weight_sum is 0 (every target
    ignored) with a gradient of 0, as torch's mean reductions of nll_loss
    and cross_entropy (dividing by 0 gave NaN gradients)."""
    empty = weight_sum == 0
    return _tmem.where(empty, float("nan"), total / _tmem.where(empty, 1.0, weight_sum))


def relu(input, inplace=False):
    """max(input, 0) (torch.nn.functional.relu); inplace writes it into
    input, under the rules of in-place ops (not a leaf that requires grad)."""
    return _in_place(input, _tmem.relu(input), inplace)


def dropout(input, p=0.5, training=True, inplace=False, *, generator=None):
    """Inverted dropout (torch.nn.functional.dropout): zeros with
    probability p, the rest scaled by 1 / (1 - p), when training; inplace
    writes it into input. generator: tmem's (the default one when None)."""
    out = _tmem.dropout(input, p, training, generator=generator)
    return _in_place(input, out, inplace, "dropout") if training and p > 0 else out


def softmax(input, dim, dtype=None):
    """softmax along dim (torch.nn.functional.softmax), input cast to dtype
    first when given. dim is required (torch's implicit dim is deprecated)."""
    return _tmem.softmax(input if dtype is None else input.to(dtype), dim)


def softplus(input, beta=1.0, threshold=20.0):
    """log(1 + exp(beta x)) / beta, and x where beta x > threshold
    (torch.nn.functional.softplus)."""
    if beta == 1.0 and threshold == 20.0:
        return _tmem.softplus(input)
    scaled = input * beta
    return _tmem.where(scaled > threshold, input, _tmem.softplus(scaled) / beta)


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
              sparse=False):
    """Rows of weight (V, C) at the int64 indices input (...) (torch.nn.
    functional.embedding); the row padding_idx (negative: from the end)
    gets no gradient. max_norm, scale_grad_by_freq and sparse raise
    ValueError: tmem does not implement them."""
    _refuse("embedding", max_norm=(max_norm, None), scale_grad_by_freq=(scale_grad_by_freq, False),
            sparse=(sparse, False))
    return _tmem.embedding(input, weight, padding_idx)


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean",
                  label_smoothing=0.0):
    """Cross-entropy of logits input (N, C), (N, C, d1, ...) or unbatched
    (C) (torch.nn.functional.cross_entropy) against int64 classes target
    (N), (N, d1, ...) or () with torch's class weights (C):
    loss_i = w[y_i] ((1 - e) nll_i) + (e / C) sum_c w[c] (-log p_ic), the
    mean dividing by the sum of w[y_i] over targets that are not
    ignore_index; or against class probabilities target of input's shape:
    loss_i = -sum_c w[c] t_ic log p_ic (t smoothed to (1 - e) t + e / C),
    the mean dividing by the number of losses. size_average and reduce
    (deprecated in torch) raise ValueError; use reduction."""
    _refuse("cross_entropy", size_average=(size_average, None), reduce=(reduce, None))
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"cross_entropy: reduction must be 'mean', 'sum' or 'none', but got {reduction!r}")
    if not 0.0 <= label_smoothing <= 1.0:
        raise _tmem.ValueError(f"cross_entropy: label_smoothing must be in [0, 1], but got {label_smoothing}")
    if isinstance(ignore_index, bool) or not isinstance(ignore_index, int):
        raise TypeError(f"cross_entropy: expected ignore_index to be an int, but got {ignore_index!r}")
    for name, value in (("input", input), ("target", target)):
        if not isinstance(value, _tmem.Tensor):
            raise TypeError(f"cross_entropy: expected {name} to be a tmem.Tensor, but got {type(value).__name__}")
    if input.dim() == 1:  # unbatched: one row
        loss = cross_entropy(input.unsqueeze(0), target.unsqueeze(0), weight, None, ignore_index, None, reduction,
                             label_smoothing)
        return loss.squeeze(0) if reduction == "none" else loss
    if target.dtype in (_tmem.float32, _tmem.float64):
        return _soft_cross_entropy(input, target, weight, reduction, label_smoothing)
    if input.dim() > 2:  # (N, C, d1, ...): every position a row
        classes = input.shape[1]
        if tuple(target.shape) != (input.shape[0], *input.shape[2:]):
            raise _tmem.ShapeError(f"cross_entropy: expected target {[input.shape[0], *input.shape[2:]]} for input "
                                   f"{list(input.shape)}, but got {list(target.shape)}")
        rows = input.permute(0, *range(2, input.dim()), 1).reshape(-1, classes)
        loss = cross_entropy(rows, target.reshape(-1), weight, None, ignore_index, None, reduction, label_smoothing)
        return loss.reshape(*target.shape) if reduction == "none" else loss
    if weight is None:
        return _tmem.cross_entropy(input, target, ignore_index=ignore_index, reduction=reduction,
                                   label_smoothing=label_smoothing)
    if input.dim() != 2 or target.dim() != 1 or weight.shape != (input.shape[1],):
        raise _tmem.ShapeError(f"cross_entropy: with class weights, input must be (N, C), target (N) and weight (C), "
                               f"but got {list(input.shape)}, {list(target.shape)} and {list(weight.shape)}")
    classes = input.shape[1]
    valid = target != ignore_index
    safe = _tmem.where(valid, target, _tmem.tensor(0))
    outside = valid * ((safe < 0) + (safe >= classes))
    if target.numel() and _tmem.sum(outside).item():
        bad = target.cpu().numpy()[outside.cpu().numpy() > 0]
        raise _tmem.IndexError(f"cross_entropy: target {int(bad[0])} is out of bounds for {classes} classes "
                               f"(ignore_index={ignore_index})")
    logp = _tmem.log_softmax(input, 1)
    w = _tmem.index_select(weight, 0, safe) * valid.to(weight.dtype)
    loss = -_tmem.gather(logp, 1, safe.unsqueeze(1)).squeeze(1) * w * (1.0 - label_smoothing)
    if label_smoothing:
        loss = loss - _tmem.sum(logp * weight, 1) * valid.to(weight.dtype) * (label_smoothing / classes)
    if reduction == "none":
        return loss
    total = _tmem.sum(loss)
    return total if reduction == "sum" else weighted_mean(total, _tmem.sum(w))


def _soft_cross_entropy(input, target, weight, reduction, label_smoothing):
    """cross_entropy against class probabilities target (input's shape,
    classes on dim 1)."""
    if tuple(target.shape) != tuple(input.shape):
        raise _tmem.ShapeError(f"cross_entropy: class probabilities must have input's shape {list(input.shape)}, "
                               f"but got {list(target.shape)}")
    classes = input.shape[1]
    if label_smoothing:
        target = target * (1.0 - label_smoothing) + label_smoothing / classes
    if weight is not None:
        target = target * weight.reshape(1, classes, *([1] * (input.dim() - 2)))
    loss = -_tmem.sum(_tmem.log_softmax(input, 1) * target, 1)
    if reduction == "none":
        return loss
    return _tmem.sum(loss) if reduction == "sum" else _tmem.sum(loss) / float(loss.numel())  # NaN for none


def linear(input, weight, bias=None):
    """input @ weight^T + bias (torch.nn.functional.linear). input (..., C_in),
    weight (C_out, C_in), bias (C_out) or None; the ShapeError of matmul or
    add names the shapes that do not fit."""
    out = _tmem.matmul(input, weight.transpose(0, 1) if weight.dim() == 2 else weight)
    return out if bias is None else out + bias


def pad(input, pad, mode="constant", value=None):
    """Constant padding (torch.nn.functional.pad): pad lists (before, after)
    pairs from the last dim backwards; value defaults to 0. Raises ValueError
    for another mode, which tmem does not implement."""
    if mode != "constant":
        raise ValueError(f"pad: mode {mode!r} is not supported (tmem pads with a constant: mode='constant')")
    return _tmem.pad(input, pad, 0.0 if value is None else value)
