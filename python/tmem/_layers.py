"""torch.nn's parameter-free layers and losses, and the torch.nn.functional
functions they use, written over tmem's ops; importing this module adds them
to ``tmem.nn`` and ``tmem.nn.functional``.

Each follows torch 1.13's signature, defaults, formula and reductions (its
documentation, and its results checked against torch in
python/tests/test_layers.py). Axis letters in the docstrings: N the batch,
C the classes or features, d1... further dims. torch's deprecated
size_average and reduce arguments raise ValueError (give reduction), as do
options tmem does not implement; reduction is 'none', 'mean' or 'sum'.
"""
import math as _math
import types as _types
import warnings as _warnings

import numpy as _np

from . import _functional, _take_torch_arguments, _tensor_ops, _tmem
from ._functional import _in_place, _refuse
from ._tmem import nn

F = _functional  # the modules call F.<name> when they run, as torch's do

_REDUCTIONS = ("none", "mean", "sum")
_BCE_EPSILON = float(_np.float32(1e-12))  # torch's floor of x (1 - x) in BCE's gradient, a float32 constant


def _check_reduction(op, reduction, allowed=_REDUCTIONS):
    """ValueError naming op and the value when reduction is not one of allowed."""
    if not isinstance(reduction, str) or reduction not in allowed:
        names = ", ".join(repr(r) for r in allowed[:-1]) + f" or {allowed[-1]!r}"
        raise _tmem.ValueError(f"{op}: reduction must be {names}, but got {reduction!r}")


def _reduce(loss, reduction):
    """loss itself ('none'), its sum or its mean (0-d)."""
    if reduction == "none":
        return loss
    return _tmem.sum(loss) if reduction == "sum" else _tmem.mean(loss)


def _legacy(op, size_average, reduce, reduction, allowed=_REDUCTIONS):
    """Refuses size_average and reduce (deprecated in torch) and checks reduction."""
    _refuse(op, size_average=(size_average, None), reduce=(reduce, None))
    _check_reduction(op, reduction, allowed)


def _warn_if_broadcast(op, input, target):
    """torch's UserWarning for a target whose shape differs from input's
    (they are broadcast, which is seldom what a loss means)."""
    if tuple(input.shape) != tuple(target.shape):
        _warnings.warn(f"{op}: using a target size ({list(target.shape)}) that is different to the input size "
                       f"({list(input.shape)}); this will likely lead to incorrect results due to broadcasting. "
                       f"Please ensure they have the same size.", stacklevel=3)


def _same_shape(op, input, target):
    """ShapeError unless target has input's shape (torch's rule for the BCE losses)."""
    if tuple(input.shape) != tuple(target.shape):
        raise _tmem.ShapeError(f"{op}: target size ({list(target.shape)}) must be the same as input size "
                               f"({list(input.shape)})")


# ---------------------------------------------------------------- functional

def leaky_relu(input, negative_slope=0.01, inplace=False):
    """x where x > 0, else negative_slope * x (torch.nn.functional.leaky_relu),
    elementwise, any shape; the gradient at 0 is negative_slope, as torch's.
    inplace writes the result into input (not a leaf that requires grad)."""
    return _in_place(input, _tmem.where(input > 0, input, input * negative_slope), inplace, "leaky_relu")


def elu(input, alpha=1.0, inplace=False):
    """x where x > 0, else alpha (exp(x) - 1) (torch.nn.functional.elu),
    elementwise, any shape. The exp sees min(x, 0), so a large x gives no
    inf in the unused branch (nor a NaN gradient)."""
    positive = input > 0
    neg = alpha * (_tmem.exp(_tmem.where(positive, 0.0, input)) - 1.0)  # where saves no input that inplace changes
    return _in_place(input, _tmem.where(positive, input, neg), inplace, "elu")


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    """input clamped to [min_val, max_val] (torch.nn.functional.hardtanh);
    the gradient passes strictly inside, as torch's. ValueError for
    min_val > max_val."""
    if min_val > max_val:
        raise _tmem.ValueError(f"hardtanh: min_val {min_val} is greater than max_val {max_val}")
    inside = (input > min_val) * (input < max_val)
    out = _tmem.where(inside, input, _tmem.clamp(input.detach(), min_val, max_val))
    return _in_place(input, out, inplace, "hardtanh")


def relu6(input, inplace=False):
    """min(max(x, 0), 6) (torch.nn.functional.relu6: hardtanh(x, 0, 6))."""
    return _in_place(input, hardtanh(input, 0.0, 6.0), inplace, "relu6")


def hardsigmoid(input, inplace=False):
    """relu6(x + 3) / 6 (torch.nn.functional.hardsigmoid); gradient 1/6 strictly inside (-3, 3)."""
    return _in_place(input, hardtanh(input / 6.0 + 0.5, 0.0, 1.0), inplace, "hardsigmoid")


