"""torch's everyday tensor functions written over tmem's ops (python/tmem/_tensor_ops.py): exact values without
torch, and values and gradients against torch 1.13 where it imports."""
import math
import unittest

import numpy as np

import tmem

try:
    import torch
except ImportError:
    torch = None

RNG = np.random.default_rng(11)


class TestExactValues(unittest.TestCase):
    """Expected outputs written out, so that these run without torch."""

    def test_factories(self):
        np.testing.assert_array_equal(tmem.eye(2, 3).numpy(), [[1, 0, 0], [0, 1, 0]])
        self.assertEqual(tmem.eye(3, dtype=tmem.float64).dtype, tmem.float64)
        np.testing.assert_array_equal(tmem.linspace(0, 1, 5).numpy(), [0, 0.25, 0.5, 0.75, 1])
        self.assertEqual(tmem.linspace(2, 3, 1).tolist(), [2.0])
        x = tmem.ones(2, 3, dtype=tmem.float64)
        for make in (tmem.zeros_like, tmem.ones_like, tmem.empty_like, tmem.rand_like, tmem.randn_like):
            self.assertEqual((make(x).shape, make(x).dtype), ((2, 3), tmem.float64), make.__name__)
        self.assertEqual(tmem.zeros_like(x, dtype=tmem.int64).dtype, tmem.int64)
        self.assertEqual(tmem.full_like(x, 7).tolist(), [[7.0] * 3] * 2)
        self.assertEqual((x.new_zeros(4).shape, x.new_ones((1, 2)).dtype, x.new_full((2,), 3).tolist(),
                          x.new_tensor([1, 2]).dtype), ((4,), tmem.float64, [3.0, 3.0], tmem.float64))
        r = tmem.randint(-3, 4, (1000,), generator=tmem.Generator(1))
        self.assertEqual((r.min().item(), r.max().item()), (-3, 3))
        self.assertEqual(tmem.randint(5, (3,)).dtype, tmem.int64)
        with self.assertRaisesRegex(tmem.ValueError, "randint: expected ints low < high, but got low 4 and high 4"):
            tmem.randint(4, 4, (2,))
        with self.assertRaisesRegex(tmem.ValueError, "linspace: steps must be an int >= 0, but got -1"):
            tmem.linspace(0, 1, -1)

    def test_shapes(self):
        x = tmem.arange(0, 6).reshape(2, 3)
        self.assertEqual(x.flip(1).tolist(), [[2, 1, 0], [5, 4, 3]])
        self.assertEqual(tmem.flip(x, (0, 1)).tolist(), [[5, 4, 3], [2, 1, 0]])
        self.assertEqual(tmem.roll(x, 1, 1).tolist(), [[2, 0, 1], [5, 3, 4]])
        self.assertEqual(tmem.roll(x, -1).tolist(), [[1, 2, 3], [4, 5, 0]])
        self.assertEqual(x.repeat(2, 1).tolist(), [[0, 1, 2], [3, 4, 5]] * 2)
        self.assertEqual(tmem.arange(0, 2).repeat(2, 2).tolist(), [[0, 1, 0, 1]] * 2)
        self.assertEqual([c.tolist() for c in tmem.arange(0, 5).chunk(2)], [[0, 1, 2], [3, 4]])
        m = tmem.ones(3, 3)
        self.assertEqual(tmem.tril(m).tolist(), [[1, 0, 0], [1, 1, 0], [1, 1, 1]])
        self.assertEqual(tmem.triu(m, 1).tolist(), [[0, 1, 1], [0, 0, 1], [0, 0, 0]])
        causal = tmem.triu(tmem.full((2, 2), -math.inf), 1)  # the causal-mask idiom keeps its zeros
        self.assertEqual(causal.tolist(), [[0.0, -math.inf], [0.0, 0.0]])
        self.assertEqual(tmem.ones(2, 3).view_as(tmem.zeros(3, 2)).shape, (3, 2))
        self.assertEqual(tmem.ones(1, 3).expand_as(tmem.zeros(4, 3)).shape, (4, 3))
        self.assertEqual(tmem.ones(2, 3, 4).mT.shape, (2, 4, 3))
        self.assertEqual(tmem.ones(2).type_as(tmem.zeros(1, dtype=tmem.float64)).dtype, tmem.float64)
        self.assertEqual((tmem.ones(1).is_floating_point(), tmem.arange(0, 1).is_floating_point()), (True, False))

    def test_max_of_two_tensors_and_split_by_sizes(self):
        a, b = tmem.tensor([1.0, 5.0]), tmem.tensor([3.0, 2.0])
        self.assertEqual((tmem.max(a, b).tolist(), a.min(b).tolist()), ([3.0, 5.0], [1.0, 2.0]))
        self.assertEqual((tmem.max(a).item(), a.max(0).indices.item()), (5.0, 1))
        parts = tmem.arange(0, 6).split([1, 3, 2])
        self.assertEqual([p.tolist() for p in parts], [[0], [1, 2, 3], [4, 5]])
        self.assertEqual([p.shape for p in tmem.split(tmem.ones(2, 5), 2, 1)], [(2, 2), (2, 2), (2, 1)])
        with self.assertRaisesRegex(tmem.ValueError, r"split: the sizes \[1, 2\] do not add up to the 6 elements"):
            tmem.arange(0, 6).split([1, 2])

    def test_masks_and_nonzero(self):
        x = tmem.tensor([[1.0, -2.0, 3.0], [0.0, 5.0, -6.0]], requires_grad=True)
        picked = tmem.masked_select(x, x > 0)  # x[x > 0] in torch
        self.assertEqual(picked.tolist(), [1.0, 3.0, 5.0])
        tmem.sum(picked * 2).backward()
        self.assertEqual(x.grad.tolist(), [[2.0, 0.0, 2.0], [0.0, 2.0, 0.0]])
        self.assertEqual(tmem.masked_select(x, tmem.tensor([1, 0, 1])).tolist(), [1.0, 3.0, 0.0, -6.0])
        self.assertEqual(tmem.nonzero(x).tolist(), [[0, 0], [0, 1], [0, 2], [1, 1], [1, 2]])
        self.assertEqual([t.tolist() for t in tmem.where(x > 0)], [[0, 0, 1], [0, 2, 1]])
        self.assertEqual((tmem.nonzero(tmem.zeros(2, 2)).shape, tmem.argwhere(tmem.tensor(3.0)).shape),
                         ((0, 2), (1, 0)))
        self.assertEqual(tmem.count_nonzero(x, 0).tolist(), [1, 2, 2])
        with self.assertRaisesRegex(tmem.ShapeError, "masked_select: the mask and the input: the shapes \\[2\\]"):
            tmem.masked_select(x, tmem.ones(2))
        with self.assertRaisesRegex(IndexError, "reads as a mask .* use masked_select\\(x, mask\\) for a mask"):
            x[x > 0]

    def test_cumsum(self):
        self.assertEqual(tmem.tensor([[1, 0, 1, 1]]).cumsum(1).tolist(), [[1, 1, 2, 3]])  # position ids from a mask
        self.assertEqual(tmem.cumsum(tmem.tensor([[1.0, 2.0], [3.0, 4.0]]), 0).tolist(), [[1.0, 2.0], [4.0, 6.0]])
        long = tmem.ones(2, 2500, dtype=tmem.float64).cumsum(1)  # across the 1024-wide blocks
        self.assertEqual(long[:, -1].tolist(), [2500.0, 2500.0])
        self.assertEqual(long[0, 1023:1026].tolist(), [1024.0, 1025.0, 1026.0])

    def test_einsum(self):
        a, b = tmem.arange(0, 6).float().reshape(2, 3), tmem.arange(0, 12).float().reshape(3, 4)
        self.assertEqual(tmem.einsum("ij,jk->ik", a, b).tolist(), (a @ b).tolist())
        self.assertEqual(tmem.einsum("ij->ji", [a]).tolist(), a.t().tolist())
        self.assertEqual(tmem.einsum("ij->", a).item(), 15.0)
        self.assertEqual(tmem.einsum("i,i", a[0], a[1]).item(), 14.0)
        self.assertEqual(tmem.einsum("...j,j", tmem.ones(2, 2, 3), tmem.ones(3)).tolist(), [[3.0, 3.0]] * 2)
        with self.assertRaisesRegex(tmem.ValueError, "einsum: an index repeated within 'ii' \\(a diagonal\\)"):
            tmem.einsum("ii->i", tmem.ones(2, 2))
        with self.assertRaisesRegex(tmem.ShapeError, "einsum: 'ijk' in 'ijk->i' names 3 dims, but the operand has 2"):
            tmem.einsum("ijk->i", a)
        with self.assertRaisesRegex(tmem.ShapeError, "einsum: index 'j' has sizes 3 and 2"):
            tmem.einsum("ij,jk->ik", a, tmem.ones(2, 4))
        with self.assertRaisesRegex(tmem.ValueError, "einsum: the output index 'z' of 'ij->z' is in no operand"):
            tmem.einsum("ij->z", a)

    def test_sort_argsort_topk(self):
        x = tmem.tensor([[3.0, math.nan, 1.0, 3.0], [2.0, -math.inf, 0.0, 5.0]])
        values, indices = tmem.sort(x)
        self.assertEqual(indices.tolist(), [[2, 0, 3, 1], [1, 2, 0, 3]])  # NaN greatest; ties keep their order
        self.assertEqual(x.sort(1, descending=True).indices.tolist(), [[1, 0, 3, 2], [3, 0, 2, 1]])
        self.assertEqual(tmem.argsort(x, 0).tolist(), [[1, 1, 1, 0], [0, 0, 0, 1]])
        top = tmem.topk(x, 2, largest=False)
        self.assertEqual((top.values.tolist(), top.indices.tolist()),
                         ([[1.0, 3.0], [-math.inf, 0.0]], [[2, 0], [1, 2]]))
        self.assertEqual(tmem.tensor([3, 1, 2]).sort().values.tolist(), [1, 2, 3])
        with self.assertRaisesRegex(tmem.ValueError, "topk: k \\(5\\) is out of range for a dim of size 4"):
            x.topk(5)

    def test_reductions_and_predicates(self):
        x = tmem.tensor([[3.0, 4.0], [0.0, 0.0]])
        self.assertEqual(tmem.norm(x).item(), 5.0)
        self.assertEqual(x.norm(dim=1).tolist(), [5.0, 0.0])
        self.assertEqual(tmem.norm(x, 1).item(), 7.0)
        self.assertEqual(tmem.norm(x, math.inf).item(), 4.0)
        self.assertEqual(tmem.amax(x, 1).tolist(), [4.0, 0.0])
        self.assertEqual(tmem.amin(x).item(), 0.0)
        self.assertEqual((tmem.all(x).item(), tmem.any(x).item(), x.all(1).tolist()), (0, 1, [1, 0]))
        self.assertAlmostEqual(tmem.logsumexp(tmem.tensor([0.0, 0.0]), 0).item(), math.log(2), places=6)
        self.assertEqual(tmem.logsumexp(tmem.full((2,), -math.inf), 0).item(), -math.inf)
        nan = tmem.tensor([1.0, math.nan, math.inf, -math.inf])
        self.assertEqual((tmem.isnan(nan).tolist(), tmem.isinf(nan).tolist(), tmem.isfinite(nan).tolist()),
                         ([0, 1, 0, 0], [0, 0, 1, 1], [1, 0, 0, 0]))
        self.assertEqual(tmem.tensor([1.0, 2.0, 3.0, 4.0]).std().item(),
                         np.std([1, 2, 3, 4], ddof=1).astype(np.float32))
        self.assertEqual(tmem.tensor([1.0, 3.0]).var(unbiased=False).item(), 1.0)
        self.assertEqual(tmem.maximum(tmem.tensor([1.0, math.nan]), tmem.tensor([2.0, 0.0])).tolist()[0], 2.0)
        self.assertTrue(math.isnan(tmem.minimum(tmem.tensor([math.nan]), tmem.tensor([0.0])).item()))
        self.assertEqual(tmem.dot(tmem.tensor([1.0, 2.0]), tmem.tensor([3.0, 4.0])).item(), 11.0)
        self.assertEqual(tmem.outer(tmem.tensor([1.0, 2.0]), tmem.tensor([3.0, 4.0])).tolist(), [[3, 4], [6, 8]])
        with self.assertRaisesRegex(tmem.ShapeError, "mm: expected two matrices, but got 1 and 2 dims"):
            tmem.mm(tmem.ones(2), tmem.ones(2, 2))
        with self.assertRaisesRegex(tmem.ValueError, "norm: p must be 'fro', inf, -inf or a number > 0, but got 0"):
            tmem.norm(x, 0)
        with self.assertRaisesRegex(tmem.IndexError, "amax: dim 2 is out of range for a tensor of 2 dims"):
            tmem.amax(x, 2)

    def test_in_place_methods(self):
        x = tmem.tensor([-1.0, 0.5, 2.0])
        x.clamp_(0, 1)
        self.assertEqual(x.tolist(), [0.0, 0.5, 1.0])
        x.masked_fill_(x == 0, 9.0)
        self.assertEqual(x.tolist(), [9.0, 0.5, 1.0])
        w = tmem.ones(3, requires_grad=True)
        with self.assertRaisesRegex(ValueError, "clamp_: a leaf tensor that requires grad is used in an in-place"):
            w.clamp_(0, 1)
        with tmem.no_grad():
            w.uniform_(-2, -1)
        self.assertTrue(np.all((w.numpy() >= -2) & (w.numpy() < -1)))
        big = tmem.zeros(20000).normal_(3.0, 2.0)
        self.assertAlmostEqual(big.mean().item(), 3.0, delta=0.1)
        self.assertAlmostEqual(big.std().item(), 2.0, delta=0.1)


