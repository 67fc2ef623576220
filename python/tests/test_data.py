"""tmem.utils.data, tmem.nn.utils, int64 in-place arithmetic, tmem.abs and dtype printing, as torch's."""
import io
import math
import pickle
import unittest
from collections import namedtuple

import numpy as np

import tmem
import tmem.nn.utils as nn_utils
from tmem.utils.data import (BatchSampler, ConcatDataset, DataLoader, Dataset, IterableDataset, SequentialSampler,
                             Subset, TensorDataset, default_collate, random_split)

try:
    import torch
except ImportError:
    torch = None


class Squares(Dataset):
    def __len__(self):
        return 7

    def __getitem__(self, i):
        return {"x": tmem.tensor([float(i), float(i * i)]), "label": i % 2, "name": f"s{i}"}


class TestData(unittest.TestCase):
    def test_sequential_batches_and_collation(self):
        loader = DataLoader(Squares(), batch_size=3)
        batches = list(loader)
        self.assertEqual(len(loader), 3)
        self.assertEqual([b["label"].tolist() for b in batches], [[0, 1, 0], [1, 0, 1], [0]])
        self.assertEqual(batches[1]["x"].tolist(), [[3, 9], [4, 16], [5, 25]])
        self.assertEqual(batches[2]["name"], ["s6"])
        self.assertEqual(batches[0]["label"].dtype, tmem.int64)
        self.assertEqual(len(DataLoader(Squares(), batch_size=3, drop_last=True)), 2)
        self.assertEqual([len(b["name"]) for b in DataLoader(Squares(), batch_size=3, drop_last=True)], [3, 3])
        one = list(DataLoader(TensorDataset(tmem.ones(2, 3)), batch_size=None))
        self.assertEqual((len(one), one[0][0].shape), (2, (3,)))
        Pair = namedtuple("Pair", "a b")
        got = default_collate([Pair(1.5, [1, 2]), Pair(2.5, [3, 4])])
        self.assertEqual((type(got).__name__, got.a.dtype, got.a.tolist(), [t.tolist() for t in got.b]),
                         ("Pair", tmem.float64, [1.5, 2.5], [[1, 3], [2, 4]]))

    def test_shuffle_is_a_permutation_drawn_from_the_generator(self):
        ds = TensorDataset(tmem.arange(0, 20))
        seen = [b[0].tolist() for b in DataLoader(ds, batch_size=6, shuffle=True, generator=tmem.Generator(3))]
        flat = [i for b in seen for i in b]
        self.assertEqual(sorted(flat), list(range(20)))
        self.assertNotEqual(flat, list(range(20)))
        again = [b[0].tolist() for b in DataLoader(ds, batch_size=6, shuffle=True, generator=tmem.Generator(3))]
        self.assertEqual(seen, again)
        loader = DataLoader(ds, batch_size=20, shuffle=True, generator=tmem.Generator(3))
        self.assertNotEqual(next(iter(loader))[0].tolist(), next(iter(loader))[0].tolist())  # a new order per epoch

    def test_subsets_splits_and_concatenation(self):
        ds = TensorDataset(tmem.arange(0, 10))
        a, b = random_split(ds, [7, 3], generator=tmem.Generator(1))
        self.assertEqual((len(a), len(b)), (7, 3))
        self.assertEqual(sorted([int(a[i][0]) for i in range(7)] + [int(b[i][0]) for i in range(3)]), list(range(10)))
        self.assertEqual([len(s) for s in random_split(ds, [0.5, 0.3, 0.2])], [5, 3, 2])
        self.assertEqual([len(s) for s in random_split(TensorDataset(tmem.arange(0, 11)), [0.5, 0.5])], [6, 5])
        with self.assertRaisesRegex(ValueError, r"random_split: the lengths \[4, 4\] do not add up to the 10"):
            random_split(ds, [4, 4])
        both = ConcatDataset([Subset(ds, [9, 8]), ds]) + ds
        self.assertEqual((len(both), int(both[1][0]), int(both[2][0]), int(both[-1][0])), (22, 8, 0, 9))
        self.assertEqual(list(BatchSampler(SequentialSampler(range(5)), 2, False)), [[0, 1], [2, 3], [4]])
        with self.assertRaisesRegex(ValueError, "TensorDataset: the tensors' first dims differ: \\[2, 3\\]"):
            TensorDataset(tmem.ones(2), tmem.ones(3))
        with self.assertRaisesRegex(ValueError, "DataLoader: batch_size must be an int >= 1 or None, but got 0"):
            DataLoader(ds, batch_size=0)
        with self.assertRaisesRegex(ValueError, "mutually exclusive with shuffle"):
            DataLoader(ds, sampler=SequentialSampler(ds), shuffle=True)

    @unittest.skipIf(torch is None, "torch does not import (Debian: python3-torch)")
    def test_iterable_datasets_batch_in_their_own_order(self):
        """torch.utils.data.IterableDataset was missing."""
        class Stream(IterableDataset):
            def __iter__(self):
                for i in range(7):
                    yield tmem.tensor([float(i)]), i

        batches = list(DataLoader(Stream(), batch_size=3))
        self.assertEqual([(tuple(x.shape), y.tolist()) for x, y in batches],
                         [((3, 1), [0, 1, 2]), ((3, 1), [3, 4, 5]), ((1, 1), [6])])
        self.assertEqual(len(list(DataLoader(Stream(), batch_size=3, drop_last=True))), 2)
        self.assertEqual(list(DataLoader(Stream(), batch_size=None))[1][1], 1)
        with self.assertRaisesRegex(ValueError, "an IterableDataset is read in its own order; it takes no shuffle"):
            DataLoader(Stream(), shuffle=True)
        with self.assertRaisesRegex(TypeError, "an IterableDataset has no len"):
            len(DataLoader(Stream()))

    def test_batches_match_torchs(self):
        x, y = np.arange(24.0).reshape(8, 3), np.arange(8)
        mine = DataLoader(TensorDataset(tmem.tensor(x), tmem.tensor(y)), batch_size=3)
        theirs = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.tensor(x), torch.tensor(y)),
                                             batch_size=3)
        for (a, b), (c, d) in zip(mine, theirs):
            np.testing.assert_array_equal(a.numpy(), c.numpy())
            np.testing.assert_array_equal(b.numpy(), d.numpy())
        sample = [{"a": 1, "b": (2.5, [3, 4])}, {"a": 5, "b": (6.5, [7, 8])}]
        got, want = default_collate(sample), torch.utils.data.default_collate(sample)
        self.assertEqual((got["a"].tolist(), got["b"][0].tolist(), [t.tolist() for t in got["b"][1]]),
                         (want["a"].tolist(), want["b"][0].tolist(), [t.tolist() for t in want["b"][1]]))
        self.assertEqual(got["b"][0].dtype.name, str(want["b"][0].dtype).replace("torch.", ""))


