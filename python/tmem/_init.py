"""tmem.nn.init: torch.nn.init's initialisers, each filling its tensor in
place without recording on the tape (as torch's, under no_grad) from tmem's
default generator, and returning it. Bounds and standard deviations are
torch's (torch/nn/init.py): Glorot & Bengio 2010 for xavier_*, He et al.
2015 for kaiming_*."""
import math as _math
import statistics as _statistics
import types as _types
import warnings as _warnings

import numpy as _np

from . import _tensor_ops, _tmem


def calculate_gain(nonlinearity, param=None):
    """The recommended gain for a nonlinearity (torch.nn.init.calculate_gain):
    1 for linear, conv* and sigmoid, 5/3 for tanh, sqrt(2) for relu,
    sqrt(2 / (1 + slope^2)) for leaky_relu (slope param, default 0.01), 3/4
    for selu. ValueError for another name or a slope that is not a number."""
    if nonlinearity in ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                        "conv_transpose3d", "sigmoid"):
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return _math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, (int, float)) and not isinstance(param, bool):
            slope = param
        else:
            raise ValueError(f"calculate_gain: negative_slope {param!r} is not a valid number")
        return _math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"calculate_gain: unsupported nonlinearity {nonlinearity!r}")


def _calculate_fan_in_and_fan_out(tensor):
    """(fan_in, fan_out) of a weight [out, in, *kernel]: in and out times the
    kernel's size. ValueError for fewer than 2 dims."""
    if tensor.dim() < 2:
        raise ValueError(f"fan in and fan out cannot be computed for a tensor of {tensor.dim()} dims (at least 2)")
    receptive = 1
    for n in tensor.shape[2:]:
        receptive *= n
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _fill(tensor, values):
    with _tmem.no_grad():
        tensor.copy_(values)
    return tensor


def uniform_(tensor, a=0.0, b=1.0):
    """tensor filled with U(a, b) samples."""
    return _fill(tensor, _tmem.rand(*tensor.shape, dtype=tensor.dtype).to(tensor.device) * (b - a) + a)


def normal_(tensor, mean=0.0, std=1.0):
    """tensor filled with N(mean, std^2) samples."""
    return _fill(tensor, _tmem.randn(*tensor.shape, dtype=tensor.dtype).to(tensor.device) * std + mean)


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0):
    """tensor filled with samples of N(mean, std^2) truncated to [a, b]:
    a few rounds of redrawing the samples outside, then inverse-CDF draws
    for any left (torch draws every sample by inverse CDF, so the numbers
    differ, the distribution does not); std 0 gives mean clamped to [a, b],
    as torch's. ValueError for a >= b or a negative std."""
    if not a < b or not std >= 0:
        raise ValueError(f"trunc_normal_: expected a < b and std >= 0, but got a {a}, b {b} and std {std}")
    if std == 0:
        return constant_(tensor, min(max(mean, a), b))
    shape = tuple(tensor.shape)
    values = _tmem.randn(*shape, dtype=_tmem.float64) * std + mean
    for _ in range(8):
        outside = (values < a) + (values > b)
        if not _tensor_ops.any(outside).item():
            return _fill(tensor, values.to(tensor.dtype).to(tensor.device))
        values = _tmem.where(outside, _tmem.randn(*shape, dtype=_tmem.float64) * std + mean, values)
    # What is still outside (a narrow or far interval): inverse CDF in the lower tail of the side it lies on, where
    # probabilities keep their precision.
    out = values.numpy().copy()
    left = (out < a) | (out > b)
    unit = _statistics.NormalDist()
    lo, hi = (a - mean) / std, (b - mean) / std
    upper = lo > 0  # an interval above the mean: draw its mirror image below, then mirror back
    p_lo, p_hi = (unit.cdf(-hi), unit.cdf(-lo)) if upper else (unit.cdf(lo), unit.cdf(hi))
    u = _tmem.rand(int(left.sum()), dtype=_tmem.float64).numpy() * (p_hi - p_lo) + p_lo
    z = _np.array([unit.inv_cdf(min(max(q, 1e-300), 1 - 1e-16)) for q in u])
    out[left] = _np.clip(mean + std * (-z if upper else z), a, b)
    return _fill(tensor, _tmem.tensor(out).to(tensor.dtype).to(tensor.device))