def hardswish(input, inplace=False):
    """x relu6(x + 3) / 6 (torch.nn.functional.hardswish; Howard et al.
    2019): 0 below -3, x (x + 3) / 6 on [-3, 3), x from 3 on, so the
    gradient is x / 3 + 1/2 on [-3, 3), as torch 1.13's."""
    middle = input * (input + 3.0) / 6.0
    out = _tmem.where(input < -3.0, input * 0.0, _tmem.where(input < 3.0, middle, input))
    return _in_place(input, out, inplace, "hardswish")


def mish(input, inplace=False):
    """x tanh(softplus(x)) (torch.nn.functional.mish; Misra 2019)."""
    return _in_place(input, input * _tmem.tanh(_functional.softplus(input)), inplace, "mish")


def prelu(input, weight):
    """x where x >= 0, else weight x (torch.nn.functional.prelu): weight [1]
    or [C], C the channels on dim 1 of input [N, C, ...]. ShapeError for a
    weight that does not fit."""
    if weight.dim() != 1 or (weight.numel() != 1 and (input.dim() < 2 or weight.numel() != input.shape[1])):
        raise _tmem.ShapeError(f"prelu: expected weight of shape [1] or [C] with C = input.shape[1], but got weight "
                               f"{list(weight.shape)} for input {list(input.shape)}")
    slope = weight if weight.numel() == 1 or input.dim() == 2 else \
        weight.reshape(weight.numel(), *([1] * (input.dim() - 2)))
    return _tmem.where(input >= 0, input, input * slope)


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """(input - target)^2, reduced (torch.nn.functional.mse_loss). input and
    target of one shape (...); another shape is broadcast with torch's
    UserWarning. Gradients reach both."""
    _legacy("mse_loss", size_average, reduce, reduction)
    _warn_if_broadcast("mse_loss", input, target)
    d = input - target
    return _reduce(d * d, reduction)


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """|input - target|, reduced (torch.nn.functional.l1_loss); shapes as
    mse_loss. The gradient at input == target is 0, as torch's."""
    _legacy("l1_loss", size_average, reduce, reduction)
    _warn_if_broadcast("l1_loss", input, target)
    return _reduce(_tmem.abs(input - target), reduction)


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """With z = |input - target|: 0.5 z^2 / beta where z < beta, else
    z - 0.5 beta, reduced (torch.nn.functional.smooth_l1_loss); beta = 0 is
    l1_loss, whose gradient at input == target is -1 for input, as torch
    1.13's kernel gives, and +1 for target (torch's kernel gives -1 to
    target too there).
    Shapes as mse_loss. ValueError for a negative beta."""
    _legacy("smooth_l1_loss", size_average, reduce, reduction)
    if beta < 0:
        raise _tmem.ValueError(f"smooth_l1_loss: beta must not be negative, but got {beta!r}")
    _warn_if_broadcast("smooth_l1_loss", input, target)
    d = input - target
    z = _tmem.abs(d)
    if beta == 0:
        return _reduce(_tmem.where(d > 0, d, -d), reduction)
    return _reduce(_tmem.where(z < beta, (0.5 / beta) * d * d, z - 0.5 * beta), reduction)


