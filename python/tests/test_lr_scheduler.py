"""tmem.optim.lr_scheduler and tmem.optim.Adam: every scheduler driven side
by side with torch 1.13's (the same arguments, two parameter groups with
different lrs, SGD, AdamW and Adam), its state_dict through tmem.save and a
weights-only tmem.load mid-run, torch's state_dicts loaded, Adam's steps
against torch.optim.Adam's; those are skipped, with the reason in the
output, when torch does not import. Without torch: exact sequences worked
out by hand, the initial-lr rules, and the errors for bad arguments."""
import copy
import io
import math
import unittest
import warnings

import numpy as np

import tmem
import tmem.optim as optim
from tmem.optim import lr_scheduler as lrs

try:
    import torch
except ImportError:
    torch = None

NO_TORCH = "torch does not import"
LRS = (0.1, 0.02)  # the two groups' lrs
STEPS = 50


def tmem_opt(kind, lrs_=LRS):
    groups = [{"params": [tmem.zeros(2, requires_grad=True)], "lr": lr} for lr in lrs_]
    if kind == "SGD":
        return optim.SGD(groups, lr=lrs_[0], momentum=0.9)
    if kind == "AdamW":
        return optim.AdamW(groups, lr=lrs_[0], weight_decay=0.01)
    return optim.Adam(groups, lr=lrs_[0])


def torch_opt(kind, lrs_=LRS):
    groups = [{"params": [torch.zeros(2, requires_grad=True)], "lr": lr} for lr in lrs_]
    if kind == "SGD":
        return torch.optim.SGD(groups, lr=lrs_[0], momentum=0.9)
    if kind == "AdamW":
        return torch.optim.AdamW(groups, lr=lrs_[0], weight_decay=0.01)
    return torch.optim.Adam(groups, lr=lrs_[0])


def factor(e):
    return 0.95 ** e


class Warmup:
    """A callable object: LambdaLR saves its __dict__ (torch's rule)."""

    def __init__(self, n):
        self.n = n

    def __call__(self, e):
        return min(1.0, (e + 1) / self.n)


# name -> a function of (the scheduler module, tmem's or torch's, and an optimizer) that builds the scheduler.
CASES = {
    "LambdaLR": lambda M, o: M.LambdaLR(o, [factor, lambda e: 1 / (1 + e)]),
    "LambdaLR object": lambda M, o: M.LambdaLR(o, Warmup(7)),
    "MultiplicativeLR": lambda M, o: M.MultiplicativeLR(o, lambda e: 0.9 if e % 3 else 1.05),
    "StepLR": lambda M, o: M.StepLR(o, step_size=7, gamma=0.3),
    "MultiStepLR": lambda M, o: M.MultiStepLR(o, milestones=[5, 12, 12, 30], gamma=0.5),
    "ConstantLR": lambda M, o: M.ConstantLR(o, factor=0.3, total_iters=9),
    "ConstantLR default": lambda M, o: M.ConstantLR(o),
    "LinearLR": lambda M, o: M.LinearLR(o, start_factor=0.2, end_factor=0.9, total_iters=17),
    "LinearLR decay": lambda M, o: M.LinearLR(o, start_factor=1.0, end_factor=0.05, total_iters=40),
    "ExponentialLR": lambda M, o: M.ExponentialLR(o, gamma=0.93),
    "CosineAnnealingLR": lambda M, o: M.CosineAnnealingLR(o, T_max=13, eta_min=1e-3),
    "CosineAnnealingLR to 0": lambda M, o: M.CosineAnnealingLR(o, T_max=25),
    "PolynomialLR": lambda M, o: M.PolynomialLR(o, total_iters=20, power=2.0),
    "CosineAnnealingWarmRestarts": lambda M, o: M.CosineAnnealingWarmRestarts(o, T_0=5, T_mult=2, eta_min=1e-4),
    "SequentialLR warmup cosine": lambda M, o: M.SequentialLR(
        o, [M.LinearLR(o, start_factor=0.1, total_iters=5), M.CosineAnnealingLR(o, T_max=30)], milestones=[5]),
    "SequentialLR three": lambda M, o: M.SequentialLR(
        o, [M.ConstantLR(o, factor=0.5, total_iters=4), M.ExponentialLR(o, 0.9), M.StepLR(o, 4, 0.5)],
        milestones=[6, 20]),
    "ChainedScheduler": lambda M, o: M.ChainedScheduler([M.ConstantLR(o, factor=0.1, total_iters=3),
                                                         M.ExponentialLR(o, gamma=0.9)]),
    "OneCycleLR cos": lambda M, o: M.OneCycleLR(o, max_lr=[0.5, 0.1], total_steps=55, cycle_momentum=False),
    "OneCycleLR linear three_phase": lambda M, o: M.OneCycleLR(
        o, max_lr=0.3, epochs=6, steps_per_epoch=10, pct_start=0.25, anneal_strategy="linear", three_phase=True,
        div_factor=10., final_div_factor=100., cycle_momentum=False),
    "OneCycleLR cos three_phase": lambda M, o: M.OneCycleLR(o, max_lr=[1.0, 0.2], total_steps=52, three_phase=True,
                                                            cycle_momentum=False),
}
KINDS = ("SGD", "AdamW", "Adam")


