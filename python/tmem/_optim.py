"""torch.optim's state_dict layout for tmem's optimizers, so that Python
code reading ``opt.state_dict()["param_groups"][0]["lr"]`` works, and an
optimizer state moves between torch and tmem (through tmem.load of a
torch.save file one way, through NumPy or safetensors the other):

    {"state": {i: {"step": tensor(t), "exp_avg": m_i, "exp_avg_sq": v_i}},   # AdamW
     "state": {i: {"momentum_buffer": b_i}},                                  # SGD
     "param_groups": [{"lr": ..., "weight_decay": ..., <the optimizer's options>, "params": [i, ...]}]}

i counts the parameters of all groups in order, as torch numbers them.
load_state_dict maps the saved groups' ids to this optimizer's parameters
by position (torch's rule), restores each group's lr, weight_decay and
momentum (SGD) or beta1 (AdamW), and refuses, naming the key, what tmem's
optimizer cannot honour (amsgrad, nesterov, maximize, another beta2 or eps
than its own, per-parameter AdamW steps that differ: tmem keeps one count). A parameter the saved state
has no entry for (torch's: it never had a gradient) starts from zero
moments at that shared count, where torch would count its own steps from 1,
so its bias correction differs from torch's until the count is large. It also takes the flat form
the C++ API checkpoints (keys "m.<i>", "step", "group_sizes", ...). The
C++ load_state_dict checks the whole state before copying any of it, so a
state that does not fit leaves the optimizer unchanged."""
import collections.abc as _abc
import math as _math
import numbers as _numbers

from . import _take_torch_arguments, _tmem
from ._tensor_ops import enable_grad as _enable_grad, refuse as _refuse
from ._tmem import optim as _optim_mod

_FLAT = {cls: (cls.state_dict, cls.load_state_dict) for cls in (_optim_mod.SGD, _optim_mod.AdamW)}
# Keys of torch's groups that change no arithmetic (implementation switches, schedulers' bookkeeping: OneCycleLR's
# max_lr, min_lr and momenta).
_IGNORED = ("foreach", "capturable", "differentiable", "fused", "initial_lr", "max_lr", "min_lr", "max_momentum",
            "base_momentum")


def _bound(opt):
    return _optim_mod.SGD if isinstance(opt, _optim_mod.SGD) else _optim_mod.AdamW


def _options(opt, group):
    """The keys of a group (besides params, lr, weight_decay) that opt's
    arithmetic depends on, with the values it has for group."""
    if _bound(opt) is _optim_mod.AdamW:
        return {"betas": tuple(group["betas"]), "eps": opt.eps, "amsgrad": False, "maximize": False}
    return {"momentum": group["momentum"], "dampening": 0.0, "nesterov": False, "maximize": False}


def _momentum_key(opt):
    """The group key tmem's optimizer sets per group besides lr and weight_decay."""
    return "betas" if _bound(opt) is _optim_mod.AdamW else "momentum"


def state_dict(self):
    """The optimizer's state as torch.optim's state_dict: {"state": {i:
    {...}}, "param_groups": [{...}]} (see the module comment). Its tensors
    may be the optimizer's own, as torch's: copy.deepcopy it for a snapshot
    that later steps cannot change."""
    bound = _bound(self)
    flat = _FLAT[bound][0](self)
    state, ids, index = {}, [], 0
    for group in self.param_groups:
        ids.append(list(range(index, index + len(group["params"]))))
        index += len(group["params"])
    if bound is _optim_mod.AdamW:
        if self.steps:
            for i in range(index):
                state[i] = {"step": _tmem.tensor(float(self.steps)), "exp_avg": flat[f"m.{i}"],
                            "exp_avg_sq": flat[f"v.{i}"]}
    else:
        for i in range(index):
            if f"momentum_buffer.{i}" in flat:
                state[i] = {"momentum_buffer": flat[f"momentum_buffer.{i}"]}
    switches = {"foreach": None, "differentiable": False} | ({"capturable": False, "fused": None}
                                                            if bound is _optim_mod.AdamW else {})
    groups = [{"lr": group["lr"], "weight_decay": group["weight_decay"], **_options(self, group), **switches,
               "params": params}
              for group, params in zip(self.param_groups, ids)]
    return {"state": state, "param_groups": groups}


def _number(value, who):
    """value as a finite float >= 0; tmem.ValueError naming who otherwise."""
    ok = isinstance(value, _numbers.Real) and not isinstance(value, bool) and _math.isfinite(value) and value >= 0
    if not ok:
        raise _tmem.ValueError(f"{who} must be a finite number >= 0, but got {value!r}")
    return float(value)


