// Post-accumulate-grad hooks on leaf tensors (PyTorch
// Tensor.register_post_accumulate_grad_hook): the engine (core/autograd.cpp)
// calls a leaf's hooks once per backward, as soon as that backward has
// processed the last edge that leads to the leaf, so its .grad is complete
// while the rest of the graph is still being differentiated. Data-parallel
// training (dist/ddp.h) starts a gradient bucket's all-reduce from here.
#pragma once
#include <cstdint>
#include <functional>

#include "tmem/core/tensor.h"

namespace tmem {

/// A hook: receives the leaf whose gradient this backward has finished
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