def save_and_load(state):
    """state through tmem.save and a weights-only tmem.load: it must hold plain values only."""
    buf = io.BytesIO()
    tmem.save(state, buf)
    buf.seek(0)
    return tmem.load(buf, weights_only=True)


@unittest.skipIf(torch is None, NO_TORCH)
class TestAgainstTorch(unittest.TestCase):
    def assert_lrs(self, mine, theirs, what):
        self.assertEqual(list(mine), list(theirs), what)  # the same arithmetic: bit for bit

    def assert_same(self, ms, mo, ts, to, what):
        self.assert_lrs(ms.get_last_lr(), ts.get_last_lr(), what)
        self.assert_lrs([g["lr"] for g in mo.param_groups], [g["lr"] for g in to.param_groups], what)
        if hasattr(ts, "last_epoch"):
            self.assertEqual(ms.last_epoch, ts.last_epoch, what)
        if hasattr(ts, "base_lrs"):
            self.assert_lrs(ms.base_lrs, ts.base_lrs, what)

    def step(self, ms, mo, ts, to):
        mo.step()
        to.step()
        ms.step()
        ts.step()

    def test_schedulers_match_torch(self):
        """get_last_lr(), the groups' lrs, last_epoch and base_lrs after construction and each of 50 steps."""
        for name, build in CASES.items():
            for kind in KINDS:
                with self.subTest(name, optimizer=kind), warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # torch's step(0) deprecation in SequentialLR
                    mo, to = tmem_opt(kind), torch_opt(kind)
                    ms, ts = build(lrs, mo), build(torch.optim.lr_scheduler, to)
                    self.assert_same(ms, mo, ts, to, f"{name} built")
                    for i in range(STEPS):
                        self.step(ms, mo, ts, to)
                        self.assert_same(ms, mo, ts, to, f"{name} step {i + 1}")

    def test_state_dict_round_trip(self):
        """After 20 steps, the state_dict through tmem.save and a weights-only tmem.load into a new optimizer
        and scheduler: it continues as torch's does, and its state_dict equals the original's."""
        for name, build in CASES.items():
            with self.subTest(name), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                mo, to = tmem_opt("SGD"), torch_opt("SGD")
                ms, ts = build(lrs, mo), build(torch.optim.lr_scheduler, to)
                for _ in range(20):
                    self.step(ms, mo, ts, to)
                saved = save_and_load(ms.state_dict())
                mo2 = tmem_opt("SGD", (0.7, 0.3))
                ms2 = build(lrs, mo2)
                mo2.load_state_dict(mo.state_dict())
                ms2.load_state_dict(saved)
                self.assertEqual(ms2.state_dict(), ms.state_dict())
                self.assert_same(ms2, mo2, ts, to, f"{name} loaded")
                for i in range(STEPS - 20):
                    self.step(ms2, mo2, ts, to)
                    self.assert_same(ms2, mo2, ts, to, f"{name} step {21 + i} after loading")

    def test_torch_state_dict_loads(self):
        """A torch scheduler's state_dict after 20 steps continues in tmem as in torch."""
        for name, build in CASES.items():
            with self.subTest(name), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                to = torch_opt("AdamW")
                ts = build(torch.optim.lr_scheduler, to)
                for _ in range(20):
                    to.step()
                    ts.step()
                mo = tmem_opt("AdamW")
                ms = build(lrs, mo)
                for g, tg in zip(mo.param_groups, to.param_groups):
                    g["lr"] = tg["lr"]
                ms.load_state_dict(ts.state_dict())
                for i in range(STEPS - 20):
                    self.step(ms, mo, ts, to)
                    self.assert_same(ms, mo, ts, to, f"{name} step {21 + i}")

    def test_reduce_lr_on_plateau(self):
        """The same metric sequence (a noisy descent that stalls, rises, falls) gives torch's lrs at every step,
        and the state_dict mid-run continues the same."""
        rng = np.random.default_rng(3)
        metrics = list(np.concatenate([np.linspace(1, 0.5, 15), np.full(10, 0.5), np.linspace(0.5, 0.8, 10),
                                       np.linspace(0.8, 0.2, 15)]) + 0.02 * rng.standard_normal(50))
        configs = [dict(),
                   dict(mode="min", factor=0.5, patience=2),
                   dict(mode="max", factor=0.3, patience=1, threshold=0.01, threshold_mode="abs", cooldown=2,
                        min_lr=[0.01, 0.001]),
                   dict(mode="min", factor=0.5, patience=0, threshold=0.1, eps=1e-3, min_lr=0.004),
                   dict(mode="max", factor=0.7, patience=3, threshold=0.05, threshold_mode="rel", cooldown=1)]
        for config in configs:
            for kind in KINDS:
                with self.subTest(config=config, optimizer=kind):
                    mo, to = tmem_opt(kind), torch_opt(kind)
                    ms = lrs.ReduceLROnPlateau(mo, **config)
                    ts = torch.optim.lr_scheduler.ReduceLROnPlateau(to, **config)
                    for i, m in enumerate(metrics):
                        if i == 25:
                            mo2 = tmem_opt(kind)
                            ms2 = lrs.ReduceLROnPlateau(mo2, **config)
                            mo2.load_state_dict(mo.state_dict())
                            ms2.load_state_dict(save_and_load(ms.state_dict()))
                            self.assertEqual(ms2.state_dict(), ms.state_dict())
                            mo, ms = mo2, ms2
                        ms.step(tmem.tensor(m) if i % 2 else float(m))
                        ts.step(float(m))
                        self.assertEqual([g["lr"] for g in mo.param_groups], [g["lr"] for g in to.param_groups],
                                         f"step {i}")
                        self.assertEqual(ms.get_last_lr(), ts._last_lr)
                        self.assertEqual((ms.best, ms.num_bad_epochs, ms.cooldown_counter, ms.last_epoch),
                                         (ts.best, ts.num_bad_epochs, ts.cooldown_counter, ts.last_epoch))
                    if config:
                        self.assertLess(mo.param_groups[0]["lr"], LRS[0])  # the sequence reduced the lr

    def test_step_with_epoch_uses_closed_form(self):
        """step(epoch), deprecated in torch: the same warning and the closed form's lrs."""
        for name in ("StepLR", "MultiStepLR", "ConstantLR", "LinearLR", "ExponentialLR", "CosineAnnealingLR",
                     "PolynomialLR", "CosineAnnealingWarmRestarts", "LambdaLR"):
            with self.subTest(name):
                mo, to = tmem_opt("SGD"), torch_opt("SGD")
                ms, ts = CASES[name](lrs, mo), CASES[name](torch.optim.lr_scheduler, to)
                for epoch in (3, 17, 8, 40):
                    with warnings.catch_warnings(record=True) as caught:
                        warnings.simplefilter("always")
                        ms.step(epoch)
                        ts.step(epoch)
                    self.assertEqual(len([w for w in caught if "epoch parameter" in str(w.message)]),
                                     0 if name == "CosineAnnealingWarmRestarts" else 2)
                    self.assert_same(ms, mo, ts, to, f"{name} epoch {epoch}")

    def step_both(self, x, theirs, mine, steps, before_each=None):
        """steps of (zero_grad, ((x w^T + b)^2).sum() backward, optimizer step, scheduler step) for torch's
        (w, b, optimizer, scheduler) and tmem's side by side, the parameters equal to 1e-12 after each;
        before_each(step) runs first."""
        (tw, tb, topt, ts), (mw, mb, mopt, ms) = theirs, mine
        for step in range(steps):
            if before_each:
                before_each(step)
            topt.zero_grad()
            ((torch.tensor(x) @ tw.t() + tb) ** 2).sum().backward()
            topt.step()
            ts.step()
            mopt.zero_grad()
            tmem.sum((tmem.tensor(x) @ mw.t() + mb) ** 2).backward()
            mopt.step()
            ms.step()
            for t, m in ((tw, mw), (tb, mb)):
                np.testing.assert_allclose(m.detach().numpy(), t.detach().numpy(), rtol=1e-12, atol=1e-15,
                                           err_msg=f"step {step}")

    def test_one_cycle_cycles_momentum_as_torchs(self):
        """OneCycleLR's default cycle_momentum=True was refused: tmem's optimizers could not change momentum or
        betas. Now each group's momentum (SGD) or beta1 (Adam, AdamW) is set, and 12 steps match torch's."""
        rng = np.random.default_rng(3)
        w0, b0, x = rng.standard_normal((3, 4)), rng.standard_normal(3), rng.standard_normal((5, 4))
        makers = {
            "SGD": (lambda ps: torch.optim.SGD(ps, lr=0.01, momentum=0.9),
                    lambda ps: optim.SGD(ps, lr=0.01, momentum=0.9), "momentum"),
            "AdamW": (lambda ps: torch.optim.AdamW(ps, lr=0.01, betas=(0.9, 0.99)),
                      lambda ps: optim.AdamW(ps, lr=0.01, betas=(0.9, 0.99)), "betas"),
            "Adam": (lambda ps: torch.optim.Adam(ps, lr=0.01), lambda ps: optim.Adam(ps, lr=0.01), "betas")}
        for name, (make_torch, make_mine, key) in makers.items():
            with self.subTest(optimizer=name):
                tw, tb = (torch.tensor(a, requires_grad=True) for a in (w0, b0))
                mw, mb = (tmem.tensor(a, dtype=tmem.float64, requires_grad=True) for a in (w0, b0))
                topt = make_torch([{"params": [tw]}, {"params": [tb]}])
                mopt = make_mine([{"params": [mw]}, {"params": [mb]}])
                ts = torch.optim.lr_scheduler.OneCycleLR(topt, max_lr=[0.05, 0.02], total_steps=12,
                                                         base_momentum=[0.8, 0.7])
                ms = lrs.OneCycleLR(mopt, max_lr=[0.05, 0.02], total_steps=12, base_momentum=[0.8, 0.7])
                def same_momenta(step):
                    for g in range(2):
                        self.assertAlmostEqual(np.ravel(mopt.param_groups[g][key])[0],
                                               np.ravel(topt.param_groups[g][key])[0], places=12, msg=f"step {step}")
                self.step_both(x, (tw, tb, topt, ts), (mw, mb, mopt, ms), 12, same_momenta)
                again = make_mine([{"params": [mw]}, {"params": [mb]}])
                again.load_state_dict(mopt.state_dict())  # the groups' momenta come back
                self.assertEqual([again.param_groups[g][key] for g in range(2)],
                                 [mopt.param_groups[g][key] for g in range(2)])

    def test_adam_steps_match_torch(self):
        """optim.Adam's parameters after 8 steps (two groups, float64, a OneCycleLR setting the lrs) equal
        torch.optim.Adam's to 1e-12, as do the state_dicts' moments."""
        rng = np.random.default_rng(7)
        w0, b0, x = rng.standard_normal((3, 4)), rng.standard_normal(3), rng.standard_normal((5, 4))
        tw, tb = (torch.tensor(a, requires_grad=True) for a in (w0, b0))
        mw, mb = (tmem.tensor(a, dtype=tmem.float64, requires_grad=True) for a in (w0, b0))
        topt = torch.optim.Adam([{"params": [tw]}, {"params": [tb], "lr": 0.003}], lr=0.01, betas=(0.8, 0.95),
                                eps=1e-7)
        mopt = optim.Adam([{"params": [mw]}, {"params": [mb], "lr": 0.003}], lr=0.01, betas=(0.8, 0.95), eps=1e-7)
        ts = torch.optim.lr_scheduler.OneCycleLR(topt, max_lr=[0.05, 0.01], total_steps=8, cycle_momentum=False)
        ms = lrs.OneCycleLR(mopt, max_lr=[0.05, 0.01], total_steps=8, cycle_momentum=False)
        self.step_both(x, (tw, tb, topt, ts), (mw, mb, mopt, ms), 8)
        mine, theirs = mopt.state_dict(), topt.state_dict()
        scheduler_keys = {"initial_lr", "max_lr", "min_lr"}  # torch's OneCycleLR keeps these in the groups
        self.assertEqual([sorted(g) for g in mine["param_groups"]],
                         [sorted(set(g) - scheduler_keys) for g in theirs["param_groups"]])
        for i in (0, 1):
            for key in ("exp_avg", "exp_avg_sq"):
                np.testing.assert_allclose(mine["state"][i][key].numpy(), theirs["state"][i][key].numpy(),
                                           rtol=1e-12, atol=1e-15)
        # torch's Adam state_dict loads into tmem's Adam (less the keys torch's OneCycleLR added to its groups,
        # which tmem's optimizers refuse).
        again = optim.Adam([{"params": [mw]}, {"params": [mb]}], lr=0.01, betas=(0.8, 0.95), eps=1e-7)
        again.load_state_dict({"state": {i: {k: tmem.tensor(v.numpy()) for k, v in e.items()}
                                         for i, e in theirs["state"].items()},
                               "param_groups": [{k: v for k, v in g.items() if k not in scheduler_keys}
                                                for g in theirs["param_groups"]]})
        self.assertEqual(again.steps, 8)
        self.assertEqual([g["lr"] for g in again.param_groups], [g["lr"] for g in topt.param_groups])