def _check_groups(self, saved, who):
    """The (lr, weight_decay) of each saved group and the map from saved
    parameter ids to positions, after checking the groups fit self."""
    groups = self.param_groups
    if not isinstance(saved, (list, tuple)) or len(saved) != len(groups):
        count = len(saved) if isinstance(saved, (list, tuple)) else type(saved).__name__
        raise _tmem.ValueError(f"{who}: the state_dict has {count} parameter groups, but the optimizer has "
                               f"{len(groups)}")
    positions, settings, index, momentum_key = {}, [], 0, _momentum_key(self)
    for g, (group, s) in enumerate(zip(groups, saved)):
        where = f"{who}: param_groups[{g}]"
        options = _options(self, group)
        if not isinstance(s, dict) or not isinstance(s.get("params"), (list, tuple)):
            raise _tmem.ValueError(f"{where} must be a dict with a list of parameter ids under 'params'")
        if len(s["params"]) != len(group["params"]):
            raise _tmem.ValueError(f"{where} has {len(s['params'])} parameters, but the optimizer's group has "
                                   f"{len(group['params'])}")
        for pid in s["params"]:
            if not isinstance(pid, _abc.Hashable):
                raise _tmem.ValueError(f"{where} lists a parameter id of type {type(pid).__name__}, which cannot be "
                                       f"a key of state")
            if pid in positions:
                raise _tmem.ValueError(f"{where} lists parameter id {pid!r} twice")
            positions[pid] = index
            index += 1
        for key, value in s.items():
            if key in ("params", "lr", "weight_decay") or key in _IGNORED:
                continue
            if key not in options:
                raise _tmem.ValueError(f"{where}: tmem's {_bound(self).__name__} has no option {key!r}")
            if key == momentum_key:
                continue  # per group: checked below
            if key == "betas":
                same = isinstance(value, (list, tuple)) and tuple(value) == options[key]
            else:
                same = isinstance(value, _numbers.Real) and value == options[key]
            if not same:
                raise _tmem.ValueError(f"{where}['{key}'] is {value!r}, but this optimizer's is {options[key]!r}; "
                                       f"tmem's {_bound(self).__name__} cannot change it (build one with it, or it "
                                       f"is an option tmem lacks)")
        settings.append((_number(s.get("lr", group["lr"]), f"{where}['lr']"),
                         _number(s.get("weight_decay", group["weight_decay"]), f"{where}['weight_decay']"),
                         _momentum_setting(self, s.get(momentum_key, group[momentum_key]), f"{where}")))
    return settings, positions


def _momentum_setting(opt, value, where):
    """A saved group's momentum (SGD) or betas (AdamW) after checking tmem's
    optimizer can take it: a momentum >= 0, a beta1 in [0, 1) with this
    optimizer's beta2."""
    if _bound(opt) is _optim_mod.AdamW:
        if not isinstance(value, (list, tuple)) or len(value) != 2:
            raise _tmem.ValueError(f"{where}['betas'] is {value!r}, not a pair (beta1, beta2)")
        beta1 = _number(value[0], f"{where}['betas'][0]")
        if not 0 <= beta1 < 1 or tuple(value)[1] != opt.betas[1]:
            raise _tmem.ValueError(f"{where}['betas'] is {value!r}; tmem's AdamW takes a beta1 in [0, 1) per group "
                                   f"and keeps one beta2, {opt.betas[1]!r}")
        return (beta1, opt.betas[1])
    return _number(value, f"{where}['momentum']")


def _moment(value, param, where):
    if not isinstance(value, _tmem.Tensor):
        raise _tmem.ValueError(f"{where} must be a tensor, but got {type(value).__name__}")
    if tuple(value.shape) != tuple(param.shape):
        raise _tmem.ShapeError(f"{where} expected shape {list(param.shape)} (its parameter's), but got "
                               f"{list(value.shape)}")
    return value


def _step_count(value, where):
    """A saved AdamW step (a 0-d tensor, or a number in older torch) as an int."""
    if isinstance(value, _tmem.Tensor):
        if value.numel() != 1:
            raise _tmem.ShapeError(f"{where} must hold one number, but has shape {list(value.shape)}")
        value = value.item()
    if not isinstance(value, _numbers.Real) or isinstance(value, bool) or not float(value).is_integer() or value < 0:
        raise _tmem.ValueError(f"{where} must be a whole number of steps >= 0, but got {value!r}")
    return int(value)


