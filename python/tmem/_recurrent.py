"""torch.nn's recurrent layers (RNN, LSTM, GRU and their cells) written in
Python over tmem's ops, with torch's parameter names and layout
(weight_ih_l{k}[_reverse] [G*H, In], weight_hh_l{k} [G*H, H], bias_ih_l{k},
bias_hh_l{k}; gates in torch's order: LSTM i, f, g, o; GRU r, z, n), so a
torch state_dict loads into them and they compute what torch's compute
(torch.nn.LSTM's documented equations). The input projection of every time
step is one matrix product; the recurrence is a Python loop over time,
differentiated through the ops. Initialised as torch's: U(-1/sqrt(H),
1/sqrt(H)) from tmem's default generator."""
import math as _math

from . import _tmem
from ._tmem import nn

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def _cell(mode, x_proj, h, c, w_hh, b_hh):
    """One step: (h', c') from the input's projection x_proj [N, G*H] (bias
    included) and the state h, c [N, H]."""
    hh = h @ w_hh.t()
    if b_hh is not None:
        hh = hh + b_hh
    if mode == "LSTM":
        i, f, g, o = (x_proj + hh).chunk(4, 1)
        c = _tmem.sigmoid(f) * c + _tmem.sigmoid(i) * _tmem.tanh(g)
        return _tmem.sigmoid(o) * _tmem.tanh(c), c
    if mode == "GRU":
        xr, xz, xn = x_proj.chunk(3, 1)
        hr, hz, hn = hh.chunk(3, 1)
        r, z = _tmem.sigmoid(xr + hr), _tmem.sigmoid(xz + hz)
        n = _tmem.tanh(xn + r * hn)
        return (1 - z) * n + z * h, None
    pre = x_proj + hh
    return (_tmem.tanh(pre) if mode == "RNN_TANH" else _tmem.relu(pre)), None


