"""nn.Conv1d/2d, pooling and BatchNorm1d/2d (python/tmem/_conv.py): exact values without torch, and values,
gradients and running statistics against torch 1.13 with its weights loaded where torch imports."""
import unittest

import numpy as np

import tmem
import tmem.nn as nn
import tmem.nn.functional as F

try:
    import torch
except ImportError:
    torch = None

RNG = np.random.default_rng(9)


class TestExactValues(unittest.TestCase):
    def test_convolution_and_pooling_by_hand(self):
        x = tmem.arange(0, 16).float().reshape(1, 1, 4, 4)
        ones = tmem.ones(1, 1, 2, 2)
        self.assertEqual(F.conv2d(x, ones).tolist(), [[[[10, 14, 18], [26, 30, 34], [42, 46, 50]]]])
        self.assertEqual(F.conv2d(x, ones, tmem.tensor([1.0]), stride=2).tolist(), [[[[11, 19], [43, 51]]]])
        self.assertEqual(F.conv2d(x, tmem.ones(1, 1, 1, 1), padding=1)[0, 0, 0].tolist(), [0, 0, 0, 0, 0, 0])
        self.assertEqual(F.max_pool2d(x, 2).tolist(), [[[[5, 7], [13, 15]]]])
        self.assertEqual(F.avg_pool2d(x, 2).tolist(), [[[[2.5, 4.5], [10.5, 12.5]]]])
        self.assertEqual(F.adaptive_avg_pool2d(x, 1).tolist(), [[[[7.5]]]])
        self.assertEqual(F.conv1d(tmem.arange(0, 5).float().reshape(1, 1, 5), tmem.tensor([[[1.0, -1.0]]])).tolist(),
                         [[[-1, -1, -1, -1]]])
        w = tmem.zeros(4, 1, 1, 1)  # groups = 2: channels 0-1 -> outputs 0-1, 2-3 -> 2-3
        w[:, 0, 0, 0] = tmem.tensor([1.0, 2.0, 3.0, 4.0])
        self.assertEqual(F.conv2d(tmem.ones(1, 2, 1, 1), w,
                                  groups=2).reshape(-1).tolist(), [1, 2, 3, 4])

    def test_batch_norm_statistics(self):
        bn = nn.BatchNorm2d(2, momentum=0.5)
        x = tmem.tensor(RNG.standard_normal((4, 2, 3, 3)) * 3 + 1, dtype=tmem.float32)
        y = bn(x).numpy()
        np.testing.assert_allclose(y.mean((0, 2, 3)), [0, 0], atol=1e-5)
        np.testing.assert_allclose(y.var((0, 2, 3)), [1, 1], rtol=1e-3)
        xs = x.numpy()
        np.testing.assert_allclose(bn.running_mean.numpy(), 0.5 * xs.mean((0, 2, 3)), rtol=1e-5)
        np.testing.assert_allclose(bn.running_var.numpy(), 0.5 + 0.5 * xs.var((0, 2, 3), ddof=1), rtol=1e-5)
        self.assertEqual(bn.num_batches_tracked.item(), 1)
        self.assertEqual(list(bn.state_dict()), ["weight", "bias", "running_mean", "running_var",
                                                 "num_batches_tracked"])
        bn.eval()
        np.testing.assert_allclose(bn(x).numpy(), (xs - bn.running_mean.numpy()[None, :, None, None]) /
                                   np.sqrt(bn.running_var.numpy()[None, :, None, None] + 1e-5), rtol=1e-4, atol=1e-5)

    def test_group_norm_by_hand(self):
        x = tmem.tensor([[[1.0, 3.0], [5.0, 7.0]]])  # one group of 2 channels: mean 4, variance 5
        np.testing.assert_allclose(nn.GroupNorm(1, 2)(x).detach().numpy(),
                                   (np.array([[[1, 3], [5, 7]]]) - 4) / np.sqrt(5 + 1e-5), rtol=1e-6)
        np.testing.assert_allclose(F.group_norm(x, 2).numpy(), [[[-1, 1], [-1, 1]]], rtol=1e-4)
        with self.assertRaisesRegex(tmem.ValueError, "GroupNorm: num_groups 3 must divide num_channels 4"):
            nn.GroupNorm(3, 4)

    def test_errors(self):
        with self.assertRaisesRegex(tmem.ShapeError, "conv2d: input with 3 channels, weight \\[4, 2, 3, 3\\]"):
            F.conv2d(tmem.ones(1, 3, 5, 5), tmem.ones(4, 2, 3, 3))
        with self.assertRaisesRegex(tmem.ShapeError, "conv2d: the kernel \\(3, 3\\) .* is larger than the padded"):
            nn.Conv2d(1, 1, 3)(tmem.ones(1, 1, 2, 2))
        with self.assertRaisesRegex(tmem.ValueError, "max_pool2d: ceil_mode=True is not supported"):
            F.max_pool2d(tmem.ones(1, 1, 4, 4), 2, ceil_mode=True)
        with self.assertRaisesRegex(tmem.ValueError, "Conv2d: padding_mode 'reflect' is not supported"):
            nn.Conv2d(1, 1, 3, padding_mode="reflect")
        with self.assertRaisesRegex(tmem.ShapeError, "BatchNorm2d: expected input of 4 dims with 3 channels"):
            nn.BatchNorm2d(3)(tmem.ones(2, 4, 2, 2))
        with self.assertRaisesRegex(tmem.ValueError, "batch_norm: expected more than 1 value per channel"):
            nn.BatchNorm1d(3)(tmem.ones(1, 3))
        # Found by a tester: accepted (stride 0 ran as the kernel), or raw errors.
        with self.assertRaisesRegex(tmem.ValueError, "stride must be an int or 2 ints >= 1, but got 0"):
            nn.MaxPool2d(2, stride=0)(tmem.ones(1, 1, 4, 4))
        with self.assertRaisesRegex(tmem.ValueError, "Conv2d: dilation must be an int or 2 ints >= 1, but got 0"):
            nn.Conv2d(1, 1, 3, dilation=0)
        with self.assertRaisesRegex(tmem.ValueError, "Conv2d: padding must be 'valid', 'same' \\(with stride 1\\)"):
            nn.Conv2d(1, 1, 3, stride=2, padding="same")
        with self.assertRaisesRegex(tmem.ShapeError, "conv2d: expected bias of shape \\[4\\], but got \\[3\\]"):
            F.conv2d(tmem.ones(1, 3, 5, 5), tmem.ones(4, 3, 3, 3), tmem.ones(3))
        with self.assertRaisesRegex(tmem.ShapeError, "adaptive_avg_pool2d: expected input \\[N, C, H, W\\]"):
            nn.AdaptiveAvgPool2d(1)(tmem.ones(4))
        running = tmem.ones(4)
        with self.assertRaisesRegex(tmem.ShapeError, "batch_norm: expected running_mean of shape \\[3\\]"):
            F.batch_norm(tmem.randn(4, 3), running, tmem.ones(4), training=True)
        self.assertEqual(running.tolist(), [1.0] * 4)  # it was scaled before the shape error


