"""tmem.optim.lr_scheduler: torch.optim.lr_scheduler's schedulers (PyTorch
1.13's arithmetic, step for step) for tmem's optimizers.

    opt = tmem.optim.SGD(model.parameters(), lr=0.1)
    sched = tmem.optim.lr_scheduler.StepLR(opt, step_size=30, gamma=0.1)
    for epoch in range(100):
        train(...)
        sched.step()

The schedulers take the same arguments, with the same defaults, as torch's,
give the same learning rates (torch's recursive "chainable" forms where
step() uses them, its closed forms for step(epoch)), and have step(),
get_last_lr(), last_epoch, base_lrs, state_dict() and load_state_dict().
Their state_dicts hold plain values only (numbers, strings, lists, dicts),
so tmem.save stores them and a weights-only tmem.load reads them back.

Where tmem differs from torch:

* torch records each group's initial lr in the group ('initial_lr'); tmem's
  param_groups hold only params, lr, weight_decay and momentum (SGD) or betas (AdamW), so the initial lrs are
  kept here, beside the optimizer (a weak map shared by all schedulers of
  one optimizer, with torch's setdefault rule: the first scheduler built
  with last_epoch=-1 records them, later ones find them). A scheduler built
  with last_epoch >= 0 needs them recorded by an earlier one in this
  process, or raises KeyError as torch's does; OneCycleLR keeps its max_lr,
  min_lr and momenta in the scheduler (and its state_dict) for the same reason.
* OneCycleLR's cycle_momentum sets each group's momentum (SGD) or beta1
  (AdamW, Adam): tmem keeps those per group, and one beta2.
* torch wraps optimizer.step to warn when scheduler.step() comes first;
  tmem's bound optimizers take no such wrapper, so there is no warning.
* A learning rate a few ulps below 0 that rounding gives (torch's LinearLR
  to end_factor=0 ends at -2e-17 for some arguments) is set as 0: tmem's
  optimizers refuse a negative lr.
"""
import copy as _copy
import math as _math
import numbers as _numbers
import sys as _sys
import types as _types
import warnings as _warnings
import weakref as _weakref
from bisect import bisect_right as _bisect_right
from collections import Counter as _Counter

from . import _tmem
from ._tmem import optim as _optim

__all__ = ["LRScheduler", "LambdaLR", "MultiplicativeLR", "StepLR", "MultiStepLR", "ConstantLR", "LinearLR",
           "ExponentialLR", "SequentialLR", "PolynomialLR", "CosineAnnealingLR", "ChainedScheduler",
           "ReduceLROnPlateau", "CosineAnnealingWarmRestarts", "OneCycleLR"]

EPOCH_DEPRECATION_WARNING = (
    "The epoch parameter in `scheduler.step()` was not necessary and is being deprecated where possible. Please "
    "use `scheduler.step()` to step the scheduler. During the deprecation, if epoch is different from None, the "
    "closed form is used instead of the new chainable form, where available.")

_GET_LR_WARNING = "To get the last learning rate computed by the scheduler, please use `get_last_lr()`."

# optimizer -> [initial lr of group 0, of group 1, ...]: torch's group['initial_lr'], which tmem's groups cannot hold.
_INITIAL_LRS = _weakref.WeakKeyDictionary()

# Keys of torch's scheduler state_dicts that are no plain values and that tmem's schedulers do not need.
_TORCH_ONLY_KEYS = {"anneal_func", "use_beta1", "_scale_fn_ref", "_scale_fn_custom"}


def _optimizers():
    return (_optim.SGD, _optim.AdamW)  # Adam is a subclass of AdamW


def _check_optimizer(optimizer, who):
    if not isinstance(optimizer, _optimizers()):
        raise TypeError(f"{who}: {type(optimizer).__name__} is not an Optimizer (expected a tmem.optim optimizer: "
                        f"SGD, Adam or AdamW)")


def _is_real(value):
    return isinstance(value, _numbers.Real) and not isinstance(value, bool) and _math.isfinite(value)


def _real(value, who, name, low=None, high=None, low_open=False, high_open=False):
    """value, a finite real number in the interval given; tmem.ValueError naming who and name otherwise."""
    ok = _is_real(value)
    if ok and low is not None:
        ok = value > low if low_open else value >= low
    if ok and high is not None:
        ok = value < high if high_open else value <= high
    if not ok:
        where = ""
        if low is not None or high is not None:
            lo = "(" if low_open else "["
            hi = ")" if high_open else "]"
            where = f" in {lo}{'-inf' if low is None else low}, {'inf' if high is None else high}{hi}"
        raise _tmem.ValueError(f"{who}: expected {name} to be a finite number{where}, but got {value!r}")
    return value


def _integer(value, who, name, low):
    if not isinstance(value, _numbers.Integral) or isinstance(value, bool) or value < low:
        kind = "a positive integer" if low == 1 else f"an integer >= {low}"
        raise _tmem.ValueError(f"{who}: expected {name} to be {kind}, but got {value!r}")
    return int(value)


def _per_group(value, optimizer, who, name):
    """A value for each group: a list or tuple of one per group, or one for all."""
    count = len(optimizer.param_groups)
    if isinstance(value, (list, tuple)):
        if len(value) != count:
            raise _tmem.ValueError(f"{who}: expected {count} values for {name} (one per parameter group), but got "
                                   f"{len(value)}")
        return list(value)
    return [value] * count


