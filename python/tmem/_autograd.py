"""tmem.autograd: torch.autograd's grad and backward over tmem's engine
(core/autograd.h), and its grad-mode guards."""
import types as _types

from . import _tmem
from ._tensor_ops import enable_grad, set_grad_enabled

_FLOAT = (_tmem.float32, _tmem.float64)


def _tensors(value, who, what):
    """value (a tensor or a sequence of them) as a list."""
    items = [value] if isinstance(value, _tmem.Tensor) else list(value)
    for i, item in enumerate(items):
        if not isinstance(item, _tmem.Tensor):
            raise TypeError(f"{who}: expected {what} to be tensors, but item {i} is a {type(item).__name__}")
    return items


def _root(outputs, grad_outputs, who):
    """One root and its gradient standing for outputs with grad_outputs
    (None: ones for a one-element output): the output itself, or the sum of
    (output * gradient) over several."""
    outputs = _tensors(outputs, who, "outputs")
    grads = [None] * len(outputs) if grad_outputs is None else \
        [grad_outputs] if isinstance(grad_outputs, _tmem.Tensor) else list(grad_outputs)
    if len(grads) != len(outputs):
        raise _tmem.ValueError(f"{who}: got {len(grads)} grad_outputs for {len(outputs)} outputs")
    if not outputs:
        raise _tmem.ValueError(f"{who}: expected at least one output")
    if len(outputs) == 1:
        return outputs[0], grads[0]
    with enable_grad():
        terms = []
        for i, (out, g) in enumerate(zip(outputs, grads)):
            if not out.requires_grad:
                raise _tmem.ValueError(f"{who}: output {i} does not require grad and has no grad_fn")
            if g is None and out.numel() != 1:
                raise _tmem.ValueError(f"{who}: a gradient can be created implicitly only for a one-element "
                                       f"output, but output {i} has shape {list(out.shape)}")
            terms.append(_tmem.sum(out if g is None else out * g.detach().to(out.dtype)))
        root = terms[0]
        for term in terms[1:]:
            root = root + term
    return root, None


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, only_inputs=True,
         allow_unused=False, is_grads_batched=False):
    """The gradients of outputs (a tensor or a sequence, each weighted by its
    grad_outputs entry) with respect to inputs (torch.autograd.grad), as a
    tuple, no .grad changed; None for an input the outputs do not depend on
    with allow_unused, else ValueError. The graph is freed unless
    retain_graph. create_graph and is_grads_batched raise ValueError: tmem
    has no double backward."""
    if create_graph or is_grads_batched:
        raise _tmem.ValueError("autograd.grad: create_graph=True and is_grads_batched=True are not supported "
                               "(tmem's backward functions do not record, so there is no double backward)")
    inputs = _tensors(inputs, "autograd.grad", "inputs")
    root, seed = _root(outputs, grad_outputs, "autograd.grad")
    return tuple(_tmem._grad(root, inputs, seed, bool(retain_graph), allow_unused))


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """Backpropagates tensors (weighted by grad_tensors) into the leaves'
    .grad (torch.autograd.backward); with inputs, into theirs only.
    create_graph raises ValueError (no double backward)."""
    if create_graph:
        raise _tmem.ValueError("autograd.backward: create_graph=True is not supported (no double backward)")
    root, seed = _root(tensors, grad_tensors, "autograd.backward")
    if inputs is None:
        root.backward(seed, retain_graph=bool(retain_graph))
        return
    inputs = _tensors(inputs, "autograd.backward", "inputs")
    for x, g in zip(inputs, _tmem._grad(root, inputs, seed, bool(retain_graph), True)):
        if g is None:
            continue
        if x.grad is None:
            x.grad = g
        else:
            x.grad += g


autograd = _types.ModuleType("tmem.autograd", "torch.autograd's grad and backward, and its grad modes.")
autograd.grad, autograd.backward = grad, backward
autograd.no_grad, autograd.enable_grad, autograd.set_grad_enabled = _tmem.no_grad, enable_grad, set_grad_enabled