@unittest.skipIf(torch is None, "torch does not import (Debian: python3-torch)")
class TestAgainstTorch(unittest.TestCase):
    def compare(self, mine, theirs, shape, train=False):
        theirs = theirs.double()
        mine = mine.double()
        if not train:
            theirs.eval()
            mine.eval()
        self.assertEqual(list(mine.state_dict()), list(theirs.state_dict()))
        mine.load_state_dict({k: tmem.tensor(v.numpy(), dtype=tmem.float64 if v.is_floating_point() else tmem.int64)
                              for k, v in theirs.state_dict().items()})
        x = RNG.standard_normal(shape)
        xt, xm = torch.tensor(x, requires_grad=True), tmem.tensor(x, dtype=tmem.float64, requires_grad=True)
        out_t, out_m = theirs(xt), mine(xm)
        np.testing.assert_allclose(out_m.detach().numpy(), out_t.detach().numpy(), rtol=1e-10, atol=1e-12)
        w = RNG.standard_normal(tuple(out_t.shape))
        (out_t * torch.tensor(w)).sum().backward()
        tmem.sum(out_m * tmem.tensor(w)).backward()
        np.testing.assert_allclose(xm.grad.numpy(), xt.grad.numpy(), rtol=1e-10, atol=1e-12)
        grads = dict(theirs.named_parameters())
        for name, p in mine.named_parameters():
            np.testing.assert_allclose(p.grad.numpy(), grads[name].grad.numpy(), rtol=1e-10, atol=1e-12, err_msg=name)
        for name, t in theirs.state_dict().items():
            np.testing.assert_allclose(mine.state_dict()[name].numpy(), t.numpy(), rtol=1e-12, err_msg=name)

    def test_layers(self):
        cases = [
            (lambda m: m.Conv2d(3, 4, 3), (2, 3, 7, 6)),
            (lambda m: m.Conv2d(4, 6, (3, 2), stride=(2, 1), padding=(1, 2), dilation=(1, 2), groups=2), (2, 4, 9, 8)),
            (lambda m: m.Conv2d(3, 4, 3, padding="same", bias=False), (3, 6, 5)),
            (lambda m: m.Conv1d(3, 4, 5, stride=2, padding=2), (2, 3, 11)),
            (lambda m: m.MaxPool2d(3, 2, 1), (2, 3, 7, 7)),
            (lambda m: m.MaxPool1d(2), (2, 3, 8)),
            (lambda m: m.AvgPool2d(2), (2, 3, 6, 6)),
            (lambda m: m.AdaptiveAvgPool2d(1), (2, 3, 6, 6)),
            (lambda m: m.GroupNorm(2, 4), (3, 4, 5, 5)),
            (lambda m: m.GroupNorm(4, 4, affine=False), (3, 4, 7)),
        ]
        for i, (make, shape) in enumerate(cases):
            with self.subTest(i=i):
                self.compare(make(nn), make(torch.nn), shape)
        for make, shape in ((lambda m: m.BatchNorm2d(3), (4, 3, 5, 5)), (lambda m: m.BatchNorm1d(3), (6, 3)),
                            (lambda m: m.BatchNorm1d(3, momentum=None), (6, 3, 4))):
            for train in (True, False):
                with self.subTest(shape=shape, train=train):
                    self.compare(make(nn), make(torch.nn), shape, train)

    def test_a_small_cnn_trains_as_torchs(self):
        """The same CNN (conv, batch norm, relu, pool, linear) from one set of weights, three SGD steps in each
        framework: the losses and final weights agree."""
        def build(m):
            return m.Sequential(m.Conv2d(1, 4, 3, padding=1), m.BatchNorm2d(4), m.ReLU(), m.MaxPool2d(2),
                                m.Flatten(), m.Linear(4 * 4 * 4, 3))
        theirs, mine = build(torch.nn).double(), build(nn).double()
        mine.load_state_dict({k: tmem.tensor(v.numpy(), dtype=tmem.float64 if v.is_floating_point() else tmem.int64)
                              for k, v in theirs.state_dict().items()})
        opt_t = torch.optim.SGD(theirs.parameters(), lr=0.1, momentum=0.9)
        opt_m = tmem.optim.SGD(mine.parameters(), lr=0.1, momentum=0.9)
        x, y = RNG.standard_normal((8, 1, 8, 8)), RNG.integers(0, 3, 8)
        for _ in range(3):
            for model, opt, lib in ((theirs, opt_t, torch), (mine, opt_m, tmem)):
                opt.zero_grad()
                functional = F if lib is tmem else torch.nn.functional
                loss = functional.cross_entropy(model(lib.tensor(x)), lib.tensor(y))
                loss.backward()
                opt.step()
                if lib is torch:
                    want = loss.item()
                else:
                    self.assertAlmostEqual(loss.item(), want, places=10)
        for name, t in theirs.state_dict().items():
            np.testing.assert_allclose(mine.state_dict()[name].numpy(), t.numpy(), rtol=1e-9, atol=1e-12, err_msg=name)


if __name__ == "__main__":
    unittest.main()
