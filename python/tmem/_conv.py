"""torch's convolution, pooling and batch-norm layers (Conv1d, Conv2d,
MaxPool1d/2d, AvgPool1d/2d, AdaptiveAvgPool2d, BatchNorm1d/2d and their
functions in nn.functional) written in Python over tmem's ops, with torch's
parameter names and shapes (weight [O, C / groups, kH, kW], bias [O];
running_mean, running_var, num_batches_tracked), so a torch state_dict
loads and they compute what torch's compute. A convolution gathers its
input's patches (one strided slice per kernel position, stacked: im2col)
and multiplies them by the weight; pooling reduces the same patches. So
they differentiate through slicing, stack and matmul, at im2col's memory
cost (N C kH kW Ho Wo), which suits small images (Fashion-MNIST) rather
than large ones."""
import math as _math

from . import _functional, _init, _tmem
from ._tmem import nn


def _tuple(value, n, who, name, least=0):
    """value (an int or n ints) as n ints >= least; ValueError otherwise."""
    values = (value,) * n if isinstance(value, int) else tuple(value) if isinstance(value, (tuple, list)) else None
    if values is None or len(values) != n or \
            not all(isinstance(v, int) and not isinstance(v, bool) and v >= least for v in values):
        raise _tmem.ValueError(f"{who}: {name} must be an int or {n} ints >= {least}, but got {value!r}")
    return values


def _patches(x, kernel, stride, dilation, who):
    """The patches of x [N, C, H, W] (already padded): [N, C, kH kW, Ho, Wo]."""
    (kh, kw), (sh, sw), (dh, dw) = kernel, stride, dilation
    h, w = x.shape[2], x.shape[3]
    ho, wo = (h - dh * (kh - 1) - 1) // sh + 1, (w - dw * (kw - 1) - 1) // sw + 1
    if ho <= 0 or wo <= 0:
        raise _tmem.ShapeError(f"{who}: the kernel {kernel} (dilation {dilation}) is larger than the padded input "
                               f"{h} x {w}")
    cols = [x[:, :, i * dh:i * dh + sh * (ho - 1) + 1:sh, j * dw:j * dw + sw * (wo - 1) + 1:sw]
            for i in range(kh) for j in range(kw)]
    return _tmem.stack(cols, 2)