class TestMasks(unittest.TestCase):
    """~mask, a & b, x.gt(0) and logical_not raised; torch's bool results are tmem's int64 0/1."""

    def test_combining_masks(self):
        x = tmem.tensor([-2.0, 0.5, 1.5, 3.0])
        a, b = x > -1, x < 2
        self.assertEqual([(a & b).tolist(), (a | b).tolist(), (a ^ b).tolist()],
                         [[0, 1, 1, 0], [1, 1, 1, 1], [1, 0, 0, 1]])
        self.assertEqual([tmem.logical_not(a).tolist(), tmem.logical_and(x, a).tolist(),
                          tmem.logical_or(0, a).tolist(), tmem.logical_xor(a, b).tolist()],
                         [[1, 0, 0, 0], [0, 1, 1, 1], [0, 1, 1, 1], [1, 0, 0, 1]])
        self.assertEqual([x.gt(0).tolist(), x.ge(0.5).tolist(), x.lt(1.5).tolist(), x.le(-2).tolist(),
                          x.eq(3).tolist(), tmem.ne(x, 0.5).tolist()],
                         [[0, 1, 1, 1], [0, 1, 1, 1], [1, 1, 0, 0], [1, 0, 0, 0], [0, 0, 0, 1], [1, 0, 1, 1]])
        m = x > 0
        same = m
        m &= b
        self.assertIs(m, same)  # written in place, as torch's
        self.assertEqual(m.tolist(), [0, 1, 1, 0])
        ints = tmem.tensor([12, 10, -1])
        self.assertEqual([(ints & 6).tolist(), (3 | ints).tolist(), (ints ^ ints).tolist()],
                         [[4, 2, 6], [15, 11, -1], [0, 0, 0]])  # torch's int64 results
        self.assertEqual([a.bool().tolist(), tmem.tensor([2, 0]).bool().tolist(), x.int().tolist()],
                         [[0, 1, 1, 1], [1, 0], [-2, 0, 1, 3]])
        self.assertEqual([x.type(), ints.type(), x.type(tmem.float64).dtype],
                         ["tmem.FloatTensor", "tmem.LongTensor", tmem.float64])
        with self.assertRaisesRegex(TypeError, "~: tmem has no bool dtype.*use logical_not\\(mask\\) or 1 - mask"):
            ~a
        with self.assertRaisesRegex(TypeError, "&: expected int64 operands .* but got tmem.float32 and tmem.int64"):
            x & a

    def test_closeness(self):
        inf, nan = math.inf, math.nan
        a = tmem.tensor([1.0, nan, inf, -inf, 1.0])
        b = tmem.tensor([1.000001, nan, inf, inf, 1.1])
        self.assertEqual(tmem.isclose(a, b).tolist(), [1, 0, 1, 0, 0])  # torch's
        self.assertEqual(tmem.isclose(a, b, equal_nan=True).tolist(), [1, 1, 1, 0, 0])
        self.assertEqual(tmem.isclose(a, b, atol=0.2).tolist(), [1, 0, 1, 0, 1])
        self.assertEqual([tmem.allclose(a[:1], b[:1]), tmem.allclose(a, b), tmem.allclose(tmem.ones(0), tmem.ones(0))],
                         [True, False, True])
        self.assertEqual([tmem.equal(a[:1], a[:1]), tmem.equal(a[:1], b[:1]), tmem.equal(a[:2], a[:3])],
                         [True, False, False])


