"""tmem.nn's parameter-free layers and losses and the tmem.nn.functional
functions under them (tmem/_layers.py): exact values from NumPy or by hand,
the errors, and values and gradients against torch 1.13 on float64 inputs
(skipped, with the reason in the output, when torch does not import)."""
import copy
import math
import unittest
import warnings

import numpy as np

import tmem
import tmem.nn as nn
import tmem.nn.functional as F

try:
    import torch
    import torch.nn.functional as TF
except ImportError:
    torch = None

RNG = np.random.default_rng(11)
FUNCTIONS = ("leaky_relu", "elu", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "nll_loss",
             "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div", "one_hot", "normalize",
             "cosine_similarity")
MODULES = ("Identity", "ReLU", "GELU", "Tanh", "Sigmoid", "SiLU", "Softplus", "Softmax", "LogSoftmax", "LeakyReLU",
           "ELU", "Flatten", "Unflatten", "CrossEntropyLoss", "NLLLoss", "MSELoss", "L1Loss", "SmoothL1Loss",
           "HuberLoss", "BCELoss", "BCEWithLogitsLoss", "KLDivLoss")
EPS32 = float(np.float32(1e-12))  # torch's floor of x (1 - x) in BCE's gradient


def t64(a, requires_grad=False):
    return tmem.tensor(np.asarray(a, dtype=np.float64), requires_grad=requires_grad)


def reduce_np(loss, reduction):
    return {"none": loss, "mean": loss.mean(), "sum": loss.sum()}[reduction]


def log_softmax_np(x):
    z = x - x.max(1, keepdims=True)
    return z - np.log(np.exp(z).sum(1, keepdims=True))