def huber_loss(input, target, reduction="mean", delta=1.0):
    """With z = |input - target|: 0.5 z^2 where z < delta, else
    delta (z - 0.5 delta), reduced (torch.nn.functional.huber_loss). Shapes
    as mse_loss. ValueError for delta <= 0."""
    _check_reduction("huber_loss", reduction)
    if not delta > 0:
        raise _tmem.ValueError(f"huber_loss: delta must be positive, but got {delta!r}")
    _warn_if_broadcast("huber_loss", input, target)
    d = input - target
    z = _tmem.abs(d)
    return _reduce(_tmem.where(z < delta, 0.5 * d * d, delta * (z - 0.5 * delta)), reduction)


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    """Negative log-likelihood (torch.nn.functional.nll_loss): loss_i =
    -w[y_i] input[i, y_i] for log-probabilities input (N, C) and int64
    classes target (N); also input (C) with a 0-d target, and input
    (N, C, d1, ...) with target (N, d1, ...). weight (C) defaults to ones; a
    target equal to ignore_index has loss 0 and weight 0; 'mean' divides
    the sum by the sum of w[y_i] (NaN when every target is ignored, as torch).
    Raises DtypeError for a target that is not int64, ShapeError for shapes
    that do not fit, IndexError for a class outside [0, C)."""
    _legacy("nll_loss", size_average, reduce, reduction)
    if target.dtype != _tmem.int64:
        raise _tmem.DtypeError(f"nll_loss: target must hold int64 class indices, but got {target.dtype}")
    shape, tshape = tuple(input.shape), tuple(target.shape)
    if not shape or tshape != (shape[:1] + shape[2:] if len(shape) > 1 else ()):
        raise _tmem.ShapeError(f"nll_loss: input (N, C, d1, ...) needs target (N, d1, ...) and input (C) a 0-d "
                               f"target, but got input {list(shape)} and target {list(tshape)}")
    classes = shape[1] if len(shape) > 1 else shape[0]
    if weight is not None and tuple(weight.shape) != (classes,):
        raise _tmem.ShapeError(f"nll_loss: weight must have one value for each of the {classes} classes, but got "
                               f"shape {list(weight.shape)}")
    if len(shape) == 1:
        logp = input.unsqueeze(0)
    elif len(shape) == 2:
        logp = input
    else:
        logp = _tmem.permute(input, (0, *range(2, len(shape)), 1)).reshape(-1, classes)
    flat = target.reshape(-1)
    valid = flat != ignore_index
    safe = _tmem.where(valid, flat, _tmem.tensor(0))
    if flat.numel() and _tmem.sum(valid * ((safe < 0) + (safe >= classes))).item():
        bad = flat.cpu().numpy()
        bad = bad[(bad != ignore_index) & ((bad < 0) | (bad >= classes))]
        raise _tmem.IndexError(f"nll_loss: target {int(bad[0])} is out of bounds for {classes} classes "
                               f"(ignore_index={ignore_index})")
    picked = _tmem.gather(logp, 1, safe.unsqueeze(1)).squeeze(1)
    mask = valid.to(input.dtype)
    w = mask if weight is None else _tmem.index_select(weight, 0, safe) * mask
    loss = -picked * w
    if reduction == "none":
        return loss.reshape(tshape)
    total = _tmem.sum(loss)
    return total if reduction == "sum" else _functional.weighted_mean(total, _tmem.sum(w))


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """-w (y log x + (1 - y) log(1 - x)) for probabilities x = input and
    targets y = target of one shape (...), each log clamped to >= -100, as
    torch.nn.functional.binary_cross_entropy; weight broadcasts against
    input. The gradient for input is torch's, w (x - y) / max(x (1 - x),
    1e-12), finite at x = 0 and 1; target's is w (log(1 - x) - log x) with
    the clamped logs, so finite too (torch 1.13's does not clamp: +-inf at
    x = 0 or 1). Raises ShapeError when target's shape is not input's,
    ValueError for an input outside [0, 1]."""
    _legacy("binary_cross_entropy", size_average, reduce, reduction)
    _same_shape("binary_cross_entropy", input, target)
    if input.numel():
        lo, hi = _tmem.min(input.detach()).item(), _tmem.max(input.detach()).item()
        if not (0.0 <= lo and hi <= 1.0):
            raise _tmem.ValueError(f"binary_cross_entropy: every element of input must be between 0 and 1 (a "
                                   f"probability), but they range over [{lo}, {hi}]")
    x = input.detach()
    loss = -(target * _tmem.clamp(_tmem.log(x), min=-100.0) + (1.0 - target) * _tmem.clamp(_tmem.log(1.0 - x),
                                                                                             min=-100.0))
    if input.requires_grad:
        # The value holds input only as a constant (above), so that input's
        # gradient can be torch's bounded formula: a term that is 0 in value
        # and has that gradient (tmem has no second derivatives to break).
        slope = (x - target.detach()) / _tmem.clamp(x * (1.0 - x), min=_BCE_EPSILON)
        loss = loss + slope * (input - x)
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None, reduction="mean",
                                     pos_weight=None):
    """Binary cross-entropy of logits x = input against targets y = target
    of one shape (...) (torch.nn.functional.binary_cross_entropy_with_logits):
    w ((1 - y) x + l softplus(-x)) with l = 1 + (pos_weight - 1) y (l = 1
    without pos_weight, a weight of the positive class that broadcasts
    against target, e.g. (C) for (N, C)), and softplus(-x) computed as
    torch's m + log(exp(-m) + exp(-x - m)), m = max(-x, 0), which no large
    |x| overflows. weight broadcasts against input. ShapeError when target's
    shape is not input's."""
    _legacy("binary_cross_entropy_with_logits", size_average, reduce, reduction)
    _same_shape("binary_cross_entropy_with_logits", input, target)
    m = _tmem.clamp(-input, min=0.0)
    softplus_neg = m + _tmem.log(_tmem.exp(-m) + _tmem.exp(-input - m))
    if pos_weight is not None:
        softplus_neg = ((pos_weight - 1.0) * target + 1.0) * softplus_neg
    loss = (1.0 - target) * input + softplus_neg
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """Pointwise KL divergence (torch.nn.functional.kl_div) of log-probabilities
    input against probabilities target: target (log target - input), 0
    where target is 0 (torch's xlogy); with log_target, target holds
    log-probabilities: exp(target) (target - input). Same shapes (...).
    reduction 'batchmean' is the sum over input.shape[0] (the true KL
    divergence of a batch); 'mean' divides by every element, as torch's.
    target's gradient where it is 0 is -input (torch's is NaN there)."""
    _legacy("kl_div", size_average, reduce, reduction, ("none", "batchmean", "mean", "sum"))
    if log_target:
        loss = _tmem.exp(target) * (target - input)
    else:
        zero = target == 0
        loss = _tmem.where(zero, 0.0, target * _tmem.log(_tmem.where(zero, 1.0, target))) - target * input
    if reduction == "batchmean":
        total = _tmem.sum(loss)
        return total / input.shape[0] if input.dim() else total
    return _reduce(loss, reduction)