class TestExactValues(unittest.TestCase):
    """Sequences worked out by hand (no torch needed)."""

    def run_schedule(self, make, steps, lrs_=(1.0, 0.5)):
        opt = optim.SGD([{"params": [tmem.zeros(1, requires_grad=True)], "lr": lr} for lr in lrs_], lr=lrs_[0])
        sched = make(opt)
        out = [sched.get_last_lr()]
        for _ in range(steps):
            opt.step()
            sched.step()
            out.append(sched.get_last_lr())
            self.assertEqual(out[-1], [g["lr"] for g in opt.param_groups])
        return out

    def assert_close(self, got, want):
        np.testing.assert_allclose(np.array(got), np.array(want), rtol=1e-12, atol=1e-15)

    def test_step_lr(self):
        got = self.run_schedule(lambda o: lrs.StepLR(o, step_size=3, gamma=0.5), 10)
        # epochs 0-2: 1, 3-5: 1/2, 6-8: 1/4, 9-10: 1/8 (powers of two: exact)
        self.assertEqual([g[0] for g in got], [1, 1, 1, .5, .5, .5, .25, .25, .25, .125, .125])
        self.assertEqual([g[1] for g in got], [.5, .5, .5, .25, .25, .25, .125, .125, .125, .0625, .0625])

    def test_multi_step_lr(self):
        got = self.run_schedule(lambda o: lrs.MultiStepLR(o, milestones=[2, 5, 5, 9], gamma=0.5), 10)
        # x1/2 at 2, x1/4 at 5 (listed twice), x1/2 at 9
        self.assertEqual([g[0] for g in got], [1, 1, .5, .5, .5, .125, .125, .125, .125, .0625, .0625])

    def test_linear_lr(self):
        got = self.run_schedule(lambda o: lrs.LinearLR(o, start_factor=0.25, end_factor=1.0, total_iters=4), 7)
        self.assert_close([g[0] for g in got], [0.25, 0.4375, 0.625, 0.8125, 1.0, 1.0, 1.0, 1.0])
        self.assert_close([g[1] for g in got], [0.125, 0.21875, 0.3125, 0.40625, 0.5, 0.5, 0.5, 0.5])
        got = self.run_schedule(lambda o: lrs.LinearLR(o, start_factor=1.0, end_factor=0.5, total_iters=2), 3)
        self.assert_close([g[0] for g in got], [1.0, 0.75, 0.5, 0.5])

    def test_cosine_annealing_lr_closed_form(self):
        """The recursive form step() uses equals eta_min + (eta_max - eta_min)(1 + cos(pi t / T_max)) / 2, on
        past T_max too (period 2 T_max)."""
        T, eta_min = 10, 0.01
        got = self.run_schedule(lambda o: lrs.CosineAnnealingLR(o, T_max=T, eta_min=eta_min), 3 * T)
        for g, base in enumerate((1.0, 0.5)):
            want = [eta_min + (base - eta_min) * (1 + math.cos(math.pi * t / T)) / 2 for t in range(3 * T + 1)]
            self.assert_close([lr[g] for lr in got], want)
        self.assert_close(got[T], [eta_min, eta_min])
        self.assert_close(got[2 * T], [1.0, 0.5])

    def test_one_cycle_lr(self):
        """10 steps, max_lr 1, div_factor 4 (initial 0.25), final_div_factor 2 (min 0.125), pct_start 0.3: up
        to 1 over steps 0-2, then down to 0.125 at step 9."""
        def make(**kw):
            return lambda o: lrs.OneCycleLR(o, max_lr=[1.0, 2.0], total_steps=10, div_factor=4.0,
                                            final_div_factor=2.0, cycle_momentum=False, **kw)
        got = self.run_schedule(make(anneal_strategy="linear"), 9)
        self.assert_close([g[0] for g in got], [0.25, 0.625, 1.0] + [1.0 - 0.875 * (t - 2) / 7 for t in range(3, 10)])
        self.assert_close([g[1] for g in got], [2 * g[0] for g in got])
        got = self.run_schedule(make(), 9)
        self.assert_close([g[0] for g in got],
                          [0.25, 0.625, 1.0] + [0.125 + 0.875 * (1 + math.cos(math.pi * (t - 2) / 7)) / 2
                                                for t in range(3, 10)])
        got = self.run_schedule(make(anneal_strategy="linear", three_phase=True), 9)
        self.assert_close([g[0] for g in got], [0.25, 0.625, 1.0, 0.625, 0.25, 0.225, 0.2, 0.175, 0.15, 0.125])
        got = self.run_schedule(make(three_phase=True), 9)
        self.assert_close([g[0] for g in got], [0.25, 0.625, 1.0, 0.625, 0.25]
                          + [0.125 + 0.125 * (1 + math.cos(math.pi * (t - 4) / 5)) / 2 for t in range(5, 10)])
        with self.assertRaisesRegex(tmem.ValueError, "OneCycleLR: tried to step 12 times. The specified number of "
                                                     "total steps is 10"):
            self.run_schedule(make(), 11)

    def test_sequential_and_chained(self):
        """The examples of torch's docs, ConstantLR(factor=0.1, total_iters=2) then ExponentialLR(0.9) from epoch
        2, and the two chained, with the values torch 1.13 gives (its docs' lists are off)."""
        got = self.run_schedule(lambda o: lrs.SequentialLR(
            o, [lrs.ConstantLR(o, factor=0.1, total_iters=2), lrs.ExponentialLR(o, gamma=0.9)], milestones=[2]), 4)
        # ConstantLR's 0.1 at epochs 0 and 1; ExponentialLR restarts at epoch 2 (its step(0)) from the initial lr 1.
        self.assert_close([g[0] for g in got], [0.1, 0.1, 1.0, 0.9, 0.81])
        got = self.run_schedule(lambda o: lrs.ChainedScheduler(
            [lrs.ConstantLR(o, factor=0.1, total_iters=2), lrs.ExponentialLR(o, gamma=0.9)]), 4)
        # Built: 0.1 (ExponentialLR's epoch 0 keeps it); then x0.9 each step, and x10 at ConstantLR's epoch 2.
        self.assert_close([g[0] for g in got], [0.1, 0.09, 0.81, 0.729, 0.6561])

    def test_reduce_lr_on_plateau(self):
        opt = optim.SGD([tmem.zeros(1, requires_grad=True)], lr=1.0)
        sched = lrs.ReduceLROnPlateau(opt, factor=0.5, patience=1, cooldown=1, min_lr=0.2)
        got = []
        for m in (5, 4, 4, 4, 4, 4, 4, 4, 4, 3):
            sched.step(m)
            got.append(opt.param_groups[0]["lr"])
        # two epochs without improvement reduce (epoch 4), one of cooldown, then two more (epoch 7), then the floor
        self.assertEqual(got, [1, 1, 1, .5, .5, .5, .25, .25, .25, .25])
        self.assertEqual(sched.get_last_lr(), [0.25])
        self.assertEqual(sched.best, 3)

    def test_schedulers_take_any_optimizer(self):
        for make in (lambda ps: optim.SGD(ps, lr=0.8), lambda ps: optim.AdamW(ps, lr=0.8),
                     lambda ps: optim.Adam(ps, lr=0.8)):
            opt = make([tmem.zeros(1, requires_grad=True)])
            sched = lrs.StepLR(opt, step_size=1, gamma=0.5)
            opt.step()
            sched.step()
            self.assertEqual(opt.param_groups[0]["lr"], 0.4)

    def test_initial_lr_rules(self):
        """As torch's group['initial_lr']: the first scheduler (last_epoch=-1) records each group's lr, a later
        one on the same optimizer finds it; last_epoch >= 0 needs it recorded (KeyError otherwise)."""
        opt = optim.SGD([{"params": [tmem.zeros(1, requires_grad=True)], "lr": 1.0},
                         {"params": [tmem.zeros(1, requires_grad=True)], "lr": 0.5}], lr=1.0)
        first = lrs.ConstantLR(opt, factor=0.5, total_iters=3)
        self.assertEqual([g["lr"] for g in opt.param_groups], [0.5, 0.25])
        second = lrs.ExponentialLR(opt, gamma=0.5)
        self.assertEqual(second.base_lrs, [1.0, 0.5])
        self.assertEqual(first.base_lrs, [1.0, 0.5])
        resumed = lrs.StepLR(opt, step_size=2, last_epoch=4)
        self.assertEqual((resumed.base_lrs, resumed.last_epoch), ([1.0, 0.5], 5))
        fresh = optim.SGD([tmem.zeros(1, requires_grad=True)], lr=1.0)
        with self.assertRaisesRegex(KeyError, r"StepLR: param 'initial_lr' is not specified in param_groups\[0\]"):
            lrs.StepLR(fresh, step_size=2, last_epoch=4)
        # A group added later gets its initial lr from the next scheduler built with last_epoch=-1.
        opt.add_param_group({"params": [tmem.zeros(1, requires_grad=True)], "lr": 0.125})
        self.assertEqual(lrs.StepLR(opt, step_size=2).base_lrs, [1.0, 0.5, 0.125])

    def test_state_dict_is_plain_and_copied(self):
        opt = optim.SGD([tmem.zeros(1, requires_grad=True)], lr=1.0)
        sched = lrs.MultiStepLR(opt, milestones=[3, 3, 5])
        state = sched.state_dict()
        self.assertEqual(state["milestones"], {3: 2, 5: 1})
        self.assertIs(type(state["milestones"]), dict)
        self.assertEqual(save_and_load(state), state)
        state["base_lrs"].append(9.0)
        self.assertEqual(sched.base_lrs, [1.0])
        lam = lrs.LambdaLR(opt, [Warmup(4)])
        lam_state = lam.state_dict()
        self.assertEqual(lam_state["lr_lambdas"], [{"n": 4}])
        lam2 = lrs.LambdaLR(opt, [Warmup(9)])
        lam2.load_state_dict(lam_state)
        self.assertEqual(lam2.lr_lambdas[0].n, 4)
        self.assertEqual(lrs.LambdaLR(opt, factor).state_dict()["lr_lambdas"], [None])
        one = lrs.OneCycleLR(opt, max_lr=1.0, total_steps=10, cycle_momentum=False)
        self.assertEqual(one.state_dict()["anneal_strategy"], "cos")
        self.assertEqual(one.state_dict()["_group_lrs"], [{"initial_lr": 0.04, "max_lr": 1.0, "min_lr": 4e-06,
                                                            "max_momentum": 0.95, "base_momentum": 0.85}])
        self.assertEqual(save_and_load(one.state_dict()), one.state_dict())

    def test_get_lr_outside_step_warns(self):
        sched = lrs.StepLR(optim.SGD([tmem.zeros(1, requires_grad=True)], lr=1.0), step_size=2)
        with self.assertWarnsRegex(UserWarning, "please use `get_last_lr\\(\\)`"):
            sched.get_lr()

    def test_module(self):
        import importlib
        self.assertIs(importlib.import_module("tmem.optim.lr_scheduler"), lrs)
        self.assertIs(optim.lr_scheduler, lrs)
        for name in lrs.__all__:
            self.assertTrue(getattr(lrs, name).__doc__, name)
        self.assertTrue(optim.Adam.__doc__)