def _recorded_initial_lrs(optimizer, who):
    """The initial lrs recorded for optimizer's groups; KeyError, as torch's, when a group has none."""
    initial = _INITIAL_LRS.get(optimizer, [])
    groups = optimizer.param_groups
    if len(initial) < len(groups):
        raise KeyError(f"{who}: param 'initial_lr' is not specified in param_groups[{len(initial)}] when resuming "
                       f"an optimizer (tmem keeps initial lrs beside the optimizer, recorded by a scheduler built "
                       f"with last_epoch=-1; build it so and load its state_dict to resume)")
    return initial[:len(groups)]


def _record_initial_lrs(optimizer, values=None, overwrite=False):
    """torch's group.setdefault('initial_lr', group['lr']) for every group (or = values[i] when overwrite)."""
    initial = _INITIAL_LRS.setdefault(optimizer, [])
    groups = optimizer.param_groups
    for i, group in enumerate(groups):
        value = group["lr"] if values is None else values[i]
        if i >= len(initial):
            initial.append(value)
        elif overwrite:
            initial[i] = value


def _set_group_lrs(scheduler, optimizer, values, who):
    """Sets each group's lr; a tiny negative value (rounding) becomes 0, a clearly negative or non-finite one
    raises tmem.ValueError naming the scheduler and the group before any group is set."""
    base = getattr(scheduler, "base_lrs", None)
    values = list(values)
    groups = optimizer.param_groups
    for i, (group, lr) in enumerate(zip(groups, values)):
        if _is_real(lr) and lr < 0:
            scale = max(abs(group["lr"]), abs(base[i]) if base is not None and i < len(base) else 0.0)
            if -lr <= 1e-12 * scale:
                lr = 0.0
        if not (_is_real(lr) and lr >= 0):
            raise _tmem.ValueError(f"{who}: cannot set param_groups[{i}]['lr'] to {lr!r}: an lr must be a finite "
                                   f"number >= 0")
        values[i] = float(lr)
    for group, lr in zip(groups, values):
        group["lr"] = lr
    return values


class _State:
    """state_dict() and load_state_dict() as torch's (every attribute but the
    optimizer), with plain values only."""

    def _state_keys(self):
        return [k for k in self.__dict__ if k != "optimizer"]

    def state_dict(self):
        """The scheduler's state as a dict of plain values (torch's keys: every attribute but the optimizer),
        copied: later steps do not change it."""
        return {k: _copy.deepcopy(self._plain(k, self.__dict__[k])) for k in self._state_keys()}

    def _plain(self, key, value):
        return value

    def _restore(self, key, value):
        return value

    def load_state_dict(self, state_dict):
        """Restores a state_dict() of this kind of scheduler (tmem's, or torch's read with tmem.load). Load the
        optimizer's state_dict too, as with torch. Raises TypeError for a non-dict and tmem.ValueError naming
        a key this scheduler does not have; underscore keys it lacks (torch's bookkeeping) are ignored."""
        who = f"{type(self).__name__}.load_state_dict"
        if not isinstance(state_dict, dict):
            raise TypeError(f"{who}: expected a dict, but got {type(state_dict).__name__}")
        keys = set(self._state_keys())
        unknown = sorted(str(k) for k in state_dict
                         if k not in keys and k not in _TORCH_ONLY_KEYS and not str(k).startswith("_"))
        if unknown:
            raise _tmem.ValueError(f"{who}: the state_dict has keys this scheduler does not have: {unknown}")
        count = len(self.optimizer.param_groups)
        for k in ("base_lrs", "_last_lr", "min_lrs", "_group_lrs"):
            if k in state_dict and k in keys and (not isinstance(state_dict[k], (list, tuple))
                                                  or len(state_dict[k]) != count):
                raise _tmem.ValueError(f"{who}: state_dict['{k}'] must hold one value per parameter group "
                                       f"({count}), but got {state_dict[k]!r}")
        for k in ("last_epoch", "_step_count"):
            if k in state_dict and k in keys and not (isinstance(state_dict[k], int)
                                                      and not isinstance(state_dict[k], bool)):
                raise _tmem.ValueError(f"{who}: state_dict['{k}'] must be an int, but got {state_dict[k]!r}")
        for k, v in state_dict.items():
            if k in keys:
                self.__dict__[k] = self._restore(k, _copy.deepcopy(v))