def _flat_from_torch(self, state, positions, who):
    """The C++ load_state_dict's flat state for torch's per-parameter state."""
    params = [p for group in self.param_groups for p in group["params"]]
    if not isinstance(state, dict):
        raise _tmem.ValueError(f"{who}: state must be a dict from parameter ids to dicts, but got "
                               f"{type(state).__name__}")
    adamw = _bound(self) is _optim_mod.AdamW
    keys = ("step", "exp_avg", "exp_avg_sq") if adamw else ("momentum_buffer",)
    flat = {"group_sizes": _tmem.tensor([len(g["params"]) for g in self.param_groups], dtype=_tmem.int64)}
    steps = {}
    for pid, entry in state.items():
        if pid not in positions:
            raise _tmem.ValueError(f"{who}: state holds parameter id {pid!r}, which no saved group lists")
        i, where = positions[pid], f"{who}: state[{pid!r}]"
        if not isinstance(entry, dict) or set(entry) - set(keys) or (adamw and set(entry) != set(keys)):
            got = sorted(map(str, entry)) if isinstance(entry, dict) else type(entry).__name__
            raise _tmem.ValueError(f"{where} must be a dict of {list(keys)}, but got {got}")
        if adamw:
            steps[pid] = _step_count(entry["step"], f"{where}['step']")
            flat[f"m.{i}"] = _moment(entry["exp_avg"], params[i], f"{where}['exp_avg']")
            flat[f"v.{i}"] = _moment(entry["exp_avg_sq"], params[i], f"{where}['exp_avg_sq']")
        elif entry.get("momentum_buffer") is not None:
            flat[f"momentum_buffer.{i}"] = _moment(entry["momentum_buffer"], params[i], f"{where}['momentum_buffer']")
    if adamw:
        if len(set(steps.values())) > 1:
            raise _tmem.ValueError(f"{who}: the parameters' steps differ ({steps}); tmem's AdamW keeps one step "
                                   f"count for all of them")
        flat["step"] = _tmem.tensor([next(iter(steps.values()), 0)], dtype=_tmem.int64)
        for i, p in enumerate(params):  # torch has no state for a parameter before its first gradient
            flat.setdefault(f"m.{i}", _tmem.zeros_like(p.detach()))
            flat.setdefault(f"v.{i}", _tmem.zeros_like(p.detach()))
    return flat


def load_state_dict(self, state_dict):
    """Restores a state_dict() of this optimizer or of torch's (torch.optim
    .AdamW or .SGD; see the module comment), or the flat form the C++ API
    checkpoints. Raises tmem.ValueError naming the group or parameter whose
    entry does not fit (group count or sizes, an option tmem's optimizer
    cannot honour, an unknown key, AdamW steps that differ), tmem.ShapeError
    for a tensor whose shape is not its parameter's; nothing changes then."""
    bound = _bound(self)
    who = f"{bound.__name__}.load_state_dict"
    if not isinstance(state_dict, dict):
        raise TypeError(f"{who}: expected a dict, but got {type(state_dict).__name__}")
    if "param_groups" not in state_dict and "state" not in state_dict:
        return _FLAT[bound][1](self, state_dict)
    if set(state_dict) != {"state", "param_groups"}:
        raise _tmem.ValueError(f"{who}: a torch.optim state_dict has the keys 'state' and 'param_groups', but got "
                               f"{sorted(map(str, state_dict))}")
    settings, positions = _check_groups(self, state_dict["param_groups"], who)
    _FLAT[bound][1](self, _flat_from_torch(self, state_dict["state"], positions, who))
    momentum_key = _momentum_key(self)
    for g, (lr, weight_decay, momentum) in enumerate(settings):
        self.param_groups[g]["lr"] = lr
        self.param_groups[g]["weight_decay"] = weight_decay
        self.param_groups[g][momentum_key] = momentum


for _cls in _FLAT:
    _cls.state_dict, _cls.load_state_dict = state_dict, load_state_dict


def _sgd_args(params, lr=None, momentum=0.0, dampening=0, weight_decay=0.0, nesterov=False, *, maximize=False,
              foreach=None, differentiable=False):
    """torch.optim.SGD's arguments as tmem's SGD takes them: params (tensors
    or parameter groups), lr (required unless every group has its own),
    momentum and weight_decay; dampening, nesterov and maximize other than
    their defaults raise ValueError (tmem's SGD does not implement them);
    foreach and differentiable change nothing."""
    _refuse("optim.SGD", dampening=(dampening, 0), nesterov=(nesterov, False), maximize=(maximize, False),
            differentiable=(differentiable, False))
    _numbers_given("optim.SGD", params, lr=lr, momentum=momentum, weight_decay=weight_decay)
    return (params, lr, momentum, weight_decay), {}


def _adamw_args(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *, maximize=False,
                foreach=None, capturable=False, differentiable=False, fused=None):
    """torch.optim.AdamW's arguments as tmem's AdamW takes them: params,
    lr, betas, eps and weight_decay; amsgrad and maximize other than False
    raise ValueError (tmem's AdamW does not implement them); foreach,
    capturable, differentiable and fused change nothing."""
    _refuse("optim.AdamW", amsgrad=(amsgrad, False), maximize=(maximize, False),
            differentiable=(differentiable, False))
    _numbers_given("optim.AdamW", params, lr=lr, eps=eps, weight_decay=weight_decay)
    return (params, lr, betas, eps, weight_decay), {}