class TestGradModesAndInit(unittest.TestCase):
    def test_grad_modes(self):
        x = tmem.ones(2, requires_grad=True)
        with tmem.no_grad():
            with tmem.enable_grad():
                self.assertTrue((x * 2).requires_grad)
            self.assertFalse((x * 2).requires_grad)

            @tmem.enable_grad()
            def doubled(t):
                return t * 2
            self.assertTrue(doubled(x).requires_grad)
        with tmem.set_grad_enabled(False):
            self.assertFalse(tmem.is_grad_enabled())
        self.assertTrue(tmem.is_grad_enabled())
        tmem.set_grad_enabled(False)  # a call on its own keeps the mode, as torch's
        try:
            self.assertFalse((x * 2).requires_grad)
        finally:
            tmem.set_grad_enabled(True)
        with tmem.inference_mode():
            self.assertFalse((x * 2).requires_grad)
        with tmem.inference_mode(False):
            self.assertTrue((x * 2).requires_grad)
        with self.assertRaisesRegex(TypeError, "set_grad_enabled: expected mode to be a bool, but got 1"):
            tmem.set_grad_enabled(1)

    def test_init(self):
        init = tmem.nn.init
        import tmem.nn.init as imported
        self.assertIs(imported, init)
        lin = tmem.nn.Linear(300, 200)
        self.assertIs(init.constant_(lin.bias, 0.5), lin.bias)
        self.assertEqual(set(lin.bias.tolist()), {0.5})
        self.assertTrue(lin.bias.requires_grad and lin.bias.is_leaf)
        init.zeros_(lin.bias)
        self.assertEqual(set(lin.bias.tolist()), {0.0})
        bound = math.sqrt(6 / 500)
        w = init.xavier_uniform_(lin.weight).numpy()
        self.assertTrue(np.all(np.abs(w) <= bound) and np.abs(w).max() > 0.99 * bound)
        init.kaiming_normal_(lin.weight, mode="fan_out", nonlinearity="relu")
        self.assertAlmostEqual(float(lin.weight.numpy().std()), math.sqrt(2 / 200), delta=0.003)
        init.kaiming_uniform_(lin.weight, a=math.sqrt(5))  # nn.Linear's own initialisation in torch
        self.assertLessEqual(float(np.abs(lin.weight.numpy()).max()), 1 / math.sqrt(300))
        init.trunc_normal_(lin.weight, std=0.02, a=-0.04, b=0.04)
        w = lin.weight.numpy()
        self.assertTrue(np.all(np.abs(w) <= 0.04) and abs(float(w.std()) - 0.0176) < 0.002)
        self.assertEqual(init.eye_(tmem.zeros(2, 3)).tolist(), [[1, 0, 0], [0, 1, 0]])
        for shape, gain in (((3, 5), 1.0), ((6, 2, 2), 2.0), ((4, 4), 0.5)):  # (semi-)orthogonal rows or columns
            q = init.orthogonal_(tmem.empty(*shape), gain, generator=tmem.Generator(0)).numpy().astype(np.float64)
            q = q.reshape(shape[0], -1)
            small = q @ q.T if q.shape[0] <= q.shape[1] else q.T @ q
            np.testing.assert_allclose(small, gain ** 2 * np.eye(len(small)), atol=1e-5)
        with self.assertRaisesRegex(tmem.ValueError, "orthogonal_: only tensors with 2 or more dims"):
            init.orthogonal_(tmem.empty(3))
        self.assertEqual((init.calculate_gain("tanh"), init.calculate_gain("relu"),
                          init.calculate_gain("leaky_relu", 0.2)), (5 / 3, math.sqrt(2), math.sqrt(2 / 1.04)))
        self.assertEqual(init._calculate_fan_in_and_fan_out(tmem.zeros(8, 4, 3, 3)), (36, 72))
        with self.assertRaisesRegex(ValueError, "fan in and fan out cannot be computed for a tensor of 1 dims"):
            init.xavier_uniform_(lin.bias)
        with self.assertRaisesRegex(ValueError, "calculate_gain: unsupported nonlinearity 'softmax'"):
            init.calculate_gain("softmax")