class LRScheduler(_State):
    """The base of the schedulers (torch's _LRScheduler): on construction it records each group's initial lr
    (last_epoch=-1; kept beside the optimizer, for tmem's param_groups cannot hold 'initial_lr') as base_lrs and
    takes the first step; step() advances last_epoch and sets each group's lr to get_lr()."""

    def __init__(self, optimizer, last_epoch=-1, verbose=False):
        who = type(self).__name__
        _check_optimizer(optimizer, who)
        _integer(last_epoch, who, "last_epoch", -1)
        self.optimizer = optimizer
        if last_epoch == -1:
            _record_initial_lrs(optimizer)
        self.base_lrs = list(_recorded_initial_lrs(optimizer, who))
        self.last_epoch = last_epoch
        self.verbose = verbose
        self._initial_step()

    def _initial_step(self):
        self._step_count = 0
        self.step()

    def get_last_lr(self):
        """The learning rates the last step set, one per group."""
        return list(self._last_lr)

    def get_lr(self):
        """The learning rates for last_epoch (chainable form); use get_last_lr() to read the current ones."""
        raise NotImplementedError

    def _warn_get_lr(self):
        if not self.__dict__.get("_get_lr_called_within_step", False):
            _warnings.warn(_GET_LR_WARNING, UserWarning, stacklevel=3)

    def print_lr(self, is_verbose, group, lr, epoch=None):
        """Prints the learning rate set for a group when is_verbose (torch's verbose output)."""
        if is_verbose:
            if epoch is None:
                print(f"Adjusting learning rate of group {group} to {lr:.4e}.")
            else:
                epoch_str = ("%.2f" if isinstance(epoch, float) else "%.5d") % epoch
                print(f"Epoch {epoch_str}: adjusting learning rate of group {group} to {lr:.4e}.")

    def step(self, epoch=None):
        """Advances the schedule by one step and sets each group's lr. step(epoch) (deprecated in torch, with
        its warning) jumps to that epoch through the closed form where the scheduler has one."""
        if epoch is not None:
            _warnings.warn(EPOCH_DEPRECATION_WARNING, UserWarning, stacklevel=2)
        self._step(epoch)

    def _step(self, epoch=None):
        before = (self.last_epoch, self._step_count)
        try:
            self._advance(epoch)
        except BaseException:
            self.last_epoch, self._step_count = before  # a step that failed leaves the schedule where it was
            raise

    def _advance(self, epoch):
        self._step_count += 1
        self._get_lr_called_within_step = True
        try:
            if epoch is None:
                self.last_epoch += 1
                values = self.get_lr()
            else:
                self.last_epoch = epoch
                closed = getattr(self, "_get_closed_form_lr", None)
                values = closed() if closed is not None else self.get_lr()
        finally:
            self._get_lr_called_within_step = False
        values = _set_group_lrs(self, self.optimizer, values, type(self).__name__)
        for i, lr in enumerate(values):
            self.print_lr(self.verbose, i, lr, epoch)
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]


_LRScheduler = LRScheduler  # torch 1.13's name


def _lambdas(lr_lambda, optimizer, who):
    _check_optimizer(optimizer, who)
    count = len(optimizer.param_groups)
    fns = list(lr_lambda) if isinstance(lr_lambda, (list, tuple)) else [lr_lambda] * count
    if len(fns) != count:
        raise _tmem.ValueError(f"{who}: expected {count} lr_lambdas (one per parameter group), but got {len(fns)}")
    for i, fn in enumerate(fns):
        if not callable(fn):
            raise TypeError(f"{who}: lr_lambda[{i}] must be callable, but got {type(fn).__name__}")
    return fns


class _LambdaState:
    """torch's rule for lr_lambdas in state_dicts: a function or lambda saves as None (it is not saved), a
    callable object as a copy of its __dict__."""

    def _plain(self, key, value):
        if key == "lr_lambdas":
            return [None if isinstance(fn, _types.FunctionType) else dict(fn.__dict__) for fn in value]
        return value

    def load_state_dict(self, state_dict):
        """Restores a state_dict(); the lambdas stay this scheduler's own (a callable object's saved __dict__
        updates it, as torch's)."""
        state_dict = dict(state_dict) if isinstance(state_dict, dict) else state_dict
        saved = state_dict.pop("lr_lambdas", None) if isinstance(state_dict, dict) else None
        super().load_state_dict(state_dict)
        if saved is not None:
            for fn, attrs in zip(self.lr_lambdas, saved):
                if attrs is not None:
                    fn.__dict__.update(attrs)

    def _state_keys(self):
        return [k for k in self.__dict__ if k not in ("optimizer", "lr_lambdas")] + ["lr_lambdas"]


class LambdaLR(_LambdaState, LRScheduler):
    """lr = initial_lr * lr_lambda(epoch), per group (torch.optim.lr_scheduler.LambdaLR). lr_lambda: a function
    of the epoch, or a list of one per group. The lambdas are not saved in state_dict (torch's rule)."""

    def __init__(self, optimizer, lr_lambda, last_epoch=-1, verbose=False):
        self.optimizer = optimizer
        self.lr_lambdas = _lambdas(lr_lambda, optimizer, "LambdaLR")
        super().__init__(optimizer, last_epoch, verbose)

    def get_lr(self):
        self._warn_get_lr()
        return [base_lr * lmbda(self.last_epoch) for lmbda, base_lr in zip(self.lr_lambdas, self.base_lrs)]


class MultiplicativeLR(_LambdaState, LRScheduler):
    """lr_epoch = lr_(epoch-1) * lr_lambda(epoch) for epoch > 0, per group
    (torch.optim.lr_scheduler.MultiplicativeLR). The lambdas are not saved in state_dict."""

    def __init__(self, optimizer, lr_lambda, last_epoch=-1, verbose=False):
        self.optimizer = optimizer
        self.lr_lambdas = _lambdas(lr_lambda, optimizer, "MultiplicativeLR")
        super().__init__(optimizer, last_epoch, verbose)

    def get_lr(self):
        self._warn_get_lr()
        if self.last_epoch > 0:
            return [group["lr"] * lmbda(self.last_epoch)
                    for lmbda, group in zip(self.lr_lambdas, self.optimizer.param_groups)]
        return [group["lr"] for group in self.optimizer.param_groups]


