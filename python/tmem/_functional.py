"""tmem.nn.functional: torch.nn.functional's names for tmem's ops, so that
``import tmem.nn.functional as F`` runs code written against torch's. The
functions are tmem's own (their signatures already follow torch's); linear
and pad are written here."""
from ._tmem import (cross_entropy, dropout, embedding, gelu, grid_sample, layer_norm, log_softmax,  # noqa: F401
                    relu, scaled_dot_product_attention, sigmoid, silu, softmax, softplus, tanh)
from ._tmem import matmul as _matmul
from ._tmem import pad as _pad


def linear(input, weight, bias=None):
    """input @ weight^T + bias (torch.nn.functional.linear). input (..., C_in),
    weight (C_out, C_in), bias (C_out) or None; the ShapeError of matmul or
    add names the shapes that do not fit."""
    out = _matmul(input, weight.transpose(0, 1) if weight.dim() == 2 else weight)
    return out if bias is None else out + bias


def pad(input, pad, mode="constant", value=None):
    """Constant padding (torch.nn.functional.pad): pad lists (before, after)
    pairs from the last dim backwards; value defaults to 0. Raises ValueError
    for another mode, which tmem does not implement."""
    if mode != "constant":
        raise ValueError(f"pad: mode {mode!r} is not supported (tmem pads with a constant: mode='constant')")
    return _pad(input, pad, 0.0 if value is None else value)
