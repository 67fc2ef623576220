"""The op library from Python: values against NumPy, gradients against
central finite differences (test_torch.py compares with PyTorch)."""
import unittest

import numpy as np

import tmem

RNG = np.random.default_rng(1)


def randn(*shape):
    return RNG.standard_normal(shape)


def check_grads(test, fn, arrays, eps=1e-6, atol=1e-6, rtol=1e-4):
    """Compares tmem's gradients of sum(fn(*tensors) * w) with central
    differences computed from float64 NumPy copies of the inputs."""
    w = None

    def loss(arrs):
        nonlocal w
        out = fn(*[tmem.tensor(a, dtype=tmem.float64) for a in arrs])
        if w is None:
            w = np.random.default_rng(5).standard_normal(out.shape)
        return float(np.sum(out.numpy() * w))

    loss(arrays)
    ts = [tmem.tensor(a, dtype=tmem.float64, requires_grad=True) for a in arrays]
    tmem.sum(fn(*ts) * tmem.tensor(w)).backward()
    for i, a in enumerate(arrays):
        numeric = np.zeros_like(a)
        for idx in np.ndindex(a.shape):
            plus = [x.copy() for x in arrays]
            minus = [x.copy() for x in arrays]
            plus[i][idx] += eps
            minus[i][idx] -= eps
            numeric[idx] = (loss(plus) - loss(minus)) / (2 * eps)
        np.testing.assert_allclose(ts[i].grad.numpy(), numeric, atol=atol, rtol=rtol,
                                   err_msg=f"gradient of input {i}")


