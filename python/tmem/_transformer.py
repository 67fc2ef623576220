"""torch.nn.TransformerEncoderLayer and TransformerEncoder written in Python
over tmem's ops, with torch's module and parameter names (self_attn.
in_proj_weight [3E, E], self_attn.out_proj, linear1, linear2, norm1, norm2),
so that a torch state_dict loads into them and they compute what torch's
compute (torch/nn/modules/transformer.py: post-norm by default, pre-norm
with norm_first). tmem's own nn.MultiheadAttention (x -> x, causal by
default) keeps its API; the layer's self_attn is torch's multi-head
attention (query, key, value -> (output, weights)), as an encoder layer's
part."""
import copy as _copy
import math as _math

from . import _functional, _init, _tmem
from ._tmem import nn


def _additive(mask, dtype, who):
    """A mask as torch's attention takes it, made additive: a floating mask
    is added as it is; an int64 one (tmem's comparisons; torch's bool) has
    its non-zero places masked out (-inf)."""
    if mask is None:
        return None
    if not isinstance(mask, _tmem.Tensor):
        raise TypeError(f"{who}: expected a mask tensor, but got {type(mask).__name__}")
    if mask.dtype == _tmem.int64:
        return _tmem.where(mask != 0, -_math.inf, 0.0).to(dtype)
    return mask.to(dtype)


class _EncoderSelfAttention(nn.Module):
    """torch.nn.MultiheadAttention's parameters (in_proj_weight [3E, E],
    in_proj_bias [3E], out_proj) and forward (query, key, value [L, N, E],
    or [N, L, E] with batch_first; attn_mask [L, S] or [N*H, L, S];
    key_padding_mask [N, S], non-zero = padding) -> (output, the attention
    weights averaged over heads, or None without need_weights)."""

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, batch_first=False):
        super().__init__()
        if embed_dim % num_heads:
            raise _tmem.ValueError(f"MultiheadAttention: embed_dim {embed_dim} is not divisible by num_heads "
                                   f"{num_heads}")
        self.embed_dim, self.num_heads, self.dropout, self.batch_first = embed_dim, num_heads, dropout, batch_first
        self.in_proj_weight = nn.Parameter(_init.xavier_uniform_(_tmem.zeros(3 * embed_dim, embed_dim)))
        self.in_proj_bias = nn.Parameter(_tmem.zeros(3 * embed_dim)) if bias else None
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        if bias:
            _init.zeros_(self.out_proj.bias)

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True, is_causal=False):
        if query.dim() != key.dim() or query.dim() != value.dim() or query.dim() not in (2, 3):
            raise _tmem.ShapeError(f"MultiheadAttention: expected query, key and value of 2 or 3 dims alike, but got "
                                   f"{list(query.shape)}, {list(key.shape)} and {list(value.shape)}")
        if query.dim() == 2:  # unbatched [L, E]
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
            out, weights = self.forward(*(t.unsqueeze(0 if self.batch_first else 1) for t in (query, key, value)),
                                        key_padding_mask, need_weights, attn_mask, average_attn_weights, is_causal)
            return out.squeeze(0 if self.batch_first else 1), (None if weights is None else weights.squeeze(0))
        if self.batch_first:
            query, key, value = (_tmem.transpose(t, 0, 1) for t in (query, key, value))
        length, batch, e = query.shape
        source = key.shape[0]
        if e != self.embed_dim or key.shape[2] != e or value.shape[2] != e or value.shape[:2] != key.shape[:2] or \
                key.shape[1] != batch:
            raise _tmem.ShapeError(f"MultiheadAttention: expected query [L, N, {self.embed_dim}] and key, value "
                                   f"[S, N, {self.embed_dim}] (batch first when batch_first), but got "
                                   f"{list(query.shape)}, {list(key.shape)} and {list(value.shape)}")
        h, dh = self.num_heads, e // self.num_heads
        w, b = self.in_proj_weight, self.in_proj_bias
        chunks = w.chunk(3, 0)
        biases = b.chunk(3, 0) if b is not None else (None, None, None)

        def project(x, wi, bi, n):
            y = x @ wi.t()
            if bi is not None:
                y = y + bi
            return y.reshape(n, batch, h, dh).permute(1, 2, 0, 3)  # [N, H, n, Dh]
        q, k, v = (project(x, wi, bi, n) for x, wi, bi, n in zip((query, key, value), chunks, biases,
                                                                  (length, source, source)))
        mask = _additive(attn_mask, q.dtype, "MultiheadAttention")
        if mask is not None:
            if tuple(mask.shape) not in ((length, source), (batch * h, length, source)):
                raise _tmem.ShapeError(f"MultiheadAttention: expected attn_mask of shape {[length, source]} or "
                                       f"{[batch * h, length, source]}, but got {list(mask.shape)}")
            if mask.dim() == 3:
                mask = mask.reshape(batch, h, length, source)
        pad = _additive(key_padding_mask, q.dtype, "MultiheadAttention")
        if pad is not None:
            if tuple(pad.shape) != (batch, source):
                raise _tmem.ShapeError(f"MultiheadAttention: expected key_padding_mask of shape {[batch, source]}, "
                                       f"but got {list(pad.shape)}")
            pad = pad.reshape(batch, 1, 1, source)
            mask = pad if mask is None else mask + pad
        if is_causal and mask is None:
            mask = _tmem.triu(_tmem.full((length, source), -_math.inf, dtype=q.dtype), 1)
        p = self.dropout if self.training else 0.0
        out = _tmem.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)
        out = _tmem.transpose(out, 1, 2).reshape(batch, length, e)
        out = self.out_proj(out)
        out = out if self.batch_first else _tmem.transpose(out, 0, 1)
        if not need_weights:
            return out, None
        # The weights before attention dropout (torch returns them after it, in training).
        scores = (q @ k.transpose(-2, -1)) * (1.0 / _math.sqrt(dh))
        weights = _tmem.softmax(scores if mask is None else scores + mask, -1)
        return out, (weights.mean(1) if average_attn_weights else weights)

    def extra_repr(self):
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}"