class _RNNBase(nn.Module):
    """The stacked, optionally bidirectional recurrence of torch.nn.RNNBase."""

    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, proj_size=0):
        super().__init__()
        who = {"RNN_TANH": "RNN", "RNN_RELU": "RNN"}.get(mode, mode)
        for name, value in (("input_size", input_size), ("hidden_size", hidden_size), ("num_layers", num_layers)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise _tmem.ValueError(f"{who}: {name} must be an int >= 1, but got {value!r}")
        if not 0 <= dropout <= 1:
            raise _tmem.ValueError(f"{who}: dropout must be in [0, 1], but got {dropout!r}")
        if proj_size:
            raise _tmem.ValueError(f"{who}: proj_size is not supported by tmem")
        self.mode, self.input_size, self.hidden_size, self.num_layers = mode, input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.dropout, self.bidirectional = bias, batch_first, float(dropout), bidirectional
        gates, bound = _GATES[mode] * hidden_size, 1.0 / _math.sqrt(hidden_size)
        directions = 2 if bidirectional else 1
        for layer in range(num_layers):
            for suffix in ("", "_reverse")[:directions]:
                width = input_size if layer == 0 else hidden_size * directions
                shapes = [("weight_ih", (gates, width)), ("weight_hh", (gates, hidden_size))]
                if bias:
                    shapes += [("bias_ih", (gates,)), ("bias_hh", (gates,))]
                for name, shape in shapes:
                    t = _tmem.rand(*shape) * (2 * bound) - bound
                    setattr(self, f"{name}_l{layer}{suffix}", nn.Parameter(t))

    def _weights(self, layer, suffix):
        get = self.__dict__.get
        return (get(f"weight_ih_l{layer}{suffix}"), get(f"weight_hh_l{layer}{suffix}"),
                get(f"bias_ih_l{layer}{suffix}"), get(f"bias_hh_l{layer}{suffix}"))

    def _run(self, x, h, c, layer, suffix):
        """One direction of one layer over x [T, N, In]: outputs [T, N, H], h_n, c_n."""
        w_ih, w_hh, b_ih, b_hh = self._weights(layer, suffix)
        steps, batch = x.shape[0], x.shape[1]
        proj = (x.reshape(steps * batch, x.shape[2]) @ w_ih.t())
        if b_ih is not None:
            proj = proj + b_ih
        proj = proj.reshape(steps, batch, proj.shape[1])
        order = range(steps - 1, -1, -1) if suffix else range(steps)
        outputs = [None] * steps
        for t in order:
            h, c = _cell(self.mode, proj[t], h, c, w_hh, b_hh)
            outputs[t] = h
        return _tmem.stack(outputs, 0), h, c

    def forward(self, input, hx=None):
        """input [T, N, In] ([N, T, In] with batch_first, or [T, In] unbatched)
        and the initial state (zeros when None; an LSTM's a pair (h0, c0)),
        each [layers * directions, N, H] ([.., H] unbatched) -> (output [T, N,
        directions * H], h_n, or (h_n, c_n) for an LSTM). ShapeError for an
        input or state of another shape."""
        who = type(self).__name__
        if input.dim() not in (2, 3) or input.shape[0 if input.dim() == 2 or not self.batch_first else 1] == 0:
            raise _tmem.ShapeError(f"{who}: expected an input of 2 or 3 dims with at least one time step, but got "
                                   f"shape {list(input.shape)}")
        unbatched = input.dim() == 2
        x = input.unsqueeze(1) if unbatched else (_tmem.transpose(input, 0, 1) if self.batch_first else input)
        if x.shape[2] != self.input_size:
            raise _tmem.ShapeError(f"{who}: expected input of size {self.input_size} in its last dim, but got "
                                   f"shape {list(input.shape)}")
        directions = 2 if self.bidirectional else 1
        state_shape = (self.num_layers * directions, x.shape[1], self.hidden_size)
        lstm = self.mode == "LSTM"
        if hx is None:
            zeros = _tmem.zeros(*state_shape, dtype=x.dtype).to(x.device)
            h0, c0 = zeros, (zeros if lstm else None)
        else:
            if lstm and not (isinstance(hx, (tuple, list)) and len(hx) == 2):
                raise TypeError(f"{who}: expected hx to be a pair (h0, c0)")
            if not lstm and not isinstance(hx, _tmem.Tensor):
                raise TypeError(f"{who}: expected hx to be a tensor, but got {type(hx).__name__}")
            h0, c0 = (hx if lstm else (hx, None))
            if unbatched:
                h0, c0 = h0.unsqueeze(1), (c0.unsqueeze(1) if lstm else None)
            for name, s in (("h0", h0), ("c0", c0)):
                if s is not None and tuple(s.shape) != state_shape:
                    raise _tmem.ShapeError(f"{who}: expected {name} of shape {list(state_shape)}, but got "
                                           f"{list(s.shape)}")
        h_n, c_n = [], []
        for layer in range(self.num_layers):
            outs = []
            for d, suffix in enumerate(("", "_reverse")[:directions]):
                k = layer * directions + d
                out, h, c = self._run(x, h0[k], c0[k] if lstm else None, layer, suffix)
                outs.append(out)
                h_n.append(h)
                c_n.append(c)
            x = outs[0] if directions == 1 else _tmem.cat(outs, 2)
            if self.dropout and self.training and layer < self.num_layers - 1:
                x = _tmem.dropout(x, self.dropout, True)
        output = x.squeeze(1) if unbatched else (_tmem.transpose(x, 0, 1) if self.batch_first else x)
        h_n = _tmem.stack(h_n, 0)
        c_n = _tmem.stack(c_n, 0) if lstm else None
        if unbatched:
            h_n, c_n = h_n.squeeze(1), (c_n.squeeze(1) if lstm else None)
        return output, ((h_n, c_n) if lstm else h_n)

    def extra_repr(self):
        out = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            out += f", num_layers={self.num_layers}"
        if self.mode == "RNN_RELU":
            out += ", nonlinearity='relu'"
        for name, default in (("bias", True), ("batch_first", False), ("dropout", 0.0), ("bidirectional", False)):
            if getattr(self, name) != default:
                out += f", {name}={getattr(self, name)}"
        return out


class RNN(_RNNBase):
    """Elman RNN, h' = tanh (or relu) of x W_ih^T + b_ih + h W_hh^T + b_hh (torch.nn.RNN)."""

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False):
        if nonlinearity not in ("tanh", "relu"):
            raise _tmem.ValueError(f"RNN: nonlinearity must be 'tanh' or 'relu', but got {nonlinearity!r}")
        super().__init__("RNN_" + nonlinearity.upper(), input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional)


class LSTM(_RNNBase):
    """Long short-term memory (torch.nn.LSTM): i, f, g, o gates; c' = f c + i g, h' = o tanh(c')."""

    def __init__(self, *args, **kwargs):
        super().__init__("LSTM", *args, **kwargs)