def np_softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def np_layer_norm(x, w, b, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    var = x.var(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def np_splat(content, mu, sigma, D, H, W):
    lin = lambda n: np.zeros(1) if n == 1 else np.linspace(-1, 1, n)
    z, y, x = np.meshgrid(lin(D), lin(H), lin(W), indexing="ij")
    out = np.zeros((content.shape[0], content.shape[1], D, H, W))
    for b in range(content.shape[0]):
        d2 = (x - mu[b, 0]) ** 2 + (y - mu[b, 1]) ** 2 + (z - mu[b, 2]) ** 2
        g = np.exp(-d2 / (2 * sigma[b] ** 2 + 1e-6))
        out[b] = content[b][:, None, None, None] * g
    return out


def np_selective_scan(u, delta, A, Bm, Cm, D):
    B, T, E = u.shape
    h = np.zeros((B, E, A.shape[1]))
    y = np.zeros_like(u)
    for t in range(T):
        h = np.exp(delta[:, t, :, None] * A) * h + delta[:, t, :, None] * Bm[:, t, None, :] * u[:, t, :, None]
        y[:, t] = np.einsum("ben,bn->be", h, Cm[:, t]) + D * u[:, t]
    return y, h


class TestValues(unittest.TestCase):
    def test_elementwise_against_numpy(self):
        x = randn(3, 5).astype(np.float32)
        t = tmem.tensor(x)
        from math import erf
        gelu = np.vectorize(lambda v: 0.5 * v * (1 + erf(v / np.sqrt(2))))(x)
        cases = {"relu": np.maximum(x, 0), "exp": np.exp(x), "tanh": np.tanh(x), "sigmoid": 1 / (1 + np.exp(-x)),
                 "gelu": gelu, "silu": x / (1 + np.exp(-x)), "softplus": np.log1p(np.exp(x)), "abs": np.abs(x),
                 "sin": np.sin(x), "cos": np.cos(x)}
        for name, want in cases.items():
            np.testing.assert_allclose(getattr(tmem, name)(t).numpy(), want, rtol=1e-5, atol=1e-6, err_msg=name)
        np.testing.assert_allclose(tmem.clamp(t, min=-0.5, max=0.5).numpy(), np.clip(x, -0.5, 0.5))
        np.testing.assert_allclose(tmem.clamp(t, min=0).numpy(), np.maximum(x, 0))
        np.testing.assert_allclose(t.exp().log().numpy(), x, atol=1e-6)
        d_k = tmem.sqrt(tmem.tensor(64))  # an int64 input of exp, sqrt, sin, ... is float32, as torch's
        self.assertEqual((d_k.dtype, d_k.item()), (tmem.float32, 8.0))
        np.testing.assert_allclose(tmem.exp(-tmem.arange(0, 6, 2)).numpy(), np.exp(-np.arange(0.0, 6, 2)), rtol=1e-6)
        wide = np.array([-1e4, -40.5, -3.14159, 0.0, 1e-3, 2.5, 100.25, 3e4])  # range reduction, float64 exact
        for name in ("sin", "cos"):
            got = getattr(tmem.tensor(wide), name)()
            np.testing.assert_allclose(got.numpy(), getattr(np, name)(wide), rtol=1e-14, atol=1e-14, err_msg=name)
            x64 = tmem.tensor(wide, requires_grad=True)
            getattr(tmem, name)(x64).sum().backward()
            want = np.cos(wide) if name == "sin" else -np.sin(wide)
            np.testing.assert_allclose(x64.grad.numpy(), want, rtol=1e-14, atol=1e-14, err_msg=name)

    def test_reductions(self):
        x = randn(2, 3, 4)
        t = tmem.tensor(x)
        np.testing.assert_allclose(tmem.sum(t).item(), x.sum())
        np.testing.assert_allclose(tmem.sum(t, dim=1).numpy(), x.sum(1))
        np.testing.assert_allclose(t.mean((0, 2), keepdim=True).numpy(), x.mean((0, 2), keepdims=True))
        np.testing.assert_allclose(tmem.var(t, 2).numpy(), x.var(2, ddof=1))
        self.assertEqual(tmem.max(t).item(), x.max())
        r = tmem.max(t, dim=2)
        np.testing.assert_allclose(r.values.numpy(), x.max(2))
        np.testing.assert_array_equal(r.indices.numpy(), x.argmax(2))
        vals, idx = t.min(1)
        np.testing.assert_array_equal(idx.numpy(), x.argmin(1))

    def test_shape_ops(self):
        x = randn(2, 3, 4)
        t = tmem.tensor(x)
        np.testing.assert_array_equal(t.reshape(4, 6).numpy(), x.reshape(4, 6))
        np.testing.assert_array_equal(tmem.reshape(t, (-1,)).numpy(), x.reshape(-1))
        np.testing.assert_array_equal(t.permute(2, 0, 1).numpy(), x.transpose(2, 0, 1))
        np.testing.assert_array_equal(tmem.transpose(t, 0, 2).numpy(), x.swapaxes(0, 2))
        np.testing.assert_array_equal(t[0].t().numpy(), x[0].T)  # torch.t: 2-D transposed, 0-D and 1-D as they are
        np.testing.assert_array_equal(tmem.t(t[0, 0]).numpy(), x[0, 0])
        self.assertEqual(t[0, 0, 0].t().shape, ())
        with self.assertRaisesRegex(tmem.ShapeError, "t: expected a tensor of at most 2 dims, but got 3 dims"):
            t.t()
        np.testing.assert_array_equal(tmem.cat([t, t], 1).numpy(), np.concatenate([x, x], 1))
        np.testing.assert_array_equal(tmem.stack([t, t], 0).numpy(), np.stack([x, x]))
        np.testing.assert_array_equal(t.unsqueeze(1).squeeze(1).numpy(), x)
        np.testing.assert_array_equal(t[:, :1].expand(2, 3, 4).numpy(), np.broadcast_to(x[:, :1], (2, 3, 4)))
        parts = t.split(2, dim=2)
        self.assertEqual([p.shape for p in parts], [(2, 3, 2), (2, 3, 2)])
        rows = t.unbind(1)
        self.assertEqual(len(rows), 3)
        for k, r in enumerate(rows):
            np.testing.assert_array_equal(r.numpy(), x[:, k])
        np.testing.assert_array_equal(tmem.pad(t, [1, 2]).numpy(), np.pad(x, ((0, 0), (0, 0), (1, 2))))
        idx = tmem.tensor([2, 0])
        np.testing.assert_array_equal(t.index_select(1, idx).numpy(), x[:, [2, 0]])

    def test_softmax_layer_norm_matmul(self):
        x = randn(4, 7)
        t = tmem.tensor(x)
        np.testing.assert_allclose(tmem.softmax(t, -1).numpy(), np_softmax(x, -1), rtol=1e-12)
        np.testing.assert_allclose(tmem.log_softmax(t, 0).numpy(), np.log(np_softmax(x, 0)), rtol=1e-12)
        w, b = randn(7), randn(7)
        np.testing.assert_allclose(tmem.layer_norm(t, (7,), tmem.tensor(w), tmem.tensor(b)).numpy(),
                                   np_layer_norm(x, w, b), rtol=1e-10)
        y = randn(2, 7, 3)
        np.testing.assert_allclose(tmem.matmul(t, tmem.tensor(y)).numpy(), x @ y, rtol=1e-12)
        # A 0-d input was told "expected normalized_shape [0]".
        with self.assertRaisesRegex(tmem.ShapeError, "layer_norm: expected an input of at least 1 dim, but got a 0-d"):
            tmem.layer_norm(tmem.tensor(5.0), [1])

    def test_cross_entropy(self):
        logits, target = randn(5, 4), np.array([0, 3, 1, 2, 3])
        lsm = np.log(np_softmax(logits, 1))
        want = -lsm[np.arange(5), target].mean()
        got = tmem.cross_entropy(tmem.tensor(logits), tmem.tensor(target)).item()
        self.assertAlmostEqual(got, want, places=12)
        none = tmem.cross_entropy(tmem.tensor(logits), tmem.tensor(target), reduction="none")
        np.testing.assert_allclose(none.numpy(), -lsm[np.arange(5), target])

    def test_gaussian_splat_matches_its_formula(self):
        content, mu, sigma = randn(2, 3), np.tanh(randn(2, 3)), np.array([0.3, 0.7])
        got = tmem.gaussian_splat(tmem.tensor(content), tmem.tensor(mu), tmem.tensor(sigma), 4, 5, 6)
        np.testing.assert_allclose(got.numpy(), np_splat(content, mu, sigma, 4, 5, 6), rtol=1e-10, atol=1e-12)

    def test_grid_sample_at_cell_centres_reads_cells(self):
        vol = randn(1, 2, 3, 4, 5)
        # align_corners=True puts -1 and 1 on the corner cell centres.
        idx = [(0, 0, 0), (2, 3, 4), (1, 2, 3)]
        grid = np.array([[[[[2 * x / 4 - 1, 2 * y / 3 - 1, 2 * z / 2 - 1] for (z, y, x) in idx]]]])
        out = tmem.grid_sample(tmem.tensor(vol), tmem.tensor(grid), align_corners=True).numpy()
        for k, (z, y, x) in enumerate(idx):
            np.testing.assert_allclose(out[0, :, 0, 0, k], vol[0, :, z, y, x], rtol=1e-12)

    def test_sdpa_matches_numpy(self):
        q, k, v = randn(1, 2, 3, 4), randn(1, 2, 5, 4), randn(1, 2, 5, 2)
        s = q @ k.swapaxes(-1, -2) / 2.0
        want = np_softmax(s, -1) @ v
        got = tmem.scaled_dot_product_attention(tmem.tensor(q), tmem.tensor(k), tmem.tensor(v))
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-10)
        causal = tmem.scaled_dot_product_attention(tmem.tensor(q), tmem.tensor(k[:, :, :3]), tmem.tensor(v[:, :, :3]),
                                                   is_causal=True).numpy()
        np.testing.assert_allclose(causal[:, :, 0], v[:, :, 0], rtol=1e-12)

    def test_sdpa_rejects_a_non_finite_scale(self):
        # NaN or inf once gave all-zero outputs silently.
        q = tmem.ones(1, 1, 2, 2)
        for scale in (float("nan"), float("inf"), -float("inf")):
            with self.assertRaises(tmem.ValueError) as cm:
                tmem.scaled_dot_product_attention(q, q, q, scale=scale)
            self.assertEqual(str(cm.exception),
                             f"scaled_dot_product_attention: expected a finite scale, but got scale {scale}")
        v = tmem.tensor([[[[1.0, 2.0], [3.0, 5.0]]]])
        np.testing.assert_allclose(tmem.scaled_dot_product_attention(q, q, v, scale=0.0).numpy(),
                                   [[[[2.0, 3.5], [2.0, 3.5]]]])

    def test_operands_of_the_wrong_type_are_type_errors(self):
        # x + "a", tmem.add(x, None), layer_norm(x, [2], 3) once gave
        # pybind11's bare "Unable to cast Python instance" RuntimeError.
        x = tmem.ones(2)
        for f, message in [(lambda: x + "a", r"unsupported operand type\(s\) for \+: 'tmem._tmem.Tensor' and 'str'"),
                           (lambda: x * None, r"unsupported operand type\(s\) for \*: "),
                           (lambda: x ** "a", r"unsupported operand type\(s\) for \*\* or pow\(\): "),
                           (lambda: tmem.add(x, "a"), "add: expected other to be a tensor or a number, but got str"),
                           (lambda: x.div([1, 2]), "div: expected other to be a tensor or a number, but got list"),
                           (lambda: tmem.pow(x, None), "pow: expected exponent to be a tensor or a number, but got "
                                                       "NoneType"),
                           (lambda: tmem.layer_norm(x, [2], 3), "layer_norm: expected weight to be a tensor or None, "
                                                                "but got int"),
                           (lambda: tmem.conv3d_depthwise(tmem.ones(1, 1, 3, 3, 3), tmem.ones(1, 1, 3, 3, 3), bias=[0]),
                            "conv3d_depthwise: expected bias to be a tensor or None, but got list"),
                           (lambda: x.backward(gradient=1.0), "backward: expected gradient to be a tensor or None, "
                                                             "but got float")]:
            with self.assertRaisesRegex(TypeError, message):
                f()
        self.assertEqual((x + np.float32(2)).tolist(), [3.0, 3.0])
        # NumPy arrays are operands, on either side, as in torch: x - array
        # once returned an ndarray (without x's autograd history).
        w = tmem.tensor([1.0, 2.0], requires_grad=True)
        a = np.array([10.0, 20.0], np.float32)
        for r, want in [(w - a, [-9.0, -18.0]), (a - w, [9.0, 18.0]), (a * w, [10.0, 40.0]), (a / w, [10.0, 10.0]),
                        (w + a, [11.0, 22.0]), (a + w, [11.0, 22.0]), (2 - w, [1.0, 0.0]), (4 / w, [4.0, 2.0])]:
            self.assertIsInstance(r, tmem.Tensor)
            self.assertEqual(r.tolist(), want)
        (a - w).sum().backward()
        self.assertEqual(w.grad.tolist(), [-1.0, -1.0])
        self.assertEqual((x - np.ones(2)).dtype, tmem.float64)  # float64: promoted, as torch
        # Comparisons with an array are elementwise on either side (NumPy defers to the tensor).
        self.assertEqual((x == np.array([1.0, 2.0])).tolist(), [1, 0])
        self.assertEqual((np.array([1.0, 2.0]) == x).tolist(), [1, 0])
        self.assertEqual((np.array([0.5, 2.0]) < x).tolist(), [1, 0])
        self.assertEqual(tmem.sub(x, True).tolist(), [0.0, 0.0])

    def test_int_arguments_of_the_wrong_type_are_type_errors(self):
        # dims, shapes, strides and paddings that are not ints once gave
        # pybind11's bare "Unable to cast Python instance" RuntimeError.
        x = tmem.ones(2, 3)
        v = tmem.ones(1, 2, 3, 3, 3)
        w = tmem.ones(2, 1, 1, 1, 1)
        for f, message in [(lambda: tmem.sum(x, "a"), "sum: expected dim to be None, an int or a sequence of ints, "
                                                      "but got 'a'"),
                           (lambda: x.mean([0.5]), r"mean: expected dim .*, but got \[0.5\]"),
                           (lambda: tmem.var(x, 2 ** 70), "var: expected dim .*, but got 1180591620717411303424"),
                           (lambda: tmem.conv3d_depthwise(v, w, stride=(1, 1)),
                            r"conv3d_depthwise: expected stride to be an int or a sequence of 3 ints, "
                            r"but got \(1, 1\)"),
                           (lambda: tmem.conv3d_depthwise(v, w, padding=1.0),
                            "conv3d_depthwise: expected padding to be an int or a sequence of 3 ints, but got 1.0"),
                           (lambda: x.reshape(6.0), "reshape: expected a shape of ints .*, but got 6.0"),
                           (lambda: x.view("ab"), "view: expected a shape of ints .*, but got 'ab'"),
                           (lambda: x.permute("ab"), "permute: expected dims of ints .*, but got 'ab'"),
                           (lambda: x.expand(2, None), r"expand: expected a shape of ints, but got \(2, None\)"),
                           (lambda: tmem.zeros(2, "a"), r"zeros: expected a shape of ints, but got \(2, 'a'\)"),
                           (lambda: tmem.randn((2.0, 3)), r"randn: expected a shape of ints .*, but got \(2.0, 3\)"),
                           (lambda: tmem.nn.LayerNorm("a"), "LayerNorm: expected normalized_shape to be an int or a "
                                                            "sequence of ints, but got 'a'")]:
            with self.assertRaisesRegex(TypeError, message):
                f()
        self.assertEqual(tuple(tmem.conv3d_depthwise(v, w, stride=(1, 2, 3)).shape), (1, 2, 3, 2, 1))
        self.assertEqual(tuple(x.permute(1, 0).shape), (3, 2))
        self.assertEqual(tuple(tmem.zeros((2, 3)).shape), (2, 3))

    def test_selective_scan_matches_the_recurrence(self):
        u, delta = randn(2, 4, 3), np.abs(randn(2, 4, 3))
        A, Bm, Cm, D = -np.abs(randn(3, 2)), randn(2, 4, 2), randn(2, 4, 2), randn(3)
        y, h = tmem.selective_scan(*[tmem.tensor(a) for a in (u, delta, A, Bm, Cm, D)])
        wy, wh = np_selective_scan(u, delta, A, Bm, Cm, D)
        np.testing.assert_allclose(y.numpy(), wy, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(h.numpy(), wh, rtol=1e-10, atol=1e-12)

    def test_op_names(self):
        names = tmem.op_names()
        for op in ("matmul", "grid_sample", "gaussian_splat", "selective_scan"):
            self.assertIn(op, names)


class TestGradients(unittest.TestCase):
    def test_elementwise_and_matmul(self):
        check_grads(self, lambda a, b: tmem.tanh(a @ b) * tmem.sigmoid(a @ b), [randn(3, 4), randn(4, 2)])
        check_grads(self, lambda a: tmem.gelu(a, approximate="tanh") / (tmem.exp(a) + 1.0), [randn(5)])

    def test_softmax_layer_norm_cross_entropy(self):
        check_grads(self, lambda x: tmem.log_softmax(x, 1) * tmem.softmax(x, 0), [randn(3, 4)])
        check_grads(self, lambda x, w, b: tmem.layer_norm(x, (5,), w, b), [randn(3, 5), randn(5), randn(5)])
        target = tmem.tensor([1, 0, 2])
        check_grads(self, lambda x: tmem.cross_entropy(x, target, label_smoothing=0.1), [randn(3, 4)])

    def test_shape_ops(self):
        check_grads(self, lambda a, b: tmem.cat([a.permute(1, 0), b], 0)[1:, ::2].reshape(-1),
                    [randn(3, 2), randn(4, 3)])
        check_grads(self, lambda a: tmem.stack([a.sum(1), a.max(1).values, a.mean(1)], 0), [randn(3, 4)])

    def test_attention(self):
        check_grads(self, lambda q, k, v: tmem.scaled_dot_product_attention(q, k, v, is_causal=True),
                    [randn(1, 2, 3, 2), randn(1, 2, 3, 2), randn(1, 2, 3, 2)])

    def test_grid_sample(self):
        grid = np.tanh(randn(1, 2, 2, 3, 3)) * 0.9
        for align in (False, True):
            check_grads(self, lambda x, g: tmem.grid_sample(x, g, padding_mode="border", align_corners=align),
                        [randn(1, 2, 3, 3, 4), grid])

    def test_grid_sample_align_corners_takes_a_bool_or_none(self):
        # align_corners=0.5 or 2 was read as True.
        x, g = tmem.tensor(randn(1, 1, 2, 2, 2)), tmem.tensor(np.zeros((1, 1, 1, 1, 3)))
        for bad in (0.5, 2, "yes"):
            with self.assertRaisesRegex(TypeError, "align_corners"):
                tmem.grid_sample(x, g, align_corners=bad)
        self.assertEqual(tmem.grid_sample(x, g, align_corners=None).tolist(),
                         tmem.grid_sample(x, g, align_corners=False).tolist())

    def test_gaussian_splat(self):
        check_grads(self, lambda c, m, s: tmem.gaussian_splat(c, m, s, 3, 4, 2),
                    [randn(2, 2), np.tanh(randn(2, 3)), np.array([0.5, 0.8])])

    def test_selective_scan(self):
        fn = lambda u, d, A, B, C, D, h0: tmem.cat([tmem.selective_scan(u, d, A, B, C, D, h0)[0].reshape(-1),
                                                    tmem.selective_scan(u, d, A, B, C, D, h0)[1].reshape(-1)], 0)
        check_grads(self, fn, [randn(1, 3, 2), np.abs(randn(1, 3, 2)), -np.abs(randn(2, 2)), randn(1, 3, 2),
                               randn(1, 3, 2), randn(2), randn(1, 2, 2)])

    def test_convlstm3d_cell_with_gradcheck(self):
        Cx, C = 2, 1
        Cz = Cx + C
        shapes = [(1, Cx, 2, 2, 2), (1, C, 2, 2, 2), (1, C, 2, 2, 2), (Cz, 3), (Cz, 3), (Cz, 3), (Cz,), (Cz,), (Cz,),
                  (4 * C, Cz), (4 * C,)]
        inputs = [tmem.tensor(randn(*s), dtype=tmem.float64, requires_grad=True) for s in shapes]
        result = tmem.gradcheck(lambda *xs: tmem.cat([t.reshape(-1) for t in tmem.convlstm3d_cell(*xs)], 0), inputs)
        self.assertTrue(result.ok, result.message)

    def test_gradcheck_refuses_a_result_that_is_not_a_tensor_and_bad_tolerances(self):
        # fn returning a list was pybind's "Unable to cast Python instance to C++ type" RuntimeError,
        # and eps=0 reported x * 2 as a wrong gradient.
        x = tmem.tensor([1.0, 2.0], dtype=tmem.float64, requires_grad=True)
        with self.assertRaisesRegex(TypeError, r"gradcheck: expected fn to return a tensor, but it returned \[5\]"):
            tmem.gradcheck(lambda t: [5], [x])
        with self.assertRaisesRegex(tmem.ValueError, "gradcheck: expected a finite eps > 0"):
            tmem.gradcheck(lambda t: t * 2, [x], eps=0)
        self.assertTrue(tmem.gradcheck(lambda t: t * 2, [x]).ok)


if __name__ == "__main__":
    unittest.main()
