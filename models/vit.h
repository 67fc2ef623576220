// The Fashion-MNIST ViT family of docs/DESIGN.md §10: Vision Transformers for
// single-channel images (Dosovitskiy et al. 2021) built on models::Backbone
// (pre-norm blocks, bidirectional attention), in four variants (`method`),
// all with the same width and depth:
//   vit        plain ViT: full attention over every patch
//   local      Local ViT: patch (r, c) attends only to the patches (r', c')
//              with |r - r'| <= window / 2 and |c - c'| <= window / 2 (a
//              window x window neighbourhood on the patch grid, clipped at the
//              borders), by an additive 0 / -inf mask given to every layer
//   registers  ViT with R learned register tokens (Darcet et al. 2023,
//              "Vision Transformers Need Registers") appended after the
//              patches, attended to like patches, discarded at the output
//   spatial    Spatial (Tensor Memory) ViT: a Tensor Memory layer in every
//              memory_every-th block (docs/DESIGN.md §7 image preset: C = 16, 4^3,
//              chunk 16, every 2 layers, gamma_init -2.0); the memory scans
//              the tokens in raster order, chunk by chunk, so it is causal
//              over chunks (a patch reads what the patches of earlier chunks
//              wrote, never later ones) while attention stays bidirectional:
//              for images this is an extra, ordered path next to attention
// Patch tokens: PatchEmbed + learned positions N(0, 0.02); the encoder ends in
// a LayerNorm. Classification: mean of the patch tokens -> Linear -> logits.
// Masked patch reconstruction (MAE, He et al. 2022): the encoder sees only the
// visible patches (in raster order, so the spatial memory scans the visible
// patches in that order); a narrower decoder (plain ViT, the same for every
// method) gets the encoded tokens + a learned mask token at the masked
// positions, with its own positions, and predicts the pixels of each patch.
// Shapes: B batch, H = W = image size, P patch size, G = H / P patches per
// grid row, N = G^2 patches, T tokens, R registers, C encoder width,
// Cd decoder width.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "tmem/models/transformer.h"
#include "tmem/nn/patch_embed.h"

namespace tmem::models {

/// The ViT variants (see the file comment).
enum class ViTMethod { vit, local, registers, spatial };

/// The name of a ViT method as the CLI, JSON configs and checkpoints spell it.
std::string to_string(ViTMethod method);

/// The ViT method named `name`. Throws ValueError `unknown ViT method "<name>"
/// (expected vit, local, registers or spatial)`.
ViTMethod parse_vit_method(const std::string& name);

/// JSON form: the name (to_string); reading an unknown name throws
/// ValueError as parse_vit_method.
void to_json(nlohmann::json& j, ViTMethod method);
void from_json(const nlohmann::json& j, ViTMethod& method);

struct ViTConfig {
  ViTConfig();  // memory: the image preset of docs/DESIGN.md §7 (C = 16, 4^3, chunk 16, gamma_init -2.0)
  ViTMethod method = ViTMethod::vit;
  int64_t image = 28;          // H = W
  int64_t patch = 4;           // P (4: N = 49, 7: N = 16 on 28 x 28)
  int64_t dim = 192, layers = 4, heads = 3;
  int64_t classes = 10;        // classifier outputs
  int64_t window = 3;          // local: the odd side of the patch neighbourhood
  int64_t registers = 4;       // registers: R
  int64_t memory_every = 2;    // spatial: memory in blocks memory_every - 1, 2 memory_every - 1, ...
  double dropout = 0.0;
  /// MLP width of every method; 0: 4C for spatial, and for vit, local and
  /// registers the width that matches spatial's parameters (vit_backbone_config).
  int64_t mlp_hidden = 0;
  nn::TensorMemoryOptions memory;
};

/// Every ViT method, in table order: vit, local, registers, spatial.
const std::vector<ViTMethod>& vit_methods();

/// N, the patches of one image: (image / patch)^2. Throws ValueError when
/// patch < 1 or the image size is not a positive multiple of the patch size.
int64_t vit_patches(const ViTConfig& cfg);

/// The encoder Backbone of a method: bidirectional full attention, no
/// positions of its own (the encoder adds them), max_len N (+ R). spatial:
/// method tensor with the memory in every memory_every-th block. Parameter
/// matching: vit, local and registers get MLPs widened by the parameters of
/// spatial's memory layers (parameter_matched_mlp_hidden over all blocks), so
/// the four methods have the same width, depth and, within 1% (registers
/// adds R * C), parameter count. cfg.mlp_hidden > 0 overrides it. Throws
/// ValueError for an unknown method, mlp_hidden < 0, memory_every < 1, a bad
/// patch size, an even or non-positive window (local) or R < 1 (registers).
BackboneConfig vit_backbone_config(const ViTConfig& cfg);

/// Local attention mask on a G x G patch grid: index int64 [T] or [B, T],
/// the raster-order patch number n = r * G + c of each token, ->
/// float32 [T, T] or [B, 1, T, T] on index's device with entry (t, s) = 0
/// when |r_t - r_s| <= window / 2 and |c_t - c_s| <= window / 2, else -inf
/// (a token always sees itself). Throws ValueError for grid < 1 or an even or
/// non-positive window, ShapeError for an index that is not 1-D or 2-D,
/// DtypeError for a non-int64 index, IndexError for an index outside
/// [0, G^2).
Tensor local_attention_mask(const Tensor& index, int64_t grid, int64_t window);

/// Rows of each batch element: x [B, N, D], index int64 [B, K] (any device)
/// -> out [B, K, D] on x's device, out[b, k] = x[b, index[b, k]].
/// Differentiable in x.
/// Throws ShapeError for x not 3-D or index not [B, K], DtypeError for a
/// non-int64 index, IndexError for an index outside [0, N).
Tensor gather_rows(const Tensor& x, const Tensor& index);

/// Patch embedding + learned positions + Backbone (see vit_backbone_config):
/// the ViT encoder of every method. Throws ValueError for a bad config.
class ViTEncoder : public nn::Module {
 public:
  ViTEncoder(const ViTConfig& cfg, Generator& gen);
  /// images [B, H, W] (H = W = cfg.image) -> patch tokens [B, N, C] in
  /// raster order (registers dropped). Throws ShapeError for another image
  /// shape (naming "ViT").
  Tensor forward(const Tensor& images) const;
  /// A subset of each image's patches: patches [B, T, P * P] (patchify's
  /// rows) with their patch numbers index int64 [B, T] (any device) ->
  /// tokens [B, T, C].
  /// Each token gets its patch's position; local's mask follows the patches'
  /// grid positions; spatial's memory scans the tokens in the given order
  /// (ascending index = raster order). Throws ShapeError for patches not
  /// [B, T, P * P] with 1 <= T <= N or an index not [B, T], DtypeError /
  /// IndexError for a bad index.
  Tensor forward_patches(const Tensor& patches, const Tensor& index) const;
  ViTConfig cfg;
  std::shared_ptr<nn::PatchEmbed> embed;
  Tensor pos;        // [N, C]
  Tensor registers;  // [R, C], defined for the registers method
  std::shared_ptr<Backbone> backbone;