@unittest.skipIf(torch is None, "torch does not import (Debian: python3-torch)")
class TestAgainstTorch(unittest.TestCase):
    def compare(self, tmem_fn, torch_fn, *arrays, grad=True):
        ts = [tmem.tensor(a, dtype=tmem.float64, requires_grad=grad) for a in arrays]
        ps = [torch.tensor(a, dtype=torch.float64, requires_grad=grad) for a in arrays]
        out, want = tmem_fn(*ts), torch_fn(*ps)
        if isinstance(want, (tuple, list)):
            for o, w in zip(out, want):
                np.testing.assert_allclose(o.detach().numpy(), w.detach().numpy(), rtol=1e-12, atol=1e-14)
            return
        np.testing.assert_allclose(out.detach().numpy(), want.detach().numpy(), rtol=1e-12, atol=1e-14)
        if grad:
            w = RNG.standard_normal(want.shape)
            tmem.sum(out * tmem.tensor(w)).backward()
            (want * torch.tensor(w)).sum().backward()
            for t, p in zip(ts, ps):
                np.testing.assert_allclose(t.grad.numpy(), p.grad.numpy(), rtol=1e-12, atol=1e-14)

    def test_rounding_log1p_expm1_and_float_mod(self):
        x = np.array([[-2.5, -1.7, -0.5, 0.3], [0.5, 1.5, 2.5, 3.2], [-1e-9, 1e-9, 7.0, -7.25]])
        for name in ("floor", "ceil", "round", "trunc", "sign"):
            with self.subTest(op=name):
                self.compare(getattr(tmem, name), getattr(torch, name), x)
                self.compare(lambda t: getattr(t, name)(), lambda t: getattr(t, name)(), x)
        small = np.abs(x) / 10
        self.compare(tmem.log1p, torch.log1p, small)
        self.compare(tmem.expm1, torch.expm1, x)
        divisor = np.array([[2.0, -2.5, 1.5, 0.7], [3.0, -1.0, 0.25, 2.0], [1.0, -3.0, 2.0, 1.5]])
        self.compare(lambda a, b: a % b, lambda a, b: a % b, x, divisor)  # the divisor's sign, as Python's
        self.compare(lambda a, b: a // b, lambda a, b: a // b, x, divisor, grad=False)  # torch has no gradient
        self.compare(lambda a: 7.5 % a, lambda a: 7.5 % a, divisor, grad=False)  # torch: no such gradient
        big = [123456789.0, 1e10, 3.0, -3.0, math.inf]
        div = [7.0, 3.0, math.inf, math.inf, 2.0]
        for dtype, tdtype in ((tmem.float32, torch.float32), (tmem.float64, torch.float64)):
            mine, theirs = tmem.tensor(big, dtype=dtype), torch.tensor(big, dtype=tdtype)
            np.testing.assert_array_equal((mine % tmem.tensor(div, dtype=dtype)).numpy(),
                                          (theirs % torch.tensor(div, dtype=tdtype)).numpy())  # exact, from fmod
            np.testing.assert_array_equal((mine // tmem.tensor(div, dtype=dtype)).numpy(),
                                          (theirs // torch.tensor(div, dtype=tdtype)).numpy())
        self.assertEqual((tmem.tensor([1e16], dtype=tmem.float64) % 3).item(), 1.0)
        y = tmem.tensor([5.5, -5.5])
        y //= 2
        self.assertEqual(y.tolist(), [2.0, -3.0])
        self.assertEqual([(tmem.tensor([5, -5]) % 3).tolist(), tmem.sign(tmem.tensor([-3, 0, 5])).tolist(),
                          tmem.floor(tmem.tensor([2 ** 62 + 1])).item()], [[2, 1], [-1, 0, 1], 2 ** 62 + 1])

    def test_multinomial_nan_to_num_sum_dtype_clip_and_pad_sequence(self):
        weights = tmem.tensor([[0.1, 0.0, 0.6, 0.3], [1.0, 1.0, 1.0, 1.0]])
        drawn = tmem.multinomial(weights, 4000, replacement=True, generator=tmem.Generator(0))
        self.assertEqual((drawn.shape, drawn.dtype), ((2, 4000), tmem.int64))
        for row, want in zip(drawn.numpy(), ([0.1, 0.0, 0.6, 0.3], [0.25] * 4)):
            np.testing.assert_allclose(np.bincount(row, minlength=4) / 4000, want, atol=0.03)  # about 4 sd
        self.assertEqual(sorted(tmem.multinomial(tmem.tensor([0.0, 5.0, 0.0, 1.0]), 2).tolist()), [1, 3])
        self.assertEqual(sorted(tmem.multinomial(tmem.ones(6), 6, generator=tmem.Generator(1)).tolist()), list(range(6)))
        for bad, message in ((lambda: tmem.multinomial(tmem.tensor([0.0, 1.0]), 2), "fewer non-zero weights"),
                             (lambda: tmem.multinomial(tmem.tensor([-1.0, 1.0]), 1), "non-negative"),
                             (lambda: tmem.multinomial(tmem.zeros(3), 1), "sums to 0")):
            with self.assertRaisesRegex(tmem.ValueError, "multinomial: .*" + message):
                bad()
        odd = np.array([math.nan, math.inf, -math.inf, 1.5, -2.0])
        self.compare(tmem.nan_to_num, torch.nan_to_num, odd)
        self.compare(lambda t: tmem.nan_to_num(t, 1.0, 2.0, -3.0), lambda t: torch.nan_to_num(t, 1.0, 2.0, -3.0), odd)
        self.assertEqual([tmem.tensor([1, 2, 3]).sum(dtype=tmem.float64).dtype, tmem.sum(tmem.ones(2, 3), 1).tolist()],
                         [tmem.float64, [3.0, 3.0]])
        x = RNG.standard_normal((3, 4))
        self.compare(lambda t: t.flip(dims=(0, 1)), lambda t: t.flip(dims=(0, 1)), x)
        self.compare(lambda t: tmem.clip(t, -0.5, 0.5), lambda t: torch.clip(t, -0.5, 0.5), x)
        self.compare(lambda t: t.clip(max=0.1), lambda t: t.clip(max=0.1), x)
        from tmem.nn.utils.rnn import pad_sequence
        seqs = [RNG.standard_normal((2, 3)), RNG.standard_normal((4, 3)), RNG.standard_normal((1, 3))]
        for batch_first in (False, True):
            self.compare(lambda *t: pad_sequence(t, batch_first, -1.0),
                         lambda *t: torch.nn.utils.rnn.pad_sequence(t, batch_first, -1.0), *seqs)
        with self.assertRaisesRegex(tmem.ShapeError, "pad_sequence: expected sequences .* same trailing dims"):
            pad_sequence([tmem.ones(2, 3), tmem.ones(2, 4)])

    def test_integer_array_indexing(self):
        """emb[ids], x[perm] and logits[arange(B), targets] were IndexErrors."""
        x = RNG.standard_normal((4, 5, 6))
        for index in ([2, 0, 2], (slice(None), [4, 0]), ([0, 3], [1, 2]), ([0, 3], slice(None), [1, 2]),
                      (1, [0, 2], slice(None, None, 2)), [[0, 1], [2, 3]], (Ellipsis, [5, -1]), (None, [1, 2]),
                      [-1], ([0, 1], 2), ([[0], [1]], [[1, 2, 3]]), (slice(None), np.int64(2), [1])):
            with self.subTest(index=index):
                self.compare(lambda t: t[index], lambda t: t[index], x)
        ids = [[1, 2], [3, 0]]
        self.compare(lambda t: t[tmem.tensor(ids)], lambda t: t[torch.tensor(ids)], x)  # a 2-D index tensor
        self.compare(lambda t: t[tmem.arange(3), tmem.tensor([4, 0, 2])],
                     lambda t: t[torch.arange(3), torch.tensor([4, 0, 2])], x[0])
        with self.assertRaisesRegex(tmem.IndexError, "index: bool masks are not supported"):
            tmem.ones(3)[[True, False, True]]
        with self.assertRaisesRegex(tmem.IndexError, "tensors used as indices must be int64, but got tmem.float32"):
            tmem.ones(3)[tmem.tensor([0.0, 1.0])]
        with self.assertRaisesRegex(tmem.ShapeError, "index arrays of shapes \\[\\(2,\\), \\(3,\\)\\] do not broadcast"):
            tmem.ones(3, 3)[[0, 1], [0, 1, 2]]

    def test_autograd_grad_and_backward(self):
        """tmem.autograd was missing: torch.autograd.grad is how code takes input gradients."""
        a, b = RNG.standard_normal((3, 4)), RNG.standard_normal((4, 2))
        x, w = tmem.tensor(a, requires_grad=True), tmem.tensor(b, requires_grad=True)
        px, pw = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
        h, ph = tmem.tanh(x @ w), torch.tanh(px @ pw)
        y, py = tmem.sum(h * h), (ph * ph).sum()
        got = tmem.autograd.grad(y, [x, h], retain_graph=True)
        want = torch.autograd.grad(py, [px, ph], retain_graph=True)
        for g, p in zip(got, want):
            np.testing.assert_allclose(g.numpy(), p.numpy(), rtol=1e-12)
        self.assertEqual((x.grad, w.grad), (None, None))  # no .grad written, as torch's
        ones = np.ones((3, 2))
        got = tmem.autograd.grad([h, y], w, grad_outputs=[tmem.tensor(ones), None])
        want = torch.autograd.grad([ph, py], pw, grad_outputs=[torch.tensor(ones), None])
        np.testing.assert_allclose(got[0].numpy(), want[0].numpy(), rtol=1e-12)
        z = tmem.tensor(1.0, requires_grad=True)
        self.assertIsNone(tmem.autograd.grad(tmem.sum(x * 2), [x, z], allow_unused=True)[1])
        with self.assertRaisesRegex(tmem.ValueError, "grad: input 1 was not used to compute the root"):
            tmem.autograd.grad(tmem.sum(x * 2), [x, z])
        with self.assertRaisesRegex(tmem.ValueError, "autograd.grad: create_graph=True .* not supported"):
            tmem.autograd.grad(tmem.sum(x * 2), x, create_graph=True)
        loss = tmem.sum(x * x) + tmem.sum(w)
        tmem.autograd.backward(loss, inputs=[x])  # into x's .grad only
        np.testing.assert_allclose(x.grad.numpy(), 2 * a, rtol=1e-12)
        self.assertIsNone(w.grad)
        with tmem.autograd.no_grad():
            self.assertFalse(tmem.is_grad_enabled())

    def test_alpha_number_bases_tensor_bounds_cat_dtypes_lerp_cumprod(self):
        """torch.add(a, b, alpha=), torch.pow(2.0, x), clamp(min=tensor), repeat_interleave(n),
        F.dropout(inplace=), cat of float32 with int64, lerp and cumprod were errors."""
        x, y = RNG.standard_normal((3, 4)), RNG.standard_normal((3, 4))
        self.compare(lambda a, b: tmem.add(a, b, alpha=2.5), lambda a, b: torch.add(a, b, alpha=2.5), x, y)
        self.compare(lambda a, b: a.sub(b, alpha=-1.5), lambda a, b: a.sub(b, alpha=-1.5), x, y)
        self.compare(lambda a: tmem.pow(2.0, a), lambda a: torch.pow(2.0, a), x)
        self.compare(lambda a, b: a.clamp(min=b), lambda a, b: a.clamp(min=b), x, y)
        self.compare(lambda a, b: tmem.clamp(a, min=-b, max=b), lambda a, b: torch.clamp(a, min=-b, max=b), x,
                     np.abs(y))
        self.compare(lambda a: a.repeat_interleave(2), lambda a: a.repeat_interleave(2), x)
        counts = [1, 0, 3]
        self.compare(lambda a: a.repeat_interleave(tmem.tensor(counts), 0),
                     lambda a: a.repeat_interleave(torch.tensor(counts), 0), x)
        self.compare(lambda a, b: tmem.lerp(a, b, 0.3), lambda a, b: torch.lerp(a, b, 0.3), x, y)
        zeros = x.copy()
        zeros[0, 1] = zeros[1, 1] = zeros[1, 3] = 0.0
        self.compare(lambda a: tmem.cumprod(a, 1), lambda a: torch.cumprod(a, 1), zeros)
        self.compare(lambda a: a.cumprod(0), lambda a: a.cumprod(0), zeros)
        self.assertEqual([tmem.cat([tmem.ones(2), tmem.tensor([3])]).dtype,
                          tmem.stack([tmem.ones(1, dtype=tmem.float64), tmem.ones(1)]).dtype],
                         [tmem.float32, tmem.float64])  # torch's promotion
        data = tmem.ones(1000)
        same = data
        tmem.nn.functional.dropout(data, 0.5, True, True, generator=tmem.Generator(0))
        self.assertIs(same, data)
        self.assertEqual(sorted(set(data.tolist())), [0.0, 2.0])  # written in place

    def test_integer_array_writes(self):
        """x[idx] = v was an IndexError."""
        mine, theirs = tmem.zeros(4, 3), torch.zeros(4, 3)
        for t, lib in ((mine, tmem), (theirs, torch)):
            t[lib.tensor([0, 2])] = 1.0
            t[[1, 3], [0, 2]] = lib.tensor([5.0, 6.0])
            t[:, [1]] = 7
        self.assertEqual(mine.tolist(), theirs.tolist())
        ints = tmem.tensor([1, 2, 3])
        ints[[0, 2]] = 9
        self.assertEqual(ints.tolist(), [9, 2, 9])
        leaf = tmem.zeros(3, requires_grad=True)
        with self.assertRaisesRegex(tmem.IndexError, "writing through integer-array indices is not differentiable"):
            leaf[[0]] = 1.0
        with tmem.no_grad():
            leaf[[0]] = 1.0
        self.assertEqual((leaf.tolist(), leaf.requires_grad, leaf.is_leaf), ([1.0, 0.0, 0.0], True, True))
        with self.assertRaisesRegex(tmem.IndexError, "index: 5 is out of range for dim 0 of size 3"):
            ints[[5]] = 0

    def test_prod(self):
        zeros = RNG.standard_normal((3, 7))
        zeros[0, 2] = 0.0  # one zero in row 0: its gradient is the product of the others
        zeros[1, 1] = zeros[1, 5] = 0.0  # two in row 1: a zero gradient
        for x in (zeros, RNG.standard_normal((4, 6, 5)), RNG.standard_normal(()), np.zeros((2, 0, 3))):
            for args in ([], [0], [-1, True]) if x.ndim else ([], [0]):
                with self.subTest(shape=x.shape, args=args):
                    self.compare(lambda t: tmem.prod(t, *args), lambda t: torch.prod(t, *args), x)
        self.compare(lambda t: t.prod(1, keepdim=True), lambda t: t.prod(1, keepdim=True), zeros)
        self.assertEqual(tmem.tensor([[2, 3], [4, 5]]).prod(1).tolist(), [6, 20])
        self.assertEqual(tmem.tensor([2 ** 40, 2 ** 40]).prod().item(), torch.tensor([2 ** 40, 2 ** 40]).prod().item())
        self.assertEqual(tmem.tensor([1.0, 2.0]).prod(dtype=tmem.float64).dtype, tmem.float64)
        with self.assertRaisesRegex(TypeError, "prod: expected dim to be an int or None, but got \\(0, 1\\)"):
            tmem.prod(tmem.ones(2, 2), (0, 1))
        with self.assertRaisesRegex(tmem.IndexError, "prod: dim 2 is out of range for a tensor of 2 dims"):
            tmem.ones(2, 2).prod(2)

    def test_values_and_gradients(self):
        a, b = RNG.standard_normal((3, 4)), RNG.standard_normal((3, 4))
        b[0, :2] = a[0, :2]  # ties: each side gets half, as torch's
        ties = np.array([[1.0, 5.0, 5.0, 2.0], [0.0, 0.0, 0.0, 0.0]])
        cases = [
            (tmem.square, torch.square, a), (tmem.maximum, torch.maximum, a, b), (tmem.minimum, torch.minimum, a, b),
            (lambda x: tmem.std(x, 1), lambda x: torch.std(x, 1), a),
            (lambda x: x.std(0, unbiased=False, keepdim=True), lambda x: x.std(0, unbiased=False, keepdim=True), a),
            (lambda x: x.var((0, 1), correction=0), lambda x: x.var((0, 1), unbiased=False), a),
            (tmem.norm, torch.norm, a), (lambda x: x.norm(dim=1), lambda x: x.norm(dim=1), a),
            (lambda x: tmem.norm(x, 1, 0), lambda x: torch.norm(x, 1, 0), a),
            (lambda x: tmem.norm(x, 3, 1, True), lambda x: torch.norm(x, 3, 1, True), a),
            (lambda x: tmem.norm(x, math.inf, 1), lambda x: torch.norm(x, math.inf, 1), a),
            (tmem.norm, torch.norm, np.zeros((2, 2))),  # the gradient at 0 is 0
            (lambda x: tmem.logsumexp(x, 1), lambda x: torch.logsumexp(x, 1), a),
            (lambda x: tmem.logsumexp(x, (0, 1), True), lambda x: torch.logsumexp(x, (0, 1), True), a),
            (lambda x: tmem.amax(x, 1), lambda x: torch.amax(x, 1), ties),
            (lambda x: tmem.amin(x, (0, 1)), lambda x: torch.amin(x, (0, 1)), ties),
            (lambda x: x.amax(), lambda x: x.amax(), ties),
            (lambda x: x.flip(0, 1), lambda x: x.flip(0, 1), a), (lambda x: x.roll((1, -2), (0, 1)),
                                                                 lambda x: x.roll((1, -2), (0, 1)), a),
            (lambda x: x.repeat(2, 1, 3), lambda x: x.repeat(2, 1, 3), a),
            (lambda x: x.chunk(3, 1), lambda x: x.chunk(3, 1), a),
            (lambda x: tmem.tril(x, -1), lambda x: torch.tril(x, -1), a),
            (lambda x: x.triu(2), lambda x: x.triu(2), a),
            (lambda x, y: tmem.mm(x, y.mT), lambda x, y: torch.mm(x, y.mT), a, b),
            (lambda x, y: tmem.dot(x[0], y[1]), lambda x, y: torch.dot(x[0], y[1]), a, b),
            (lambda x, y: tmem.outer(x[0], y[1]), lambda x, y: torch.outer(x[0], y[1]), a, b),
            (lambda x: tmem.sort(x, 0, descending=True), lambda x: torch.sort(x, stable=True, dim=0, descending=True),
             ties),
            (lambda x: x.sort().values, lambda x: x.sort(stable=True).values, a),
            (lambda x: x.topk(2, 0).values, lambda x: x.topk(2, 0).values, a),
            (lambda x: tmem.cumsum(x, 1), lambda x: torch.cumsum(x, 1), a),
            (lambda x: x.cumsum(0), lambda x: x.cumsum(0), a),
            (lambda x, y: tmem.einsum("ij,kj->ik", x, y), lambda x, y: torch.einsum("ij,kj->ik", x, y), a, b),
            (lambda x, y: tmem.einsum("ij,ij->j", x, y), lambda x, y: torch.einsum("ij,ij->j", x, y), a, b),
            (lambda x, y: tmem.einsum("bi,bj->bij", x, y), lambda x, y: torch.einsum("bi,bj->bij", x, y), a, b),
            (lambda x: tmem.einsum("...ij->...ji", x.reshape(3, 2, 2)),
             lambda x: torch.einsum("...ij->...ji", x.reshape(3, 2, 2)), a),
        ]
        for i, (f, g, *arrays) in enumerate(cases):
            with self.subTest(i=i):
                self.compare(f, g, *arrays)

    def test_in_place_forms_differentiate_as_torchs(self):
        a = RNG.standard_normal(5)

        def chain(lib):
            def f(x):
                y = x * 2
                y.clamp_(-1, 1).masked_fill_(y > 0.9, 0.5)
                u = y.exp_() * 1  # torch refuses a second in-place op on a tensor whose backward saved its output
                u.sigmoid_()
                return (u * 1).tanh_()
            return f
        self.compare(chain(tmem), chain(torch), a)

    def test_predicates_and_factories(self):
        x = np.array([[1.0, np.nan, np.inf], [-np.inf, 0.0, -2.0]])
        for name in ("isnan", "isinf", "isfinite"):
            self.assertEqual(getattr(tmem, name)(tmem.tensor(x)).tolist(),
                             getattr(torch, name)(torch.tensor(x)).long().tolist(), name)
        for dims in (None, 0, 1):
            args = () if dims is None else (dims,)
            for name in ("all", "any"):
                self.assertEqual(getattr(tmem, name)(tmem.tensor(x), *args).tolist(),
                                 getattr(torch, name)(torch.tensor(x), *args).long().tolist(), (name, dims))
        for args in ((0, 1, 7), (-3.3, 10.1, 11), (1, 0, 4), (2.5, 2.5, 3)):
            np.testing.assert_allclose(tmem.linspace(*args).numpy(), torch.linspace(*args).numpy(), rtol=0,
                                       atol=1e-6 * max(abs(args[0]), abs(args[1]), 1))
        np.testing.assert_array_equal(tmem.eye(3, 2).numpy(), torch.eye(3, 2).numpy())
        for args in (("tanh",), ("relu",), ("leaky_relu",), ("leaky_relu", 0.3), ("selu",), ("conv2d",)):
            self.assertEqual(tmem.nn.init.calculate_gain(*args), torch.nn.init.calculate_gain(*args), args)


class TestFoundByAThirdTester(unittest.TestCase):
    """Defects a bad-input tester found in session 32's additions."""

    def test_wrong_answers_fixed(self):
        self.assertEqual(tmem.isclose(tmem.tensor([2 ** 63 - 1]), tmem.tensor([-1])).tolist(), [0])  # a - b wrapped
        self.assertFalse(tmem.allclose(tmem.tensor([2 ** 63 - 1]), tmem.tensor([-1])))
        x = tmem.tensor([1.0, 2.0])
        self.assertEqual(x.eq([1.0, 3.0]).tolist(), [1, 0])  # was the Python bool False
        with self.assertRaisesRegex(TypeError, "ne: expected other to be a tensor or a number, but got NoneType"):
            x.ne(None)
        with self.assertRaisesRegex(TypeError, "eq: expected input to be a tmem.Tensor, but got int"):
            tmem.eq(1, 2)
        with self.assertRaisesRegex(tmem.ValueError, "cross_entropy: label_smoothing must be in \\[0, 1\\], but got 1.5"):
            tmem.nn.functional.cross_entropy(tmem.randn(2, 3), tmem.tensor([0, 1]), weight=tmem.ones(3),
                                             label_smoothing=1.5)
        self.assertTrue(math.isnan(tmem.nn.functional.cross_entropy(tmem.zeros(0, 3), tmem.zeros(0, 3)).item()))
        rows = tmem.tensor([[1.0, 2.0], [3.0, 4.0]])
        self.assertEqual(sorted(rows[tmem.randperm(2)].tolist()), [[1.0, 2.0], [3.0, 4.0]])  # was read as a mask
        self.assertEqual(rows[tmem.tensor([3.0, 1.0]).argsort()].tolist(), [[3.0, 4.0], [1.0, 2.0]])

    def test_clear_errors_and_torchs_forms(self):
        x = tmem.tensor([1.5, 2.5])
        for make, error, message in (
                (lambda: tmem.optim.AdamW([tmem.ones(1, requires_grad=True)], lr="x"), TypeError,
                 "optim.AdamW: expected lr to be a number, but got 'x'"),
                (lambda: tmem.optim.SGD(None, lr=0.1), TypeError, "optim.SGD: expected params to be an iterable"),
                (lambda: tmem.nn.Embedding(10.0, 3), TypeError, "nn.Embedding: expected num_embeddings to be an int"),
                (lambda: tmem.nn.functional.cross_entropy(tmem.randn(2, 3), tmem.tensor([0, 1]), ignore_index=2.0),
                 TypeError, "cross_entropy: expected ignore_index to be an int, but got 2.0"),
                (lambda: x.type("torch.BadTensor"), TypeError, "type: expected a dtype or one of"),
                (lambda: x.sum(dtype="float64"), TypeError, "sum: expected dtype to be a tmem dtype"),
                (lambda: tmem.tensor([1]) & 2 ** 64, tmem.ValueError, "&: 18446744073709551616 does not fit int64"),
                (lambda: tmem.tensor([1, 2]) & tmem.tensor([1, 2, 3]), tmem.ShapeError,
                 "&: the shapes \\[2\\] and \\[3\\] do not broadcast"),
                (lambda: tmem.device("cuda:"), ValueError, "device: expected an index >= 0 for 'cuda'"),
                (lambda: tmem.isclose(x, x, rtol=-1), tmem.ValueError, "isclose: expected rtol and atol >= 0")):
            with self.subTest(message=message):
                with self.assertRaisesRegex(error, message):
                    make()
        self.assertEqual([x.type("torch.DoubleTensor").dtype, x.sum(axis=0).item(), tmem.randperm(np.int64(3)).shape],
                         [tmem.float64, 4.0, (3,)])
        self.assertEqual(tmem.nan_to_num(tmem.tensor([math.inf, math.nan]), nan=None, posinf=1e39).tolist(),
                         [math.inf, 0.0])  # 1e39 is inf in float32, as torch's
        self.assertEqual(tmem.round(tmem.tensor([1.2345, -2.5, 1234.5]), decimals=2).tolist()[1], -2.5)
        self.assertEqual(tmem.tensor([1234.5]).round(decimals=-2).tolist(), [1200.0])
        self.assertEqual((tmem.tensor([6]) & np.array([3])).tolist(), [2])  # a tensor, not an array
        self.assertEqual(repr(tmem.nn.Embedding(3, 2, device="cpu:0")), "Embedding(3, 2)")

    def test_multinomial_without_replacement_is_fast_and_exact(self):
        drawn = tmem.multinomial(tmem.ones(10000), 10000)  # was a quadratic Python loop
        self.assertEqual(sorted(drawn.tolist()), list(range(10000)))
        # Second draws of [0.5, 0, 0.3, 0.2]: P(c second) = sum over first f of p_f p_c / (1 - p_f).
        p = np.array([0.5, 0.0, 0.3, 0.2])
        second = [sum(p[f] * p[c] / (1 - p[f]) for f in range(4) if f != c) for c in range(4)]
        draws = tmem.multinomial(tmem.tensor(np.tile(p, (8000, 1))), 2, generator=tmem.Generator(0)).numpy()
        np.testing.assert_allclose(np.bincount(draws[:, 1], minlength=4) / 8000, second, atol=0.02)
        np.testing.assert_allclose(np.bincount(draws[:, 0], minlength=4) / 8000, p, atol=0.02)


if __name__ == "__main__":
    unittest.main()


class TestFoundByATester(unittest.TestCase):
    """Defects a tester found in the functions above, each fixed."""

    def test_nan_zero_and_overflow_at_the_edges(self):
        def f64(values, grad=False):
            return tmem.tensor(values, dtype=tmem.float64, requires_grad=grad)
        self.assertTrue(math.isnan(tmem.norm(f64([1.0, math.nan, 3.0])).item()))  # it gave 0
        x = f64([2.0, 2.0, 2.0], True)
        tmem.std(x).backward()
        self.assertEqual(x.grad.tolist(), [0.0, 0.0, 0.0])  # NaN: torch's std gradient is 0 where std is 0
        for values, want_grad in (([1e308, 1e308], [0.5, 0.5]), ([math.inf, 1.0, 2.0], [1.0, 0.0, 0.0]),
                                  ([1.0, 5.0, 5.0, 5.0], [0.0, 1 / 3, 1 / 3, 1 / 3])):
            x = f64(values, True)
            y = tmem.amax(x)
            y.backward()
            self.assertEqual(y.item(), max(values))  # NaN for huge ties: the shared mean overflowed
            np.testing.assert_allclose(x.grad.numpy(), want_grad)
        a, b = f64([math.inf], True), f64([math.inf], True)
        tmem.maximum(a, b).backward()
        self.assertEqual((a.grad.item(), b.grad.item()), (0.5, 0.5))
        self.assertEqual([c.shape for c in tmem.zeros(0).chunk(2)], [(0,), (0,)])
        self.assertEqual(tmem.amax(tmem.tensor(5.0), 0).item(), 5.0)  # a 0-d tensor takes dim 0, as torch's sum
        with self.assertRaisesRegex(tmem.ValueError, "randint: the range .* is wider than int64 can draw from"):
            tmem.randint(-2**62, 2**62, (2,))

    def test_grad_mode_decorators_cover_generator_bodies(self):
        @tmem.no_grad()
        def gen():
            yield tmem.is_grad_enabled()
            yield tmem.is_grad_enabled()

        @tmem.enable_grad()
        def gen2():
            yield tmem.is_grad_enabled()
        self.assertEqual(list(gen()), [False, False])  # the body ran outside no_grad
        with tmem.no_grad():
            self.assertEqual(list(gen2()), [True])
        reused = tmem.set_grad_enabled(False)
        with reused:
            self.assertFalse(tmem.is_grad_enabled())
        with reused:  # a second block raised IndexError
            self.assertFalse(tmem.is_grad_enabled())
        self.assertTrue(tmem.is_grad_enabled())

    def test_losses_with_every_target_ignored_have_zero_gradients(self):
        logits = tmem.tensor(RNG.standard_normal((2, 3)), dtype=tmem.float64, requires_grad=True)
        target = tmem.tensor([-100, -100])
        for loss in (tmem.nn.functional.nll_loss(tmem.log_softmax(logits, 1), target),
                     tmem.nn.CrossEntropyLoss(weight=tmem.ones(3, dtype=tmem.float64))(logits, target)):
            self.assertTrue(math.isnan(loss.item()))  # 0 / 0, as torch's
            logits.grad = None
            loss.backward()
            self.assertEqual(logits.grad.tolist(), [[0.0] * 3] * 2)  # NaN gradients before
        with self.assertRaisesRegex(tmem.IndexError, "cross_entropy: target 7 is out of bounds for 3 classes"):
            tmem.nn.functional.cross_entropy(logits, tmem.tensor([7, 0]), weight=tmem.ones(3, dtype=tmem.float64))

    def test_init_terminates_and_skips_empty_tensors(self):
        init = tmem.nn.init
        self.assertEqual(set(init.trunc_normal_(tmem.zeros(10), mean=0.0, std=0.0, a=1.0, b=2.0).tolist()), {1.0})
        w = init.trunc_normal_(tmem.zeros(5000), 0.0, 1.0, 8.0, 9.0).numpy()  # it looped forever
        self.assertTrue(w.min() >= 8.0 and w.max() <= 9.0 and 8.05 < w.mean() < 8.2)
        with self.assertWarnsRegex(UserWarning, "kaiming_normal_: initializing a zero-element tensor is a no-op"):
            self.assertEqual(init.kaiming_normal_(tmem.zeros(0, 3)).shape, (0, 3))

    def test_a_failed_scheduler_step_changes_nothing(self):
        p = tmem.zeros(1, requires_grad=True)
        opt = tmem.optim.SGD([{"params": [p]}, {"params": [tmem.zeros(1, requires_grad=True)]}], lr=0.1)
        sched = tmem.optim.lr_scheduler.LambdaLR(opt, [lambda e: 0.5 ** e, lambda e: -1.0 if e >= 2 else 1.0])
        sched.step()
        with self.assertRaisesRegex(tmem.ValueError, r"LambdaLR: cannot set param_groups\[1\]\['lr'\] to -0.1"):
            sched.step()
        self.assertEqual(([g["lr"] for g in opt.param_groups], sched.last_epoch), ([0.05, 0.1], 1))
        with self.assertRaisesRegex(tmem.ValueError, r"state_dict\['last_epoch'\] must be an int, but got 'x'"):
            sched.load_state_dict({"last_epoch": "x"})
        with self.assertRaisesRegex(tmem.ValueError, "lists a parameter id of type list"):
            opt.load_state_dict({"state": {}, "param_groups": [{"params": [[0]]}, {"params": [1]}]})


class TestFrozenParameters(unittest.TestCase):
    def test_frozen_parameters_as_torchs(self):
        nn = tmem.nn
        lin = nn.Linear(2, 2)
        lin.weight = nn.Parameter(tmem.ones(2, 2), requires_grad=False)  # refused: the setter wanted grad
        self.assertEqual((lin.weight.requires_grad, [n for n, _ in lin.named_parameters()]),
                         (False, ["weight", "bias"]))

        class Holder(nn.Module):
            def __init__(self):
                super().__init__()
                self.w = nn.Parameter(tmem.ones(2), requires_grad=False)
        a, b = Holder(), Holder()
        b.shared = a.w  # it was a plain attribute, out of parameters() and state_dict()
        self.assertIsInstance(a.w, nn.Parameter)
        self.assertEqual(list(b.state_dict()), ["w", "shared"])
        import gc
        import tmem as package
        before = len(package._FROZEN_PARAMETERS)
        for _ in range(50):
            nn.Parameter(tmem.ones(10), requires_grad=False)
        gc.collect()
        self.assertEqual(len(package._FROZEN_PARAMETERS), before)  # each went with its tensor


class TestFoundByASecondTester(unittest.TestCase):
    """Defects a tester found in einsum, cumsum, sort, masks, operators and data loading, each fixed."""

    def test_values(self):
        inf = math.inf
        self.assertEqual(tmem.cumsum(tmem.tensor([1.0, inf, 2.0]), 0).tolist(), [1.0, inf, inf])  # was all NaN
        self.assertEqual(tmem.cumsum(tmem.tensor([3e38, 3e38, -3e38]), 0).tolist()[1:],
                         [inf, float(np.float32(3e38))])  # summed in float64, as torch's
        self.assertEqual([tmem.cumsum(tmem.zeros(3, 0), 1).shape, tmem.sort(tmem.zeros(0, 3), 1).values.shape],
                         [(3, 0), (0, 3)])
        with self.assertRaisesRegex(TypeError, "cumsum: expected dim to be an int, but got None"):
            tmem.cumsum(tmem.ones(2), None)
        # '...' dims line up from the right: shapes (3, 3) and (3, 1, 3) give (3, 3).
        self.assertEqual(tmem.einsum("...i,...i->...", tmem.ones(3, 3), tmem.ones(3, 1, 3)).shape, (3, 3))
        self.assertEqual(tmem.einsum("...i,...i->...", tmem.ones(2, 3), tmem.ones(4, 2, 3)).shape, (4, 2))
        with self.assertRaisesRegex(tmem.ValueError, "must be ASCII letters"):
            tmem.einsum("\u00e9i->i", tmem.ones(2, 2))
        self.assertEqual(tmem.sort(tmem.tensor([3, -2**63, 5, 2**63 - 1]), descending=True).values.tolist(),
                         [2**63 - 1, 5, 3, -2**63])  # -x overflowed at -2**63
        self.assertEqual(tmem.masked_select(tmem.tensor([1.0, 2.0, 3.0]), tmem.tensor([[1, 0, 1], [0, 1, 0]])).tolist(),
                         [1.0, 3.0, 2.0])
        self.assertEqual(tmem.maximum(tmem.ones(2), tmem.full((2,), 2.0, dtype=tmem.float64)).dtype, tmem.float64)
        self.assertEqual(tmem.max(tmem.ones(2), other=tmem.zeros(2)).tolist(), [1.0, 1.0])
        self.assertEqual([p.tolist() for p in tmem.arange(0, 4).split([np.int64(1), np.int64(3)])], [[0], [1, 2, 3]])
        with self.assertRaisesRegex(tmem.ShapeError, "split: expected a tensor of at least 1 dim"):
            tmem.split(tmem.tensor(1.0), [1])

    def test_operators(self):
        x = tmem.ones(2, requires_grad=True)
        y = x ** np.array([2.0, 3.0])  # a NumPy array made the result an ndarray, dropping the graph
        self.assertIsInstance(y, tmem.Tensor)
        tmem.sum(y).backward()
        self.assertEqual((y.dtype, x.grad.tolist()), (tmem.float64, [2.0, 3.0]))
        self.assertEqual((tmem.tensor(2.0) ** np.array([2.0])).shape, (1,))
        a = tmem.ones(2)
        a += tmem.ones(2, dtype=tmem.float64)  # float32 stays float32, as torch's in-place ops
        a *= tmem.full((2,), 3.0, dtype=tmem.float64)
        a /= tmem.full((2,), 2.0, dtype=tmem.float64)
        self.assertEqual((a.dtype, a.tolist()), (tmem.float32, [3.0, 3.0]))

    def test_buffers_and_data(self):
        nn = tmem.nn

        class Inner(nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer("kept", tmem.zeros(1))
                self.register_buffer("cache", tmem.zeros(2), persistent=False)
                self.register_buffer("slot", None, persistent=False)

        class Twice(nn.Module):
            def __init__(self):
                super().__init__()
                self.a = Inner()
                self.b = self.a

        m = Twice()
        self.assertEqual(list(m.state_dict()), ["a.kept", "b.kept"])  # b.cache leaked through the second name
        m.load_state_dict(m.state_dict())  # the empty slot raised KeyError
        m.a.slot = tmem.ones(3)  # filling the slot keeps it out of state_dict
        self.assertEqual(list(m.state_dict()), ["a.kept", "b.kept"])
        data = tmem.utils.data
        self.assertEqual((data.default_collate([1, 2.5]).dtype, data.default_collate([1, 2.5]).tolist()),
                         (tmem.float32, [1.0, 2.5]))  # the floats were cut to ints
        ds = data.TensorDataset(tmem.arange(0, 10))
        self.assertEqual([len(s) for s in data.random_split(ds, np.array([3, 7]))], [3, 7])
        self.assertEqual([len(s) for s in data.random_split(ds, [0.5, 0.5, 0])], [5, 5, 0])
        with self.assertRaisesRegex(ValueError, "RandomSampler: cannot draw 3 samples from an empty data source"):
            data.RandomSampler([], num_samples=3)  # iterating it never ended
        with self.assertRaisesRegex(ValueError, "batch_size=None option disables auto-batching"):
            data.DataLoader(ds, batch_size=None, drop_last=True)
