// Layer normalisation over the last dim (docs/DESIGN.md §4), PyTorch semantics
// (torch.nn.functional.layer_norm with normalized_shape = [C]).
// Shapes: x[..., C] (N = numel / C rows), weight[C], bias[C] -> y[..., C].
#pragma once
#include "tmem/core/tensor.h"

namespace tmem {

/// Per row of C elements: mu = mean(x), var = mean((x - mu)^2) (biased, as
/// PyTorch; two passes: the mean first, then the mean of squared deviations,
/// so a large common offset such as 40000 does not cancel), rstd =
/// 1/sqrt(var + eps), xhat = (x - mu) * rstd, y = xhat * weight + bias
/// (Ba, Kiros & Hinton 2016; torch.nn.functional.layer_norm). A row whose
/// sum or sum of squared deviations overflows (|x| around 1e19 in float32)
/// is measured again scaled by its largest |x| (or |x - mu|), so it gives
/// what float64 gives where torch gives zeros or NaN; a row whose x - mu
/// overflows (|x| near the dtype's largest) gives NaN. weight and bias
/// may each be an undefined Tensor (no scale / no shift).
/// Backward: dxhat = g * weight; dx = rstd * (dxhat - mean(dxhat) - xhat *
/// mean(dxhat * xhat)); dweight = sum over rows of g * xhat; dbias = sum of g.
/// Throws ShapeError for a 0-d x or a weight/bias whose shape is not [C]
/// (naming both shapes), DtypeError for mixed or int64 dtypes (and float64 on
/// a device), DeviceError for operands on different devices or a device whose
/// backend has no layer_norm kernels, ValueError for a negative eps.
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps = 1e-5);

}  // namespace tmem