class TestValues(unittest.TestCase):
    """Torch-free: values and gradients worked out with NumPy or by hand."""

    def close(self, got, want, rtol=1e-12, atol=1e-14):
        np.testing.assert_allclose(got.detach().numpy() if isinstance(got, tmem.Tensor) else got, want, rtol=rtol,
                                   atol=atol)

    def test_names_are_registered(self):
        for name in FUNCTIONS:
            self.assertTrue(callable(getattr(F, name)), name)
            self.assertTrue(getattr(F, name).__doc__, name)
        for name in MODULES:
            cls = getattr(nn, name)
            self.assertTrue(issubclass(cls, nn.Module), name)
            self.assertTrue(cls.__doc__, name)

    def test_activations(self):
        xs = np.array([[-2.0, -0.5, 0.0], [0.5, 1.0, 30.0]])
        x = t64(xs)
        sig = 1 / (1 + np.exp(-xs))
        erf = np.vectorize(math.erf)
        checks = [
            (nn.Identity(7, key=1), xs), (nn.ReLU(), np.maximum(xs, 0)), (nn.Tanh(), np.tanh(xs)),
            (nn.Sigmoid(), sig), (nn.SiLU(), xs * sig),
            (nn.Softplus(), np.where(xs > 20, xs, np.log1p(np.exp(xs)))),
            (nn.Softplus(2, 1), np.where(2 * xs > 1, xs, np.log1p(np.exp(2 * xs)) / 2)),
            (nn.GELU(), 0.5 * xs * (1 + erf(xs / math.sqrt(2)))),
            (nn.GELU("tanh"), 0.5 * xs * (1 + np.tanh(math.sqrt(2 / math.pi) * (xs + 0.044715 * xs ** 3)))),
            (nn.Softmax(dim=1), np.exp(log_softmax_np(xs))), (nn.LogSoftmax(1), log_softmax_np(xs)),
            (nn.Softmax(0), np.exp(log_softmax_np(xs.T)).T),
            (nn.LeakyReLU(), np.where(xs > 0, xs, 0.01 * xs)), (nn.LeakyReLU(0.2), np.where(xs > 0, xs, 0.2 * xs)),
            (nn.ELU(), np.where(xs > 0, xs, np.exp(np.minimum(xs, 0)) - 1)),
            (nn.ELU(0.5), np.where(xs > 0, xs, 0.5 * (np.exp(np.minimum(xs, 0)) - 1))),
        ]
        for module, want in checks:
            with self.subTest(module=repr(module)):
                self.close(module(x), want, rtol=1e-7 if isinstance(module, nn.GELU) else 1e-12)
        self.assertIs(nn.Identity()(x), x)
        self.close(F.leaky_relu(x, 0.3), np.where(xs > 0, xs, 0.3 * xs))
        self.close(F.elu(x, 2.0), np.where(xs > 0, xs, 2 * (np.exp(np.minimum(xs, 0)) - 1)))

    def test_activation_gradients_by_hand(self):
        x = t64([-2.0, 0.0, 3.0], requires_grad=True)
        tmem.sum(F.leaky_relu(x, 0.25)).backward()
        self.close(x.grad, [0.25, 0.25, 1.0])  # torch's slope at 0 is negative_slope
        x = t64([-2.0, 0.0, 3.0, 1000.0], requires_grad=True)
        tmem.sum(F.elu(x, 1.5)).backward()
        self.close(x.grad, [1.5 * math.exp(-2), 1.5, 1.0, 1.0])  # no inf from exp(1000) in the unused branch

    def test_inplace_writes_into_the_input(self):
        base = t64([-1.0, 2.0], requires_grad=True)
        for module, want in ((nn.ReLU(True), [0.0, 2.0]), (nn.LeakyReLU(0.5, True), [-0.5, 2.0]),
                             (nn.ELU(1.0, True), [math.exp(-1) - 1, 2.0]), (nn.SiLU(True), [-1 / (1 + math.e),
                                                                                            2 / (1 + math.exp(-2))])):
            y = base * 1.0
            out = module(y)
            self.close(y, want)
            self.close(out, want)
        y = base * 1.0
        nn.ReLU()(y)
        self.close(y, [-1.0, 2.0])

    def test_flatten_and_unflatten(self):
        xs = np.arange(24.0).reshape(2, 3, 4)
        x = t64(xs)
        self.assertEqual(nn.Flatten()(x).shape, (2, 12))
        self.assertEqual(nn.Flatten(0, 1)(x).shape, (6, 4))
        self.close(nn.Flatten()(x), xs.reshape(2, 12))
        y = nn.Flatten()(x)
        self.assertEqual(nn.Unflatten(1, (3, 4))(y).shape, (2, 3, 4))
        self.assertEqual(nn.Unflatten(-1, [2, -1, 3])(y).shape, (2, 2, 2, 3))
        self.close(nn.Unflatten(1, (3, 4))(y), xs)
        self.assertEqual(nn.Unflatten(0, (1, 2))(x).shape, (1, 2, 3, 4))

    def test_regression_losses(self):
        xs, ys = np.array([[0.5, -1.0, 2.0], [3.0, 0.0, -0.25]]), np.array([[0.0, -1.0, 0.5], [0.5, 0.1, 0.5]])
        d = xs - ys
        z = np.abs(d)
        for reduction in ("none", "mean", "sum"):
            with self.subTest(reduction=reduction):
                x, y = t64(xs), t64(ys)
                self.close(F.mse_loss(x, y, reduction=reduction), reduce_np(d * d, reduction))
                self.close(F.l1_loss(x, y, reduction=reduction), reduce_np(z, reduction))
                self.close(F.smooth_l1_loss(x, y, reduction=reduction, beta=0.5),
                           reduce_np(np.where(z < 0.5, d * d, z - 0.25), reduction))
                self.close(F.smooth_l1_loss(x, y, reduction=reduction, beta=0.0), reduce_np(z, reduction))
                self.close(F.huber_loss(x, y, reduction=reduction, delta=2.0),
                           reduce_np(np.where(z < 2, 0.5 * d * d, 2 * (z - 1)), reduction))
        self.assertEqual(F.mse_loss(t64(xs), t64(ys)).shape, ())
        # Hand-worked: mean((x - y)^2) for x = [1, 3], y = [0, 0] is 5; its gradient (x - y) is [1, 3].
        x = t64([1.0, 3.0], requires_grad=True)
        loss = nn.MSELoss()(x, t64([0.0, 0.0]))
        loss.backward()
        self.assertEqual(loss.item(), 5.0)
        self.close(x.grad, [1.0, 3.0])
        x = t64([0.0, 2.0, -3.0], requires_grad=True)
        nn.L1Loss(reduction="sum")(x, t64([0.0, 0.0, 0.0])).backward()
        self.close(x.grad, [0.0, 1.0, -1.0])
        x = t64([0.0, 2.0, -3.0], requires_grad=True)
        F.smooth_l1_loss(x, t64([0.0, 0.0, 0.0]), reduction="sum", beta=0.0).backward()
        self.close(x.grad, [-1.0, 1.0, -1.0])  # torch 1.13's kernel takes -1 at 0 when beta is 0

    def test_nll_loss_by_hand(self):
        logp = np.log(np.array([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8], [0.3, 0.3, 0.4], [0.5, 0.25, 0.25]]))
        target, w = [0, 2, -100, 1], np.array([1.0, 2.0, 3.0])
        picked = np.array([logp[0, 0], logp[1, 2], 0.0, logp[3, 1]])
        weights = np.array([1.0, 3.0, 0.0, 2.0])
        x = t64(logp, requires_grad=True)
        self.close(F.nll_loss(x, tmem.tensor(target), reduction="none"), -picked)
        self.close(F.nll_loss(x, tmem.tensor(target)), -picked.sum() / 3)
        self.close(F.nll_loss(x, tmem.tensor(target), t64(w), reduction="sum"), -(picked * weights).sum())
        loss = F.nll_loss(x, tmem.tensor(target), t64(w))
        self.close(loss, -(picked * weights).sum() / 6)
        loss.backward()
        grad = np.zeros((4, 3))
        grad[0, 0], grad[1, 2], grad[3, 1] = -1 / 6, -3 / 6, -2 / 6
        self.close(x.grad, grad)
        self.close(nn.NLLLoss(ignore_index=2, reduction="none")(x, tmem.tensor([0, 2, 1, 1])),
                   [-logp[0, 0], 0.0, -logp[2, 1], -logp[3, 1]])
        # (N, C, d1) with target (N, d1), and (C) with a 0-d target.
        x3 = np.stack([logp[:2], logp[2:]], 0).transpose(0, 2, 1)  # (2, 3, 2): N=2, C=3, d1=2
        self.close(F.nll_loss(t64(x3), tmem.tensor([[0, 2], [1, 1]]), reduction="none"),
                   [[-logp[0, 0], -logp[1, 2]], [-logp[2, 1], -logp[3, 1]]])
        self.close(F.nll_loss(t64(logp[1]), tmem.tensor(2)), -logp[1, 2])
        self.assertTrue(math.isnan(F.nll_loss(t64(logp[:1]), tmem.tensor([-100])).item()))  # all ignored: 0/0

    def test_binary_cross_entropy(self):
        xs, ys = np.array([0.1, 0.5, 0.9, 0.0, 1.0]), np.array([0.0, 0.3, 1.0, 0.4, 1.0])
        w = np.array([1.0, 2.0, 0.5, 1.0, 3.0])
        clamped = np.maximum(np.log(np.maximum(xs, 1e-300)), -100), np.maximum(np.log(np.maximum(1 - xs, 1e-300)),
                                                                                  -100)
        want = -(ys * clamped[0] + (1 - ys) * clamped[1])
        self.assertEqual(want[3], 0.4 * 100)  # log 0 clamped to -100, as torch
        for reduction in ("none", "mean", "sum"):
            self.close(F.binary_cross_entropy(t64(xs), t64(ys), reduction=reduction), reduce_np(want, reduction))
            self.close(nn.BCELoss(t64(w), reduction=reduction)(t64(xs), t64(ys)), reduce_np(want * w, reduction))
        x, y = t64(xs, requires_grad=True), t64(ys, requires_grad=True)
        F.binary_cross_entropy(x, y, t64(w), reduction="sum").backward()
        self.close(x.grad, w * (xs - ys) / np.maximum(xs * (1 - xs), EPS32))  # torch's, finite at 0 and 1
        self.close(y.grad, w * (clamped[1] - clamped[0]))

    def test_binary_cross_entropy_with_logits(self):
        xs, ys = np.array([[-3.0, 0.0, 2.5], [1000.0, -1000.0, 0.5]]), np.array([[0.0, 1.0, 0.3], [0.0, 1.0, 1.0]])
        pw, w = np.array([2.0, 0.5, 3.0]), np.array([[1.0], [2.0]])
        softplus_neg = np.logaddexp(0, -xs)
        plain = (1 - ys) * xs + softplus_neg
        with_pw = (1 - ys) * xs + (1 + (pw - 1) * ys) * softplus_neg
        for reduction in ("none", "mean", "sum"):
            self.close(F.binary_cross_entropy_with_logits(t64(xs), t64(ys), reduction=reduction),
                       reduce_np(plain, reduction))
            self.close(nn.BCEWithLogitsLoss(t64(w), reduction=reduction, pos_weight=t64(pw))(t64(xs), t64(ys)),
                       reduce_np(w * with_pw, reduction))
        x = t64(xs, requires_grad=True)
        F.binary_cross_entropy_with_logits(x, t64(ys), pos_weight=t64(pw), reduction="sum").backward()
        sig = 1 / (1 + np.exp(-np.clip(xs, -700, 700)))
        self.close(x.grad, (1 + (pw - 1) * ys) * sig - pw * ys)  # torch's gradient; finite at |x| = 1000

    def test_kl_div(self):
        logq = np.log(np.array([[0.2, 0.3, 0.5], [0.6, 0.3, 0.1]]))
        p = np.array([[0.0, 0.5, 0.5], [0.25, 0.25, 0.5]])
        pointwise = np.where(p == 0, 0.0, p * np.log(np.where(p == 0, 1, p))) - p * logq
        for reduction in ("none", "mean", "sum"):
            self.close(F.kl_div(t64(logq), t64(p), reduction=reduction), reduce_np(pointwise, reduction))
        self.close(F.kl_div(t64(logq), t64(p), reduction="batchmean"), pointwise.sum() / 2)
        self.assertEqual(F.kl_div(t64(logq), t64(p), reduction="none").numpy()[0, 0], -0.0)  # 0 log 0 = 0
        logp = np.log(p[1:])
        self.close(nn.KLDivLoss(reduction="sum", log_target=True)(t64(logq[1:]), t64(logp)),
                   (p[1:] * (logp - logq[1:])).sum())

    def test_one_hot(self):
        out = F.one_hot(tmem.tensor([0, 2, 1, 2]))
        self.assertEqual(out.dtype, tmem.int64)
        self.assertEqual(out.numpy().tolist(), [[1, 0, 0], [0, 0, 1], [0, 1, 0], [0, 0, 1]])
        self.assertEqual(F.one_hot(tmem.tensor([[1], [0]]), 4).numpy().tolist(), [[[0, 1, 0, 0]], [[1, 0, 0, 0]]])
        self.assertEqual(F.one_hot(tmem.tensor(1), 2).numpy().tolist(), [0, 1])
        self.assertEqual(F.one_hot(tmem.zeros(0, dtype=tmem.int64), 3).shape, (0, 3))

    def test_normalize_and_cosine_similarity(self):
        xs = np.array([[3.0, 0.0, 1e-13], [4.0, 0.0, 0.0]])  # columns: norm 5, a zero vector, a norm below eps
        for p, norms in ((2, np.sqrt((xs ** 2).sum(0))), (1, np.abs(xs).sum(0)), (float("inf"), np.abs(xs).max(0)),
                         (3, (np.abs(xs) ** 3).sum(0) ** (1 / 3))):
            with self.subTest(p=p):
                self.close(F.normalize(t64(xs), p, dim=0), xs / np.maximum(norms, 1e-12))
        x = t64(xs, requires_grad=True)
        F.normalize(x, dim=0).sum().backward()
        grad = x.grad.numpy()
        self.assertTrue(np.isfinite(grad).all())
        self.close(grad[:, 1:], np.full((2, 2), 1e12))  # 1/eps where the norm is clamped, as torch
        a, b = np.array([[1.0, 2.0, 2.0], [0.0, 0.0, 0.0]]), np.array([[2.0, 0.0, 1.0], [1.0, 1.0, 1.0]])
        want = (a * b).sum(1) / (np.maximum(np.linalg.norm(a, axis=1), 1e-8) * np.linalg.norm(b, axis=1))
        self.close(F.cosine_similarity(t64(a), t64(b)), want)
        self.close(F.cosine_similarity(t64(a), t64(b[1:])), (a * b[1:]).sum(1) / np.maximum(
            np.linalg.norm(a, axis=1), 1e-8) / math.sqrt(3))  # broadcast (1, 3) against (2, 3)
        self.close(F.cosine_similarity(t64(a.T), t64(b.T), dim=0), want)
        x1 = t64(a, requires_grad=True)
        F.cosine_similarity(x1, t64(b)).sum().backward()
        self.close(x1.grad.numpy()[1], b[1] / (1e-8 * math.sqrt(3)), rtol=1e-9)  # zero vector: x2 / (eps ||x2||)

    def test_loss_modules_wrap_the_functions(self):
        logits, target = t64(RNG.standard_normal((5, 4))), tmem.tensor([0, 3, 1, -100, 2])
        w = t64(RNG.random(4) + 0.5)
        self.close(nn.CrossEntropyLoss(w, label_smoothing=0.1)(logits, target),
                   F.cross_entropy(logits, target, w, label_smoothing=0.1).numpy())
        self.close(nn.CrossEntropyLoss(ignore_index=1, reduction="sum")(logits, tmem.tensor([0, 1, 1, 3, 2])),
                   F.cross_entropy(logits, tmem.tensor([0, 1, 1, 3, 2]), ignore_index=1, reduction="sum").numpy())
        logp = F.log_softmax(logits, 1)
        self.close(nn.NLLLoss(w)(logp, target), F.cross_entropy(logits, target, w).numpy())
        x, y = t64(RNG.standard_normal(6)), t64(RNG.standard_normal(6))
        self.close(nn.SmoothL1Loss(beta=0.3)(x, y), F.smooth_l1_loss(x, y, beta=0.3).numpy())
        self.close(nn.HuberLoss("sum", 0.3)(x, y), F.huber_loss(x, y, "sum", 0.3).numpy())

    def test_weights_are_buffers(self):
        w, pw = tmem.ones(4), tmem.full((4,), 2.0)
        loss = nn.BCEWithLogitsLoss(w, pos_weight=pw)
        self.assertIs(loss.weight, w)
        self.assertEqual(list(loss.state_dict()), ["weight", "pos_weight"])
        self.assertEqual(list(nn.BCEWithLogitsLoss(pos_weight=pw).state_dict()), ["pos_weight"])
        self.assertIsNone(nn.CrossEntropyLoss().weight)
        self.assertEqual(nn.CrossEntropyLoss().state_dict(), {})
        self.assertEqual(list(nn.NLLLoss(w).state_dict()), ["weight"])
        self.assertEqual(loss.parameters(), [])
        copied = copy.deepcopy(loss)
        self.assertEqual(copied.pos_weight.numpy().tolist(), [2.0] * 4)
        self.assertEqual(copied.reduction, "mean")
        loss.double()
        self.assertEqual(loss.pos_weight.dtype, tmem.float64)

    def test_reprs(self):
        for module, want in ((nn.ReLU(), "ReLU()"), (nn.ReLU(inplace=True), "ReLU(inplace=True)"),
                             (nn.GELU(), "GELU(approximate='none')"), (nn.Softplus(), "Softplus(beta=1, threshold=20)"),
                             (nn.Softmax(dim=-1), "Softmax(dim=-1)"), (nn.LogSoftmax(1), "LogSoftmax(dim=1)"),
                             (nn.LeakyReLU(0.2, True), "LeakyReLU(negative_slope=0.2, inplace=True)"),
                             (nn.ELU(), "ELU(alpha=1.0)"), (nn.Flatten(), "Flatten(start_dim=1, end_dim=-1)"),
                             (nn.Unflatten(1, (2, 3)), "Unflatten(dim=1, unflattened_size=(2, 3))"),
                             (nn.Identity(), "Identity()"), (nn.CrossEntropyLoss(tmem.ones(2)), "CrossEntropyLoss()")):
            self.assertEqual(repr(module), want)
        seq = nn.Sequential(nn.Flatten(), nn.Tanh())
        self.assertEqual(repr(seq), "Sequential(\n  (0): Flatten(start_dim=1, end_dim=-1)\n  (1): Tanh()\n)")
        self.assertEqual(seq(tmem.ones(2, 3, 4)).shape, (2, 12))