def one_hot(tensor, num_classes=-1):
    """int64 one-hot encoding (torch.nn.functional.one_hot): for int64
    classes tensor (...), an int64 tensor (..., num_classes) with 1 at each
    class; num_classes=-1 takes max(tensor) + 1. Raises DtypeError for a
    tensor that is not int64, ValueError for a negative class, a class >=
    num_classes, or num_classes=-1 with an empty tensor."""
    if tensor.dtype != _tmem.int64:
        raise _tmem.DtypeError(f"one_hot: expected an int64 tensor of class indices, but got {tensor.dtype}")
    if type(num_classes) is not int or num_classes < -1:
        raise _tmem.ValueError(f"one_hot: num_classes must be a non-negative int or -1, but got {num_classes!r}")
    if tensor.numel():
        lo, hi = _tmem.min(tensor).item(), _tmem.max(tensor).item()
        if lo < 0:
            raise _tmem.ValueError(f"one_hot: class values must be non-negative, but got {lo}")
        if num_classes == -1:
            num_classes = hi + 1
        elif hi >= num_classes:
            raise _tmem.ValueError(f"one_hot: class values must be smaller than num_classes={num_classes}, but "
                                   f"got {hi}")
    elif num_classes == -1:
        raise _tmem.ValueError("one_hot: cannot infer num_classes from an empty tensor; give num_classes")
    return tensor.unsqueeze(-1) == _tmem.arange(num_classes).to(tensor.device)


def _vector_norm(op, input, p, dim):
    """The p-norm of input along dim (kept), for p >= 1 or inf, with torch's
    gradient 0 where the norm is 0 (no NaN from sqrt or pow at 0)."""
    if p == _math.inf:
        return _tmem.max(_tmem.abs(input), dim, True)[0]
    if p == 1:
        return _tmem.sum(_tmem.abs(input), dim, True)
    if not (isinstance(p, (int, float)) and 1 < p < _math.inf):
        raise _tmem.ValueError(f"{op}: p={p!r} is not supported by tmem (p >= 1 or inf)")
    s = _tmem.sum(input * input if p == 2 else _tmem.abs(input) ** p, dim, True)
    nonzero = s > 0
    safe = _tmem.where(nonzero, s, 1.0)
    return _tmem.where(nonzero, _tmem.sqrt(safe) if p == 2 else safe ** (1.0 / p), 0.0)


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """input / max(||input||_p, eps), the norm along dim
    (torch.nn.functional.normalize), any shape; p >= 1 or inf (ValueError
    for another p), out refused (ValueError). Where the norm is below eps
    the gradient is 1/eps, as torch's."""
    _refuse("normalize", out=(out, None))
    return input / _tmem.clamp(_vector_norm("normalize", input, p, dim), min=eps)


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """Cosine similarity along dim (torch.nn.functional.cosine_similarity):
    sum(x1 / max(||x1||, eps) * x2 / max(||x2||, eps)) with x1 and x2
    broadcast to one shape (..., D, ...), giving that shape without dim.
    This is torch 1.13's computation: each squared norm is raised to eps^2
    outside autograd, so its gradient flows as if unclamped; a zero vector
    gives 0 with the gradient x_other / (eps ||x_other||)."""
    shape = _tensor_ops.broadcast_shape(x1, x2, "cosine_similarity")
    x1 = x1 if tuple(x1.shape) == shape else x1.expand(*shape)
    x2 = x2 if tuple(x2.shape) == shape else x2.expand(*shape)
    floor = eps * eps

    def norm(x):
        s = _tmem.sum(x * x, dim, True)
        raised = s - s.detach() + floor  # floor in value, s's gradient
        return _tmem.sqrt(_tmem.where(s < floor, raised, s))

    return _tmem.sum((x1 / norm(x1)) * (x2 / norm(x2)), dim)


# ----------------------------------------------------------------- modules

def _inplace_repr(inplace, sep=""):
    return f"{sep}inplace=True" if inplace else ""


