// Shape ops (docs/DESIGN.md §4). reshape (when the strides allow), view, permute,
// transpose, slice, expand, squeeze and unsqueeze return views that share
// storage and version counter with their input; the others copy. All are
// differentiable; semantics follow PyTorch's functions of the same names.
#pragma once
#include <vector>

#include "tmem/core/tensor.h"

namespace tmem {

/// a with a new shape of the same numel; one dim may be -1 (inferred). A view
/// when a's strides allow one (always when a is contiguous; also, as in
/// PyTorch, when each new dim lies within dims of a that are contiguous with
/// each other, e.g. dropping or adding a size-1 dim of a permuted tensor),
/// else a copy. Throws ShapeError on a numel mismatch.
Tensor reshape(const Tensor& a, Shape shape);
/// As reshape, but never copies: throws ShapeError when a's strides allow no
/// view of that shape (PyTorch's view).
Tensor view(const Tensor& a, Shape shape);
/// Reorders dims: out.shape[i] = a.shape[dims[i]]. Throws IndexError/ValueError
/// unless dims is a permutation of 0..rank-1.
Tensor permute(const Tensor& a, const std::vector<int64_t>& dims);
/// Swaps two dims (a 0-d tensor takes dims 0 and -1 and is returned as a
/// view, as PyTorch). Throws IndexError for a dim out of range.
Tensor transpose(const Tensor& a, int64_t dim0, int64_t dim1);
/// Elements start, start+step, ... < end along dim (negative start/end count
/// from the end and are clamped to the dim, as Python slicing). step >= 1.
Tensor slice(const Tensor& a, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
/// The `length` elements from `start` along dim, as a view (torch.narrow;
/// a negative start counts from the end). Unlike slice it does not clamp:
/// throws IndexError when start is outside [-n, n] or start + length > n,
/// ValueError for a negative length, ShapeError for a 0-d tensor.
Tensor narrow(const Tensor& a, int64_t dim, int64_t start, int64_t length);
/// Broadcasts size-1 dims (and new leading dims) to `shape`; -1 keeps a dim.
/// Throws ShapeError when a cannot be expanded.
Tensor expand(const Tensor& a, const Shape& shape);
/// Removes dim when it has size 1, else returns a view of `a` as it is
/// (torch.squeeze(input, dim); a 0-d tensor takes dim -1 or 0). Throws
/// IndexError naming squeeze for a dim out of range.
Tensor squeeze(const Tensor& a, int64_t dim);
/// Inserts a size-1 dim at dim (in [-rank - 1, rank]), as a view. Throws
/// IndexError naming unsqueeze for a dim out of range.
Tensor unsqueeze(const Tensor& a, int64_t dim);
/// a itself when contiguous, else a contiguous copy (differentiable).
Tensor contiguous(const Tensor& a);

/// out = a indexed along dim by the int64 vector `index` [K]: out.shape[dim] = K.
/// Throws IndexError naming the bad index and the dim size, ShapeError for a
/// 0-d input (and in gather and repeat_interleave too).
Tensor index_select(const Tensor& a, int64_t dim, const Tensor& index);
/// PyTorch gather: out[i][j][k] = a[i][index[i][j][k]][k] for dim 1, etc.;
/// index has a's rank and index.size(d) <= a.size(d) for d != dim.
Tensor gather(const Tensor& a, int64_t dim, const Tensor& index);
/// Concatenates along dim; all other dims must match, and no tensor may be
/// 0-d (ShapeError otherwise).
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim);
/// Stacks along a new dim.
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim);
/// Splits into views of split_size along dim (the last may be smaller; one
/// empty view for a dim of size 0), as torch.split: one tape node whose backward
/// concatenates the parts' gradients (zeros for a part that got none), so
/// taking T parts costs O(T) in backward, not T zero-filled copies of `a`.
/// Throws ShapeError for a 0-d tensor, ValueError for split_size < 1.
std::vector<Tensor> split(const Tensor& a, int64_t split_size, int64_t dim);
/// The slices of `a` along dim with that dim removed, as views (torch.unbind):
/// [B, T, C] along 1 gives T tensors [B, C]. One split node.
/// Throws ShapeError for a 0-d tensor, IndexError for dim out of range.
std::vector<Tensor> unbind(const Tensor& a, int64_t dim);
/// Constant padding as torch.nn.functional.pad: pads = (left, right) for the
/// last dim, then (left, right) for the one before, ...; a negative pad
/// crops that side. Throws ValueError for an odd count or more than 2 per
/// dim, ShapeError when cropping would leave a negative size.
Tensor pad(const Tensor& a, const std::vector<int64_t>& pads, double value = 0.0);
/// Repeats each element `repeats` times along dim (torch.repeat_interleave;
/// repeats 0 gives an empty dim). Throws ValueError for repeats < 0.
Tensor repeat_interleave(const Tensor& a, int64_t repeats, int64_t dim);

}  // namespace tmem