class TestNnUtils(unittest.TestCase):
    def test_clipping_and_vectors(self):
        lin = tmem.nn.Linear(3, 2, generator=tmem.Generator(0))
        tmem.sum(lin(tmem.ones(4, 3)) * 10).backward()
        grads = np.concatenate([p.grad.numpy().ravel() for p in lin.parameters()])
        norm = nn_utils.clip_grad_norm_(lin.parameters(), 1.0)
        self.assertIsInstance(norm, tmem.Tensor)
        self.assertAlmostEqual(norm.item(), float(np.linalg.norm(grads)), places=3)
        clipped = np.concatenate([p.grad.numpy().ravel() for p in lin.parameters()])
        self.assertAlmostEqual(float(np.linalg.norm(clipped)), 1.0, places=5)
        nn_utils.clip_grad_value_(lin.parameters(), 0.1)
        self.assertLessEqual(max(float(np.abs(p.grad.numpy()).max()) for p in lin.parameters()), np.float32(0.1))
        vec = nn_utils.parameters_to_vector(lin.parameters())
        self.assertEqual(vec.shape, (8,))
        nn_utils.vector_to_parameters(tmem.arange(0, 8).float(), lin.parameters())
        self.assertEqual(lin.weight.tolist(), [[0, 1, 2], [3, 4, 5]])
        self.assertEqual(lin.bias.tolist(), [6, 7])
        lin.weight.grad.fill_(math.inf)
        before = lin.bias.grad.tolist()
        with self.assertRaisesRegex(RuntimeError, "clip_grad_norm_: the total norm of order 2.0 of the gradients "
                                                  "is inf"):
            nn_utils.clip_grad_norm_(lin.parameters(), 1.0, error_if_nonfinite=True)
        self.assertEqual(lin.bias.grad.tolist(), before)
        # By default the non-finite norm comes back and the gradients are scaled by it, as torch's:
        # by 0 for an infinite norm (inf * 0 is NaN), by NaN for a NaN norm.
        self.assertEqual(nn_utils.clip_grad_norm_(lin.parameters(), 1.0).item(), math.inf)
        self.assertEqual(lin.bias.grad.tolist(), [0.0, 0.0])
        self.assertTrue(np.isnan(lin.weight.grad.numpy()).all())
        lin.bias.grad.fill_(1.0)
        self.assertTrue(math.isnan(nn_utils.clip_grad_norm_(lin.parameters(), 1.0).item()))
        self.assertTrue(np.isnan(lin.bias.grad.numpy()).all())
        with self.assertRaisesRegex(tmem.ValueError, "clip_grad_norm_: norm_type 1 is not supported"):
            nn_utils.clip_grad_norm_(lin.parameters(), 1.0, norm_type=1)
        with self.assertRaisesRegex(tmem.ShapeError, "vector_to_parameters: expected a vector of 8 elements"):
            nn_utils.vector_to_parameters(tmem.ones(7), lin.parameters())