class TestErrors(unittest.TestCase):
    def test_bad_reduction_names_the_function_and_value(self):
        x, y, idx = tmem.rand(3, 4), tmem.rand(3, 4), tmem.tensor([0, 1, 2])
        for name, call in (("mse_loss", lambda r: F.mse_loss(x, y, reduction=r)),
                           ("l1_loss", lambda r: F.l1_loss(x, y, reduction=r)),
                           ("smooth_l1_loss", lambda r: F.smooth_l1_loss(x, y, reduction=r)),
                           ("huber_loss", lambda r: F.huber_loss(x, y, reduction=r)),
                           ("nll_loss", lambda r: F.nll_loss(x, idx, reduction=r)),
                           ("binary_cross_entropy", lambda r: F.binary_cross_entropy(x, y, reduction=r)),
                           ("binary_cross_entropy_with_logits",
                            lambda r: F.binary_cross_entropy_with_logits(x, y, reduction=r)),
                           ("kl_div", lambda r: F.kl_div(x, y, reduction=r)),
                           ("MSELoss", lambda r: nn.MSELoss(reduction=r)),
                           ("CrossEntropyLoss", lambda r: nn.CrossEntropyLoss(reduction=r)),
                           ("KLDivLoss", lambda r: nn.KLDivLoss(reduction=r))):
            with self.subTest(name=name):
                with self.assertRaisesRegex(ValueError, f"^{name}: reduction must be .* but got 'avg'"):
                    call("avg")
        with self.assertRaisesRegex(ValueError, "mse_loss: reduction must be 'none', 'mean' or 'sum', but got "
                                                "'batchmean'"):
            F.mse_loss(x, y, reduction="batchmean")
        self.assertEqual(nn.KLDivLoss(reduction="batchmean").reduction, "batchmean")

    def test_legacy_arguments_are_refused(self):
        x = tmem.rand(3)
        with self.assertRaisesRegex(ValueError, "mse_loss: size_average=False is not supported"):
            F.mse_loss(x, x, size_average=False)
        with self.assertRaisesRegex(ValueError, "BCELoss: reduce=False is not supported"):
            nn.BCELoss(reduce=False)
        with self.assertRaisesRegex(ValueError, "normalize: out="):
            F.normalize(x, dim=0, out=x)

    def test_softmax_needs_dim(self):
        with self.assertRaisesRegex(TypeError, "Softmax: dim is required"):
            nn.Softmax()
        with self.assertRaisesRegex(TypeError, "LogSoftmax: dim is required"):
            nn.LogSoftmax()

    def test_nll_loss_errors(self):
        logp = tmem.randn(3, 4)
        with self.assertRaisesRegex(tmem.ShapeError, r"nll_loss: .* but got input \[3, 4\] and target \[2\]"):
            F.nll_loss(logp, tmem.tensor([0, 1]))
        with self.assertRaisesRegex(tmem.ShapeError, r"nll_loss: .*target \[3, 1\]"):
            F.nll_loss(logp, tmem.tensor([[0], [1], [2]]))
        with self.assertRaisesRegex(tmem.DtypeError, "nll_loss: target must hold int64 class indices"):
            F.nll_loss(logp, tmem.tensor([0.0, 1.0, 2.0]))
        with self.assertRaisesRegex(IndexError, r"nll_loss: target 7 is out of bounds for 4 classes"):
            F.nll_loss(logp, tmem.tensor([0, 7, 1]))
        with self.assertRaisesRegex(IndexError, r"nll_loss: target -3 is out of bounds"):
            nn.NLLLoss()(logp, tmem.tensor([0, -3, 1]))
        with self.assertRaisesRegex(tmem.ShapeError, r"nll_loss: weight must have one value for each of the 4 "
                                                     r"classes, but got shape \[3\]"):
            F.nll_loss(logp, tmem.tensor([0, 1, 2]), tmem.ones(3))

    def test_one_hot_errors(self):
        with self.assertRaisesRegex(ValueError, "one_hot: class values must be smaller than num_classes=3, but got "
                                                "3"):
            F.one_hot(tmem.tensor([0, 3]), 3)
        with self.assertRaisesRegex(ValueError, "one_hot: class values must be non-negative, but got -1"):
            F.one_hot(tmem.tensor([0, -1]))
        with self.assertRaisesRegex(tmem.DtypeError, "one_hot: expected an int64 tensor"):
            F.one_hot(tmem.tensor([0.0, 1.0]))
        with self.assertRaisesRegex(ValueError, "one_hot: cannot infer num_classes from an empty tensor"):
            F.one_hot(tmem.zeros(0, dtype=tmem.int64))

    def test_other_errors(self):
        x, y = tmem.rand(2, 3), tmem.rand(2, 3)
        with self.assertRaisesRegex(ValueError, r"binary_cross_entropy: every element of input must be between 0 "
                                                r"and 1 \(a probability\), but they range over \[-"):
            F.binary_cross_entropy(x - 1.0, y)
        with self.assertRaisesRegex(tmem.ShapeError, r"binary_cross_entropy: target size \(\[2, 1\]\) must be the "
                                                     r"same as input size \(\[2, 3\]\)"):
            F.binary_cross_entropy(x, tmem.rand(2, 1))
        with self.assertRaisesRegex(tmem.ShapeError, r"binary_cross_entropy_with_logits: target size"):
            nn.BCEWithLogitsLoss()(x, tmem.rand(3))
        with self.assertRaisesRegex(ValueError, "smooth_l1_loss: beta must not be negative, but got -1.0"):
            F.smooth_l1_loss(x, y, beta=-1.0)
        with self.assertRaisesRegex(ValueError, "SmoothL1Loss: beta must not be negative"):
            nn.SmoothL1Loss(beta=-1.0)
        with self.assertRaisesRegex(ValueError, "huber_loss: delta must be positive, but got 0"):
            F.huber_loss(x, y, delta=0)
        with self.assertRaisesRegex(ValueError, "HuberLoss: delta must be positive"):
            nn.HuberLoss(delta=-2.0)
        with self.assertRaisesRegex(ValueError, r"normalize: p=0.5 is not supported by tmem \(p >= 1 or inf\)"):
            F.normalize(x, 0.5)
        with self.assertRaisesRegex(ValueError, "GELU: approximate must be 'none' or 'tanh', but got 'fast'"):
            nn.GELU("fast")
        with self.assertRaisesRegex(TypeError, "Unflatten: unflattened_size must be a tuple of ints, but found "
                                               "element of type float at pos 1"):
            nn.Unflatten(1, (2, 1.5))
        with self.assertRaisesRegex(TypeError, "Unflatten: dim must be an int"):
            nn.Unflatten("features", (2, 3))
        with self.assertRaisesRegex(tmem.ShapeError, r"Unflatten: sizes \[2, 2\] do not multiply up to the size of "
                                                     r"dim 1 \(3\)"):
            nn.Unflatten(1, (2, 2))(x)
        with self.assertRaisesRegex(tmem.ShapeError, r"Unflatten: sizes \[2, -1\]"):
            nn.Unflatten(1, (2, -1))(x)
        with self.assertWarnsRegex(UserWarning, r"mse_loss: using a target size \(\[3\]\) that is different to the "
                                                r"input size \(\[2, 3\]\)"):
            out = F.mse_loss(x, tmem.rand(3))
        self.assertEqual(out.shape, ())
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            F.l1_loss(x, y)  # same shapes: no warning