def _is_number(value):
    return isinstance(value, _numbers.Real) and not isinstance(value, bool)


def _numbers_given(who, params, **options):
    """TypeError naming the first option that is not a number (lr may be
    None: each group's own), or params that is not an iterable."""
    if isinstance(params, (str, bytes)) or not isinstance(params, (_abc.Iterable, _tmem.Tensor)):
        raise TypeError(f"{who}: expected params to be an iterable of tensors or of parameter groups (dicts), but "
                        f"got {type(params).__name__}")
    for name, value in options.items():
        if not (_is_number(value) or (name == "lr" and value is None and who == "optim.SGD")):
            raise TypeError(f"{who}: expected {name} to be a number, but got {value!r}")


def _with_closure(raw_step):
    def step(self, closure=None):
        """One update from the parameters' gradients (torch.optim's step):
        closure, when given, is called first with grad enabled (it computes
        the loss and its gradients) and its loss returned."""
        loss = None
        if closure is not None:
            with _enable_grad():
                loss = closure()
        raw_step(self)
        return loss
    return step


_take_torch_arguments(_optim_mod.SGD, _sgd_args)
_take_torch_arguments(_optim_mod.AdamW, _adamw_args)
for _cls in _FLAT:
    _cls.step = _with_closure(_cls.step)


class Adam(_optim_mod.AdamW):
    """Adam (Kingma and Ba; torch.optim.Adam) with weight_decay=0, which is AdamW with weight_decay=0: the same
    arithmetic, state_dict (torch's layout) and param groups. torch's Adam adds weight_decay * param to the
    gradient (L2), which tmem's AdamW cannot do: a nonzero weight_decay (also a group's) raises ValueError;
    use optim.AdamW for decoupled weight decay. amsgrad=True is not supported (ValueError). Keep every group's
    weight_decay 0: step() refuses a group set to another (it would apply AdamW's decoupled decay)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, *,
                 foreach=None, maximize=False, capturable=False, differentiable=False, fused=None):
        if not (isinstance(weight_decay, _numbers.Real) and weight_decay == 0):
            raise _tmem.ValueError(f"optim.Adam: weight_decay={weight_decay!r} is not supported: torch's Adam adds "
                                   f"it to the gradient (L2), which tmem cannot do; use optim.AdamW for decoupled "
                                   f"weight decay, or weight_decay=0")
        _refuse("optim.Adam", amsgrad=(amsgrad, False), maximize=(maximize, False),
                differentiable=(differentiable, False))
        try:
            super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=0.0)
        except _tmem.ValueError as e:
            if str(e).startswith("AdamW:"):
                raise type(e)("optim.Adam:" + str(e)[len("AdamW:"):]) from None
            raise
        self._check_weight_decay("optim.Adam")

    def _check_weight_decay(self, who):
        for i, group in enumerate(self.param_groups):
            if group["weight_decay"] != 0:
                raise _tmem.ValueError(f"{who}: param_groups[{i}] has weight_decay={group['weight_decay']!r}, which "
                                       f"Adam does not support (torch's adds L2 to the gradient); use optim.AdamW "
                                       f"for decoupled weight decay")

    def step(self, closure=None):
        """One Adam update (closure as AdamW.step's); ValueError, before changing anything, when a group's
        weight_decay was set to another value than 0."""
        self._check_weight_decay("Adam.step")
        return super().step(closure)

    def add_param_group(self, param_group):
        """Appends a parameter group (as AdamW's); a weight_decay other than 0 raises ValueError (use AdamW)."""
        if isinstance(param_group, dict) and param_group.get("weight_decay", 0) != 0:
            raise _tmem.ValueError(f"Adam.add_param_group: weight_decay={param_group['weight_decay']!r} is not "
                                   f"supported (torch's Adam adds L2 to the gradient); use optim.AdamW for "
                                   f"decoupled weight decay")
        super().add_param_group(param_group)

    def load_state_dict(self, state_dict):
        """Restores a state_dict() of Adam (tmem's or torch.optim.Adam's) as AdamW's does; a group with a
        weight_decay other than 0 raises ValueError and changes nothing."""
        if isinstance(state_dict, dict) and isinstance(state_dict.get("param_groups"), (list, tuple)):
            for i, group in enumerate(state_dict["param_groups"]):
                if isinstance(group, dict) and group.get("weight_decay", 0) != 0:
                    raise _tmem.ValueError(f"Adam.load_state_dict: param_groups[{i}]['weight_decay'] is "
                                           f"{group['weight_decay']!r}, which Adam does not support (torch's adds "
                                           f"L2 to the gradient); load it into optim.AdamW")
        super().load_state_dict(state_dict)


_optim_mod.Adam = Adam