def _padded(x, padding, value):
    ph, pw = padding
    return _functional.pad(x, (pw, pw, ph, ph), value=value) if ph or pw else x


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """The 2-D convolution (cross-correlation) of input [N, C, H, W] (or
    [C, H, W]) with weight [O, C / groups, kH, kW], plus bias [O]
    (torch.nn.functional.conv2d): [N, O, Ho, Wo]. padding may be 'valid'
    or 'same' (stride 1). ShapeError for shapes that do not fit."""
    unbatched = input.dim() == 3
    x = input.unsqueeze(0) if unbatched else input
    if x.dim() != 4 or weight.dim() != 4:
        raise _tmem.ShapeError(f"conv2d: expected input [N, C, H, W] and weight [O, C/groups, kH, kW], but got "
                               f"{list(input.shape)} and {list(weight.shape)}")
    out_channels, per_group, kh, kw = weight.shape
    channels = x.shape[1]
    if not isinstance(groups, int) or groups < 1 or channels % groups or out_channels % groups or \
            channels // groups != per_group:
        raise _tmem.ShapeError(f"conv2d: input with {channels} channels, weight {list(weight.shape)} and groups "
                               f"{groups} do not fit")
    stride, dilation = _tuple(stride, 2, "conv2d", "stride", 1), _tuple(dilation, 2, "conv2d", "dilation", 1)
    if bias is not None and tuple(bias.shape) != (out_channels,):
        raise _tmem.ShapeError(f"conv2d: expected bias of shape [{out_channels}], but got {list(bias.shape)}")
    if kh == 0 or kw == 0:
        raise _tmem.ShapeError(f"conv2d: the kernel {kh} x {kw} is empty")
    if padding == "valid":
        padding = (0, 0)
    elif isinstance(padding, str) and padding != "same":
        raise _tmem.ValueError(f"conv2d: padding must be 'valid', 'same', an int or 2 ints, but got {padding!r}")
    elif padding == "same":
        if stride != (1, 1):
            raise _tmem.ValueError("conv2d: padding='same' needs stride 1")
        total = (dilation[0] * (kh - 1), dilation[1] * (kw - 1))
        x = _functional.pad(x, (total[1] // 2, total[1] - total[1] // 2, total[0] // 2, total[0] - total[0] // 2))
        padding = (0, 0)
    padding = _tuple(padding, 2, "conv2d", "padding")
    cols = _patches(_padded(x, padding, 0.0), (kh, kw), stride, dilation, "conv2d")
    n, _, k, ho, wo = cols.shape
    cols = cols.reshape(n, groups, per_group * k, ho * wo)
    out = weight.reshape(groups, out_channels // groups, per_group * k) @ cols  # [N, g, O / g, Ho Wo]
    out = out.reshape(n, out_channels, ho, wo)
    if bias is not None:
        out = out + bias.reshape(1, out_channels, 1, 1)
    return out.squeeze(0) if unbatched else out


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """The 1-D convolution of input [N, C, L] (or [C, L]) with weight [O, C / groups, k] (torch's conv1d)."""
    unbatched = input.dim() == 2
    x = input.unsqueeze(0) if unbatched else input
    if input.dim() not in (2, 3) or weight.dim() != 3:
        raise _tmem.ShapeError(f"conv1d: expected input [N, C, L] and weight [O, C/groups, k], but got "
                               f"{list(input.shape)} and {list(weight.shape)}")
    pad = padding if isinstance(padding, str) else (0, _tuple(padding, 1, "conv1d", "padding")[0])
    out = conv2d(x.unsqueeze(2), weight.unsqueeze(2), bias, (1, _tuple(stride, 1, "conv1d", "stride")[0]), pad,
                 (1, _tuple(dilation, 1, "conv1d", "dilation")[0]), groups).squeeze(2)
    return out.squeeze(0) if unbatched else out


def _pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, who, reduce, pad_value):
    if ceil_mode:
        raise _tmem.ValueError(f"{who}: ceil_mode=True is not supported by tmem")
    if input.dim() not in (3, 4):
        raise _tmem.ShapeError(f"{who}: expected input [N, C, H, W] or [C, H, W], but got {list(input.shape)}")
    unbatched = input.dim() == 3
    x = input.unsqueeze(0) if unbatched else input
    kernel = _tuple(kernel_size, 2, who, "kernel_size", 1)
    stride = kernel if stride is None or stride == [] else _tuple(stride, 2, who, "stride", 1)
    padding = _tuple(padding, 2, who, "padding")
    if any(2 * p > k for p, k in zip(padding, kernel)):
        raise _tmem.ValueError(f"{who}: padding {padding} should be at most half of kernel_size {kernel}")
    cols = _patches(_padded(x, padding, pad_value), kernel, stride, _tuple(dilation, 2, who, "dilation", 1), who)
    out = reduce(cols)
    return out.squeeze(0) if unbatched else out


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """The maximum of each window of input [N, C, H, W] (torch's max_pool2d;
    padding counts as -inf). ValueError for ceil_mode or return_indices."""
    if return_indices:
        raise _tmem.ValueError("max_pool2d: return_indices=True is not supported by tmem")
    return _pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, "max_pool2d",
                   lambda cols: cols.max(2).values, -_math.inf)  # the first maximum of a window, as torch


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """The mean of each window of input [N, C, H, W] (torch's avg_pool2d,
    padding counted). ValueError for ceil_mode, count_include_pad=False or
    divisor_override."""
    if not count_include_pad or divisor_override is not None:
        raise _tmem.ValueError("avg_pool2d: count_include_pad=False and divisor_override are not supported by tmem")
    return _pool2d(input, kernel_size, stride, padding, 1, ceil_mode, "avg_pool2d", lambda cols: cols.mean(2), 0.0)


def _pool1d(fn, input, kernel_size, stride, padding, **kwargs):
    if input.dim() not in (2, 3):
        raise _tmem.ShapeError(f"{fn.__name__.replace('2d', '1d')}: expected input [N, C, L] or [C, L], but got "
                               f"{list(input.shape)}")
    unbatched = input.dim() == 2
    x = input.unsqueeze(0) if unbatched else input
    stride = None if stride is None else (1, _tuple(stride, 1, fn.__name__, "stride")[0])
    out = fn(x.unsqueeze(2), (1, _tuple(kernel_size, 1, fn.__name__, "kernel_size")[0]), stride,
             (0, _tuple(padding, 1, fn.__name__, "padding")[0]), **kwargs).squeeze(2)
    return out.squeeze(0) if unbatched else out


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """max_pool2d over [N, C, L] (torch's max_pool1d)."""
    return _pool1d(max_pool2d, input, kernel_size, stride, padding, dilation=(1, dilation), ceil_mode=ceil_mode,
                   return_indices=return_indices)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    """avg_pool2d over [N, C, L] (torch's avg_pool1d)."""
    return _pool1d(avg_pool2d, input, kernel_size, stride, padding, ceil_mode=ceil_mode,
                   count_include_pad=count_include_pad)


def adaptive_avg_pool2d(input, output_size):
    """The mean over output_size windows of input [N, C, H, W] (torch's
    adaptive_avg_pool2d), for sizes that divide H and W (1 included).
    ValueError for others."""
    out = _tuple(output_size, 2, "adaptive_avg_pool2d", "output_size")
    if input.dim() not in (3, 4):
        raise _tmem.ShapeError(f"adaptive_avg_pool2d: expected input [N, C, H, W] or [C, H, W], but got "
                               f"{list(input.shape)}")
    h, w = input.shape[-2], input.shape[-1]
    if out[0] == 0 or out[1] == 0 or h % out[0] or w % out[1]:
        raise _tmem.ValueError(f"adaptive_avg_pool2d: output size {out} must divide the input's {h} x {w} in tmem")
    return avg_pool2d(input, (h // out[0], w // out[1]))


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5):
    """Batch normalisation of input [N, C, ...] over every dim but C
    (torch.nn.functional.batch_norm): with the batch's mean and biased
    variance when training (updating running_mean and running_var, when
    given, by momentum with the unbiased variance), else with the running
    ones; then weight and bias [C]."""
    if input.dim() < 2:
        raise _tmem.ShapeError(f"batch_norm: expected input [N, C, ...], but got {list(input.shape)}")
    c = input.shape[1]
    for name, t in (("running_mean", running_mean), ("running_var", running_var), ("weight", weight), ("bias", bias)):
        if t is not None and tuple(t.shape) != (c,):
            raise _tmem.ShapeError(f"batch_norm: expected {name} of shape [{c}] (the input's channels), but got "
                                   f"{list(t.shape)}")
    if training and (not isinstance(momentum, (int, float)) or isinstance(momentum, bool)):
        raise TypeError(f"batch_norm: expected momentum to be a number, but got {momentum!r}")
    dims = tuple(d for d in range(input.dim()) if d != 1)
    shape = (1, c) + (1,) * (input.dim() - 2)
    if training:
        count = input.numel() // c
        if count <= 1:
            raise _tmem.ValueError(f"batch_norm: expected more than 1 value per channel when training, got input "
                                   f"size {list(input.shape)}")
        mean = input.mean(dims, keepdim=True)
        var = ((input - mean) ** 2).mean(dims, keepdim=True)
        if running_mean is not None:
            with _tmem.no_grad():
                running_mean.mul_(1 - momentum).add_(mean.detach().reshape(c) * momentum)
                running_var.mul_(1 - momentum).add_(var.detach().reshape(c) * (momentum * count / (count - 1)))
    else:
        if running_mean is None:
            raise _tmem.ValueError("batch_norm: running_mean and running_var are needed when not training")
        mean, var = running_mean.reshape(*shape), running_var.reshape(*shape)
    out = (input - mean) * _tmem.rsqrt(var + eps)
    if weight is not None:
        out = out * weight.reshape(*shape)
    if bias is not None:
        out = out + bias.reshape(*shape)
    return out


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """Group normalisation (torch.nn.functional.group_norm; Wu & He 2018):
    input [N, C, ...] normalised over each group of C / num_groups channels
    and the rest of the dims (biased variance), then weight and bias [C].
    ValueError when num_groups does not divide C."""
    if input.dim() < 2:
        raise _tmem.ShapeError(f"group_norm: expected input [N, C, ...], but got {list(input.shape)}")
    n, c = input.shape[0], input.shape[1]
    if not isinstance(num_groups, int) or num_groups < 1 or c % num_groups:
        raise _tmem.ValueError(f"group_norm: num_groups {num_groups!r} must divide the {c} channels")
    x = input.reshape(n, num_groups, -1)
    mean = x.mean(2, keepdim=True)
    var = ((x - mean) ** 2).mean(2, keepdim=True)
    out = ((x - mean) * _tmem.rsqrt(var + eps)).reshape(*input.shape)
    shape = (1, c) + (1,) * (input.dim() - 2)
    if weight is not None:
        out = out * weight.reshape(*shape)
    if bias is not None:
        out = out + bias.reshape(*shape)
    return out


class GroupNorm(nn.Module):
    """torch.nn.GroupNorm: group_norm with weight (ones) and bias (zeros) [C] when affine."""

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True):
        super().__init__()
        if not isinstance(num_groups, int) or num_groups < 1 or num_channels % num_groups:
            raise _tmem.ValueError(f"GroupNorm: num_groups {num_groups!r} must divide num_channels {num_channels}")
        self.num_groups, self.num_channels, self.eps, self.affine = num_groups, num_channels, eps, affine
        if affine:
            self.weight = nn.Parameter(_tmem.ones(num_channels))
            self.bias = nn.Parameter(_tmem.zeros(num_channels))

    def forward(self, input):
        if input.dim() < 2 or input.shape[1] != self.num_channels:
            raise _tmem.ShapeError(f"GroupNorm: expected input [N, {self.num_channels}, ...], but got "
                                   f"{list(input.shape)}")
        return group_norm(input, self.num_groups, self.weight if self.affine else None,
                          self.bias if self.affine else None, self.eps)

    def extra_repr(self):
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}"