class TestErrors(unittest.TestCase):
    def setUp(self):
        self.opt = optim.SGD([{"params": [tmem.zeros(1, requires_grad=True)], "lr": 0.1},
                              {"params": [tmem.zeros(1, requires_grad=True)], "lr": 0.2}], lr=0.1)

    def test_bad_arguments(self):
        o = self.opt
        cases = [
            (lambda: lrs.StepLR(o, 0), tmem.ValueError, "StepLR: expected step_size to be a positive integer, but "
                                                        "got 0"),
            (lambda: lrs.StepLR(o, 2.5), tmem.ValueError, "StepLR: .*step_size.* 2.5"),
            (lambda: lrs.StepLR(o, 2, gamma=float("nan")), tmem.ValueError, "StepLR: .*gamma.* nan"),
            (lambda: lrs.StepLR("not an optimizer", 3), TypeError, "StepLR: str is not an Optimizer"),
            (lambda: lrs.OneCycleLR([1, 2], 0.1), TypeError, "OneCycleLR: list is not an Optimizer"),
            (lambda: lrs.ReduceLROnPlateau(None), TypeError, "ReduceLROnPlateau: NoneType is not an Optimizer"),
            (lambda: lrs.LinearLR(o, start_factor=0), tmem.ValueError, r"LinearLR: .*start_factor.*\(0, 1\].* 0"),
            (lambda: lrs.LinearLR(o, start_factor=1.5), tmem.ValueError, "LinearLR: .*start_factor.* 1.5"),
            (lambda: lrs.LinearLR(o, end_factor=-0.1), tmem.ValueError, "LinearLR: .*end_factor.* -0.1"),
            (lambda: lrs.LinearLR(o, total_iters=0), tmem.ValueError, "LinearLR: .*total_iters.* 0"),
            (lambda: lrs.ConstantLR(o, factor=2), tmem.ValueError, "ConstantLR: .*factor.* 2"),
            (lambda: lrs.MultiStepLR(o, milestones=5), TypeError, "MultiStepLR: .*milestones.* 5"),
            (lambda: lrs.MultiStepLR(o, milestones=[3, -1]), tmem.ValueError, "MultiStepLR: .*milestone.* -1"),
            (lambda: lrs.CosineAnnealingLR(o, T_max=0), tmem.ValueError, "CosineAnnealingLR: .*T_max.* 0"),
            (lambda: lrs.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=0), tmem.ValueError,
             "CosineAnnealingWarmRestarts: .*T_mult.* 0"),
            (lambda: lrs.PolynomialLR(o, total_iters=-2), tmem.ValueError, "PolynomialLR: .*total_iters.* -2"),
            (lambda: lrs.LambdaLR(o, [factor]), tmem.ValueError, "LambdaLR: expected 2 lr_lambdas .* but got 1"),
            (lambda: lrs.LambdaLR(o, 3), TypeError, r"LambdaLR: lr_lambda\[0\] must be callable, but got int"),
            (lambda: lrs.StepLR(o, 2, last_epoch=-2), tmem.ValueError, "StepLR: .*last_epoch.* -2"),
            (lambda: lrs.OneCycleLR(o, 0.1, cycle_momentum=False), tmem.ValueError,
             "OneCycleLR: total_steps is missing"),
            (lambda: lrs.OneCycleLR(o, 0.1, epochs=3, cycle_momentum=False), tmem.ValueError,
             "OneCycleLR: total_steps is missing.*steps_per_epoch=None"),
            (lambda: lrs.OneCycleLR(o, 0.1, total_steps=0, cycle_momentum=False), tmem.ValueError,
             "OneCycleLR: .*total_steps.* 0"),
            (lambda: lrs.OneCycleLR(o, 0.1, total_steps=10, anneal_strategy="exp", cycle_momentum=False),
             tmem.ValueError, "OneCycleLR: anneal_strategy .* 'exp'"),
            (lambda: lrs.OneCycleLR(o, 0.1, total_steps=10, pct_start=1.2, cycle_momentum=False), tmem.ValueError,
             "OneCycleLR: .*pct_start.* 1.2"),
            (lambda: lrs.OneCycleLR(o, [0.1], total_steps=10, cycle_momentum=False), tmem.ValueError,
             "OneCycleLR: expected 2 values for max_lr .* but got 1"),
            (lambda: lrs.ReduceLROnPlateau(o, factor=1.0), tmem.ValueError, r"ReduceLROnPlateau: .*factor.* 1.0"),
            (lambda: lrs.ReduceLROnPlateau(o, mode="avg"), tmem.ValueError, "ReduceLROnPlateau: mode .* 'avg'"),
            (lambda: lrs.ReduceLROnPlateau(o, threshold_mode="x"), tmem.ValueError,
             "ReduceLROnPlateau: threshold_mode .* 'x'"),
            (lambda: lrs.ReduceLROnPlateau(o, min_lr=[0.1]), tmem.ValueError,
             "ReduceLROnPlateau: expected 2 values for min_lr"),
            (lambda: lrs.ReduceLROnPlateau(o, patience=-1), tmem.ValueError, "ReduceLROnPlateau: .*patience.* -1"),
            (lambda: lrs.SequentialLR(o, [lrs.StepLR(o, 2), lrs.StepLR(o, 3)], milestones=[]), tmem.ValueError,
             "SequentialLR expects number of schedulers .* 2 and the number of milestones to be equal to 0"),
            (lambda: lrs.SequentialLR(o, [lrs.StepLR(optim.SGD([tmem.zeros(1, requires_grad=True)], lr=1), 2)],
                                      milestones=[]), tmem.ValueError, "SequentialLR expects all schedulers to belong "
                                                                       "to the same optimizer.* index 0"),
            (lambda: lrs.SequentialLR(o, [], milestones=[]), tmem.ValueError, "SequentialLR: expected at least one"),
            (lambda: lrs.ChainedScheduler([lrs.StepLR(o, 2), lrs.ReduceLROnPlateau(o)]), TypeError,
             r"ChainedScheduler: schedulers\[1\] is a ReduceLROnPlateau, not a tmem LRScheduler"),
        ]
        for make, error, pattern in cases:
            with self.subTest(pattern):
                with self.assertRaisesRegex(error, pattern):
                    make()

    def test_bad_state_dicts(self):
        sched = lrs.StepLR(self.opt, 2)
        with self.assertRaisesRegex(tmem.ValueError, r"StepLR.load_state_dict: the state_dict has keys this "
                                                     r"scheduler does not have: \['T_max'\]"):
            sched.load_state_dict({"T_max": 3})
        with self.assertRaisesRegex(tmem.ValueError, r"StepLR.load_state_dict: state_dict\['base_lrs'\] must hold "
                                                     r"one value per parameter group \(2\)"):
            sched.load_state_dict({"base_lrs": [0.1]})
        with self.assertRaisesRegex(TypeError, "StepLR.load_state_dict: expected a dict, but got list"):
            sched.load_state_dict([])
        self.assertEqual(sched.base_lrs, [0.1, 0.2])

    def test_negative_lr_is_refused_with_the_scheduler_named(self):
        with self.assertRaisesRegex(tmem.ValueError, r"LambdaLR: cannot set param_groups\[0\]\['lr'\] to -0.1"):
            lrs.LambdaLR(self.opt, lambda e: -1.0)

    def test_optimizers_take_torchs_arguments_and_a_closure(self):
        """SGD(nesterov=...) and step(closure) gave pybind11's signature dump, with every parameter's repr."""
        ps = [tmem.tensor([1.0, -2.0], requires_grad=True)]
        for make, message in ((lambda: optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True), "optim.SGD: nesterov=True"),
                              (lambda: optim.SGD(ps, 0.1, 0.9, 0.5), "optim.SGD: dampening=0.5"),
                              (lambda: optim.SGD(ps, lr=0.1, maximize=True), "optim.SGD: maximize=True"),
                              (lambda: optim.AdamW(ps, amsgrad=True), "optim.AdamW: amsgrad=True"),
                              (lambda: optim.Adam(ps, maximize=True), "optim.Adam: maximize=True"),
                              (lambda: optim.Adam(ps, betas=(1.5, 0.9)), r"optim.Adam: expected betas in \[0, 1\)")):
            with self.assertRaisesRegex(tmem.ValueError, message):
                make()
        with self.assertRaisesRegex(TypeError, "optim.SGD\\(\\) got an unexpected keyword argument 'bogus'"):
            optim.SGD(ps, lr=0.1, bogus=1)
        sgd = optim.SGD(ps, lr=0.1, momentum=0.5, dampening=0, weight_decay=0.0, nesterov=False, foreach=None)
        adamw = optim.AdamW(ps, lr=0.1, amsgrad=False, foreach=None, capturable=False, fused=None)
        calls = []

        def closure():
            calls.append(tmem.is_grad_enabled())
            sgd.zero_grad()
            loss = tmem.sum(ps[0] * ps[0])
            loss.backward()
            return loss

        with tmem.no_grad():
            self.assertEqual(sgd.step(closure).item(), 5.0)  # closure runs with grad enabled, as torch's
        self.assertEqual(calls, [True])
        np.testing.assert_allclose(ps[0].detach().numpy(), [0.8, -1.6], rtol=1e-6)  # p - 0.1 * 2p
        self.assertIsNone(sgd.step())
        before = float((ps[0].detach().numpy() ** 2).sum())
        self.assertAlmostEqual(adamw.step(closure).item(), before, places=5)  # the loss before the update
        self.assertEqual(len(calls), 2)
        adam = optim.Adam(ps, lr=0.1, foreach=False)
        self.assertIsInstance(adam.step(closure), tmem.Tensor)

    def test_adam_refuses_what_it_cannot_do(self):
        ps = [tmem.zeros(1, requires_grad=True)]
        with self.assertRaisesRegex(tmem.ValueError, "optim.Adam: weight_decay=0.01 is not supported.*use "
                                                     "optim.AdamW"):
            optim.Adam(ps, weight_decay=0.01)
        with self.assertRaisesRegex(tmem.ValueError, "optim.Adam: amsgrad=True is not supported"):
            optim.Adam(ps, amsgrad=True)
        with self.assertRaisesRegex(tmem.ValueError, r"optim.Adam: param_groups\[0\] has weight_decay=0.1.*AdamW"):
            optim.Adam([{"params": ps, "weight_decay": 0.1}])
        adam = optim.Adam(ps, lr=0.01)
        with self.assertRaisesRegex(tmem.ValueError, "Adam.add_param_group: weight_decay=0.1 is not supported"):
            adam.add_param_group({"params": [tmem.zeros(1, requires_grad=True)], "weight_decay": 0.1})
        adamw = optim.AdamW(ps, lr=0.02, weight_decay=0.1)
        with self.assertRaisesRegex(tmem.ValueError, r"Adam.load_state_dict: param_groups\[0\]\['weight_decay'\] is "
                                                     r"0.1.*optim.AdamW"):
            adam.load_state_dict(adamw.state_dict())
        self.assertEqual(adam.param_groups[0]["lr"], 0.01)
        adam.param_groups[0]["weight_decay"] = 0.1  # a group set later would get AdamW's decay: step refuses it
        before = [p.numpy().copy() for p in ps]
        with self.assertRaisesRegex(tmem.ValueError, r"Adam.step: param_groups\[0\] has weight_decay=0.1"):
            adam.step()
        for p, b in zip(ps, before):
            np.testing.assert_array_equal(p.numpy(), b)

    def test_adam_is_adamw_without_weight_decay(self):
        lin = tmem.nn.Linear(3, 2, generator=tmem.Generator(1))
        adam = optim.Adam(lin.parameters(), lr=0.01, betas=(0.8, 0.9))
        self.assertIsInstance(adam, optim.AdamW)
        self.assertEqual(adam.defaults["weight_decay"], 0.0)
        self.assertEqual([g["weight_decay"] for g in adam.param_groups], [0.0])
        for _ in range(2):
            tmem.sum(lin(tmem.ones(2, 3)) ** 2).backward()
            adam.step()
            adam.zero_grad()
        state = adam.state_dict()
        self.assertEqual(state["param_groups"][0]["amsgrad"], False)
        self.assertEqual(state["param_groups"][0]["betas"], (0.8, 0.9))
        again = optim.Adam(lin.parameters(), lr=0.5, betas=(0.8, 0.9))
        again.load_state_dict(state)
        self.assertEqual((again.steps, again.param_groups[0]["lr"]), (2, 0.01))
        copied = copy.deepcopy(adam)
        self.assertIs(type(copied), optim.Adam)
        self.assertEqual(copied.steps, 2)


if __name__ == "__main__":
    unittest.main()
