// A backward function's buffer for one input's gradient (core/autograd.cpp).
// An op whose backward scatters sparse contributions into a dense input
// gradient (grid_sample) adds them into the gradient the engine already holds
// for that input, instead of clearing a tensor of its own that the engine
// then adds: one pass over the input instead of three.
#pragma once
#include <cstddef>

#include "tmem/core/autograd.h"

namespace tmem {

/// Where input `i`'s gradient goes (input i's shape, dtype and device;
/// contiguous, offset 0).
struct GradBuffer {
  Tensor grad;
  /// True: grad holds the gradient the engine has already summed for that
  /// input; the backward adds its own into it and returns this tensor.
  /// False: grad is uninitialized; the backward writes it in full.
  bool accumulate = false;
};

/// Called by node `n`'s backward function while the engine runs it: input
/// i's pending gradient when the engine holds one that nobody else can see
/// (it is then updated in place, and the engine does not sum again the
/// tensor the backward returns), else a new uninitialized tensor. Outside
/// the engine (a backward function called directly), for a leaf input, for
/// an input that is also another input of n, or when the pending gradient
/// is shared or not contiguous, it is always a new tensor. Throws ValueError when i is not an input of n.
GradBuffer input_grad_buffer(const Node& n, size_t i);

}  // namespace tmem
