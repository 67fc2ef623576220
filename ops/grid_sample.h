// grid_sample (docs/DESIGN.md §4): samples a 4-D or 5-D input at the normalised
// points of a grid, with PyTorch's torch.nn.functional.grid_sample semantics
// (aten/src/ATen/native/GridSampler.h), forward and backward on the CPU.
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

/// Samples `input` at the points of `grid`.
///
/// Shapes: input [N,C,H,W] with grid [N,Ho,Wo,2] gives [N,C,Ho,Wo]; input
/// [N,C,D,H,W] with grid [N,Do,Ho,Wo,3] gives [N,C,Do,Ho,Wo]. The grid's last
/// dim is ordered (x -> W, y -> H, z -> D), each in [-1, 1] across the input.
///
/// Coordinate mapping (PyTorch's grid_sampler_compute_source_index), per axis
/// of size S, from the normalised coordinate g to the source index i:
///   align_corners = true:  i = ((g + 1) / 2) (S - 1)     (-1, 1 are the corner cell centres)
///   align_corners = false: i = ((g + 1) S - 1) / 2       (-1, 1 are the outer cell edges)
/// then border padding clips i to [0, S-1]; reflection padding reflects i by
/// the borders (0 and S-1 with align_corners, -0.5 and S-0.5 without) until it
/// lands inside, then clips it to [0, S-1]. Bilinear/trilinear sampling
/// weights the 4/8 cells around i (a cell outside the input reads 0); nearest
/// reads the cell nearbyint(i) (round half to even), 0 when outside.
///
/// Gradients (PyTorch's *_set_grad variants): w.r.t. input, the sampling
/// weights scatter-added into the cells read; w.r.t. grid, the derivative of
/// the interpolation times d i / d g, where d i / d g is (S-1)/2 or S/2,
/// times -1 on each reflection flip, and 0 where clipping acts: a source index
/// at or beyond a border (i <= 0 or i >= S-1, borders counted as outside)
/// passes zero gradient to the grid under border and reflection padding. The
/// grid gradient of nearest sampling is 0.
///
/// Non-finite and huge coordinates (PyTorch's safe_downgrade_to_int_range,
/// applied on every path here): a source index that is NaN, +-Inf or beyond
/// +-2^62 after unnormalising and padding is replaced by an out-of-bounds
/// sentinel (-100), so no such value ever reaches an integer conversion.
///   - A NaN coordinate contributes 0 to the output in every mode and padding
///     (PyTorch disagrees with itself here: its CPU border code gives the last
///     cell, its CUDA forward the first, and torch 1.13's 2-D CPU kernel
///     crashes).
///   - +-Inf and huge finite coordinates: zeros padding gives 0; border
///     padding clips them to the edge cell and samples its value; reflection
///     of +-Inf (also a finite coordinate whose unnormalised index overflows
///     to +-Inf, e.g. 2.5e38 in float32 without align_corners) is NaN, so it
///     gives 0; a huge finite index reflects to a point inside (the parity of
///     the number of flips is computed in floating point, not through an int).
///   - The gradients stay finite: such an axis passes 0 to the grid (and a
///     point replaced by the sentinel passes 0 on every axis and nothing to
///     the input).
///
/// Deliberate departure from PyTorch: for an axis of size 1 with
/// align_corners = true and zeros padding, PyTorch maps every coordinate to
/// index 0 (the scale (S-1)/2 is 0), so a point at z = -5 still reads the
/// value. Its documentation says a point outside [-1, 1] reads the zero
/// padding, and that is what this op does: |g| > 1 on such an axis is outside
/// (output 0, zero gradients); |g| <= 1 reads index 0 as in PyTorch.
///
/// The output and gradients are computed in the input's dtype (float32 or
/// float64), with 64-bit index arithmetic, parallel over batch x output
/// points (OpenMP); the input-gradient scatter is race-free (per-sample
/// ownership, or per-thread accumulators when the batch is smaller than the
/// thread count).
///
/// Throws ShapeError (naming the op and printing both shapes) unless the
/// input is 4-D or 5-D with non-empty spatial dims, the grid has the input's
/// rank, its last dim is 2 (4-D) or 3 (5-D) and its batch equals the input's;
/// DtypeError for mixed or non-floating dtypes (float32 on a device);
/// DeviceError when the inputs are on different devices or the device's
/// backend has no kernel for this op.
Tensor grid_sample(const Tensor& input, const Tensor& grid,
                   GridSampleMode mode = GridSampleMode::Bilinear,
                   GridSamplePadding padding_mode = GridSamplePadding::Zeros,
                   bool align_corners = false);

}  // namespace tmem
