#include "tmem/models/vit.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>

#include "tmem/core/autograd.h"
#include "tmem/core/enum_names.h"
#include "tmem/ops/elementwise.h"
#include "tmem/ops/reduction.h"
#include "tmem/ops/shape.h"

namespace tmem::models {

ViTConfig::ViTConfig() {
  memory.channels = 16;
  memory.D = memory.H = memory.W = 4;
  memory.chunk = 16;
  memory.gamma_init = -2.0;
}

namespace {

constexpr std::array<std::string_view, 4> kViTMethods = {"vit", "local", "registers", "spatial"};

}  // namespace

std::string to_string(ViTMethod method) { return enum_name(kViTMethods, method); }

ViTMethod parse_vit_method(const std::string& name) {
  return parse_enum<ViTMethod>(kViTMethods, name, "unknown ViT method");
}

void to_json(nlohmann::json& j, ViTMethod method) { j = to_string(method); }

void from_json(const nlohmann::json& j, ViTMethod& method) { method = parse_vit_method(j.get<std::string>()); }

const std::vector<ViTMethod>& vit_methods() {
  using enum ViTMethod;
  static const std::vector<ViTMethod> m = {vit, local, registers, spatial};
  return m;
}

int64_t vit_patches(const ViTConfig& cfg) {
  check<ValueError>(cfg.patch >= 1 && cfg.image >= 1 && cfg.image % cfg.patch == 0, "ViT: image size ", cfg.image,
                    " is not a positive multiple of the patch size ", cfg.patch);
  const int64_t g = cfg.image / cfg.patch;
  return g * g;
}

BackboneConfig vit_backbone_config(const ViTConfig& cfg) {
  const int64_t N = vit_patches(cfg);
  check<ValueError>(cfg.mlp_hidden >= 0, "ViT: expected mlp_hidden >= 0, but got ", cfg.mlp_hidden);
  check<ValueError>(cfg.method != ViTMethod::local || (cfg.window >= 1 && cfg.window % 2 == 1),
                    "ViT: local attention needs an odd window >= 1, but got ", cfg.window);
  check<ValueError>(cfg.method != ViTMethod::registers || cfg.registers >= 1, "ViT: expected registers >= 1, but got ",
                    cfg.registers);
  check<ValueError>(cfg.memory_every >= 1, "ViT: expected memory_every >= 1, but got ", cfg.memory_every);
  const int64_t tokens = N + (cfg.method == ViTMethod::registers ? cfg.registers : 0);
  return bidirectional_backbone_config(cfg.method == ViTMethod::spatial, cfg.dim, cfg.layers, cfg.heads, tokens, cfg.dropout,
                                       cfg.memory, cfg.memory_every, cfg.mlp_hidden);
}

Tensor local_attention_mask(const Tensor& index, int64_t grid, int64_t window) {
  check<ValueError>(grid >= 1 && window >= 1 && window % 2 == 1,
                    "local_attention_mask: expected grid >= 1 and an odd window >= 1, but got grid ", grid,
                    " window ", window);
  check<ShapeError>(index.dim() == 1 || index.dim() == 2,
                    "local_attention_mask: expected index [T] or [B, T], but got ", shape_str(index.shape()));
  check<DtypeError>(index.dtype() == DType::Int64, "local_attention_mask: expected an int64 index, but got ",
                    dtype_name(index.dtype()));
  const int64_t T = index.shape().back(), B = index.numel() / std::max<int64_t>(T, 1), r = window / 2;
  const std::vector<int64_t> idx = index.to_int_vector();
  for (int64_t n : idx)
    check<IndexError>(n >= 0 && n < grid * grid, "local_attention_mask: patch ", n, " is outside [0, ", grid * grid,
                      ")");
  Tensor mask = index.dim() == 1 ? zeros({T, T}) : zeros({B, 1, T, T});
  float* p = mask.data<float>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t s = 0; s < T; ++s) {
        const int64_t nt = idx[b * T + t], ns = idx[b * T + s];
        if (std::abs(nt / grid - ns / grid) > r || std::abs(nt % grid - ns % grid) > r)
          p[(b * T + t) * T + s] = -std::numeric_limits<float>::infinity();
      }
  return mask.to(index.device());
}