def constant_(tensor, val):
    """tensor filled with val."""
    return _fill(tensor, _tmem.full(tuple(tensor.shape), val, dtype=tensor.dtype).to(tensor.device))


def ones_(tensor):
    """tensor filled with 1."""
    return constant_(tensor, 1)


def zeros_(tensor):
    """tensor filled with 0."""
    return constant_(tensor, 0)


def eye_(tensor):
    """A 2-D tensor set to the identity (ones on the diagonal). ValueError for another rank."""
    if tensor.dim() != 2:
        raise ValueError(f"eye_: only 2-D tensors are supported, but got {tensor.dim()} dims")
    return _fill(tensor, _tensor_ops.eye(*tensor.shape, dtype=tensor.dtype).to(tensor.device))


def _empty(tensor, who):
    """Whether tensor has no elements (torch's initialisers warn and leave it)."""
    if tensor.numel() == 0:
        _warnings.warn(f"{who}: initializing a zero-element tensor is a no-op")
        return True
    return False


def xavier_uniform_(tensor, gain=1.0):
    """tensor filled with U(-b, b), b = gain sqrt(6 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    if _empty(tensor, "xavier_uniform_"):
        return tensor
    bound = gain * _math.sqrt(6.0 / float(fan_in + fan_out))
    return uniform_(tensor, -bound, bound)


def xavier_normal_(tensor, gain=1.0):
    """tensor filled with N(0, s^2), s = gain sqrt(2 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    if _empty(tensor, "xavier_normal_"):
        return tensor
    return normal_(tensor, 0.0, gain * _math.sqrt(2.0 / float(fan_in + fan_out)))


def _kaiming_std(tensor, a, mode, nonlinearity, who):
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"{who}: mode must be 'fan_in' or 'fan_out', but got {mode!r}")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    fan = fan_in if mode == "fan_in" else fan_out
    return calculate_gain(nonlinearity, a) / _math.sqrt(fan)


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu"):
    """tensor filled with U(-b, b), b = gain sqrt(3 / fan) (fan_in or fan_out by mode)."""
    if _empty(tensor, "kaiming_uniform_"):
        return tensor
    bound = _math.sqrt(3.0) * _kaiming_std(tensor, a, mode, nonlinearity, "kaiming_uniform_")
    return uniform_(tensor, -bound, bound)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu"):
    """tensor filled with N(0, s^2), s = gain / sqrt(fan)."""
    if _empty(tensor, "kaiming_normal_"):
        return tensor
    return normal_(tensor, 0.0, _kaiming_std(tensor, a, mode, nonlinearity, "kaiming_normal_"))


def orthogonal_(tensor, gain=1.0, generator=None):
    """Fills tensor (at least 2-D, read as rows x the rest) with a (semi-)
    orthogonal matrix times gain (torch.nn.init.orthogonal_; Saxe et al.
    2013): the Q of the QR decomposition of N(0, 1) draws of generator (the
    default one when None), its columns' signs set by R's diagonal.
    ValueError for fewer than 2 dims."""
    if tensor.dim() < 2:
        raise _tmem.ValueError(f"orthogonal_: only tensors with 2 or more dims are supported, but got "
                               f"{tensor.dim()}")
    rows = tensor.shape[0]
    cols = tensor.numel() // rows if rows else 0
    if rows == 0 or cols == 0:
        return tensor
    flat = _tmem.randn(rows, cols, dtype=_tmem.float64, generator=generator).numpy()
    q, r = _np.linalg.qr(flat.T if rows < cols else flat)
    q = q * _np.sign(_np.diag(r))
    q = q.T if rows < cols else q
    return _fill(tensor, _tmem.tensor(gain * q.reshape(tuple(tensor.shape))).to(tensor.device))


init = _types.ModuleType("tmem.nn.init", __doc__)
for _f in (calculate_gain, _calculate_fan_in_and_fan_out, uniform_, normal_, trunc_normal_, constant_, ones_, zeros_,
           eye_, xavier_uniform_, xavier_normal_, kaiming_uniform_, kaiming_normal_, orthogonal_):
    setattr(init, _f.__name__, _f)