class TestInt64InPlaceAndPrinting(unittest.TestCase):
    def test_int64_in_place_arithmetic_as_the_operators(self):
        x = tmem.tensor([1, -2])
        x += 1  # it raised DtypeError (add_scalar) while x + 1 worked
        x -= 3
        x *= -2
        self.assertEqual(x.tolist(), [2, 8])
        x.add_(tmem.tensor([1, 1]), alpha=3)
        x.sub_(1)
        self.assertEqual(x.tolist(), [4, 10])
        with self.assertRaisesRegex(ValueError, "add_: an int64 tensor takes an integral alpha, but got 0.5"):
            x.add_(1, alpha=0.5)
        with self.assertRaisesRegex(tmem.DtypeError, "\\+=: the result is float32, which cannot be written into a "
                                                     "tensor of int64"):
            x += 0.5
        self.assertEqual(x.tolist(), [4, 10])

    def test_abs_and_dtype_printing(self):
        self.assertEqual((tmem.abs(tmem.tensor([-3, 4])).tolist(), tmem.tensor([-2**62]).abs().tolist()),
                         ([3, 4], [2**62]))
        self.assertEqual(tmem.abs(tmem.tensor([-1.5])).tolist(), [1.5])
        with self.assertRaisesRegex(TypeError, "abs: expected a Tensor, but got int"):
            tmem.abs(-1)
        self.assertEqual((str(tmem.float32), repr(tmem.int64), f"{[tmem.float64]}"),
                         ("tmem.float32", "tmem.int64", "[tmem.float64]"))


class TestDevices(unittest.TestCase):
    def test_the_device_idiom(self):
        """device = torch.device("cuda" if torch.cuda.is_available() else "cpu") had no tmem counterpart."""
        self.assertEqual(tmem.cuda.is_available(), tmem.cuda.device_count() > 0)
        device = tmem.device("cuda" if tmem.cuda.is_available() else "cpu")
        self.assertEqual(tmem.ones(2).to(device).device, "cuda:0" if device == "cuda" else "cpu")
        self.assertEqual((tmem.device("cuda", 1), tmem.device(2), tmem.device("cpu")), ("cuda:1", "cuda:2", "cpu"))
        with self.assertRaisesRegex(ValueError, "device: expected 'cpu' or 'cuda'"):
            tmem.device("tpu")
        if not tmem.cuda.is_available():
            with self.assertRaisesRegex(tmem.DeviceError, "cuda:0 is not available"):
                tmem.nn.Linear(2, 2).cuda()

    def test_device_objects_and_keywords(self):
        """torch.arange(T, device=x.device), batch.to(device, non_blocking=True) and device.type raised."""
        device = tmem.device("cpu")
        self.assertEqual((repr(device), device.type, device.index), ("device(type='cpu')", "cpu", None))
        cuda1 = tmem.device("cuda", 1)
        self.assertEqual((repr(cuda1), cuda1.type, cuda1.index, tmem.device("cuda:3").index),
                         ("device(type='cuda', index=1)", "cuda", 1, 3))
        self.assertEqual(pickle.loads(pickle.dumps(cuda1)), "cuda:1")
        self.assertEqual(tmem.load(_saved({"device": device})), {"device": "cpu"})  # weights-only allows it
        x = tmem.tensor([1.0, 2.0], device=device)
        self.assertEqual((x.device.type, repr(x.device)), ("cpu", "device(type='cpu')"))
        for made in (tmem.arange(3, device=x.device), tmem.randn(2, device=device), tmem.rand(2, device="cpu"),
                     tmem.randint(0, 5, (2,), device=device), tmem.eye(2, device=device),
                     tmem.linspace(0, 1, 3, device=device), tmem.zeros_like(x, device=device),
                     tmem.full_like(x, 2.0, device=device), tmem.randperm(4, device=device)):
            self.assertEqual(made.device, "cpu")
        grad_leaf = tmem.arange(3.0, requires_grad=True)
        self.assertEqual((grad_leaf.requires_grad, grad_leaf.is_leaf), (True, True))
        self.assertIs(x.to(device, non_blocking=True), x)
        self.assertEqual([x.to(device=device).dtype, x.to(device, tmem.float64).dtype, x.to(dtype=tmem.float64).dtype,
                          x.to(tmem.ones(1, dtype=tmem.float64)).dtype], [tmem.float32] + [tmem.float64] * 3)
        copied = x.to("cpu", copy=True)
        self.assertIsNot(copied, x)
        self.assertEqual(copied.tolist(), x.tolist())
        with self.assertRaisesRegex(ValueError, "device: expected 'cpu' or 'cuda'"):
            x.to(device="tpu")
        with self.assertRaisesRegex(TypeError, "to: unexpected arguments \\('extra',\\)"):
            x.to(tmem.float64, False, False, "extra")
        self.assertEqual(sorted(tmem.randperm(6, generator=tmem.Generator(3)).tolist()), list(range(6)))
        self.assertEqual((tmem.is_tensor(x), tmem.is_tensor([1.0])), (True, False))
        self.assertIs(tmem.as_tensor(x), x)
        self.assertEqual(tmem.as_tensor([1, 2], dtype=tmem.float64).dtype, tmem.float64)


def _saved(obj):
    """obj written by tmem.save into a file object, rewound."""
    f = io.BytesIO()
    tmem.save(obj, f)
    f.seek(0)
    return f


if __name__ == "__main__":
    unittest.main()
