// Softmax and log-softmax along one dim (docs/DESIGN.md §4), PyTorch semantics
// (torch.softmax / torch.log_softmax), max-subtracted for stability.
// Shapes: x[..., R, ...] with R the size of `dim`; the output has x's shape.
#pragma once
#include <cstdint>

#include "tmem/core/tensor.h"

namespace tmem {

/// y = exp(x - m) / sum_R exp(x - m) along `dim` (negative counts from the
/// end), m = max_R x (torch.softmax). A row that is entirely -inf (a fully
/// masked attention row) gives zeros and a zero gradient, never NaN (PyTorch
/// gives NaN there). Backward: dx = y * (g - sum_R(g * y)).
/// A 0-d x is treated as one row of one element (y = 1).
/// Throws IndexError for a bad dim, DtypeError for int64 (and for float64 on
/// a device), DeviceError on a device whose backend has no softmax kernels.
Tensor softmax(const Tensor& x, int64_t dim);

/// y = x - m - log(sum_R exp(x - m)) along `dim` (torch.log_softmax). A row
/// that is entirely -inf gives -inf everywhere and a zero gradient (PyTorch
/// gives NaN there). Backward: dx = g - exp(y) * sum_R g.
/// Throws IndexError for a bad dim, DtypeError for int64 (and for float64 on
/// a device), DeviceError on a device whose backend has no softmax kernels.
Tensor log_softmax(const Tensor& x, int64_t dim);

}  // namespace tmem
