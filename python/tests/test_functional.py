"""tmem.nn.functional against torch.nn.functional (values and gradients,
float64), and its refusals. The torch comparisons are skipped, with the
reason in the output, when torch does not import."""
import unittest

import numpy as np

import tmem
import tmem.nn.functional as F

try:
    import torch
    import torch.nn.functional as TF
except ImportError:
    torch = None

RNG = np.random.default_rng(5)


class TestFunctional(unittest.TestCase):
    def test_ops_with_torchs_signature_are_tmems(self):
        for name in ("gelu", "silu", "sigmoid", "tanh", "log_softmax", "layer_norm", "grid_sample",
                     "scaled_dot_product_attention"):
            self.assertIs(getattr(F, name), getattr(tmem, name), name)
        self.assertIs(tmem.nn.functional, F)

    def test_linear_and_pad(self):
        x, w, b = np.arange(6.0).reshape(2, 3), np.arange(12.0).reshape(4, 3) / 7, np.array([1.0, -1, 0.5, 2])
        got = F.linear(tmem.tensor(x), tmem.tensor(w), tmem.tensor(b))
        np.testing.assert_allclose(got.numpy(), x @ w.T + b, rtol=1e-12)
        np.testing.assert_allclose(F.linear(tmem.tensor(x), tmem.tensor(w)).numpy(), x @ w.T, rtol=1e-12)
        np.testing.assert_allclose(F.linear(tmem.tensor(x), tmem.tensor(w[0])).numpy(), x @ w[0], rtol=1e-12)
        with self.assertRaises(tmem.ShapeError):
            F.linear(tmem.tensor(x), tmem.tensor(w.T))
        ones = tmem.ones(1, 2)
        self.assertEqual(F.pad(ones, (1, 0)).numpy().tolist(), [[0.0, 1.0, 1.0]])
        self.assertEqual(F.pad(ones, (0, 1), "constant", 5.0).numpy().tolist(), [[1.0, 1.0, 5.0]])
        with self.assertRaisesRegex(ValueError, "pad: mode 'reflect' is not supported"):
            F.pad(ones, (1, 1), mode="reflect")

    def test_refusals_name_the_option(self):
        x, idx = tmem.randn(3, 4), tmem.tensor([0, 1, 2])
        with self.assertRaisesRegex(ValueError, "embedding: max_norm=1.0 is not supported by tmem"):
            F.embedding(idx, x, max_norm=1.0)
        with self.assertRaisesRegex(ValueError, "embedding: padding_idx 3 is outside the 3 rows"):
            F.embedding(idx, x, padding_idx=3)
        with self.assertRaisesRegex(ValueError, "cross_entropy: size_average=True is not supported"):
            F.cross_entropy(x, idx, size_average=True)
        with self.assertRaisesRegex(ValueError, "cross_entropy: reduction must be"):
            F.cross_entropy(x, idx, tmem.ones(4), reduction="avg")
        with self.assertRaisesRegex(tmem.ShapeError, "cross_entropy: with class weights, input must be"):
            F.cross_entropy(x, idx, tmem.ones(3))


@unittest.skipIf(torch is None, "torch is not installed for this interpreter (apt-get install python3-torch, or "
                                "TMEM_SETUP_TORCH=1 bash tools/setup.sh)")
class TestAgainstTorch(unittest.TestCase):
    def compare(self, tmem_fn, torch_fn, arrays, constants=(), rtol=1e-10):
        """tmem_fn and torch_fn on the same float64 arrays (then constants,
        which need no grad): outputs and the gradients of sum(out * r) for a
        fixed random r."""
        ts = [tmem.tensor(a, requires_grad=True) for a in arrays]
        ps = [torch.tensor(a, requires_grad=True) for a in arrays]
        out = tmem_fn(*ts, *[tmem.tensor(c) for c in constants])
        want = torch_fn(*ps, *[torch.tensor(c) for c in constants])
        np.testing.assert_allclose(out.detach().numpy(), want.detach().numpy(), rtol=rtol, atol=rtol * 1e-2)
        r = RNG.standard_normal(want.shape)
        tmem.sum(out * tmem.tensor(r)).backward()
        (want * torch.tensor(r)).sum().backward()
        for i, (t, p) in enumerate(zip(ts, ps)):
            np.testing.assert_allclose(t.grad.numpy(), p.grad.numpy(), rtol=rtol, atol=rtol * 1e-2, err_msg=f"input {i}")

    def test_cross_entropy_with_class_weights_ignore_index_and_smoothing(self):
        x, w = RNG.standard_normal((6, 4)), RNG.random(4) + 0.5
        t = np.array([0, 3, -100, 2, 1, 3])
        for reduction in ("mean", "sum", "none"):
            for smoothing in (0.0, 0.2):
                kw = dict(reduction=reduction, label_smoothing=smoothing)
                self.compare(lambda a, b, y: F.cross_entropy(a, y, b, **kw),
                             lambda a, b, y: TF.cross_entropy(a, y, b, **kw), [x], [w, t])
        self.compare(lambda a, y: F.cross_entropy(a, y, ignore_index=1),
                     lambda a, y: TF.cross_entropy(a, y, ignore_index=1), [x], [np.array([0, 1, 2, 3, 1, 0])])

    def test_embedding_padding_idx_gets_no_gradient(self):
        idx = np.array([[0, 2, 4], [4, 1, 0]])
        for padding_idx in (None, 0, -1):
            self.compare(lambda w, i: F.embedding(i, w, padding_idx=padding_idx),
                         lambda w, i: TF.embedding(i, w, padding_idx=padding_idx), [RNG.standard_normal((5, 3))],
                         [idx])

    def test_relu_softmax_and_softplus_options(self):
        x = RNG.standard_normal((3, 5)) * 10
        self.compare(lambda a: F.relu(a * 1.0, inplace=True), lambda a: TF.relu(a * 1.0, inplace=True), [x])
        self.compare(lambda a: F.softmax(a, 1, dtype=tmem.float32).double(),
                     lambda a: TF.softmax(a, 1, dtype=torch.float32).double(), [x / 10], rtol=1e-6)
        for beta, threshold in ((1.0, 20.0), (2.0, 5.0), (0.5, 1.0)):
            self.compare(lambda a: F.softplus(a, beta, threshold), lambda a: TF.softplus(a, beta, threshold), [x])
        self.compare(lambda a, b, c: F.linear(a, b, c), TF.linear,
                     [RNG.standard_normal((2, 3)), RNG.standard_normal((4, 3)), RNG.standard_normal(4)])
        self.compare(lambda a: F.pad(a, (1, 2, 0, 1), value=3.0), lambda a: TF.pad(a, (1, 2, 0, 1), value=3.0), [x])


if __name__ == "__main__":
    unittest.main()
