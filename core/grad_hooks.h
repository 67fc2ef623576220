// Hooks the autograd engine (core/autograd.cpp) calls during backward.
// - Gradient hooks (PyTorch Tensor.register_hook) see a tensor's whole
//   gradient, summed over every use of the tensor, before it goes on (into
//   its grad_fn's backward, or into a leaf's .grad) and may replace it;
//   retain_grad keeps a non-leaf's gradient in its .grad with one of them.
// - Post-accumulate-grad hooks on leaf tensors (PyTorch
//   Tensor.register_post_accumulate_grad_hook) run once per backward, as
//   soon as that backward has processed the last edge that leads to the
//   leaf, so its .grad is complete while the rest of the graph is still
//   being differentiated. Data-parallel training (dist/ddp.h) starts a
//   gradient bucket's all-reduce from here.
#pragma once
#include <cstdint>
#include <functional>

#include "tmem/core/tensor.h"

namespace tmem {

/// A gradient hook: receives the gradient of its tensor (same shape, dtype
/// and device) and returns the gradient to use instead, or an undefined
/// Tensor to keep it.
using GradHook = std::function<Tensor(const Tensor& grad)>;

/// Registers `hook` on `t` and returns its id (for remove_hook), as PyTorch's
/// Tensor.register_hook. Each backward that reaches t calls its hooks once,
/// in registration order, with t's gradient summed over all its uses; each
/// hook gets what the one before returned. A leaf's .grad then accumulates
/// the last result; a non-leaf's grad_fn differentiates with it. A hook
/// runs on the thread that runs backward, with grad mode off; an exception
/// it throws ends that backward and propagates out of it. A returned
/// tensor of another shape, dtype or device is refused (ValueError naming
/// register_hook and both shapes, dtypes or devices). A non-leaf's hook
/// belongs to the value t had when it was registered (a later in-place op
/// on t does not move it) and goes with its graph: once a backward without
/// retain_graph has freed that graph, it is never called. The registry
/// holds no reference to t but holds the hook until remove_hook, until t
/// dies or (a non-leaf's) until its graph is freed: a hook that holds t
/// (a Python closure over it) keeps both alive until then, where PyTorch's
/// collector would free them. Throws ValueError for an undefined tensor or
/// one that does not require grad.
uint64_t register_hook(const Tensor& t, GradHook hook);

/// Removes the gradient hook with this id; an unknown id is ignored
/// (removing twice is harmless).
void remove_hook(uint64_t id);

/// Makes backward keep the gradient of non-leaf `t` in t.grad(), summed
/// over backward calls as a leaf's (PyTorch Tensor.retain_grad), after the
/// hooks of t's value. It follows t: after an in-place op on t, t.grad() is
/// the gradient of t's new value. A leaf already keeps its gradient:
/// nothing changes. Throws ValueError for an undefined tensor or one that
/// does not require grad.
void retain_grad(const Tensor& t);

/// Whether retain_grad was called on non-leaf `t` (false for a leaf, as
/// PyTorch's Tensor.retains_grad).
bool retains_grad(const Tensor& t);

/// A post-accumulate-grad hook: receives the leaf whose gradient this backward has finished
/// (its grad() is undefined when no gradient reached it on any edge).
using PostAccumulateGradHook = std::function<void(const Tensor& leaf)>;

/// Registers `hook` on leaf `t` and returns its id (for
/// remove_post_accumulate_grad_hook). Hooks of one leaf run in registration
/// order, on the thread that runs backward, with grad mode off; an exception
/// thrown by a hook ends that backward and propagates out of it. A leaf the
/// backward does not reach gets no call. The registry holds no reference to
/// t: a hook of a tensor that died is never called. Throws ValueError for an
/// undefined tensor or one that is not a leaf requiring grad.
uint64_t register_post_accumulate_grad_hook(const Tensor& t, PostAccumulateGradHook hook);

/// Removes the hook with this id; an unknown id is ignored (removing twice is
/// harmless).
void remove_post_accumulate_grad_hook(uint64_t id);

}  // namespace tmem
