"""Forward hooks of tmem.nn.Module, as torch.nn.Module's
(register_forward_pre_hook, register_forward_hook and the RemovableHandle of
torch.utils.hooks). They run when Python calls a module; a module that
another module's C++ constructor made (mha.qkv, model.backbone) is called by
C++, where they would never run, so registering one there is refused."""
import collections as _collections
import copy as _copy
import itertools as _itertools
import weakref as _weakref

from . import _tmem

# The keys of a module's __dict__ holding its hooks: a name with a '.' is
# never a registered parameter, buffer or module, so none can shadow them.
PRE_HOOKS = "tmem.forward_pre_hooks"
HOOKS = "tmem.forward_hooks"

_ids = _itertools.count()


class RemovableHandle:
    """What register_forward_hook and register_forward_pre_hook return:
    remove() takes the hook out (again: nothing); `with handle:` removes it
    at the block's end."""

    def __init__(self, hooks):
        self._hooks = _weakref.ref(hooks)
        self.id = next(_ids)
        while self.id in hooks:  # a key of hooks unpickled from another process, whose ids counted alike
            self.id = next(_ids)

    def remove(self):
        hooks = self._hooks()
        if hooks is not None:
            hooks.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()

    def __deepcopy__(self, memo):
        """A handle on the deep copy of its hooks (the copied module's, in
        one deepcopy call with it), as torch's."""
        copied = RemovableHandle.__new__(RemovableHandle)
        hooks = self._hooks()
        copied._hooks = _weakref.ref(_copy.deepcopy(hooks, memo)) if hooks is not None else self._hooks
        copied.id = self.id
        return copied


def _hooks_of(module, kind, who):
    """module's ordered dict of `kind` hooks, made on first use. Raises
    TypeError for a module made by another module's C++ constructor;
    AttributeError before Module.__init__."""
    _tmem._check_built(module)
    if "_tmem_init" not in module.__dict__:
        raise TypeError(f"{who}: this {type(module).__name__} was made by its parent's C++ constructor and is "
                        f"called from C++, where Python hooks do not run; hook a module that Python calls "
                        f"(the parent, or a module built in Python)")
    hooks = module.__dict__.get(kind)
    if hooks is None:
        hooks = module.__dict__[kind] = _collections.OrderedDict()
    return hooks


def _register(kind, who):
    def register(self, hook):
        if not callable(hook):
            raise TypeError(f"{who}: expected a callable hook, but got {type(hook).__name__}")
        hooks = _hooks_of(self, kind, who)
        handle = RemovableHandle(hooks)
        hooks[handle.id] = hook
        return handle
    register.__name__ = who.rpartition(".")[2]
    return register


register_forward_pre_hook = _register(PRE_HOOKS, "Module.register_forward_pre_hook")
register_forward_pre_hook.__doc__ = (
    "Registers hook(module, args), called before each forward with its positional arguments (a tuple); "
    "what it returns other than None replaces them (a non-tuple as the one argument). Returns a "
    "RemovableHandle. Raises TypeError for a module its parent's C++ constructor made.")
register_forward_hook = _register(HOOKS, "Module.register_forward_hook")
register_forward_hook.__doc__ = (
    "Registers hook(module, args, output), called after each forward; what it returns other than None "
    "replaces the output. Returns a RemovableHandle. Raises TypeError for a module its parent's C++ "
    "constructor made.")


def module_call(self, *args, **kwargs):
    """module(*args, **kwargs): the forward pre-hooks, forward, then the
    forward hooks, in registration order (torch.nn.Module.__call__)."""
    state = self.__dict__
    pre = state.get(PRE_HOOKS)
    if pre:
        for hook in list(pre.values()):
            result = hook(self, args)
            if result is not None:
                args = result if isinstance(result, tuple) else (result,)
    output = self.forward(*args, **kwargs)
    post = state.get(HOOKS)
    if post:
        for hook in list(post.values()):
            result = hook(self, args, output)
            if result is not None:
                output = result
    return output