class Identity(nn.Module):
    """Returns its input (torch.nn.Identity); its arguments are ignored."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class ReLU(nn.Module):
    """max(x, 0) elementwise (torch.nn.ReLU); inplace as F.relu."""

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.relu(input, inplace=self.inplace)

    def extra_repr(self):
        return _inplace_repr(self.inplace)


class GELU(nn.Module):
    """x Phi(x) elementwise, or its tanh form with approximate='tanh'
    (torch.nn.GELU). ValueError for another approximate."""

    def __init__(self, approximate="none"):
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise _tmem.ValueError(f"GELU: approximate must be 'none' or 'tanh', but got {approximate!r}")
        self.approximate = approximate

    def forward(self, input):
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


class Tanh(nn.Module):
    """tanh elementwise (torch.nn.Tanh)."""

    def forward(self, input):
        return F.tanh(input)


class Sigmoid(nn.Module):
    """1 / (1 + exp(-x)) elementwise (torch.nn.Sigmoid)."""

    def forward(self, input):
        return F.sigmoid(input)


class SiLU(nn.Module):
    """x sigmoid(x) elementwise (torch.nn.SiLU); inplace writes into the input."""

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        # silu keeps its input for the backward: a copy, when input is overwritten
        return _in_place(input, F.silu(input.clone() if self.inplace else input), self.inplace, "SiLU")

    def extra_repr(self):
        return _inplace_repr(self.inplace)


class Softplus(nn.Module):
    """log(1 + exp(beta x)) / beta, x where beta x > threshold
    (torch.nn.Softplus, F.softplus)."""

    def __init__(self, beta=1, threshold=20):
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, input):
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self):
        return f"beta={self.beta}, threshold={self.threshold}"


def _require_dim(cls, dim):
    if dim is None:
        raise TypeError(f"{cls}: dim is required (torch's implicit choice of dim is deprecated); give e.g. "
                        f"{cls}(dim=-1)")
    return dim


class Softmax(nn.Module):
    """Softmax along dim (torch.nn.Softmax). TypeError when dim is not
    given: torch's implicit dim is deprecated, and tmem does not guess."""

    def __init__(self, dim=None):
        super().__init__()
        self.dim = _require_dim("Softmax", dim)

    def forward(self, input):
        return F.softmax(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class LogSoftmax(nn.Module):
    """log(softmax(x)) along dim, computed stably (torch.nn.LogSoftmax).
    TypeError when dim is not given, as Softmax."""

    def __init__(self, dim=None):
        super().__init__()
        self.dim = _require_dim("LogSoftmax", dim)

    def forward(self, input):
        return F.log_softmax(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class LeakyReLU(nn.Module):
    """x where x > 0, else negative_slope * x (torch.nn.LeakyReLU, F.leaky_relu)."""

    def __init__(self, negative_slope=0.01, inplace=False):
        super().__init__()
        self.negative_slope, self.inplace = negative_slope, inplace

    def forward(self, input):
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self):
        return f"negative_slope={self.negative_slope}" + _inplace_repr(self.inplace, ", ")


def _clamping_module(name, function, doc):
    """A module class applying function(input, inplace=self.inplace)."""
    def __init__(self, inplace=False):
        nn.Module.__init__(self)
        self.inplace = inplace

    return type(name, (nn.Module,), {"__doc__": doc, "__init__": __init__,
                                     "forward": lambda self, input: function(input, inplace=self.inplace),
                                     "extra_repr": lambda self: _inplace_repr(self.inplace)})


ReLU6 = _clamping_module("ReLU6", relu6, "min(max(x, 0), 6) (torch.nn.ReLU6, F.relu6).")
Hardsigmoid = _clamping_module("Hardsigmoid", hardsigmoid, "relu6(x + 3) / 6 (torch.nn.Hardsigmoid).")
Hardswish = _clamping_module("Hardswish", hardswish, "x relu6(x + 3) / 6 (torch.nn.Hardswish).")
Mish = _clamping_module("Mish", mish, "x tanh(softplus(x)) (torch.nn.Mish).")


class Hardtanh(nn.Module):
    """x clamped to [min_val, max_val] (torch.nn.Hardtanh, F.hardtanh)."""

    def __init__(self, min_val=-1.0, max_val=1.0, inplace=False):
        super().__init__()
        self.min_val, self.max_val, self.inplace = min_val, max_val, inplace

    def forward(self, input):
        return hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self):
        return f"min_val={self.min_val}, max_val={self.max_val}" + _inplace_repr(self.inplace, ", ")


class PReLU(nn.Module):
    """x where x >= 0, else a x with a learned slope a per channel
    (torch.nn.PReLU): weight [num_parameters] starting at init. ValueError
    for num_parameters that is not an int >= 1."""

    def __init__(self, num_parameters=1, init=0.25):
        super().__init__()
        if isinstance(num_parameters, bool) or not isinstance(num_parameters, int) or num_parameters < 1:
            raise _tmem.ValueError(f"PReLU: expected num_parameters to be an int >= 1, but got {num_parameters!r}")
        self.num_parameters = num_parameters
        self.weight = nn.Parameter(_tmem.full((num_parameters,), float(init)))

    def forward(self, input):
        return prelu(input, self.weight)

    def extra_repr(self):
        return f"num_parameters={self.num_parameters}"