 private:
  // tokens with positions [B, T, C] (+ the local mask) -> [B, T, C].
  Tensor encode(const Tensor& x, const Tensor& mask) const;
};

/// ViTEncoder -> mean over the N patch tokens -> Linear(C -> classes).
/// Throws ValueError for a bad config or classes < 1.
class ViTClassifier : public nn::Module {
 public:
  ViTClassifier(const ViTConfig& cfg, Generator& gen);
  /// images [B, H, W] -> logits [B, classes]. Throws what ViTEncoder::forward throws.
  Tensor forward(const Tensor& images) const;
  std::shared_ptr<ViTEncoder> encoder;
  std::shared_ptr<nn::Linear> head;
};

/// Which patches an MAE sees: visible and masked patch numbers of each
/// image, each row ascending (raster order); together they partition 0 ... N-1.
/// The functions that take a mask accept it on any device (the trainers keep
/// it on the host, where its indices are read).
struct PatchMask {
  Tensor visible;  // int64 [B, N - M]
  Tensor masked;   // int64 [B, M]
};

/// M, the masked patches of N at mask ratio `ratio`: N - floor(N (1 - ratio))
/// (MAE's rule: keep floor(N (1 - ratio)) patches). Throws ValueError naming
/// "random_patch_mask" for a ratio outside (0, 1) or one that leaves no
/// visible or no masked patch.
int64_t masked_patch_count(int64_t N, double ratio);

/// A uniformly random mask per image, on the host: M = masked_patch_count(N,
/// ratio) patches drawn without replacement from `gen` (deterministic for a
/// given generator state). Throws ValueError for B < 1, N < 2 or a bad ratio.
PatchMask random_patch_mask(int64_t B, int64_t N, double ratio, Generator& gen);

struct MAEConfig {
  ViTConfig encoder;
  int64_t decoder_dim = 96, decoder_layers = 2, decoder_heads = 3;
};

/// Masked autoencoder: encoder(visible patches) -> Linear(C -> Cd) ->
/// with a learned mask token [Cd] ~ N(0, 0.02) at every masked position ->
/// decoder Backbone (base: bidirectional full attention, learned positions
/// over the N patches, MLP 4 Cd, final LayerNorm) -> Linear(Cd -> P * P)
/// pixels. Throws ValueError for a bad encoder or decoder config.
class MaskedAutoencoder : public nn::Module {
 public:
  MaskedAutoencoder(const MAEConfig& cfg, Generator& gen);
  /// images [B, H, W], a mask of the N patches -> predicted pixels of every
  /// patch [B, N, P * P] (raster order; train on the masked ones). Throws
  /// ShapeError for another image shape or a mask not of B rows over N patches.
  Tensor forward(const Tensor& images, const PatchMask& mask) const;
  MAEConfig cfg;
  std::shared_ptr<ViTEncoder> encoder;
  std::shared_ptr<nn::Linear> dec_embed, head;
  Tensor mask_token;  // [Cd]
  std::shared_ptr<Backbone> decoder;
};

/// The MAE loss: mean squared error between pred [B, N, P * P] and the
/// pixels of images [B, H, W] over the masked patches only; targets are the
/// raw pixels (no per-patch normalisation). Differentiable in pred. Throws
/// ShapeError when pred does not match patchify(images, patch).
Tensor masked_patch_loss(const Tensor& pred, const Tensor& images, const PatchMask& mask, int64_t patch);

/// The composite reconstruction [B, H, W]: visible patches copied from
/// images (exactly), masked patches from pred [B, N, P * P] clamped to
/// [0, 1]. No autograd. images and pred on one device, the result on it.
/// Throws ShapeError when pred does not match patchify(images, patch).
Tensor mae_composite(const Tensor& images, const Tensor& pred, const PatchMask& mask, int64_t patch);

}  // namespace tmem::models
