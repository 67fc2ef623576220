"""The Tensor Memory ops, layer_norm and attention against PyTorch on the
same inputs, values and gradients (float64), and DLPack exchange with torch.
Skipped, with the reason in the output, when torch does not import (CTest
reports the test as skipped)."""
import unittest

import numpy as np

import tmem

try:
    import torch
except ImportError:
    torch = None

RNG = np.random.default_rng(2)


def randn(*shape):
    return RNG.standard_normal(shape)


def compare_with_torch(tmem_fn, torch_fn, arrays, rtol=1e-10, atol=1e-12):
    """Runs tmem_fn and torch_fn on the same float64 inputs and compares the
    outputs and the gradients of sum(out * w) for a fixed random w."""
    ts = [tmem.tensor(a, dtype=tmem.float64, requires_grad=True) for a in arrays]
    ps = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in arrays]
    out, want = tmem_fn(*ts), torch_fn(*ps)
    np.testing.assert_allclose(out.numpy(), want.detach().numpy(), rtol=rtol, atol=atol, err_msg="values")
    w = np.random.default_rng(9).standard_normal(out.shape)
    tmem.sum(out * tmem.tensor(w)).backward()
    (want * torch.tensor(w)).sum().backward()
    for i, (t, p) in enumerate(zip(ts, ps)):
        np.testing.assert_allclose(t.grad.numpy(), p.grad.numpy(), rtol=rtol, atol=atol,
                                   err_msg=f"gradient of input {i}")