@unittest.skipIf(torch is None, "torch is not installed for this interpreter (apt-get install python3-torch, or "
                                "TMEM_SETUP_TORCH=1 bash tools/setup.sh)")
class TestAgainstTorch(unittest.TestCase):
    def compare(self, tmem_fn, torch_fn, arrays, constants=(), rtol=1e-10):
        """tmem_fn and torch_fn on the same float64 arrays (then constants,
        which need no grad; int64 arrays stay int64): outputs and the
        gradients of sum(out * r) for a random r."""
        ts = [tmem.tensor(a, requires_grad=True) for a in arrays]
        ps = [torch.tensor(a, requires_grad=True) for a in arrays]
        out = tmem_fn(*ts, *[tmem.tensor(c) for c in constants])
        want = torch_fn(*ps, *[torch.tensor(c) for c in constants])
        self.assertEqual(out.shape, tuple(want.shape))
        np.testing.assert_allclose(out.detach().numpy(), want.detach().numpy(), rtol=rtol, atol=rtol * 1e-2)
        r = RNG.standard_normal(want.shape)
        tmem.sum(out * tmem.tensor(r)).backward()
        (want * torch.tensor(r)).sum().backward()
        for i, (t, p) in enumerate(zip(ts, ps)):
            np.testing.assert_allclose(t.grad.numpy(), p.grad.numpy(), rtol=rtol, atol=rtol * 1e-2,
                                       err_msg=f"input {i}")

    def test_activation_functions_and_modules(self):
        x = RNG.standard_normal((4, 5)) * 3
        x[0, :3] = [0.0, 25.0, -25.0]
        for slope in (0.01, 0.3, -0.5):
            self.compare(lambda a: F.leaky_relu(a, slope), lambda a: TF.leaky_relu(a, slope), [x])
        for alpha in (1.0, 0.4):
            self.compare(lambda a: F.elu(a, alpha), lambda a: TF.elu(a, alpha), [x])
        self.compare(lambda a: F.leaky_relu(a * 1.0, 0.2, True), lambda a: TF.leaky_relu(a * 1.0, 0.2, True), [x])
        self.compare(lambda a: F.elu(a * 1.0, 0.7, True), lambda a: TF.elu(a * 1.0, 0.7, True), [x])
        specs = [("Identity", ()), ("ReLU", ()), ("GELU", ()), ("GELU", ("tanh",)), ("Tanh", ()), ("Sigmoid", ()),
                 ("SiLU", ()), ("Softplus", ()), ("Softplus", (2.0, 4.0)), ("Softmax", (1,)), ("Softmax", (0,)),
                 ("LogSoftmax", (-1,)), ("LeakyReLU", ()), ("LeakyReLU", (0.2,)), ("ELU", ()), ("ELU", (0.5,)),
                 ("Flatten", ()), ("Flatten", (0, 1)), ("ReLU6", ()), ("Hardtanh", ()), ("Hardtanh", (-2.0, 3.0)),
                 ("Hardsigmoid", ()), ("Hardswish", ()), ("Mish", ())]
        for name, args in specs:
            with self.subTest(module=name, args=args):
                mine, theirs = getattr(nn, name)(*args), getattr(torch.nn, name)(*args)
                self.assertEqual(repr(mine), repr(theirs))
                # torch's hardsigmoid gradient is g times 1.0f / 6.0f, a float32 constant, in float64 too
                self.compare(mine, theirs, [x], rtol={"GELU": 1e-9, "Hardsigmoid": 1e-7}.get(name, 1e-10))
        for args, inplace in (((), True), ((0.1,), True), ((), False)):
            for name in ("ReLU", "SiLU", "LeakyReLU", "ELU"):
                mine = getattr(nn, name)(*args if name in ("LeakyReLU", "ELU") else (), inplace=inplace)
                theirs = getattr(torch.nn, name)(*args if name in ("LeakyReLU", "ELU") else (), inplace=inplace)
                self.assertEqual(repr(mine), repr(theirs))
                self.compare(lambda a: mine(a * 1.0), lambda a: theirs(a * 1.0), [x])
        edges = np.array([[-3.0, 3.0, 6.0, -1.0, 1.0, 0.0, 2.9, -2.9]])  # torch's gradients at the kinks
        for name in ("relu6", "hardtanh", "hardsigmoid", "hardswish"):
            self.compare(getattr(F, name), getattr(TF, name), [edges], rtol=1e-7 if name == "hardsigmoid" else 1e-10)
        for weight in (np.array([0.25]), np.array([0.1, -0.2, 0.3])):
            self.compare(F.prelu, TF.prelu, [RNG.standard_normal((2, 3, 4)), weight])
        self.assertEqual([repr(nn.PReLU(3)), repr(nn.ReLU6(inplace=True))], [repr(torch.nn.PReLU(3)),
                                                                          repr(torch.nn.ReLU6(inplace=True))])
        self.assertEqual(list(nn.PReLU(3).state_dict()), list(torch.nn.PReLU(3).state_dict()))
        for bad in (0, -1, 2.5):
            with self.assertRaisesRegex(tmem.ValueError, f"PReLU: expected num_parameters to be an int >= 1, but "
                                                         f"got {bad}"):
                nn.PReLU(bad)
        for dim, size in ((1, (2, 3)), (-1, [3, -1]), (0, (1, 2))):
            mine, theirs = nn.Unflatten(dim, size), torch.nn.Unflatten(dim, size)
            self.assertEqual(repr(mine), repr(theirs))
            self.compare(mine, theirs, [RNG.standard_normal((2, 6))])

    def test_regression_losses(self):
        x, y = RNG.standard_normal((4, 5)), RNG.standard_normal((4, 5))
        y[0, :2] = x[0, :2]  # d = 0: gradient 0
        y[1, 0], y[1, 1] = x[1, 0] + 0.5, x[1, 1] - 0.5  # at beta / delta
        for reduction in ("none", "mean", "sum"):
            kw = dict(reduction=reduction)
            self.compare(lambda a, b: F.mse_loss(a, b, **kw), lambda a, b: TF.mse_loss(a, b, **kw), [x, y])
            self.compare(lambda a, b: F.l1_loss(a, b, **kw), lambda a, b: TF.l1_loss(a, b, **kw), [x, y])
            for beta in (1.0, 0.5, 3.0):
                self.compare(lambda a, b: F.smooth_l1_loss(a, b, beta=beta, **kw),
                             lambda a, b: TF.smooth_l1_loss(a, b, beta=beta, **kw), [x, y])
            # beta = 0 at input == target: torch's kernel gives -1 to input (matched) and -1 to target too
            # (tmem's target gets +1, the negative of input's), so target is a constant here.
            self.compare(lambda a, b: F.smooth_l1_loss(a, b, beta=0.0, **kw),
                         lambda a, b: TF.smooth_l1_loss(a, b, beta=0.0, **kw), [x], [y])
            self.compare(lambda a, b: F.smooth_l1_loss(a, b, beta=0.0, **kw),
                         lambda a, b: TF.smooth_l1_loss(a, b, beta=0.0, **kw), [x[1:], y[1:]])
            for delta in (1.0, 0.5, 3.0):
                self.compare(lambda a, b: F.huber_loss(a, b, delta=delta, **kw),
                             lambda a, b: TF.huber_loss(a, b, delta=delta, **kw), [x, y])
            for name, kwargs in (("MSELoss", {}), ("L1Loss", {}), ("SmoothL1Loss", {"beta": 0.5}),
                                 ("HuberLoss", {"delta": 0.5})):
                self.compare(getattr(nn, name)(**kw, **kwargs), getattr(torch.nn, name)(**kw, **kwargs), [x, y])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # both warn about the broadcast
            self.compare(F.mse_loss, TF.mse_loss, [x, y[:1]])

    def test_nll_loss(self):
        logp = log_softmax_np(RNG.standard_normal((6, 4)))
        target, w = np.array([0, 3, -100, 2, 1, 3]), RNG.random(4) + 0.5
        for reduction in ("none", "mean", "sum"):
            kw = dict(reduction=reduction)
            self.compare(lambda a, t: F.nll_loss(a, t, **kw), lambda a, t: TF.nll_loss(a, t, **kw), [logp], [target])
            self.compare(lambda a, b, t: F.nll_loss(a, t, b, **kw), lambda a, b, t: TF.nll_loss(a, t, b, **kw), [logp],
                         [w, target])
            self.compare(lambda a, b, t: nn.NLLLoss(b, ignore_index=3, **kw)(a, t),
                         lambda a, b, t: torch.nn.NLLLoss(b, ignore_index=3, **kw)(a, t), [logp],
                         [w, np.array([0, 3, 1, 2, 1, 3])])
            x3, t3 = RNG.standard_normal((2, 4, 3, 2)), np.array([[[0, 1], [2, 3], [-100, 0]], [[3, 3], [1, 0],
                                                                                            [2, 2]]])
            self.compare(lambda a, b, t: F.nll_loss(a, t, b, **kw), lambda a, b, t: TF.nll_loss(a, t, b, **kw), [x3],
                         [w, t3])
            self.compare(lambda a, t: F.nll_loss(a, t, **kw), lambda a, t: TF.nll_loss(a, t, **kw), [logp[0]],
                         [np.array(2)])

    def test_cross_entropy_loss_module(self):
        x, w = RNG.standard_normal((6, 4)), RNG.random(4) + 0.5
        t = np.array([0, 3, -100, 2, 1, 3])
        for reduction in ("none", "mean", "sum"):
            for smoothing in (0.0, 0.2):
                kw = dict(reduction=reduction, label_smoothing=smoothing)
                self.compare(lambda a, b, y: nn.CrossEntropyLoss(b, **kw)(a, y),
                             lambda a, b, y: torch.nn.CrossEntropyLoss(b, **kw)(a, y), [x], [w, t])
                self.compare(lambda a, y: nn.CrossEntropyLoss(ignore_index=3, **kw)(a, y),
                             lambda a, y: torch.nn.CrossEntropyLoss(ignore_index=3, **kw)(a, y), [x],
                             [np.array([0, 3, 1, 2, 1, 3])])

    def test_binary_cross_entropy(self):
        x, y = RNG.uniform(0.02, 0.98, (4, 5)), RNG.uniform(0, 1, (4, 5))
        y[0] = [0.0, 1.0, 0.0, 1.0, 0.5]
        w = RNG.random((4, 5)) + 0.5
        for reduction in ("none", "mean", "sum"):
            kw = dict(reduction=reduction)
            self.compare(lambda a, b: F.binary_cross_entropy(a, b, **kw),
                         lambda a, b: TF.binary_cross_entropy(a, b, **kw), [x, y])
            self.compare(lambda a, b, c: F.binary_cross_entropy(a, b, c, **kw),
                         lambda a, b, c: TF.binary_cross_entropy(a, b, c, **kw), [x, y], [w])
            self.compare(lambda a, b, c: nn.BCELoss(c[0], **kw)(a, b),
                         lambda a, b, c: torch.nn.BCELoss(c[0], **kw)(a, b), [x, y], [w])
        # At and near 0 and 1 (logs clamped to -100; input's gradient floored at 1e-12), target as a constant:
        # torch 1.13's target gradient does not clamp its logs (inf at 0 and 1), tmem's does.
        edge = np.array([0.0, 1.0, 1e-50, 1e-13, 0.5, 1 - 1e-16, 1e-44])
        self.compare(lambda a, b: F.binary_cross_entropy(a, b, reduction="none"),
                     lambda a, b: TF.binary_cross_entropy(a, b, reduction="none"), [edge],
                     [np.array([0.3, 0.2, 1.0, 0.5, 0.5, 1.0, 0.0])])

    def test_binary_cross_entropy_with_logits(self):
        x, y = RNG.standard_normal((4, 5)) * 4, RNG.uniform(0, 1, (4, 5))
        x[0] = [0.0, 40.0, -40.0, 800.0, -800.0]
        y[0, :3] = [0.0, 1.0, 1.0]
        w, pw = RNG.random((4, 1)) + 0.5, RNG.random(5) * 3
        for reduction in ("none", "mean", "sum"):
            kw = dict(reduction=reduction)
            self.compare(lambda a, b: F.binary_cross_entropy_with_logits(a, b, **kw),
                         lambda a, b: TF.binary_cross_entropy_with_logits(a, b, **kw), [x, y])
            self.compare(lambda a, b, c, d: F.binary_cross_entropy_with_logits(a, b, c, pos_weight=d, **kw),
                         lambda a, b, c, d: TF.binary_cross_entropy_with_logits(a, b, c, pos_weight=d, **kw),
                         [x[1:], y[1:]], [w[1:], pw])  # torch's target gradient, through log(sigmoid), is inf at 800
            self.compare(lambda a, b, d: nn.BCEWithLogitsLoss(pos_weight=d, **kw)(a, b),
                         lambda a, b, d: torch.nn.BCEWithLogitsLoss(pos_weight=d, **kw)(a, b), [x[1:], y[1:]], [pw])
            self.compare(lambda a, b, c: nn.BCEWithLogitsLoss(c, **kw)(a, b),
                         lambda a, b, c: torch.nn.BCEWithLogitsLoss(c, **kw)(a, b), [x, y], [w])
        self.compare(lambda a, b, d: F.binary_cross_entropy_with_logits(a, b, pos_weight=d, reduction="none"),
                     lambda a, b, d: TF.binary_cross_entropy_with_logits(a, b, pos_weight=d, reduction="none"), [x],
                     [y, pw])  # with |x| = 800, input's gradient only

    def test_kl_div(self):
        logq = log_softmax_np(RNG.standard_normal((3, 4)))
        p = np.exp(log_softmax_np(RNG.standard_normal((3, 4))))
        for reduction in ("none", "batchmean", "mean", "sum"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # torch warns about 'mean'
                for log_target in (False, True):
                    kw = dict(reduction=reduction, log_target=log_target)
                    target = np.log(p) if log_target else p
                    self.compare(lambda a, b: F.kl_div(a, b, **kw), lambda a, b: TF.kl_div(a, b, **kw), [logq, target])
                    self.compare(nn.KLDivLoss(**kw), torch.nn.KLDivLoss(**kw), [logq, target])
                zeros = p.copy()
                zeros[0, :2] = 0.0  # 0 log 0 = 0; torch's target gradient there is NaN, so target is a constant
                self.compare(lambda a, b: F.kl_div(a, b, reduction=reduction),
                             lambda a, b: TF.kl_div(a, b, reduction=reduction), [logq], [zeros])

    def test_one_hot(self):
        for t, n in (([0, 2, 1, 4], -1), ([[1, 0], [2, 2]], 5), (3, 4)):
            got, want = F.one_hot(tmem.tensor(t), n), TF.one_hot(torch.tensor(t), n)
            self.assertEqual(got.numpy().tolist(), want.numpy().tolist())
            self.assertEqual(str(want.dtype), "torch.int64")

    def test_cross_entropy_over_positions_probabilities_and_one_row(self):
        """(N, C, d...) logits, class-probability targets and unbatched (C) logits were ShapeErrors."""
        x = RNG.standard_normal((3, 5, 4, 2))
        y = RNG.integers(0, 5, (3, 4, 2))
        y[0, 0, 0] = -100
        w = np.abs(RNG.standard_normal(5)) + 0.1
        p = RNG.random((3, 5, 4, 2))
        p /= p.sum(1, keepdims=True)
        for reduction in ("mean", "sum", "none"):
            for smoothing in (0.0, 0.2):
                with self.subTest(reduction=reduction, label_smoothing=smoothing):
                    def mine(a, t, *weight):
                        return F.cross_entropy(a, t, *weight, reduction=reduction, label_smoothing=smoothing)

                    def theirs(a, t, *weight):
                        return TF.cross_entropy(a, t, *weight, reduction=reduction, label_smoothing=smoothing)
                    self.compare(mine, theirs, [x], [y])
                    self.compare(mine, theirs, [x], [y, w])
                    self.compare(mine, theirs, [x, p])  # the probabilities' gradient too
                    self.compare(mine, theirs, [x, p], [w])
                    self.compare(mine, theirs, [x[0, :, 0, 0]], [np.int64(3)])
                    self.compare(mine, theirs, [x[:, :, 0, 0], p[:, :, 0, 0]])
        self.compare(lambda a, t: nn.CrossEntropyLoss()(a, t), lambda a, t: torch.nn.CrossEntropyLoss()(a, t), [x], [y])
        with self.assertRaisesRegex(tmem.ShapeError, r"cross_entropy: expected target \[3, 4, 2\] for input "
                                                     r"\[3, 5, 4, 2\], but got \[3, 4\]"):
            F.cross_entropy(tmem.tensor(x), tmem.tensor(y[:, :, 0]))
        with self.assertRaisesRegex(tmem.ShapeError, "cross_entropy: class probabilities must have input's shape"):
            F.cross_entropy(tmem.tensor(x), tmem.tensor(p[:, :, 0]))

    def test_embedding_padding_idx_and_layer_norm_options(self):
        for pad in (1, -1):
            mine, theirs = nn.Embedding(5, 3, padding_idx=pad), torch.nn.Embedding(5, 3, padding_idx=pad)
            self.assertEqual((repr(mine), mine.padding_idx), (repr(theirs), theirs.padding_idx))
            np.testing.assert_array_equal(mine.weight.detach().numpy()[pad], np.zeros(3))
            with tmem.no_grad():
                mine.weight.copy_(tmem.tensor(theirs.weight.detach().numpy()))
            idx, r = [[pad % 5, 0, 2], [pad % 5, 4, 0]], RNG.standard_normal((2, 3, 3)).astype(np.float32)
            out, want = mine(tmem.tensor(idx)), theirs(torch.tensor(idx))
            np.testing.assert_array_equal(out.detach().numpy(), want.detach().numpy())
            tmem.sum(out * tmem.tensor(r)).backward()
            (want * torch.tensor(r)).sum().backward()
            np.testing.assert_allclose(mine.weight.grad.numpy(), theirs.weight.grad.numpy(), rtol=1e-6)
            self.assertEqual(float(np.abs(mine.weight.grad.numpy()[pad]).max()), 0.0)
        # torch's other arguments at their defaults are taken (they gave pybind11's signature dump)
        explicit = nn.Embedding(5, 3, padding_idx=1, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
                                sparse=False)
        self.assertEqual((repr(explicit), repr(copy.deepcopy(explicit))), ("Embedding(5, 3, padding_idx=1)",) * 2)
        for option, message in (({"sparse": True}, "sparse=True"), ({"max_norm": 1.0}, "max_norm=1.0"),
                                ({"device": "cuda"}, "device='cuda'")):
            with self.assertRaisesRegex(tmem.ValueError, f"nn.Embedding: {message} is not supported by tmem"):
                nn.Embedding(5, 3, **option)
        pretrained = RNG.standard_normal((4, 2)).astype(np.float32)
        for freeze, pad in ((True, None), (False, 0)):
            mine = nn.Embedding.from_pretrained(tmem.tensor(pretrained), freeze=freeze, padding_idx=pad)
            theirs = torch.nn.Embedding.from_pretrained(torch.tensor(pretrained), freeze=freeze, padding_idx=pad)
            self.assertEqual((repr(mine), mine.weight.requires_grad), (repr(theirs), theirs.weight.requires_grad))
            np.testing.assert_array_equal(mine.weight.detach().numpy(), pretrained)  # the padding row kept, as torch's
        x = RNG.standard_normal((4, 6))
        for args, kwargs in (((6,), {}), (((6,),), {"eps": 1e-3}), ((6,), {"elementwise_affine": False})):
            mine, theirs = nn.LayerNorm(*args, **kwargs), torch.nn.LayerNorm(*args, **kwargs)
            self.assertEqual(repr(mine), repr(theirs))
            self.assertEqual(list(mine.state_dict()), list(theirs.state_dict()))
        self.compare(nn.LayerNorm(6, elementwise_affine=False), torch.nn.LayerNorm(6, elementwise_affine=False), [x])
        no_bias = nn.LayerNorm(6, bias=False)  # torch 2.1's option; torch 1.13 lacks it
        self.assertEqual((list(no_bias.state_dict()), no_bias.bias), (["weight"], None))

    def test_normalize_and_cosine_similarity(self):
        x = RNG.standard_normal((4, 3, 5))
        for p in (2.0, 1, 3, 1.5, float("inf")):
            for dim in (1, -1, 0):
                self.compare(lambda a: F.normalize(a, p, dim), lambda a: TF.normalize(a, p, dim), [x])
        small = np.array([[0.0, 1e-4, 3.0], [0.0, 2e-4, 4.0]])  # a zero column, a norm below eps=1e-3, norm 5
        self.compare(lambda a: F.normalize(a, dim=0, eps=1e-3), lambda a: TF.normalize(a, dim=0, eps=1e-3), [small])
        y = RNG.standard_normal((4, 3, 5))
        for dim in (1, -1, 0):
            self.compare(lambda a, b: F.cosine_similarity(a, b, dim),
                         lambda a, b: TF.cosine_similarity(a, b, dim), [x, y])
        self.compare(lambda a, b: F.cosine_similarity(a, b, -1), lambda a, b: TF.cosine_similarity(a, b, -1),
                     [x[:, :1], y[:1]])  # broadcast (4, 1, 5) against (1, 3, 5)
        other = np.array([[1.0, 2.0, 0.5], [3.0, -1.0, 2.0]])
        self.compare(lambda a, b: F.cosine_similarity(a, b, 0, eps=1e-3),
                     lambda a, b: TF.cosine_similarity(a, b, 0, eps=1e-3), [small, other])


if __name__ == "__main__":
    unittest.main()
