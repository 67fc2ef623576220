#include "tmem/nn/patch_embed.h"

#include "tmem/ops/shape.h"

namespace tmem::nn {

namespace {

void check_grid(const char* op, const Tensor& t, int64_t patch, int64_t H, int64_t W) {
  check<ValueError>(patch >= 1, op, ": expected patch >= 1, but got ", patch);
  check<ShapeError>(H > 0 && W > 0 && H % patch == 0 && W % patch == 0, op,
                    ": expected an image size divisible by the patch size ", patch, ", but got ", H, " x ", W,
                    " (", shape_str(t.shape()), ")");
}

}  // namespace

Tensor patchify(const Tensor& images, int64_t patch) {
  check<ShapeError>(images.dim() == 3, "patchify: expected images [B, H, W], but got ", shape_str(images.shape()));
  const int64_t B = images.shape()[0], H = images.shape()[1], W = images.shape()[2];
  check_grid("patchify", images, patch, H, W);
  const int64_t gh = H / patch, gw = W / patch;
  Tensor t = permute(reshape(images, {B, gh, patch, gw, patch}), {0, 1, 3, 2, 4});
  return reshape(t, {B, gh * gw, patch * patch});
}

Tensor unpatchify(const Tensor& patches, int64_t patch, int64_t H, int64_t W) {
  check_grid("unpatchify", patches, patch, H, W);
  const int64_t gh = H / patch, gw = W / patch;
  check<ShapeError>(patches.dim() == 3 && patches.shape()[1] == gh * gw && patches.shape()[2] == patch * patch,
                    "unpatchify: expected patches [B, ", gh * gw, ", ", patch * patch, "] for ", H, " x ", W,
                    " images and patch ", patch, ", but got ", shape_str(patches.shape()));
  const int64_t B = patches.shape()[0];
  Tensor t = permute(reshape(patches, {B, gh, gw, patch, patch}), {0, 1, 3, 2, 4});
  return reshape(t, {B, H, W});
}

PatchEmbed::PatchEmbed(int64_t patch_, int64_t dim_, Generator& gen) : patch(patch_), dim(dim_) {
  check<ValueError>(patch >= 1 && dim >= 1, "PatchEmbed: expected patch >= 1 and dim >= 1, but got patch ", patch,
                    " dim ", dim);
  proj = register_module("proj", std::make_shared<Linear>(patch * patch, dim, true, gen));
}

Tensor PatchEmbed::forward(const Tensor& images) const { return embed(patchify(images, patch)); }

Tensor PatchEmbed::embed(const Tensor& patches) const {
  check<ShapeError>(patches.dim() >= 1 && patches.shape().back() == patch * patch,
                    "PatchEmbed: expected patches [..., ", patch * patch, "], but got ",
                    shape_str(patches.shape()));
  return proj->forward(patches);
}

}  // namespace tmem::nn
