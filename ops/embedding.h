// Embedding lookup (docs/DESIGN.md §4), PyTorch semantics
// (torch.nn.functional.embedding with padding_idx, without max_norm).
// Shapes: weight[V, D] (V rows of width D), indices[...] int64 -> out[..., D].
#pragma once
#include <optional>

#include "tmem/core/tensor.h"

namespace tmem {

/// out[i..., :] = weight[indices[i...], :] (torch.nn.functional.embedding).
/// Every index is range-checked before anything is read: one outside
/// [0, V) throws IndexError naming the index, its position and the table size.
/// Backward: dweight = scatter-add of g's rows into the rows they were read
/// from (an index used twice receives both gradients); indices get none.
/// With padding_idx p (negative: counted from the end, as torch), row p of
/// dweight is 0: the padding row is read but never trained.
/// Throws ShapeError when weight is not 2-D, DtypeError when indices are not
/// int64 or weight is not floating (float32 on a device), ValueError for a
/// padding_idx outside [-V, V), DeviceError for operands on different
/// devices or a device whose backend has no embedding kernels.
Tensor embedding(const Tensor& weight, const Tensor& indices,
                 std::optional<int64_t> padding_idx = std::nullopt);

}  // namespace tmem