Tensor gather_rows(const Tensor& x, const Tensor& index) {
  check<ShapeError>(x.dim() == 3 && index.dim() == 2 && index.shape()[0] == x.shape()[0],
                    "gather_rows: expected x [B, N, D] and index [B, K], but got x ", shape_str(x.shape()),
                    " index ", shape_str(index.shape()));
  check<DtypeError>(index.dtype() == DType::Int64, "gather_rows: expected an int64 index, but got ",
                    dtype_name(index.dtype()));
  const int64_t B = x.shape()[0], N = x.shape()[1], D = x.shape()[2], K = index.shape()[1];
  std::vector<int64_t> flat = index.to_int_vector();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t k = 0; k < K; ++k) {
      int64_t& v = flat[b * K + k];
      check<IndexError>(v >= 0 && v < N, "gather_rows: index ", v, " is outside [0, ", N, ")");
      v += b * N;
    }
  return reshape(index_select(reshape(x, {B * N, D}), 0, tensor_int(flat, {B * K}).to(x.device())), {B, K, D});
}

ViTEncoder::ViTEncoder(const ViTConfig& c, Generator& gen) : cfg(c) {
  const BackboneConfig bc = vit_backbone_config(cfg);
  const int64_t N = vit_patches(cfg);
  embed = register_module("embed", std::make_shared<nn::PatchEmbed>(cfg.patch, cfg.dim, gen));
  pos = register_parameter("pos", randn({N, cfg.dim}, 0.0, 0.02, DType::Float32, gen));
  if (cfg.method == ViTMethod::registers)
    registers = register_parameter("registers", randn({cfg.registers, cfg.dim}, 0.0, 0.02, DType::Float32, gen));
  backbone = register_module("backbone", std::make_shared<Backbone>(bc, gen));
}

Tensor ViTEncoder::encode(const Tensor& x, const Tensor& mask) const {
  const int64_t B = x.shape()[0], T = x.shape()[1];
  Tensor h = registers.defined() ? cat({x, expand(unsqueeze(registers, 0), {B, cfg.registers, cfg.dim})}, 1) : x;
  BackboneState fresh;
  Tensor y = backbone->forward(h, fresh, mask);
  return registers.defined() ? slice(y, 1, 0, T) : y;
}

Tensor ViTEncoder::forward(const Tensor& images) const {
  check<ShapeError>(images.dim() == 3 && images.shape()[1] == cfg.image && images.shape()[2] == cfg.image,
                    "ViT: expected images [B, ", cfg.image, ", ", cfg.image, "], but got ", shape_str(images.shape()));
  const int64_t N = vit_patches(cfg);
  Tensor mask;
  if (cfg.method == ViTMethod::local) {
    std::vector<int64_t> all(static_cast<size_t>(N));
    std::iota(all.begin(), all.end(), int64_t{0});
    mask = local_attention_mask(tensor_int(all, {N}), cfg.image / cfg.patch, cfg.window).to(images.device());
  }
  return encode(embed->forward(images) + pos, mask);
}

Tensor ViTEncoder::forward_patches(const Tensor& patches, const Tensor& index) const {
  const int64_t N = vit_patches(cfg), P2 = cfg.patch * cfg.patch;
  check<ShapeError>(patches.dim() == 3 && patches.shape()[1] >= 1 && patches.shape()[1] <= N &&
                        patches.shape()[2] == P2 && index.shape() == Shape{patches.shape()[0], patches.shape()[1]},
                    "ViT: expected patches [B, 1 <= T <= ", N, ", ", P2, "] and index [B, T], but got patches ",
                    shape_str(patches.shape()), " index ", shape_str(index.shape()));
  const int64_t B = patches.shape()[0], T = patches.shape()[1];
  check<DtypeError>(index.dtype() == DType::Int64, "ViT: expected an int64 patch index, but got ",
                    dtype_name(index.dtype()));
  Tensor p = reshape(index_select(pos, 0, reshape(index, {B * T}).to(pos.device())), {B, T, cfg.dim});
  Tensor mask = cfg.method == ViTMethod::local
                    ? local_attention_mask(index, cfg.image / cfg.patch, cfg.window).to(patches.device())
                    : Tensor();
  return encode(embed->embed(patches) + p, mask);
}