class GRU(_RNNBase):
    """Gated recurrent unit (torch.nn.GRU): r, z, n gates; n = tanh(x W_in + b_in + r (h W_hn + b_hn)),
    h' = (1 - z) n + z h."""

    def __init__(self, *args, **kwargs):
        super().__init__("GRU", *args, **kwargs)


class _CellBase(nn.Module):
    """One step of a recurrence (torch.nn.RNNCellBase): weight_ih, weight_hh, bias_ih, bias_hh."""

    def __init__(self, mode, input_size, hidden_size, bias=True):
        super().__init__()
        self.mode, self.input_size, self.hidden_size, self.bias = mode, input_size, hidden_size, bias
        gates, bound = _GATES[mode] * hidden_size, 1.0 / _math.sqrt(hidden_size)
        shapes = [("weight_ih", (gates, input_size)), ("weight_hh", (gates, hidden_size))]
        if bias:
            shapes += [("bias_ih", (gates,)), ("bias_hh", (gates,))]
        for name, shape in shapes:
            setattr(self, name, nn.Parameter(_tmem.rand(*shape) * (2 * bound) - bound))

    def forward(self, input, hx=None):
        """input [N, In] (or [In]) and the state ([N, H]; an LSTMCell's a pair;
        zeros when None) -> the next state. ShapeError for other shapes,
        TypeError for an LSTMCell's state that is not a pair."""
        who = type(self).__name__
        if input.dim() not in (1, 2) or input.shape[-1] != self.input_size:
            raise _tmem.ShapeError(f"{who}: expected input [N, {self.input_size}] or [{self.input_size}], but got "
                                   f"{list(input.shape)}")
        unbatched = input.dim() == 1
        x = input.unsqueeze(0) if unbatched else input
        lstm = self.mode == "LSTM"
        if hx is None:
            zeros = _tmem.zeros(x.shape[0], self.hidden_size, dtype=x.dtype).to(x.device)
            h, c = zeros, (zeros if lstm else None)
        else:
            if lstm and not (isinstance(hx, (tuple, list)) and len(hx) == 2):
                raise TypeError(f"{who}: expected hx to be a pair (h, c)")
            h, c = hx if lstm else (hx, None)
            want = (self.hidden_size,) if unbatched else (x.shape[0], self.hidden_size)
            for name, t in (("h", h), ("c", c)):
                if t is not None and (not isinstance(t, _tmem.Tensor) or tuple(t.shape) != want):
                    got = list(t.shape) if isinstance(t, _tmem.Tensor) else type(t).__name__
                    raise _tmem.ShapeError(f"{who}: expected the state {name} of shape {list(want)}, but got {got}")
            if unbatched:
                h, c = h.unsqueeze(0), (c.unsqueeze(0) if lstm else None)
        proj = x @ self.weight_ih.t()
        if self.bias:
            proj = proj + self.bias_ih
        h, c = _cell(self.mode, proj, h, c, self.weight_hh, self.bias_hh if self.bias else None)
        if unbatched:
            h, c = h.squeeze(0), (c.squeeze(0) if lstm else None)
        return (h, c) if lstm else h

    def extra_repr(self):
        return f"{self.input_size}, {self.hidden_size}" + ("" if self.bias else ", bias=False")


class RNNCell(_CellBase):
    """One step of torch.nn.RNN (torch.nn.RNNCell)."""

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh"):
        if nonlinearity not in ("tanh", "relu"):
            raise _tmem.ValueError(f"RNNCell: nonlinearity must be 'tanh' or 'relu', but got {nonlinearity!r}")
        super().__init__("RNN_" + nonlinearity.upper(), input_size, hidden_size, bias)


class LSTMCell(_CellBase):
    """One step of torch.nn.LSTM (torch.nn.LSTMCell)."""

    def __init__(self, input_size, hidden_size, bias=True):
        super().__init__("LSTM", input_size, hidden_size, bias)


class GRUCell(_CellBase):
    """One step of torch.nn.GRU (torch.nn.GRUCell)."""

    def __init__(self, input_size, hidden_size, bias=True):
        super().__init__("GRU", input_size, hidden_size, bias)


for _cls in (RNN, LSTM, GRU, RNNCell, LSTMCell, GRUCell):
    setattr(nn, _cls.__name__, _cls)