_ACTIVATIONS = {"relu": _tmem.relu, "gelu": _tmem.gelu}  # by name, so a layer pickles (the C++ functions do not)


class TransformerEncoderLayer(nn.Module):
    """torch.nn.TransformerEncoderLayer: self-attention and a feed-forward
    block (linear1, activation, dropout, linear2), each with a residual and
    a LayerNorm after it (or before it, with norm_first). src [S, N, E]
    ([N, S, E] with batch_first; [S, E] unbatched) -> the same shape."""

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu", layer_norm_eps=1e-5,
                 batch_first=False, norm_first=False, bias=True):
        super().__init__()
        named = {fn: name for name, fn in _ACTIVATIONS.items()}
        activation = named.get(activation, activation)
        if activation is _functional.relu:
            activation = "relu"
        if isinstance(activation, str) and activation not in _ACTIVATIONS:
            raise _tmem.ValueError(f"TransformerEncoderLayer: activation should be relu/gelu, not {activation!r}")
        self.self_attn = _EncoderSelfAttention(d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first)
        self.linear1 = nn.Linear(d_model, dim_feedforward, bias=bias)
        self.dropout = nn.Dropout(dropout)
        self.linear2 = nn.Linear(dim_feedforward, d_model, bias=bias)
        self.norm_first, self.batch_first = norm_first, batch_first
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.dropout1, self.dropout2 = nn.Dropout(dropout), nn.Dropout(dropout)
        self.activation = activation  # a name ('relu', 'gelu') or a callable

    def _sa(self, x, mask, padding, is_causal):
        return self.dropout1(self.self_attn(x, x, x, attn_mask=mask, key_padding_mask=padding, need_weights=False,
                                            is_causal=is_causal)[0])

    def _ff(self, x):
        act = _ACTIVATIONS[self.activation] if isinstance(self.activation, str) else self.activation
        return self.dropout2(self.linear2(self.dropout(act(self.linear1(x)))))

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        if src.dim() not in (2, 3):
            raise _tmem.ShapeError(f"TransformerEncoderLayer: expected src of 2 or 3 dims, but got {list(src.shape)}")
        unbatched = src.dim() == 2
        x = src.unsqueeze(0 if self.batch_first else 1) if unbatched else src
        padding = src_key_padding_mask
        if padding is not None and unbatched:
            padding = padding.unsqueeze(0)
        if self.norm_first:
            x = x + self._sa(self.norm1(x), src_mask, padding, is_causal)
            x = x + self._ff(self.norm2(x))
        else:
            x = self.norm1(x + self._sa(x, src_mask, padding, is_causal))
            x = self.norm2(x + self._ff(x))
        return x.squeeze(0 if self.batch_first else 1) if unbatched else x


class TransformerEncoder(nn.Module):
    """torch.nn.TransformerEncoder: num_layers deep copies of encoder_layer
    (layers.0, layers.1, ...), then norm when given."""

    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True, mask_check=True):
        super().__init__()
        self.layers = nn.ModuleList([_copy.deepcopy(encoder_layer) for _ in range(num_layers)])
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        x = src
        for layer in self.layers:
            x = layer(x, src_mask=mask, src_key_padding_mask=src_key_padding_mask, is_causal=bool(is_causal))
        return self.norm(x) if self.norm is not None else x


for _cls in (TransformerEncoderLayer, TransformerEncoder):
    setattr(nn, _cls.__name__, _cls)