class StepLR(LRScheduler):
    """Multiplies each group's lr by gamma every step_size epochs: lr = initial_lr * gamma ** (epoch //
    step_size) (torch.optim.lr_scheduler.StepLR)."""

    def __init__(self, optimizer, step_size, gamma=0.1, last_epoch=-1, verbose=False):
        _check_optimizer(optimizer, "StepLR")
        self.step_size = _integer(step_size, "StepLR", "step_size", 1)
        self.gamma = _real(gamma, "StepLR", "gamma")
        super().__init__(optimizer, last_epoch, verbose)

    def get_lr(self):
        self._warn_get_lr()
        if (self.last_epoch == 0) or (self.last_epoch % self.step_size != 0):
            return [group["lr"] for group in self.optimizer.param_groups]
        return [group["lr"] * self.gamma for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [base_lr * self.gamma ** (self.last_epoch // self.step_size) for base_lr in self.base_lrs]


class MultiStepLR(LRScheduler):
    """Multiplies each group's lr by gamma at each milestone epoch: lr = initial_lr * gamma ** (milestones
    passed) (torch.optim.lr_scheduler.MultiStepLR; a milestone listed twice counts twice)."""

    def __init__(self, optimizer, milestones, gamma=0.1, last_epoch=-1, verbose=False):
        _check_optimizer(optimizer, "MultiStepLR")
        if isinstance(milestones, (str, bytes)) or not hasattr(milestones, "__iter__"):
            raise TypeError(f"MultiStepLR: expected milestones to be a list of epochs, but got {milestones!r}")
        self.milestones = _Counter(_integer(m, "MultiStepLR", "each milestone", 0) for m in milestones)
        self.gamma = _real(gamma, "MultiStepLR", "gamma")
        super().__init__(optimizer, last_epoch, verbose)

    def _plain(self, key, value):
        return dict(value) if key == "milestones" else value  # a Counter is no plain value

    def _restore(self, key, value):
        return _Counter(value) if key == "milestones" else value

    def get_lr(self):
        self._warn_get_lr()
        if self.last_epoch not in self.milestones:
            return [group["lr"] for group in self.optimizer.param_groups]
        return [group["lr"] * self.gamma ** self.milestones[self.last_epoch]
                for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        milestones = list(sorted(self.milestones.elements()))
        return [base_lr * self.gamma ** _bisect_right(milestones, self.last_epoch) for base_lr in self.base_lrs]


class ConstantLR(LRScheduler):
    """lr = initial_lr * factor until epoch total_iters, initial_lr from then on
    (torch.optim.lr_scheduler.ConstantLR). factor in (0, 1]."""

    def __init__(self, optimizer, factor=1.0 / 3, total_iters=5, last_epoch=-1, verbose=False):
        _check_optimizer(optimizer, "ConstantLR")
        self.factor = _real(factor, "ConstantLR", "factor", 0, 1, low_open=True)
        self.total_iters = _integer(total_iters, "ConstantLR", "total_iters", 0)
        super().__init__(optimizer, last_epoch, verbose)

    def get_lr(self):
        self._warn_get_lr()
        if self.last_epoch == 0:
            return [group["lr"] * self.factor for group in self.optimizer.param_groups]
        if self.last_epoch > self.total_iters or (self.last_epoch != self.total_iters):
            return [group["lr"] for group in self.optimizer.param_groups]
        return [group["lr"] * (1.0 / self.factor) for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [base_lr * (self.factor + (self.last_epoch >= self.total_iters) * (1 - self.factor))
                for base_lr in self.base_lrs]


class LinearLR(LRScheduler):
    """lr = initial_lr * (start_factor + (end_factor - start_factor) * min(epoch, total_iters) / total_iters)
    (torch.optim.lr_scheduler.LinearLR; step() uses torch's chainable form). start_factor in (0, 1],
    end_factor in [0, 1]."""

    def __init__(self, optimizer, start_factor=1.0 / 3, end_factor=1.0, total_iters=5, last_epoch=-1,
                 verbose=False):
        _check_optimizer(optimizer, "LinearLR")
        self.start_factor = _real(start_factor, "LinearLR", "start_factor", 0, 1, low_open=True)
        self.end_factor = _real(end_factor, "LinearLR", "end_factor", 0, 1)
        self.total_iters = _integer(total_iters, "LinearLR", "total_iters", 1)
        super().__init__(optimizer, last_epoch, verbose)

    def get_lr(self):
        self._warn_get_lr()
        if self.last_epoch == 0:
            return [group["lr"] * self.start_factor for group in self.optimizer.param_groups]
        if self.last_epoch > self.total_iters:
            return [group["lr"] for group in self.optimizer.param_groups]
        return [group["lr"] * (1. + (self.end_factor - self.start_factor)
                               / (self.total_iters * self.start_factor
                                  + (self.last_epoch - 1) * (self.end_factor - self.start_factor)))
                for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [base_lr * (self.start_factor + (self.end_factor - self.start_factor)
                           * min(self.total_iters, self.last_epoch) / self.total_iters)
                for base_lr in self.base_lrs]


class ExponentialLR(LRScheduler):
    """lr = initial_lr * gamma ** epoch (torch.optim.lr_scheduler.ExponentialLR)."""

    def __init__(self, optimizer, gamma, last_epoch=-1, verbose=False):
        _check_optimizer(optimizer, "ExponentialLR")
        self.gamma = _real(gamma, "ExponentialLR", "gamma")
        super().__init__(optimizer, last_epoch, verbose)

    def get_lr(self):
        self._warn_get_lr()
        if self.last_epoch == 0:
            return [group["lr"] for group in self.optimizer.param_groups]
        return [group["lr"] * self.gamma for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [base_lr * self.gamma ** self.last_epoch for base_lr in self.base_lrs]


def _check_schedulers(schedulers, optimizer, who):
    if isinstance(schedulers, (str, bytes)) or not hasattr(schedulers, "__iter__"):
        raise TypeError(f"{who}: expected schedulers to be a list of schedulers, but got {schedulers!r}")
    schedulers = list(schedulers)
    if not schedulers:
        raise _tmem.ValueError(f"{who}: expected at least one scheduler, but got an empty list")
    for i, s in enumerate(schedulers):
        if not isinstance(s, LRScheduler):
            raise TypeError(f"{who}: schedulers[{i}] is a {type(s).__name__}, not a tmem LRScheduler")
        if s.optimizer is not (optimizer if optimizer is not None else schedulers[0].optimizer):
            raise _tmem.ValueError(f"{who} expects all schedulers to belong to the same optimizer, but got "
                                   f"schedulers at index {i} to be different than the optimizer passed in")
    return schedulers


class _Nested:
    """state_dict of a scheduler of schedulers: its own state and each scheduler's state_dict under
    '_schedulers'."""

    def _plain(self, key, value):
        return [s.state_dict() for s in value] if key == "_schedulers" else value

    def load_state_dict(self, state_dict):
        """Restores a state_dict(), each scheduler's from its entry."""
        who = f"{type(self).__name__}.load_state_dict"
        if not isinstance(state_dict, dict):
            raise TypeError(f"{who}: expected a dict, but got {type(state_dict).__name__}")
        state_dict = dict(state_dict)
        saved = state_dict.pop("_schedulers", None)
        if saved is not None and (not isinstance(saved, (list, tuple)) or len(saved) != len(self._schedulers)):
            raise _tmem.ValueError(f"{who}: state_dict['_schedulers'] must hold {len(self._schedulers)} "
                                   f"state_dicts, but got {saved!r}")
        _State.load_state_dict(self, state_dict)
        for s, state in zip(self._schedulers, saved or ()):
            s.load_state_dict(state)

    def _step(self, epoch=None):
        if epoch is not None:
            raise TypeError(f"{type(self).__name__}.step() takes no epoch")
        self.step()


class SequentialLR(_Nested, LRScheduler):
    """Runs schedulers one after the other: schedulers[i] from epoch milestones[i-1] on, restarted (its step(0))
    there (torch.optim.lr_scheduler.SequentialLR). verbose does nothing, as in torch."""

    def __init__(self, optimizer, schedulers, milestones, last_epoch=-1, verbose=False):
        _check_optimizer(optimizer, "SequentialLR")
        schedulers = _check_schedulers(schedulers, optimizer, "SequentialLR")
        if isinstance(milestones, (str, bytes)) or not hasattr(milestones, "__iter__"):
            raise TypeError(f"SequentialLR: expected milestones to be a list of epochs, but got {milestones!r}")
        milestones = [_integer(m, "SequentialLR", "each milestone", 0) for m in milestones]
        if len(milestones) != len(schedulers) - 1:
            raise _tmem.ValueError(
                f"SequentialLR expects number of schedulers provided to be one more than the number of milestone "
                f"points, but got number of schedulers {len(schedulers)} and the number of milestones to be equal "
                f"to {len(milestones)}")
        if milestones != sorted(milestones):
            raise _tmem.ValueError(f"SequentialLR: expected increasing milestones, but got {milestones}")
        _integer(last_epoch, "SequentialLR", "last_epoch", -1)
        self._schedulers = schedulers
        self._milestones = milestones
        self.last_epoch = last_epoch + 1
        self.optimizer = optimizer
        initial = _recorded_initial_lrs(optimizer, "SequentialLR")
        _set_group_lrs(self, optimizer, initial, "SequentialLR")  # back to the initial lrs
        for scheduler in self._schedulers:  # "undo" the step the schedulers took when built
            scheduler.last_epoch -= 1
        self._schedulers[0]._initial_step()  # the first scheduler's initial step only
        self._last_lr = schedulers[0].get_last_lr()

    def step(self):
        """Steps the scheduler whose turn it is (restarting it at its milestone)."""
        self.last_epoch += 1
        idx = _bisect_right(self._milestones, self.last_epoch)
        scheduler = self._schedulers[idx]
        if idx > 0 and self._milestones[idx - 1] == self.last_epoch:
            scheduler._step(0)  # torch's scheduler.step(0), without its deprecation warning
        else:
            scheduler.step()
        self._last_lr = scheduler.get_last_lr()


class PolynomialLR(LRScheduler):
    """lr = initial_lr * (1 - min(epoch, total_iters) / total_iters) ** power
    (torch.optim.lr_scheduler.PolynomialLR)."""

    def __init__(self, optimizer, total_iters=5, power=1.0, last_epoch=-1, verbose=False):
        _check_optimizer(optimizer, "PolynomialLR")
        self.total_iters = _integer(total_iters, "PolynomialLR", "total_iters", 1)
        self.power = _real(power, "PolynomialLR", "power")
        super().__init__(optimizer, last_epoch, verbose)

    def get_lr(self):
        self._warn_get_lr()
        if self.last_epoch == 0 or self.last_epoch > self.total_iters:
            return [group["lr"] for group in self.optimizer.param_groups]
        decay_factor = ((1.0 - self.last_epoch / self.total_iters)
                        / (1.0 - (self.last_epoch - 1) / self.total_iters)) ** self.power
        return [group["lr"] * decay_factor for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [base_lr * (1.0 - min(self.total_iters, self.last_epoch) / self.total_iters) ** self.power
                for base_lr in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """Cosine annealing from initial_lr (eta_max) to eta_min over T_max epochs (SGDR without restarts;
    torch.optim.lr_scheduler.CosineAnnealingLR): eta_t = eta_min + (eta_max - eta_min) * (1 + cos(pi * t /
    T_max)) / 2. step() uses torch's recursive form, eta_t = eta_min + (eta_(t-1) - eta_min) * (1 + cos(pi t /
    T_max)) / (1 + cos(pi (t-1) / T_max)), which equals it to rounding and follows outside changes to the lr;
    step(epoch) the closed form."""

    def __init__(self, optimizer, T_max, eta_min=0, last_epoch=-1, verbose=False):
        _check_optimizer(optimizer, "CosineAnnealingLR")
        self.T_max = _real(T_max, "CosineAnnealingLR", "T_max", 0, low_open=True)
        self.eta_min = _real(eta_min, "CosineAnnealingLR", "eta_min")
        super().__init__(optimizer, last_epoch, verbose)

    def get_lr(self):
        self._warn_get_lr()
        if self.last_epoch == 0:
            return [group["lr"] for group in self.optimizer.param_groups]
        elif self._step_count == 1 and self.last_epoch > 0:
            return [self.eta_min + (base_lr - self.eta_min) * (1 + _math.cos((self.last_epoch) * _math.pi / self.T_max))
                    / 2 for base_lr in self.base_lrs]
        elif (self.last_epoch - 1 - self.T_max) % (2 * self.T_max) == 0:
            return [group["lr"] + (base_lr - self.eta_min) * (1 - _math.cos(_math.pi / self.T_max)) / 2
                    for base_lr, group in zip(self.base_lrs, self.optimizer.param_groups)]
        return [(1 + _math.cos(_math.pi * self.last_epoch / self.T_max))
                / (1 + _math.cos(_math.pi * (self.last_epoch - 1) / self.T_max))
                * (group["lr"] - self.eta_min) + self.eta_min
                for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [self.eta_min + (base_lr - self.eta_min) * (1 + _math.cos(_math.pi * self.last_epoch / self.T_max)) / 2
                for base_lr in self.base_lrs]


class ChainedScheduler(_Nested, LRScheduler):
    """Steps several schedulers of one optimizer together, each on the lrs the previous one set
    (torch.optim.lr_scheduler.ChainedScheduler)."""

    def __init__(self, schedulers):
        schedulers = _check_schedulers(schedulers, None, "ChainedScheduler")
        self._schedulers = schedulers
        self.optimizer = schedulers[0].optimizer
        self._last_lr = [group["lr"] for group in self._schedulers[-1].optimizer.param_groups]

    def step(self):
        """Steps every scheduler, in order."""
        for scheduler in self._schedulers:
            scheduler.step()
        self._last_lr = [group["lr"] for group in self._schedulers[-1].optimizer.param_groups]


class ReduceLROnPlateau(_State):
    """Multiplies each group's lr by factor (not below min_lr, and only by more than eps) when the metric passed
    to step(metric) has not improved for more than patience steps, then waits cooldown steps
    (torch.optim.lr_scheduler.ReduceLROnPlateau). An improvement beats the best by threshold: relative
    (best * (1 -+ threshold), threshold_mode 'rel') or absolute (best -+ threshold, 'abs'), for mode 'min' or
    'max'."""

    def __init__(self, optimizer, mode="min", factor=0.1, patience=10, threshold=1e-4, threshold_mode="rel",
                 cooldown=0, min_lr=0, eps=1e-8, verbose=False):
        who = "ReduceLROnPlateau"
        self.factor = _real(factor, who, "factor", 0, 1, high_open=True)
        _check_optimizer(optimizer, who)
        self.optimizer = optimizer
        self.min_lrs = [_real(v, who, "min_lr", 0) for v in _per_group(min_lr, optimizer, who, "min_lr")]
        self.patience = _integer(patience, who, "patience", 0)
        self.verbose = verbose
        self.cooldown = _integer(cooldown, who, "cooldown", 0)
        self.cooldown_counter = 0
        self.mode = mode
        self.threshold = _real(threshold, who, "threshold")
        self.threshold_mode = threshold_mode
        self.best = None
        self.num_bad_epochs = None
        self.mode_worse = None  # the worse value for the chosen mode
        self.eps = _real(eps, who, "eps", 0)
        self.last_epoch = 0
        self._init_is_better(mode=mode, threshold=threshold, threshold_mode=threshold_mode)
        self._reset()
        self._last_lr = [group["lr"] for group in optimizer.param_groups]

    def _reset(self):
        self.best = self.mode_worse
        self.cooldown_counter = 0
        self.num_bad_epochs = 0

    def get_last_lr(self):
        """The groups' learning rates after the last step (the current ones before the first)."""
        return list(self._last_lr)

    def step(self, metrics, epoch=None):
        """Takes the metric (a number or a one-element tensor) of the epoch just done; reduces the lrs after
        more than patience epochs without improvement."""
        try:
            current = float(metrics)
        except (TypeError, ValueError) as e:
            raise TypeError(f"ReduceLROnPlateau.step: expected the metric to be a number, but got {metrics!r}") from e
        if epoch is None:
            epoch = self.last_epoch + 1
        else:
            _warnings.warn(EPOCH_DEPRECATION_WARNING, UserWarning, stacklevel=2)
        self.last_epoch = epoch
        if self.is_better(current, self.best):
            self.best = current
            self.num_bad_epochs = 0
        else:
            self.num_bad_epochs += 1
        if self.in_cooldown:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0  # ignore any bad epochs in cooldown
        if self.num_bad_epochs > self.patience:
            self._reduce_lr(epoch)
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def _reduce_lr(self, epoch):
        for i, param_group in enumerate(self.optimizer.param_groups):
            old_lr = float(param_group["lr"])
            new_lr = max(old_lr * self.factor, self.min_lrs[i])
            if old_lr - new_lr > self.eps:
                param_group["lr"] = new_lr
                if self.verbose:
                    epoch_str = ("%.2f" if isinstance(epoch, float) else "%.5d") % epoch
                    print(f"Epoch {epoch_str}: reducing learning rate of group {i} to {new_lr:.4e}.")

    @property
    def in_cooldown(self):
        """Whether the scheduler is waiting out its cooldown."""
        return self.cooldown_counter > 0

    def is_better(self, a, best):
        """Whether the metric a improves on best by the threshold."""
        if self.mode == "min" and self.threshold_mode == "rel":
            return a < best * (1. - self.threshold)
        elif self.mode == "min" and self.threshold_mode == "abs":
            return a < best - self.threshold
        elif self.mode == "max" and self.threshold_mode == "rel":
            return a > best * (self.threshold + 1.)
        return a > best + self.threshold

    def _init_is_better(self, mode, threshold, threshold_mode):
        if mode not in {"min", "max"}:
            raise _tmem.ValueError(f"ReduceLROnPlateau: mode must be 'min' or 'max', but got {mode!r}")
        if threshold_mode not in {"rel", "abs"}:
            raise _tmem.ValueError(f"ReduceLROnPlateau: threshold_mode must be 'rel' or 'abs', but got "
                                   f"{threshold_mode!r}")
        self.mode_worse = _math.inf if mode == "min" else -_math.inf
        self.mode = mode
        self.threshold = threshold
        self.threshold_mode = threshold_mode

    def load_state_dict(self, state_dict):
        """Restores a state_dict() (tmem's or torch's)."""
        super().load_state_dict(state_dict)
        self._init_is_better(mode=self.mode, threshold=self.threshold, threshold_mode=self.threshold_mode)


class CosineAnnealingWarmRestarts(LRScheduler):
    """Cosine annealing with warm restarts (SGDR; torch.optim.lr_scheduler.CosineAnnealingWarmRestarts):
    eta_t = eta_min + (initial_lr - eta_min) * (1 + cos(pi * T_cur / T_i)) / 2, T_cur counting the epochs since
    the last restart, T_i = T_0 * T_mult ** restarts. step(epoch) takes fractional epochs."""

    def __init__(self, optimizer, T_0, T_mult=1, eta_min=0, last_epoch=-1, verbose=False):
        who = "CosineAnnealingWarmRestarts"
        _check_optimizer(optimizer, who)
        self.T_0 = _integer(T_0, who, "T_0", 1)
        self.T_i = T_0
        self.T_mult = _integer(T_mult, who, "T_mult", 1)
        self.eta_min = _real(eta_min, who, "eta_min")
        self.T_cur = last_epoch
        super().__init__(optimizer, last_epoch, verbose)

    def get_lr(self):
        self._warn_get_lr()
        return [self.eta_min + (base_lr - self.eta_min) * (1 + _math.cos(_math.pi * self.T_cur / self.T_i)) / 2
                for base_lr in self.base_lrs]

    def step(self, epoch=None):
        """One step, or to epoch (a float for a fraction of an epoch, as torch's; no deprecation warning)."""
        self._step(epoch)

    def _step(self, epoch=None):
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur = self.T_cur + 1
            if self.T_cur >= self.T_i:
                self.T_cur = self.T_cur - self.T_i
                self.T_i = self.T_i * self.T_mult
        else:
            if not _is_real(epoch) or epoch < 0:
                raise _tmem.ValueError(f"CosineAnnealingWarmRestarts: expected a non-negative epoch, but got "
                                       f"{epoch!r}")
            if epoch >= self.T_0:
                if self.T_mult == 1:
                    self.T_cur = epoch % self.T_0
                else:
                    n = int(_math.log((epoch / self.T_0 * (self.T_mult - 1) + 1), self.T_mult))
                    self.T_cur = epoch - self.T_0 * (self.T_mult ** n - 1) / (self.T_mult - 1)
                    self.T_i = self.T_0 * self.T_mult ** (n)
            else:
                self.T_i = self.T_0
                self.T_cur = epoch
        self.last_epoch = _math.floor(epoch)
        self._get_lr_called_within_step = True
        try:
            values = self.get_lr()
        finally:
            self._get_lr_called_within_step = False
        values = _set_group_lrs(self, self.optimizer, values, "CosineAnnealingWarmRestarts")
        for i, lr in enumerate(values):
            self.print_lr(self.verbose, i, lr, epoch)
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]


class OneCycleLR(LRScheduler):
    """The 1cycle policy (Smith and Topin, "Super-Convergence"; torch.optim.lr_scheduler.OneCycleLR): lr anneals
    from initial_lr = max_lr / div_factor up to max_lr over pct_start of total_steps, then down to min_lr =
    initial_lr / final_div_factor ('cos' or 'linear'); three_phase: up, back to initial_lr symmetrically, then
    down to min_lr. Step it after every batch. With cycle_momentum each group's momentum (SGD) or beta1 (AdamW,
    Adam) moves the other way, between max_momentum and base_momentum. The groups' initial, max and min lrs and
    momenta (torch keeps them in the param groups) are kept in the scheduler and its state_dict."""

    def __init__(self, optimizer, max_lr, total_steps=None, epochs=None, steps_per_epoch=None, pct_start=0.3,
                 anneal_strategy="cos", cycle_momentum=True, base_momentum=0.85, max_momentum=0.95, div_factor=25.,
                 final_div_factor=1e4, three_phase=False, last_epoch=-1, verbose=False):
        who = "OneCycleLR"
        _check_optimizer(optimizer, who)
        self.optimizer = optimizer
        if total_steps is not None:
            self.total_steps = _integer(total_steps, who, "total_steps", 1)
        elif epochs is None or steps_per_epoch is None:
            raise _tmem.ValueError(f"{who}: total_steps is missing: define either total_steps OR (epochs AND "
                                   f"steps_per_epoch), but got total_steps=None, epochs={epochs!r}, "
                                   f"steps_per_epoch={steps_per_epoch!r}")
        else:
            self.total_steps = (_integer(epochs, who, "epochs", 1)
                                * _integer(steps_per_epoch, who, "steps_per_epoch", 1))
        _real(pct_start, who, "pct_start", 0, 1)
        if three_phase:
            self._schedule_phases = [
                {"end_step": float(pct_start * self.total_steps) - 1, "start_lr": "initial_lr", "end_lr": "max_lr",
                 "start_momentum": "max_momentum", "end_momentum": "base_momentum"},
                {"end_step": float(2 * pct_start * self.total_steps) - 2, "start_lr": "max_lr",
                 "end_lr": "initial_lr", "start_momentum": "base_momentum", "end_momentum": "max_momentum"},
                {"end_step": self.total_steps - 1, "start_lr": "initial_lr", "end_lr": "min_lr",
                 "start_momentum": "max_momentum", "end_momentum": "max_momentum"},
            ]
        else:
            self._schedule_phases = [
                {"end_step": float(pct_start * self.total_steps) - 1, "start_lr": "initial_lr", "end_lr": "max_lr",
                 "start_momentum": "max_momentum", "end_momentum": "base_momentum"},
                {"end_step": self.total_steps - 1, "start_lr": "max_lr", "end_lr": "min_lr",
                 "start_momentum": "base_momentum", "end_momentum": "max_momentum"},
            ]
        if anneal_strategy not in ("cos", "linear"):
            raise _tmem.ValueError(f"{who}: anneal_strategy must be one of 'cos' or 'linear', but got "
                                   f"{anneal_strategy!r}")
        self.anneal_strategy = anneal_strategy
        self.cycle_momentum = bool(cycle_momentum)
        self._use_beta1 = "betas" in optimizer.param_groups[0]
        max_momenta = [_real(v, who, "max_momentum", 0) for v in _per_group(max_momentum, optimizer, who,
                                                                            "max_momentum")]
        base_momenta = [_real(v, who, "base_momentum", 0) for v in _per_group(base_momentum, optimizer, who,
                                                                              "base_momentum")]
        _real(div_factor, who, "div_factor", 0, low_open=True)
        _real(final_div_factor, who, "final_div_factor", 0, low_open=True)
        max_lrs = [_real(v, who, "max_lr", 0) for v in _per_group(max_lr, optimizer, who, "max_lr")]
        _integer(last_epoch, who, "last_epoch", -1)
        if last_epoch == -1:
            initial = [m / div_factor for m in max_lrs]
            _record_initial_lrs(optimizer, initial, overwrite=True)  # torch: group['initial_lr'] = ...
        else:
            initial = _recorded_initial_lrs(optimizer, who)
        self._group_lrs = [{"initial_lr": i, "max_lr": m, "min_lr": i / final_div_factor, "max_momentum": mm,
                            "base_momentum": bm}
                           for i, m, mm, bm in zip(initial, max_lrs, max_momenta, base_momenta)]
        if self.cycle_momentum and last_epoch == -1:
            for group, momentum in zip(optimizer.param_groups, max_momenta):
                self._set_momentum(group, momentum)
        super().__init__(optimizer, last_epoch, verbose)

    def _set_momentum(self, group, momentum):
        """group's momentum, or its beta1 (beta2 kept), set to momentum."""
        if self._use_beta1:
            group["betas"] = (momentum, group["betas"][1])
        else:
            group["momentum"] = momentum

    def _anneal(self, start, end, pct):
        if self.anneal_strategy == "cos":  # cosine anneal from start to end as pct goes from 0.0 to 1.0
            cos_out = _math.cos(_math.pi * pct) + 1
            return end + (start - end) / 2.0 * cos_out
        return (end - start) * pct + start

    def get_lr(self):
        self._warn_get_lr()
        lrs = []
        step_num = self.last_epoch
        if step_num > self.total_steps:
            raise _tmem.ValueError(f"OneCycleLR: tried to step {step_num + 1} times. The specified number of total "
                                   f"steps is {self.total_steps}")
        for group, param_group in zip(self._group_lrs, self.optimizer.param_groups):
            start_step = 0
            for i, phase in enumerate(self._schedule_phases):
                end_step = phase["end_step"]
                if step_num <= end_step or i == len(self._schedule_phases) - 1:
                    pct = (step_num - start_step) / (end_step - start_step)
                    computed_lr = self._anneal(group[phase["start_lr"]], group[phase["end_lr"]], pct)
                    computed_momentum = self._anneal(group[phase["start_momentum"]], group[phase["end_momentum"]],
                                                     pct)
                    break
                start_step = phase["end_step"]
            lrs.append(computed_lr)
            if self.cycle_momentum:
                self._set_momentum(param_group, computed_momentum)
        return lrs


_optim.lr_scheduler = _sys.modules[__name__]
_sys.modules[__package__ + ".optim.lr_scheduler"] = _sys.modules[__name__]
