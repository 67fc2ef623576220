// Reductions (docs/DESIGN.md §4): sum, mean, max/min (values + indices), var, over
// any set of dims, with keepdim. Empty `dims` means every dim. Float inputs.
// All of them also run on CUDA (float32; cuda/reduction.cu).
#pragma once
#include <optional>
#include <vector>

#include "tmem/core/tensor.h"

namespace tmem {

/// Sum over `dims` (all when empty). Throws IndexError for a bad dim.
Tensor sum(const Tensor& a, const std::vector<int64_t>& dims = {}, bool keepdim = false);
/// Mean over `dims` (all when empty).
Tensor mean(const Tensor& a, const std::vector<int64_t>& dims = {}, bool keepdim = false);
/// Variance over `dims` with Bessel-style `correction` (PyTorch: 1 = unbiased),
/// computed in two passes (mean first), so large offsets do not cancel. The
/// divisor is max(N - correction, 0) as in PyTorch: correction >= N gives
/// inf, or NaN where the values are all equal.
Tensor var(const Tensor& a, const std::vector<int64_t>& dims = {}, int64_t correction = 1,
           bool keepdim = false);

/// Values and int64 indices of a max/min along one dim.
struct ValuesIndices {
  Tensor values;
  Tensor indices;
};
/// Max along `dim`: the first index of the maximum; NaN counts as the maximum
/// (PyTorch). The gradient goes to that index only. Throws ShapeError on an
/// empty dim.
ValuesIndices max(const Tensor& a, int64_t dim, bool keepdim = false);
ValuesIndices min(const Tensor& a, int64_t dim, bool keepdim = false);
/// Max / min over all elements (0-d result). The gradient is shared evenly
/// among the elements equal to the result (every NaN when it is NaN), as
/// torch.max(a)'s; max(a, dim) gives it to the first index only. Throws
/// ShapeError for an empty tensor.
Tensor max(const Tensor& a);
Tensor min(const Tensor& a);

/// Index (int64) of the maximum along `dim` (PyTorch torch.argmax): the
/// first one on ties, a NaN counting as the maximum; the shape of max(a,
/// dim, keepdim).indices. Without a dim, the index into the flattened
/// tensor: a 0-d tensor, or all dims kept at size 1 with keepdim. Not
/// differentiable. Throws IndexError for a bad dim, ShapeError on an empty
/// dim or tensor, DtypeError for int64 input.
Tensor argmax(const Tensor& a, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
/// As argmax, for the minimum (torch.argmin).
Tensor argmin(const Tensor& a, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);

/// Sums `g` down to `shape`, which must broadcast to g's shape (the backward
/// of broadcasting). Throws ShapeError otherwise.
Tensor sum_to(const Tensor& g, const Shape& shape);

}  // namespace tmem