class _ConvNd(nn.Module):
    def __init__(self, dims, in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                 padding_mode):
        super().__init__()
        who = f"Conv{dims}d"
        if padding_mode != "zeros":
            raise _tmem.ValueError(f"{who}: padding_mode {padding_mode!r} is not supported by tmem (only 'zeros')")
        if not isinstance(groups, int) or groups < 1 or in_channels % groups or out_channels % groups:
            raise _tmem.ValueError(f"{who}: in_channels {in_channels} and out_channels {out_channels} must be "
                                   f"divisible by groups {groups}")
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size = _tuple(kernel_size, dims, who, "kernel_size", 1)
        self.stride = _tuple(stride, dims, who, "stride", 1)
        self.dilation = _tuple(dilation, dims, who, "dilation", 1)
        if isinstance(padding, str) and (padding not in ("valid", "same") or
                                         (padding == "same" and self.stride != (1,) * dims)):
            raise _tmem.ValueError(f"{who}: padding must be 'valid', 'same' (with stride 1), an int or {dims} ints, "
                                   f"but got {padding!r} with stride {self.stride}")
        self.padding = padding if isinstance(padding, str) else _tuple(padding, dims, who, "padding")
        weight = _tmem.zeros(out_channels, in_channels // groups, *self.kernel_size)
        self.weight = nn.Parameter(_init.kaiming_uniform_(weight, a=_math.sqrt(5)))  # torch's reset_parameters
        if bias:
            fan_in = in_channels // groups * _math.prod(self.kernel_size)
            bound = 1 / _math.sqrt(fan_in) if fan_in else 0
            self.bias = nn.Parameter(_tmem.rand(out_channels) * (2 * bound) - bound)
        else:
            self.bias = None

    def extra_repr(self):
        out = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding not in ((0,) * len(self.kernel_size),):
            out += f", padding={self.padding}"
        if self.dilation != (1,) * len(self.kernel_size):
            out += f", dilation={self.dilation}"
        if self.groups != 1:
            out += f", groups={self.groups}"
        return out + ("" if self.bias is not None else ", bias=False")


class Conv2d(_ConvNd):
    """torch.nn.Conv2d: conv2d with weight [O, C / groups, kH, kW] and bias [O]."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros"):
        super().__init__(2, in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode)

    def forward(self, input):
        return conv2d(input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)


class Conv1d(_ConvNd):
    """torch.nn.Conv1d: conv1d with weight [O, C / groups, k] and bias [O]."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros"):
        super().__init__(1, in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode)

    def forward(self, input):
        padding = self.padding if isinstance(self.padding, str) else self.padding[0]
        return conv1d(input, self.weight, self.bias, self.stride[0], padding, self.dilation[0], self.groups)