def torch_attention(q, k, v, causal):
    """softmax(q k^T / sqrt(d) + causal mask) v composed in PyTorch."""
    s = q @ k.transpose(-1, -2) / np.sqrt(q.shape[-1])
    if causal:
        T, S = s.shape[-2:]
        s = s.masked_fill(torch.ones(T, S, dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(s, -1) @ v


def torch_splat(content, mu, sigma, D, H, W):
    """gaussian_splat's formula (ops/gaussian_splat.h) written in PyTorch."""
    lin = lambda n: torch.zeros(1, dtype=torch.float64) if n == 1 else torch.linspace(-1, 1, n, dtype=torch.float64)
    z, y, x = torch.meshgrid(lin(D), lin(H), lin(W), indexing="ij")
    d2 = ((x[None] - mu[:, 0, None, None, None]) ** 2 + (y[None] - mu[:, 1, None, None, None]) ** 2 +
          (z[None] - mu[:, 2, None, None, None]) ** 2)
    g = torch.exp(-d2 / (2 * sigma[:, None, None, None] ** 2 + 1e-6))
    return content[:, :, None, None, None] * g[:, None]


@unittest.skipIf(torch is None, "torch is not installed for this interpreter (apt-get install python3-torch, or "
                                "TMEM_SETUP_TORCH=1 bash tools/setup.sh)")
class TestAgainstTorch(unittest.TestCase):
    def test_grid_sample(self):
        x, g = randn(2, 3, 4, 5, 6), np.tanh(randn(2, 3, 2, 2, 3)) * 1.1
        for pad in ("zeros", "border", "reflection"):
            for align in (False, True):
                with self.subTest(padding_mode=pad, align_corners=align):
                    compare_with_torch(
                        lambda a, b: tmem.grid_sample(a, b, padding_mode=pad, align_corners=align),
                        lambda a, b: torch.nn.functional.grid_sample(a, b, padding_mode=pad, align_corners=align),
                        [x, g])
        x2, g2 = randn(2, 3, 5, 4), np.tanh(randn(2, 3, 2, 2)) * 1.1
        compare_with_torch(lambda a, b: tmem.grid_sample(a, b, align_corners=False),
                           lambda a, b: torch.nn.functional.grid_sample(a, b, align_corners=False), [x2, g2])

    def test_gaussian_splat_against_its_formula(self):
        compare_with_torch(lambda c, m, s: tmem.gaussian_splat(c, m, s, 3, 4, 5),
                           lambda c, m, s: torch_splat(c, m, s, 3, 4, 5),
                           [randn(2, 3), np.tanh(randn(2, 3)), np.array([0.3, 0.7])])

    def test_layer_norm(self):
        compare_with_torch(lambda y, w, b: tmem.layer_norm(y, (8,), w, b),
                           lambda y, w, b: torch.nn.functional.layer_norm(y, (8,), w, b),
                           [randn(3, 8), randn(8), randn(8)])

    def test_attention(self):
        for causal in (False, True):
            with self.subTest(is_causal=causal):
                compare_with_torch(lambda q, k, v: tmem.scaled_dot_product_attention(q, k, v, is_causal=causal),
                                   lambda q, k, v: torch_attention(q, k, v, causal),
                                   [randn(1, 2, 4, 3), randn(1, 2, 4, 3), randn(1, 2, 4, 5)])

    def test_dlpack_with_torch(self):
        t = tmem.tensor([[1.0, 2.0], [3.0, 4.0]])
        pt = torch.utils.dlpack.from_dlpack(t)
        pt[0, 0] = 9.0
        self.assertEqual(t[0, 0].item(), 9.0)
        src = torch.arange(6, dtype=torch.float64).reshape(2, 3)
        back = tmem.from_dlpack(src)
        src[1, 2] = -1.0
        np.testing.assert_array_equal(back.numpy(), src.numpy())
        self.assertEqual(back.numpy().ctypes.data, src.data_ptr())
        col = tmem.from_dlpack(torch.arange(12, dtype=torch.int64).reshape(3, 4).t())
        self.assertEqual(col.stride(), (1, 4))
        np.testing.assert_array_equal(col.numpy(), np.arange(12).reshape(3, 4).T)

    def test_int64_ops_as_torch(self):
        """where, masked_fill, clamp, gather and matmul of int64 tensors give torch's values and dtypes (they
        raised DtypeError), with torch's promotion to float32 for a float operand or bound."""
        a = np.array([1, -2, 3, 2**62 + 1])
        b = np.array([4, 5, 6, 7])
        ta, tb, pa, pb = tmem.tensor(a), tmem.tensor(b), torch.tensor(a), torch.tensor(b)

        def same(got, want):
            self.assertEqual(str(got.dtype).split(".")[-1], str(want.dtype).split(".")[-1])
            self.assertEqual(got.tolist(), want.tolist())

        same(tmem.where(ta > 0, ta, tb), torch.where(pa > 0, pa, pb))
        same(tmem.where(ta > 0, ta, 7), torch.where(pa > 0, pa, 7))
        same(tmem.where(ta > 0, 1, 2), torch.where(pa > 0, 1, 2))  # two ints: int64 (it was float32)
        same(tmem.where(ta > 0, 1.5, 2), torch.where(pa > 0, 1.5, 2))
        same(tmem.where(ta > 0, ta, 0.5), torch.where(pa > 0, pa, 0.5))
        same(ta.masked_fill(ta > 2, 0.7), pa.masked_fill(pa > 2, 0.7))
        same(ta.masked_fill(ta < 0, 2**40), pa.masked_fill(pa < 0, 2**40))
        for lo, hi in ((0, 2), (None, 3), (-1, None), (0.5, 2.5)):
            same(tmem.clamp(ta, lo, hi), torch.clamp(pa, lo, hi))
        idx = np.array([[1, 0], [1, 1]])
        same(tmem.gather(tmem.tensor(a.reshape(2, 2)), 1, tmem.tensor(idx)),
             torch.gather(torch.tensor(a.reshape(2, 2)), 1, torch.tensor(idx)))
        m, n = np.arange(24).reshape(2, 3, 4) - 9, np.arange(20).reshape(4, 5) * 3
        same(tmem.tensor(m) @ tmem.tensor(n), torch.tensor(m) @ torch.tensor(n))
        same(tmem.matmul(tmem.tensor(m[:, :1]), tmem.tensor(n[None])), torch.matmul(torch.tensor(m[:, :1]),
                                                                                      torch.tensor(n[None])))
        # Integers past 2^53 exactly (they went through a double: 2**62 + 1 became 2**62).
        for v in (2**62 + 1, 2**63 - 1, -2**63):
            same(ta.masked_fill(ta > 2, v), pa.masked_fill(pa > 2, v))
            same(ta.masked_fill(ta > 2, np.int64(v)), pa.masked_fill(pa > 2, v))
            same(tmem.clamp(ta, max=v), torch.clamp(pa, max=v))
            same(tmem.clamp(ta, min=v), torch.clamp(pa, min=v))
        same(ta.masked_fill(ta > 2, tmem.tensor(2**62 + 3)), pa.masked_fill(pa > 2, torch.tensor(2**62 + 3)))
        with self.assertRaisesRegex(tmem.ShapeError, "masked_fill: expected a 0-d value tensor, but got shape"):
            ta.masked_fill(ta > 2, tmem.tensor([5]))
        # A 0-d float value tensor gets its gradient, as torch's Tensor overload.
        x, v = tmem.tensor([1.0, 2.0, 3.0], requires_grad=True), tmem.tensor(4.0, requires_grad=True)
        px, pv = torch.tensor([1.0, 2.0, 3.0], requires_grad=True), torch.tensor(4.0, requires_grad=True)
        tmem.sum(x.masked_fill(x > 1.5, v) * tmem.tensor([1.0, 2.0, 3.0])).backward()
        (px.masked_fill(px > 1.5, pv) * torch.tensor([1.0, 2.0, 3.0])).sum().backward()
        self.assertEqual((x.grad.tolist(), v.grad.item()), (px.grad.tolist(), pv.grad.item()))
        with self.assertRaisesRegex(ValueError, "clamp: at least one of min and max must not be None"):
            tmem.clamp(ta)
        with self.assertRaisesRegex(ValueError, "masked_fill: value nan cannot be converted to int64"):
            ta.masked_fill(ta > 0, float("nan"))

    def test_gradient_hooks_as_torchs(self):
        """register_hook on leaves and non-leaves and retain_grad give torch's gradients: every hook sees the
        gradient summed over all uses of its tensor, once, and hooks chain in registration order."""
        x0 = randn(3, 4)
        w0 = randn(4, 2)

        def run(lib):
            x = lib.tensor(x0, requires_grad=True)
            w = lib.tensor(w0, requires_grad=True)
            seen = []
            x.register_hook(lambda g: g * 0.5)
            w.register_hook(lambda g: seen.append(("w", g.numpy().copy())))
            h = lib.tanh(x @ w)
            h.register_hook(lambda g: g + 1.0)
            h.register_hook(lambda g: seen.append(("h", g.numpy().copy())) or g * 3.0)
            h.retain_grad()  # after the hooks: torch 1.13 and 2.x agree
            loss = (h * h).sum() + (h * 2.0).sum() + (x * 3.0).sum()
            loss.register_hook(lambda g: g * 2.0)
            loss.backward()
            return [x.grad.numpy(), w.grad.numpy(), h.grad.numpy()], seen

        got, got_seen = run(tmem)
        want, want_seen = run(torch)
        for name, a, b in zip(["x.grad", "w.grad", "h.grad"], got, want):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12, err_msg=name)
        self.assertEqual([k for k, _ in got_seen], [k for k, _ in want_seen])
        for (k, a), (_, b) in zip(got_seen, want_seen):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12, err_msg=k)

    def test_fill_zero_and_copy_keep_a_non_leaf_in_the_graph_as_torchs(self):
        """fill_, zero_ and copy_ of a constant into a non-leaf: its earlier history gets a zero gradient (its
        hooks see it), a view taken before stays in the graph, and the new values' uses count."""
        x0, c0 = randn(2, 3), randn(3)

        def run(lib, op):
            x = lib.tensor(x0, requires_grad=True)
            y = lib.tanh(x) * 2.0
            row = y[1]
            seen = []
            y.register_hook(lambda g: seen.append(g.numpy().copy()))
            y.retain_grad()
            op(y, lib)
            loss = (y * x).sum() + (row * 3.0).sum()
            loss.backward()
            return [x.grad.numpy(), y.grad.numpy(), row.detach().numpy()] + seen

        ops = {"fill_": lambda y, lib: y.fill_(1.5), "zero_": lambda y, lib: y.zero_(),
               "copy_": lambda y, lib: y.copy_(lib.tensor(c0))}
        for name, op in ops.items():
            got, want = run(tmem, op), run(torch, op)
            self.assertEqual(len(got), len(want), name)
            for i, (a, b) in enumerate(zip(got, want)):
                np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12, err_msg=f"{name} output {i}")

    def test_fill_with_a_0d_tensor_sends_its_gradient_back_as_torchs(self):
        """y.fill_(v) for a 0-d v that requires grad: v's gradient is the sum of y's (it once got none)."""
        def run(lib, target):
            v = lib.tensor(np.float64(1.25), requires_grad=True)
            x = lib.tensor(np.array([1.0, 2.0]), requires_grad=True)
            y = x * 2.0 if target == "non-leaf" else lib.zeros(2, dtype=lib.float64)
            y.fill_(v)
            (y * y * lib.tensor(np.array([1.0, 3.0]))).sum().backward()
            return y.detach().numpy(), v.grad.numpy(), None if x.grad is None else x.grad.numpy()

        for target in ("non-leaf", "constant"):
            got, want = run(tmem, target), run(torch, target)
            for i, (a, b) in enumerate(zip(got, want)):
                if b is None:
                    self.assertIsNone(a, f"{target} output {i}")
                else:
                    np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12, err_msg=f"{target} output {i}")
        with self.assertRaisesRegex(tmem.ValueError, "fill_: only a 0-dimensional value tensor can fill a tensor, "
                                                     "but got one of shape \\[2\\]"):
            tmem.zeros(2).fill_(tmem.ones(2))

    def test_in_place_ops_on_views_as_torchs_copy_slices(self):
        """Writes into views of a tensor that needs grad (x[i] = v, fill_, add_, mul_, copy_ on rows, columns,
        transposed and strided windows) give torch's values and gradients, hooks included."""
        x0, v0, w0 = randn(3, 4), randn(4), randn(3)

        def run(lib):
            x = lib.tensor(x0, requires_grad=True)
            v = lib.tensor(v0, requires_grad=True)
            w = lib.tensor(w0, requires_grad=True)
            y = lib.tanh(x) * 2.0
            seen = []
            y.register_hook(lambda g: seen.append(g.numpy().copy()))
            col = y[:, 2]
            y[1] = v
            y[:, 0].fill_(0.5)
            y.transpose(0, 1)[3].add_(w)
            y[:, 1:4:2].mul_(w.reshape(3, 1))
            y[2, 1:3].copy_(v[0:2] * 3.0)
            c = lib.zeros(2, 3, dtype=lib.float64)
            c[0].copy_(w)
            loss = (y * y).sum() + (col * 3.0).sum() + (c * c).sum()
            loss.backward()
            return [y.detach().numpy(), col.detach().numpy(), x.grad.numpy(), v.grad.numpy(), w.grad.numpy()] + seen

        got, want = run(tmem), run(torch)
        self.assertEqual(len(got), len(want))
        for i, (a, b) in enumerate(zip(got, want)):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12, err_msg=f"output {i}")

    def test_a_float64_sequential_loads_torchs_state_dict_and_matches_it(self):
        """nn.Sequential and ModuleDict name their parameters as torch's, so a torch state_dict loads by key;
        after double(), values and parameter gradients match torch's in float64."""
        torch.manual_seed(0)
        ref = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.LayerNorm(5),
                                  torch.nn.ModuleDict({"out": torch.nn.Linear(5, 2)})).double()
        mine = tmem.nn.Sequential(tmem.nn.Linear(3, 5), tmem.nn.LayerNorm(5),
                                  tmem.nn.ModuleDict({"out": tmem.nn.Linear(5, 2)})).double()
        self.assertEqual(list(mine.state_dict()), list(ref.state_dict()))
        mine.load_state_dict({k: tmem.tensor(v.numpy()) for k, v in ref.state_dict().items()})
        x = randn(4, 3)

        def run_ref(t):
            return ref[2]["out"](ref[1](ref[0](t)))

        def run_mine(t):
            return mine[2]["out"](mine[1](mine[0](t)))
        compare_with_torch(run_mine, run_ref, [x])
        for name, p in ref.named_parameters():
            got = dict(mine.named_parameters())[name]
            self.assertEqual(got.dtype, tmem.float64)
            np.testing.assert_allclose(got.grad.numpy(), p.grad.numpy(), rtol=1e-10, atol=1e-12, err_msg=name)


if __name__ == "__main__":
    unittest.main()
