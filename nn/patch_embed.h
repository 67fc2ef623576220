// Patches of single-channel images (ViT, Dosovitskiy et al. 2021): cutting
// images into non-overlapping P x P patches in raster order, the inverse,
// and the patch embedding (a Linear over each flattened patch, the same as
// a P x P convolution with stride P). Shapes: B batch, H, W image rows and
// columns, P patch size, N = (H / P)(W / P) patches, C = dim channels.
#pragma once
#include <memory>

#include "tmem/core/rng.h"
#include "tmem/nn/linear.h"
#include "tmem/nn/module.h"

namespace tmem::nn {

/// images [B, H, W] -> patches [B, N, P * P]: patch n = (row r, column c) of
/// the (H / P) x (W / P) patch grid, n = r * (W / P) + c (raster order), its
/// pixels flattened row by row. Differentiable (shape ops). Throws ValueError
/// for patch < 1, ShapeError for images not 3-D or H, W not divisible by
/// patch (naming "patchify" and the shape).
Tensor patchify(const Tensor& images, int64_t patch);

/// The inverse of patchify: patches [B, N, P * P] -> images [B, H, W] with
/// N = (H / P)(W / P). Differentiable. Throws ValueError for patch < 1,
/// ShapeError for patches not [B, (H / P)(W / P), P * P] or H, W not
/// divisible by patch (naming "unpatchify").
Tensor unpatchify(const Tensor& patches, int64_t patch, int64_t H, int64_t W);

/// Patch embedding: proj = Linear(P * P -> C) applied to every flattened
/// patch. Throws ValueError for patch < 1 or dim < 1.
class PatchEmbed : public Module {
 public:
  PatchEmbed(int64_t patch, int64_t dim, Generator& gen = default_generator());
  /// images [B, H, W] -> tokens [B, N, C] in raster order. Throws what
  /// patchify throws.
  Tensor forward(const Tensor& images) const;
  /// Already cut patches [..., P * P] -> [..., C] (e.g. a subset of them).
  /// Throws ShapeError when the last dim is not P * P.
  Tensor embed(const Tensor& patches) const;
  int64_t patch, dim;
  std::shared_ptr<Linear> proj;
};

}  // namespace tmem::nn
