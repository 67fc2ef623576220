"""nn.RNN, LSTM, GRU and their cells (python/tmem/_recurrent.py): torch's parameter names, values and gradients
against torch 1.13 with its weights loaded (where torch imports), and hand-computed steps without torch."""
import math
import unittest

import numpy as np

import tmem
import tmem.nn as nn

try:
    import torch
except ImportError:
    torch = None

RNG = np.random.default_rng(5)


def as_float64(module):
    for p in module.parameters():
        p.data = p.to(tmem.float64)
    return module


class TestWithoutTorch(unittest.TestCase):
    def test_cells_by_hand(self):
        """All weights 0: every sigmoid gate is 1/2 and tanh(0) = 0, so an LSTM step halves c and h = tanh(c) / 2;
        a GRU step gives h' = (n + h) / 2 with n = 0."""
        cell = nn.LSTMCell(2, 3)
        for p in cell.parameters():
            nn.init.zeros_(p)
        h, c = cell(tmem.ones(1, 2), (tmem.zeros(1, 3), tmem.full((1, 3), 2.0)))
        self.assertEqual(c.tolist(), [[1.0] * 3])
        np.testing.assert_allclose(h.numpy(), [[0.5 * math.tanh(1.0)] * 3], rtol=1e-6)
        gru = nn.GRUCell(2, 3)
        for p in gru.parameters():
            nn.init.zeros_(p)
        self.assertEqual(gru(tmem.ones(2), tmem.full((3,), 4.0)).tolist(), [2.0] * 3)
        rnn = nn.RNNCell(1, 1, nonlinearity="relu", bias=False)
        nn.init.ones_(rnn.weight_ih)
        nn.init.constant_(rnn.weight_hh, 2.0)
        self.assertEqual(rnn(tmem.tensor([[3.0]]), tmem.tensor([[-5.0]])).tolist(), [[0.0]])  # relu(3 - 10)

    def test_layouts_and_shapes(self):
        lstm = nn.LSTM(3, 4, num_layers=2, bidirectional=True, batch_first=True)
        self.assertEqual([(n, p.shape) for n, p in lstm.named_parameters()][:5],
                         [("weight_ih_l0", (16, 3)), ("weight_hh_l0", (16, 4)), ("bias_ih_l0", (16,)),
                          ("bias_hh_l0", (16,)), ("weight_ih_l0_reverse", (16, 3))])
        self.assertEqual(lstm.weight_ih_l1.shape, (16, 8))
        out, (h, c) = lstm(tmem.randn(2, 5, 3))
        self.assertEqual((out.shape, h.shape, c.shape), ((2, 5, 8), (4, 2, 4), (4, 2, 4)))
        out, h = nn.GRU(3, 4)(tmem.randn(5, 3))  # unbatched
        self.assertEqual((out.shape, h.shape), ((5, 4), (1, 4)))
        bound = 1 / math.sqrt(4)
        self.assertTrue(all(float(np.abs(p.numpy()).max()) <= bound for p in lstm.parameters()))
        self.assertEqual(repr(nn.GRU(3, 4, num_layers=2, batch_first=True)),
                         "GRU(3, 4, num_layers=2, batch_first=True)")
        with self.assertRaisesRegex(tmem.ShapeError, "LSTM: expected input of size 3 in its last dim"):
            nn.LSTM(3, 4)(tmem.randn(5, 2, 4))
        with self.assertRaisesRegex(tmem.ShapeError, "GRU: expected h0 of shape \\[1, 2, 4\\], but got \\[2, 4\\]"):
            nn.GRU(3, 4)(tmem.randn(5, 2, 3), tmem.zeros(2, 4))
        with self.assertRaisesRegex(tmem.ValueError, "RNN: nonlinearity must be 'tanh' or 'relu'"):
            nn.RNN(3, 4, nonlinearity="gelu")


    def test_states_and_inputs_are_checked(self):
        """Found by a tester: a single tensor given to LSTMCell was unpacked along its first dim and ran."""
        with self.assertRaisesRegex(TypeError, "LSTMCell: expected hx to be a pair \\(h, c\\)"):
            nn.LSTMCell(3, 4)(tmem.randn(2, 3), tmem.zeros(2, 4))
        with self.assertRaisesRegex(tmem.ShapeError, "RNNCell: expected input \\[N, 3\\] or \\[3\\]"):
            nn.RNNCell(3, 4)(tmem.randn(2, 2, 3))
        with self.assertRaisesRegex(tmem.ShapeError, "RNNCell: expected the state h of shape \\[4\\], but got "
                                                     "\\[1, 4\\]"):
            nn.RNNCell(3, 4)(tmem.randn(3), tmem.zeros(1, 4))
        with self.assertRaisesRegex(TypeError, "GRU: expected hx to be a tensor, but got tuple"):
            nn.GRU(3, 4)(tmem.randn(5, 2, 3), (tmem.zeros(1, 2, 4),))
        with self.assertRaisesRegex(tmem.ShapeError, "LSTM: expected an input of 2 or 3 dims with at least one"):
            nn.LSTM(3, 4)(tmem.zeros(0, 2, 3))