class _Pool(nn.Module):
    def __init__(self, fn, kernel_size, stride=None, padding=0, **options):
        super().__init__()
        self._fn, self.kernel_size, self.padding = fn, kernel_size, padding
        self.stride = kernel_size if stride is None else stride
        self._options = options

    def forward(self, input):
        return self._fn(input, self.kernel_size, self.stride, self.padding, **self._options)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxPool2d(_Pool):
    """torch.nn.MaxPool2d (max_pool2d)."""

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False, ceil_mode=False):
        super().__init__(max_pool2d, kernel_size, stride, padding, dilation=dilation, ceil_mode=ceil_mode,
                         return_indices=return_indices)


class MaxPool1d(_Pool):
    """torch.nn.MaxPool1d (max_pool1d)."""

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False, ceil_mode=False):
        super().__init__(max_pool1d, kernel_size, stride, padding, dilation=dilation, ceil_mode=ceil_mode,
                         return_indices=return_indices)


class AvgPool2d(_Pool):
    """torch.nn.AvgPool2d (avg_pool2d)."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                 divisor_override=None):
        super().__init__(avg_pool2d, kernel_size, stride, padding, ceil_mode=ceil_mode,
                         count_include_pad=count_include_pad, divisor_override=divisor_override)


class AvgPool1d(_Pool):
    """torch.nn.AvgPool1d (avg_pool1d)."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
        super().__init__(avg_pool1d, kernel_size, stride, padding, ceil_mode=ceil_mode,
                         count_include_pad=count_include_pad)