class ELU(nn.Module):
    """x where x > 0, else alpha (exp(x) - 1) (torch.nn.ELU, F.elu)."""

    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, input):
        return F.elu(input, self.alpha, self.inplace)

    def extra_repr(self):
        return f"alpha={self.alpha}" + _inplace_repr(self.inplace, ", ")


class Flatten(nn.Module):
    """Merges dims start_dim..end_dim into one (torch.nn.Flatten): (N, C, H, W)
    gives (N, C H W) with the defaults."""

    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, input):
        return input.flatten(self.start_dim, self.end_dim)

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(nn.Module):
    """Splits dim into unflattened_size (a tuple or list of ints, one of
    them may be -1) (torch.nn.Unflatten): (N, 12) with dim=1, (3, 4) gives
    (N, 3, 4). TypeError for a size that is not ints (tmem has no named
    dims), ShapeError when the sizes do not multiply to the dim's size."""

    def __init__(self, dim, unflattened_size):
        super().__init__()
        if type(dim) is not int:
            raise TypeError(f"Unflatten: dim must be an int (tmem has no named dims), but got {dim!r}")
        if not isinstance(unflattened_size, (tuple, list)):
            raise TypeError(f"Unflatten: unflattened_size must be a tuple of ints, but got "
                            f"{type(unflattened_size).__name__}")
        for i, n in enumerate(unflattened_size):
            if type(n) is not int:
                raise TypeError(f"Unflatten: unflattened_size must be a tuple of ints, but found element of type "
                                f"{type(n).__name__} at pos {i}")
        self.dim, self.unflattened_size = dim, unflattened_size

    def forward(self, input):
        shape = tuple(input.shape)
        if not -len(shape) <= self.dim < len(shape):
            raise _tmem.IndexError(f"Unflatten: dim {self.dim} is out of range for a {len(shape)}-d input")
        dim = self.dim % len(shape)
        sizes = tuple(self.unflattened_size)
        known = _math.prod(n for n in sizes if n != -1)
        fits = (known == shape[dim] if -1 not in sizes else
                sizes.count(-1) == 1 and known > 0 and shape[dim] % known == 0)
        if not fits:
            raise _tmem.ShapeError(f"Unflatten: sizes {list(sizes)} do not multiply up to the size of dim {dim} "
                                   f"({shape[dim]}) of the input {list(shape)}")
        return input.reshape(*shape[:dim], *sizes, *shape[dim + 1:])

    def extra_repr(self):
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


class _Loss(nn.Module):
    """A loss module's reduction, checked when it is built (torch's _Loss)."""

    def __init__(self, size_average=None, reduce=None, reduction="mean", allowed=_REDUCTIONS):
        super().__init__()
        _legacy(type(self).__name__, size_average, reduce, reduction, allowed)
        self.reduction = reduction


class CrossEntropyLoss(_Loss):
    """F.cross_entropy of logits (N, C) and int64 classes (N), with class
    weight (C, a buffer as in torch), ignore_index and label_smoothing
    (torch.nn.CrossEntropyLoss)."""

    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean",
                 label_smoothing=0.0):
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)
        self.ignore_index, self.label_smoothing = ignore_index, label_smoothing

    def forward(self, input, target):
        return F.cross_entropy(input, target, weight=self.weight, ignore_index=self.ignore_index,
                               reduction=self.reduction, label_smoothing=self.label_smoothing)


class NLLLoss(_Loss):
    """F.nll_loss of log-probabilities (N, C) and int64 classes (N), with class
    weight (C, a buffer) and ignore_index (torch.nn.NLLLoss)."""

    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)
        self.ignore_index = ignore_index

    def forward(self, input, target):
        return F.nll_loss(input, target, weight=self.weight, ignore_index=self.ignore_index, reduction=self.reduction)


class MSELoss(_Loss):
    """F.mse_loss: (input - target)^2, reduced (torch.nn.MSELoss)."""

    def forward(self, input, target):
        return F.mse_loss(input, target, reduction=self.reduction)


class L1Loss(_Loss):
    """F.l1_loss: |input - target|, reduced (torch.nn.L1Loss)."""

    def forward(self, input, target):
        return F.l1_loss(input, target, reduction=self.reduction)