@unittest.skipIf(torch is None, "torch does not import (Debian: python3-torch)")
class TestAgainstTorch(unittest.TestCase):
    def compare(self, mine, theirs, x, state=None):
        """Loads theirs' weights into mine (float64), runs both on x (and state), and compares outputs, final
        states and the gradients of every parameter and of x for a random weighting of the output."""
        mine.load_state_dict({k: tmem.tensor(v.detach().numpy(), dtype=tmem.float64)
                              for k, v in theirs.state_dict().items()})
        xt, xm = torch.tensor(x, requires_grad=True), tmem.tensor(x, dtype=tmem.float64, requires_grad=True)
        st = None if state is None else tuple(torch.tensor(s) for s in state)
        sm = None if state is None else tuple(tmem.tensor(s, dtype=tmem.float64) for s in state)
        if state is not None and len(state) == 1:
            st, sm = st[0], sm[0]
        ot, om = theirs(xt, st) if st is not None else theirs(xt), mine(xm, sm) if sm is not None else mine(xm)
        flat_t = [ot] if isinstance(ot, torch.Tensor) else [ot[0], *(ot[1] if isinstance(ot[1], tuple) else (ot[1],))]
        flat_m = [om] if isinstance(om, tmem.Tensor) else [om[0], *(om[1] if isinstance(om[1], tuple) else (om[1],))]
        for a, b in zip(flat_m, flat_t):
            np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-10, atol=1e-12)
        weights = [RNG.standard_normal(tuple(b.shape)) for b in flat_t]
        sum(tmem.sum(a * tmem.tensor(w)) for a, w in zip(flat_m, weights)).backward()
        sum((b * torch.tensor(w)).sum() for b, w in zip(flat_t, weights)).backward()
        np.testing.assert_allclose(xm.grad.numpy(), xt.grad.numpy(), rtol=1e-10, atol=1e-12)
        grads = dict(theirs.named_parameters())
        self.assertEqual([n for n, _ in mine.named_parameters()], list(grads))
        for name, p in mine.named_parameters():
            np.testing.assert_allclose(p.grad.numpy(), grads[name].grad.numpy(), rtol=1e-10, atol=1e-12,
                                       err_msg=name)

    def test_layers(self):
        for cls, kw in (("LSTM", {}), ("GRU", {}), ("RNN", {}), ("RNN", {"nonlinearity": "relu", "bias": False}),
                        ("LSTM", {"num_layers": 2, "bidirectional": True}),
                        ("GRU", {"num_layers": 3, "batch_first": True}), ("GRU", {"bidirectional": True})):
            with self.subTest(cls=cls, **kw):
                mine = as_float64(getattr(nn, cls)(3, 4, **kw))
                theirs = getattr(torch.nn, cls)(3, 4, **kw).double()
                self.compare(mine, theirs, RNG.standard_normal((5, 2, 3)))
        layers = 2
        h0, c0 = RNG.standard_normal((layers, 2, 4)), RNG.standard_normal((layers, 2, 4))
        self.compare(as_float64(nn.LSTM(3, 4, layers)), torch.nn.LSTM(3, 4, layers).double(),
                     RNG.standard_normal((6, 2, 3)), (h0, c0))
        self.compare(as_float64(nn.GRU(3, 4)), torch.nn.GRU(3, 4).double(), RNG.standard_normal((6, 3)),
                     (RNG.standard_normal((1, 4)),))

    def test_cells(self):
        for cls in ("LSTMCell", "GRUCell", "RNNCell"):
            with self.subTest(cls=cls):
                mine, theirs = as_float64(getattr(nn, cls)(3, 4)), getattr(torch.nn, cls)(3, 4).double()
                h = RNG.standard_normal((2, 4))
                state = (h, RNG.standard_normal((2, 4))) if cls == "LSTMCell" else (h,)
                self.compare(mine, theirs, RNG.standard_normal((2, 3)), state)


if __name__ == "__main__":
    unittest.main()