class AdaptiveAvgPool2d(nn.Module):
    """torch.nn.AdaptiveAvgPool2d (adaptive_avg_pool2d; sizes that divide the input's)."""

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, input):
        return adaptive_avg_pool2d(input, self.output_size)

    def extra_repr(self):
        return f"output_size={self.output_size}"


class _BatchNorm(nn.Module):
    def __init__(self, dims, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True):
        super().__init__()
        if momentum is not None and (not isinstance(momentum, (int, float)) or isinstance(momentum, bool)):
            raise TypeError(f"{type(self).__name__}: expected momentum to be a number or None, but got {momentum!r}")
        self._dims, self.num_features, self.eps, self.momentum = dims, num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        if affine:
            self.weight = nn.Parameter(_tmem.ones(num_features))
            self.bias = nn.Parameter(_tmem.zeros(num_features))
        if track_running_stats:
            self.register_buffer("running_mean", _tmem.zeros(num_features))
            self.register_buffer("running_var", _tmem.ones(num_features))
            self.register_buffer("num_batches_tracked", _tmem.zeros((), dtype=_tmem.int64))
        else:
            self.running_mean = self.running_var = None

    def forward(self, input):
        if input.dim() not in self._dims or input.shape[1] != self.num_features:
            raise _tmem.ShapeError(f"{type(self).__name__}: expected input of {' or '.join(map(str, self._dims))} "
                                   f"dims with {self.num_features} channels in dim 1, but got {list(input.shape)}")
        training = self.training or not self.track_running_stats
        momentum = self.momentum
        if self.training and self.track_running_stats:
            with _tmem.no_grad():
                self.num_batches_tracked.add_(1)
            if momentum is None:  # a cumulative moving average, as torch's
                momentum = 1.0 / self.num_batches_tracked.item()
        track = self.training and self.track_running_stats
        return batch_norm(input, self.running_mean if track or not training else None,
                          self.running_var if track or not training else None,
                          self.weight if self.affine else None, self.bias if self.affine else None, training,
                          momentum, self.eps)

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    """torch.nn.BatchNorm1d: input [N, C] or [N, C, L]."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True):
        super().__init__((2, 3), num_features, eps, momentum, affine, track_running_stats)


class BatchNorm2d(_BatchNorm):
    """torch.nn.BatchNorm2d: input [N, C, H, W]."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True):
        super().__init__((4,), num_features, eps, momentum, affine, track_running_stats)


for _fn in (conv1d, conv2d, max_pool1d, max_pool2d, avg_pool1d, avg_pool2d, adaptive_avg_pool2d, batch_norm,
            group_norm):
    setattr(_functional, _fn.__name__, _fn)
for _cls in (Conv1d, Conv2d, MaxPool1d, MaxPool2d, AvgPool1d, AvgPool2d, AdaptiveAvgPool2d, BatchNorm1d, BatchNorm2d,
             GroupNorm):
    setattr(nn, _cls.__name__, _cls)
