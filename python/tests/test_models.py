"""tmem.models from Python: tasks, the diagnostic model, TrainConfig, and a
Python training loop that reproduces the C++ trainer's losses exactly."""
import copy
import functools
import gc
import threading
import unittest

import numpy as np

import tmem
import tmem.nn as nn
import tmem.optim as optim
from tmem import models

# A small tensor-memory run: a few seconds on 2 cores.
SMALL = {"task": "coord-binding", "method": "tensor", "W": 4, "steps": 4, "batch": 4, "seed": 3, "dim": 16,
         "layers": 1, "heads": 2, "mem_channels": 4, "mem_grid": [3, 3, 3], "eval_batches": 1}


def python_loop(cfg):
    """The C++ trainer's loop (models/trainer.cpp) written in Python; returns the losses."""
    task = models.make_task(cfg.task, cfg.task_cfg)
    model = models.DiagnosticModel(task, cfg.model, generator=tmem.Generator(cfg.seed))
    data_gen = tmem.Generator(cfg.seed + 1)
    params = model.parameters()
    # The C++ trainer's two groups (nn::weight_decay_groups): weight decay on
    # tensors of rank >= 2 only.
    opt = optim.AdamW(optim.weight_decay_groups(params, cfg.weight_decay), lr=cfg.lr)
    losses = []
    for _ in range(cfg.steps):
        batch = task.sample(cfg.batch, data_gen)
        logits = model(batch)
        loss = tmem.cross_entropy(logits.reshape(-1, task.classes()), batch.targets.reshape(-1))
        loss.backward()
        losses.append(loss.item())
        nn.clip_grad_norm_(params, cfg.clip)
        opt.step()
        opt.zero_grad()
    return losses, model


class TestTasks(unittest.TestCase):
    def test_coord_binding_batch(self):
        task = models.make_task("coord-binding", W=4)
        batch = task.sample(3, tmem.Generator(0))
        self.assertEqual(batch.features.shape, (3, task.seq_len(), task.feature_dim()))
        self.assertEqual(batch.targets.dtype, tmem.int64)
        t = batch.targets.numpy()
        self.assertTrue(((t == -100) | ((t >= 0) & (t < task.classes()))).all())
        same = models.make_task("coord-binding", models.TaskConfig(W=4)).sample(3, tmem.Generator(0))
        np.testing.assert_array_equal(same.features.numpy(), batch.features.numpy())
        # copy.deepcopy (pickling's TypeError before): copies of the tensors; copy.copy shares them.
        kept = copy.deepcopy(batch)
        shallow = copy.copy(batch)
        with tmem.no_grad():
            batch.features.fill_(7.0)
        np.testing.assert_array_equal(kept.features.numpy(), same.features.numpy())
        for name in ("ids", "targets", "observed"):
            a, b = getattr(kept, name), getattr(same, name)
            self.assertEqual(None if a is None else a.numpy().tolist(), None if b is None else b.numpy().tolist())
        self.assertEqual(shallow.features._impl_id, batch.features._impl_id)
        self.assertNotEqual(kept.features._impl_id, batch.features._impl_id)

    def test_sizes_beyond_the_limit_are_refused(self):
        # sample(2**62) overflowed batch x length and wrote past its buffer
        # (SIGSEGV); G = 2**62 wrapped mqar's length to 80 tokens.
        task = models.make_task("no-harm", length=8)
        for batch in (2**62, 0, -1):
            with self.subTest(batch=batch):
                with self.assertRaises(tmem.ValueError) as cm:
                    task.sample(batch, tmem.Generator(0))
                self.assertEqual(str(cm.exception),
                                 "sample: expected a batch of 1 to 65536 sequences, but got %d" % batch)
        for name, key, value in (("mqar", "G", 2**62), ("no-harm", "length", 2**62), ("coord-binding", "W", 2**61),
                                 ("map-recall", "T", 65552)):
            with self.subTest(name=name):
                with self.assertRaises(tmem.ValueError) as cm:
                    models.make_task(name, **{key: value})
                self.assertEqual(str(cm.exception), "%s: expected %s <= 65536, but got %d" % (name, key, value))
        self.assertEqual(models.make_task("mqar", G=3).seq_len(), 128)

    def test_backbone_config_is_a_copy(self):
        # Editing the live config bypassed the length check (max_len 100000).
        b = models.Backbone(models.BackboneConfig(dim=16, layers=1, heads=2, max_len=8))
        cfg = b.config
        cfg.max_len = 100000
        self.assertEqual(b.config.max_len, 8)

    def test_bad_task_and_keys(self):
        with self.assertRaises(tmem.ValueError):
            models.make_task("no-such-task")
        with self.assertRaises(AttributeError):
            models.TaskConfig(Q=3)


