// grid_sample (docs/DESIGN.md §4, docs/OPS.md §1): samples a 4-D or 5-D input
// at the normalised points of a grid, with PyTorch's semantics.
#pragma once
#include "tmem/core/tensor.h"

namespace tmem {

/// Interpolation: bilinear (trilinear on 5-D input) or nearest neighbour.
enum class GridSampleMode { Bilinear, Nearest };
/// What a point outside the input reads: zeros, the clipped border value, or
/// the value at the point reflected by the borders.
enum class GridSamplePadding { Zeros, Border, Reflection };

const char* grid_sample_mode_name(GridSampleMode mode);        // "bilinear", "nearest"
const char* grid_sample_padding_name(GridSamplePadding pad);   // "zeros", "border", "reflection"

/// Samples `input` at the points of `grid` (torch.nn.functional.grid_sample;
/// mapping, padding, gradients and non-finite coordinates: docs/OPS.md §1).
/// input [N,C,H,W] with grid [N,Ho,Wo,2] gives [N,C,Ho,Wo]; input [N,C,D,H,W]
/// with grid [N,Do,Ho,Wo,3] gives [N,C,Do,Ho,Wo]. The grid's last dim is
/// (x -> W, y -> H, z -> D), each in [-1, 1] across the input. One departure
/// from PyTorch: on a size-1 axis with align_corners and zeros padding,
/// |g| > 1 reads 0. Throws ShapeError (both shapes) unless the input is 4-D or
/// 5-D with non-empty spatial dims and the grid matches it in rank, batch and
/// last dim (2 or 3); DtypeError for mixed or non-floating dtypes (float32 on
/// a device); DeviceError for mixed devices or a backend without the kernel.
Tensor grid_sample(const Tensor& input, const Tensor& grid,
                   GridSampleMode mode = GridSampleMode::Bilinear,
                   GridSamplePadding padding_mode = GridSamplePadding::Zeros,
                   bool align_corners = false);

}  // namespace tmem
