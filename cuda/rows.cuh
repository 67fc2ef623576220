// The row programs of the nn kernels (softmax, log_softmax, layer_norm,
// cross_entropy), shared by the CUDA kernels and their host build
// (cuda/hd.h). A row program is a functor f(r, first, step, reduce) that
// handles row r with the elements j = first, first + step, ... of each pass:
// it accumulates a partial result over them, hands it to `reduce` (which
// combines the partials of every thread working on the row and returns the
// total to each), and then writes its elements. One thread per row calls it
// with (0, 1, OneThread{}): the partial is the total. A block per row calls
// it with (threadIdx.x, blockDim.x, a block reduction of cuda/nn_launch.cuh).
// Partials accumulate in float (gaussian_splat's geometry sums in double);
// a reduce combines partials in their own type. Plain C++17 for g++; no CUDA
// header.
#pragma once
#include <cmath>
#include <cstdint>

#include "tmem/cuda/hd.h"

namespace tmem::cuda {

/// Rows of at most this many elements take one thread each; longer rows one
/// block each.
inline constexpr int64_t kShortRow = 32;

/// -inf in float (the value of a masked logit).
TMEM_HD float neg_inf() { return -INFINITY; }

/// a + b: the sum of two partials (float or double).
struct SumOp {
  template <class T>
  TMEM_HD T operator()(T a, T b) const {
    return a + b;
  }
  static TMEM_HD float identity() { return 0.0f; }
};

/// max(a, b), NaN when either is NaN: a row holding NaN never looks masked
/// (all -inf) and gives NaN, as the CPU kernels.
struct MaxOp {
  TMEM_HD float operator()(float a, float b) const { return (a != a || a > b) ? a : b; }
  static TMEM_HD float identity() { return neg_inf(); }
};

/// The reduce of a row handled by one thread: its partial is the total.
struct OneThread {
  template <class T, class Op>
  TMEM_HD T operator()(T v, Op) const {
    return v;
  }
};

}  // namespace tmem::cuda