class SmoothL1Loss(_Loss):
    """F.smooth_l1_loss with beta (torch.nn.SmoothL1Loss); ValueError for a negative beta."""

    def __init__(self, size_average=None, reduce=None, reduction="mean", beta=1.0):
        super().__init__(size_average, reduce, reduction)
        if beta < 0:
            raise _tmem.ValueError(f"SmoothL1Loss: beta must not be negative, but got {beta!r}")
        self.beta = beta

    def forward(self, input, target):
        return F.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class HuberLoss(_Loss):
    """F.huber_loss with delta (torch.nn.HuberLoss); ValueError for delta <= 0."""

    def __init__(self, reduction="mean", delta=1.0):
        super().__init__(reduction=reduction)
        if not delta > 0:
            raise _tmem.ValueError(f"HuberLoss: delta must be positive, but got {delta!r}")
        self.delta = delta

    def forward(self, input, target):
        return F.huber_loss(input, target, reduction=self.reduction, delta=self.delta)


class BCELoss(_Loss):
    """F.binary_cross_entropy of probabilities and targets of one shape,
    with an elementwise weight (a buffer) (torch.nn.BCELoss)."""

    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)

    def forward(self, input, target):
        return F.binary_cross_entropy(input, target, weight=self.weight, reduction=self.reduction)


class BCEWithLogitsLoss(_Loss):
    """F.binary_cross_entropy_with_logits of logits and targets of one shape,
    with weight and pos_weight (buffers, e.g. pos_weight (C) for (N, C))
    (torch.nn.BCEWithLogitsLoss)."""

    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean", pos_weight=None):
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input, target):
        return F.binary_cross_entropy_with_logits(input, target, self.weight, reduction=self.reduction,
                                                  pos_weight=self.pos_weight)


class KLDivLoss(_Loss):
    """F.kl_div of log-probabilities against (log-)probabilities; reduction
    also 'batchmean' (torch.nn.KLDivLoss)."""

    def __init__(self, size_average=None, reduce=None, reduction="mean", log_target=False):
        super().__init__(size_average, reduce, reduction, ("none", "batchmean", "mean", "sum"))
        self.log_target = log_target

    def forward(self, input, target):
        return F.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)


_FUNCTIONS = (leaky_relu, elu, hardtanh, relu6, hardsigmoid, hardswish, mish, prelu, mse_loss, l1_loss, smooth_l1_loss, huber_loss, nll_loss, binary_cross_entropy,
              binary_cross_entropy_with_logits, kl_div, one_hot, normalize, cosine_similarity)
_MODULES = (Identity, ReLU, GELU, Tanh, Sigmoid, SiLU, Softplus, Softmax, LogSoftmax, LeakyReLU, ELU, ReLU6,
            Hardtanh, Hardsigmoid, Hardswish, Mish, PReLU, Flatten,
            Unflatten, CrossEntropyLoss, NLLLoss, MSELoss, L1Loss, SmoothL1Loss, HuberLoss, BCELoss,
            BCEWithLogitsLoss, KLDivLoss)

for _fn in _FUNCTIONS:
    setattr(_functional, _fn.__name__, _fn)
for _cls in _MODULES:
    setattr(nn, _cls.__name__, _cls)


def _embedding_args(num_embeddings, embedding_dim, padding_idx=None, max_norm=None, norm_type=2.0,
                    scale_grad_by_freq=False, sparse=False, _weight=None, _freeze=False, device=None, dtype=None, *,
                    generator=None):
    """torch.nn.Embedding's arguments as tmem's Embedding takes them:
    sizes, padding_idx and tmem's generator; max_norm, scale_grad_by_freq,
    sparse, _weight (use Embedding.from_pretrained), _freeze, and a device
    or dtype other than the CPU's float32 raise ValueError (tmem does not
    implement them); norm_type matters only with max_norm."""
    _refuse("nn.Embedding", max_norm=(max_norm, None), scale_grad_by_freq=(scale_grad_by_freq, False),
            sparse=(sparse, False), _weight=(None if _weight is None else "a tensor", None), _freeze=(_freeze, False),
            device=(None if device is None or str(device).partition(":")[0] == "cpu" else device, None),
            dtype=(None if dtype in (None, _tmem.float32) else dtype, None))
    for name, value in (("num_embeddings", num_embeddings), ("embedding_dim", embedding_dim),
                        ("padding_idx", padding_idx)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise TypeError(f"nn.Embedding: expected {name} to be an int, but got {value!r}")
    return (num_embeddings, embedding_dim), {"padding_idx": padding_idx, "generator": generator}


def _from_pretrained(cls, embeddings, freeze=True, padding_idx=None, max_norm=None, norm_type=2.0,
                     scale_grad_by_freq=False, sparse=False):
    """An Embedding whose weight is a float32 copy of embeddings [V, C]
    (torch.nn.Embedding.from_pretrained; the padding row keeps its values),
    trained unless freeze. ShapeError unless embeddings is 2-D."""
    if embeddings.dim() != 2:
        raise _tmem.ShapeError(f"Embedding.from_pretrained: expected embeddings of shape [V, C], but got "
                               f"{tuple(embeddings.shape)}")
    made = cls(*embeddings.shape, padding_idx=padding_idx, max_norm=max_norm, norm_type=norm_type,
               scale_grad_by_freq=scale_grad_by_freq, sparse=sparse)
    with _tmem.no_grad():
        made.weight.copy_(embeddings)
    made.weight.requires_grad_(not freeze)
    return made


_take_torch_arguments(nn.Embedding, _embedding_args)
nn.Embedding.from_pretrained = classmethod(_from_pretrained)


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False):
    """Scales the gradients of parameters (a tensor or an iterable of them)
    to a joint L2 norm of at most max_norm, and returns the norm before
    clipping as a 0-d float32 tensor (torch.nn.utils.clip_grad_norm_).
    A NaN or infinite norm is returned as it is, the gradients scaled by
    min(1, max_norm / (norm + 1e-6)) as torch's (so they become 0 or NaN;
    check the norm and skip the step); with error_if_nonfinite it is a
    RuntimeError instead, the gradients unchanged. ValueError for a
    norm_type other than 2 (tmem's kernel is the L2 norm)."""
    if norm_type not in (2, 2.0, "fro"):
        raise _tmem.ValueError(f"clip_grad_norm_: norm_type {norm_type!r} is not supported; tmem clips by the L2 "
                               f"norm (norm_type=2)")
    params = [parameters] if isinstance(parameters, _tmem.Tensor) else list(parameters)
    try:
        return _tmem.tensor(nn.clip_grad_norm_(params, max_norm))
    except _tmem.ValueError as e:
        if "non-finite" not in str(e):
            raise
    grads = [p.grad for p in params if p.grad is not None]
    norm = _math.sqrt(sum(float(_tmem.sum(g.double() * g.double()).item()) for g in grads))
    if error_if_nonfinite:
        raise RuntimeError(f"clip_grad_norm_: the total norm of order {norm_type} of the gradients is {norm}, so "
                           f"they cannot be clipped; pass error_if_nonfinite=False to scale them by it anyway")
    coef = max_norm / (norm + 1e-6)
    with _tmem.no_grad():
        for g in grads:
            g.mul_(coef if _math.isnan(coef) else min(coef, 1.0))
    return _tmem.tensor(norm)