class TestTrainConfig(unittest.TestCase):
    def test_defaults_resolved_and_round_trip(self):
        cfg = models.TrainConfig({"method": "tensor"})
        task = models.make_task(cfg.task, cfg.task_cfg)
        self.assertEqual(cfg.model.dim, task.default_dim())
        self.assertEqual(cfg.model.memory.chunk, task.default_chunk())
        d = cfg.to_dict()
        self.assertEqual(d["method"], "tensor")
        self.assertEqual(models.TrainConfig(d).to_dict(), d)
        cfg.model.memory.channels = 8
        self.assertEqual(cfg.to_dict()["mem_channels"], 8)

    def test_bad_keys(self):
        with self.assertRaises(tmem.ValueError) as cm:
            models.TrainConfig({"stpes": 3})
        self.assertIn("stpes", str(cm.exception))
        with self.assertRaises(tmem.ValueError):
            models.TrainConfig({"steps": 1.5})
        # NaN once gave nlohmann's bare parse error (a RuntimeError).
        with self.assertRaisesRegex(tmem.ValueError, r"TrainConfig: JSON has no NaN or infinities .*, but got "
                                                     r"\['lr'\] = nan"):
            models.TrainConfig({"lr": float("nan")})

    def test_method_names(self):
        cfg = models.BackboneConfig(method="base", attention="xl")
        self.assertEqual((cfg.method, cfg.attention), ("base", "xl"))
        with self.assertRaises(tmem.ValueError) as cm:
            cfg.method = "slotz"
        self.assertIn('unknown method "slotz"', str(cm.exception))
        self.assertEqual(cfg.method, "base")
        with self.assertRaises(tmem.ValueError):
            cfg.attention = "sparse"
        with self.assertRaises(tmem.ValueError) as cm:
            models.TrainConfig({"method": "slotz"})
        self.assertIn('unknown method "slotz"', str(cm.exception))


class TestTraining(unittest.TestCase):
    def test_python_loop_matches_the_cpp_trainer(self):
        cfg = models.TrainConfig(SMALL)
        calls = []
        result = models.train_diagnostic(cfg, lambda step, steps, loss, acc, sps: calls.append(step))
        losses, model = python_loop(cfg)
        self.assertEqual(losses, result["losses"])
        self.assertEqual(calls, [1, 2, 3, 4])
        self.assertEqual(result["parameters"], model.num_parameters())
        self.assertEqual(len(model.memory_layers()), 1)
        self.assertEqual(len(models.memory_gates(model.backbone)), 1)

    def test_trainer_releases_the_gil(self):
        cfg = models.TrainConfig(dict(SMALL, steps=6))
        ticks = [0]
        done = threading.Event()

        def tick():
            while not done.is_set():
                ticks[0] += 1

        worker = threading.Thread(target=tick)
        worker.start()
        models.train_diagnostic(cfg)
        done.set()
        worker.join()
        self.assertGreater(ticks[0], 1000)

    def test_model_parts(self):
        cfg = models.TrainConfig(SMALL)
        task = models.make_task(cfg.task, cfg.task_cfg)
        model = models.DiagnosticModel(task, cfg.model)
        with tmem.nn.TensorMemoryProbe() as probe:
            logits = model(task.sample(2, tmem.Generator(1)))
        self.assertEqual(logits.shape, (2, task.seq_len(), task.classes()))
        mem = model.memory_layers()[0]
        self.assertEqual(probe.last(mem)["mu_write"].shape[-1], 3)
        self.assertIs(model.backbone.blocks[0].memory is None, False)
        self.assertIn("head.weight", model.state_dict())

    def test_blocks_is_the_registered_module_list(self):
        # Every name named_modules() gives is a getattr path, as torch's.
        gc.collect()  # which freed the bound ModuleList type, whose name the Python one takes: a plain Module came
        cfg = models.TrainConfig(SMALL)
        model = models.DiagnosticModel(models.make_task(cfg.task, cfg.task_cfg), cfg.model)
        blocks = model.backbone.blocks
        self.assertIs(blocks, dict(model.named_modules())["backbone.blocks"])
        self.assertEqual(type(blocks).__name__, "ModuleList")
        self.assertIn("(blocks): ModuleList(", repr(model))
        for name, module in model.named_modules():
            if name:
                self.assertIs(functools.reduce(getattr, name.split("."), model), module, name)
        n = len(blocks)
        self.assertEqual(n, cfg.model.layers)
        self.assertEqual(list(blocks), [blocks[i] for i in range(n)])
        self.assertIs(blocks[-1], blocks[n - 1])
        self.assertIs(blocks[False], blocks[0])  # a bool is an index, as in a list
        self.assertEqual(blocks[::-1], list(reversed(list(blocks))))
        self.assertIs(getattr(blocks, "0"), blocks[0])
        self.assertEqual([type(b).__name__ for b in blocks], ["Block"] * n)
        with self.assertRaisesRegex(IndexError, f"index {n} is out of range for a ModuleList of {n} modules"):
            blocks[n]
        with self.assertRaisesRegex(IndexError, f"index {-n - 1} is out of range"):
            blocks[-n - 1]
        with self.assertRaisesRegex(TypeError, "ModuleList indices must be integers or slices, not str"):
            blocks["0"]
        for add in (lambda: setattr(blocks, "extra", tmem.nn.Linear(2, 2)),
                    lambda: blocks.register_buffer("scale", tmem.ones(2)),
                    lambda: blocks.register_module("extra", tmem.nn.Linear(2, 2))):
            with self.assertRaisesRegex(TypeError, "ModuleList: cannot .*: this module was made by its parent's "
                                                   "C\\+\\+ constructor"):
                add()
        self.assertEqual([name for name, _ in blocks.named_children()], [str(i) for i in range(n)])
        blocks.eval()  # a module: train/eval, parameters and to reach the blocks
        self.assertFalse(blocks[0].training)
        self.assertTrue(model.training)
        self.assertEqual(sum(p.numel() for p in blocks.parameters()),
                         sum(p.numel() for name, p in model.named_parameters() if name.startswith("backbone.blocks.")))


if __name__ == "__main__":
    unittest.main()