ViTClassifier::ViTClassifier(const ViTConfig& cfg, Generator& gen) {
  check<ValueError>(cfg.classes >= 1, "ViTClassifier: expected classes >= 1, but got ", cfg.classes);
  encoder = register_module("encoder", std::make_shared<ViTEncoder>(cfg, gen));
  head = register_module("head", std::make_shared<nn::Linear>(cfg.dim, cfg.classes, true, gen));
}

Tensor ViTClassifier::forward(const Tensor& images) const {
  return head->forward(mean(encoder->forward(images), {1}));
}

int64_t masked_patch_count(int64_t N, double ratio) {
  const auto keep = static_cast<int64_t>(std::floor(static_cast<double>(N) * (1.0 - ratio)));
  check<ValueError>(ratio > 0 && ratio < 1 && keep >= 1 && keep < N, "random_patch_mask: expected a mask ratio in ",
                    "(0, 1) that leaves at least one visible and one masked patch of ", N, ", but got ", ratio);
  return N - keep;
}

PatchMask random_patch_mask(int64_t B, int64_t N, double ratio, Generator& gen) {
  check<ValueError>(B >= 1 && N >= 2, "random_patch_mask: expected B >= 1 and N >= 2, but got B ", B, " N ", N);
  const int64_t M = masked_patch_count(N, ratio);
  std::vector<int64_t> visible, masked, perm(static_cast<size_t>(N));
  visible.reserve(static_cast<size_t>(B * (N - M)));
  masked.reserve(static_cast<size_t>(B * M));
  for (int64_t b = 0; b < B; ++b) {
    std::iota(perm.begin(), perm.end(), int64_t{0});
    for (int64_t i = 0; i < M; ++i) std::swap(perm[i], perm[i + gen.randint(N - i)]);  // partial Fisher-Yates
    std::sort(perm.begin(), perm.begin() + M);
    std::sort(perm.begin() + M, perm.end());
    masked.insert(masked.end(), perm.begin(), perm.begin() + M);
    visible.insert(visible.end(), perm.begin() + M, perm.end());
  }
  return {tensor_int(visible, {B, N - M}), tensor_int(masked, {B, M})};
}

MaskedAutoencoder::MaskedAutoencoder(const MAEConfig& c, Generator& gen) : cfg(c) {
  const ViTConfig& e = cfg.encoder;
  check<ValueError>(cfg.decoder_dim >= 1 && cfg.decoder_layers >= 1 && cfg.decoder_heads >= 1,
                    "MaskedAutoencoder: expected positive decoder dim, layers and heads, but got ", cfg.decoder_dim,
                    ", ", cfg.decoder_layers, ", ", cfg.decoder_heads);
  encoder = register_module("encoder", std::make_shared<ViTEncoder>(e, gen));
  dec_embed = register_module("dec_embed", std::make_shared<nn::Linear>(e.dim, cfg.decoder_dim, true, gen));
  mask_token = register_parameter("mask_token", randn({cfg.decoder_dim}, 0.0, 0.02, DType::Float32, gen));
  BackboneConfig d;
  d.method = BackboneMethod::base;
  d.dim = cfg.decoder_dim;
  d.layers = cfg.decoder_layers;
  d.heads = cfg.decoder_heads;
  d.max_len = vit_patches(e);
  d.dropout = e.dropout;
  d.causal = false;
  decoder = register_module("decoder", std::make_shared<Backbone>(d, gen));
  head = register_module("head", std::make_shared<nn::Linear>(cfg.decoder_dim, e.patch * e.patch, true, gen));
}