def clip_grad_value_(parameters, clip_value):
    """Clamps the gradients of parameters into [-clip_value, clip_value] in
    place (torch.nn.utils.clip_grad_value_)."""
    params = [parameters] if isinstance(parameters, _tmem.Tensor) else list(parameters)
    with _tmem.no_grad():
        for p in params:
            if p.grad is not None:
                p.grad.clamp_(-clip_value, clip_value)


def parameters_to_vector(parameters):
    """The parameters flattened and concatenated into one vector (torch.nn.utils.parameters_to_vector)."""
    return _tmem.cat([p.reshape(-1) for p in parameters], 0)


def vector_to_parameters(vec, parameters):
    """Copies consecutive slices of vec into the parameters (torch.nn.utils.vector_to_parameters).
    ShapeError when vec's length is not the parameters' total."""
    params = list(parameters)
    total = sum(p.numel() for p in params)
    if vec.dim() != 1 or vec.shape[0] != total:
        raise _tmem.ShapeError(f"vector_to_parameters: expected a vector of {total} elements, but got shape "
                               f"{vec.shape}")
    start = 0
    with _tmem.no_grad():
        for p in params:
            p.copy_(vec[start:start + p.numel()].reshape(tuple(p.shape)))
            start += p.numel()


def pad_sequence(sequences, batch_first=False, padding_value=0.0):
    """Tensors [L_i, *] padded with padding_value to the longest L and
    stacked: [L, B, *], or [B, L, *] with batch_first
    (torch.nn.utils.rnn.pad_sequence; differentiable). ShapeError when the
    trailing dims differ, ValueError for no sequences."""
    sequences = list(sequences)
    if not sequences:
        raise _tmem.ValueError("pad_sequence: expected at least one sequence")
    trailing = {tuple(x.shape[1:]) for x in sequences}
    if len(trailing) > 1 or sequences[0].dim() == 0:
        raise _tmem.ShapeError(f"pad_sequence: expected sequences [L, *] with the same trailing dims, but got "
                               f"{[tuple(x.shape) for x in sequences]}")
    longest = max(x.shape[0] for x in sequences)
    padded = [_tmem.pad(x, [0, 0] * (x.dim() - 1) + [0, longest - x.shape[0]], padding_value) for x in sequences]
    return _tmem.stack(padded, 0 if batch_first else 1)


utils = _types.ModuleType("tmem.nn.utils", "torch.nn.utils's gradient clipping and parameter vectors.")
for _fn in (clip_grad_norm_, clip_grad_value_, parameters_to_vector, vector_to_parameters):
    setattr(utils, _fn.__name__, _fn)
utils.rnn = _types.ModuleType("tmem.nn.utils.rnn", "torch.nn.utils.rnn's pad_sequence.")
utils.rnn.pad_sequence = pad_sequence
