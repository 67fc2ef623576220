// Dropout (docs/DESIGN.md §4), PyTorch semantics (torch.nn.functional.dropout).
// Shapes: any; the output has x's shape.
#pragma once
#include "tmem/core/rng.h"
#include "tmem/core/tensor.h"

namespace tmem {

/// Inverted dropout (Srivastava et al. 2014; torch.nn.functional.dropout):
/// when training, each element is kept with probability 1 - p and scaled by
/// 1/(1 - p), else zeroed: y = x * mask, mask[i] in {0, 1/(1-p)} drawn from
/// `gen` in row-major order (one uniform per element, dropped when u < p).
/// p == 1 gives zeros (and draws nothing); when !training or p == 0, x itself
/// is returned (identity, as PyTorch). The mask is saved for backward:
/// dx = g * mask.
/// On a device the mask is drawn on the host from `gen` exactly as on the CPU
/// and copied over, so a Generator state gives the same mask on every device.
/// Throws ValueError for p outside [0, 1], DtypeError for int64 (float64 on a
/// device), DeviceError on a device whose backend has no dropout kernel.
Tensor dropout(const Tensor& x, double p, bool training, Generator& gen = default_generator());

}  // namespace tmem