namespace {

// For a mask of B rows over N patches: restore[b, n] = the row of patch n in
// cat(visible[b], masked[b]). Throws unless the rows partition 0 ... N-1.
Tensor restore_index(const PatchMask& mask, int64_t B, int64_t N) {
  check<ShapeError>(mask.visible.dim() == 2 && mask.masked.dim() == 2 && mask.visible.shape()[0] == B &&
                        mask.masked.shape()[0] == B && mask.visible.shape()[1] + mask.masked.shape()[1] == N,
                    "MaskedAutoencoder: expected a mask of ", B, " rows over ", N, " patches, but got visible ",
                    shape_str(mask.visible.shape()), " masked ", shape_str(mask.masked.shape()));
  const int64_t V = mask.visible.shape()[1], M = N - V;
  const std::vector<int64_t> vis = mask.visible.to_int_vector(), msk = mask.masked.to_int_vector();
  std::vector<int64_t> restore(static_cast<size_t>(B * N), -1);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t j = 0; j < N; ++j) {
      const int64_t n = j < V ? vis[b * V + j] : msk[b * M + j - V];
      check<ValueError>(n >= 0 && n < N && restore[b * N + n] < 0, "MaskedAutoencoder: the visible and masked ",
                        "patches of row ", b, " do not partition 0 ... ", N - 1, " (patch ", n, ")");
      restore[b * N + n] = j;
    }
  return tensor_int(restore, {B, N});
}

void check_prediction(const char* op, const Tensor& pred, const Tensor& patches) {
  check<ShapeError>(pred.shape() == patches.shape(), op, ": expected pred ", shape_str(patches.shape()),
                    " (the patches of the images), but got ", shape_str(pred.shape()));
}

}  // namespace

Tensor MaskedAutoencoder::forward(const Tensor& images, const PatchMask& mask) const {
  const ViTConfig& e = cfg.encoder;
  check<ShapeError>(images.dim() == 3 && images.shape()[1] == e.image && images.shape()[2] == e.image,
                    "MaskedAutoencoder: expected images [B, ", e.image, ", ", e.image, "], but got ",
                    shape_str(images.shape()));
  const int64_t B = images.shape()[0], N = vit_patches(e);
  Tensor restore = restore_index(mask, B, N);
  Tensor enc = encoder->forward_patches(gather_rows(nn::patchify(images, e.patch), mask.visible), mask.visible);
  const int64_t M = mask.masked.shape()[1];
  Tensor tokens = cat({dec_embed->forward(enc), expand(reshape(mask_token, {1, 1, cfg.decoder_dim}),
                                                        {B, M, cfg.decoder_dim})},
                      1);
  return head->forward(decoder->forward(gather_rows(tokens, restore)));
}

Tensor masked_patch_loss(const Tensor& pred, const Tensor& images, const PatchMask& mask, int64_t patch) {
  Tensor target = nn::patchify(images, patch);
  check_prediction("masked_patch_loss", pred, target);
  Tensor d = gather_rows(pred, mask.masked) - gather_rows(target, mask.masked);
  return mean(d * d);
}

Tensor mae_composite(const Tensor& images, const Tensor& pred, const PatchMask& mask, int64_t patch) {
  NoGradGuard no_grad;
  Tensor target = nn::patchify(images, patch);
  check_prediction("mae_composite", pred, target);
  const int64_t B = target.shape()[0], N = target.shape()[1], M = mask.masked.shape()[1];
  check<ShapeError>(mask.masked.dim() == 2 && mask.masked.shape()[0] == B,
                    "mae_composite: expected a mask of ", B, " rows, but got masked ", shape_str(mask.masked.shape()));
  std::vector<double> is_masked(static_cast<size_t>(B * N), 0.0);
  const std::vector<int64_t> msk = mask.masked.to_int_vector();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t j = 0; j < M; ++j) {
      const int64_t n = msk[b * M + j];
      check<IndexError>(n >= 0 && n < N, "mae_composite: masked patch ", n, " is outside [0, ", N, ")");
      is_masked[b * N + n] = 1.0;
    }
  Tensor patches = where(tensor(is_masked, {B, N, 1}).to(pred.device()), clamp(pred, 0.0, 1.0), target);
  return nn::unpatchify(patches, patch, images.shape()[1], images.shape()[2]);
}

}  // namespace tmem::models
