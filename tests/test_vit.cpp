// The Fashion-MNIST ViT family (models/vit.h, models/vit_trainer.h):
// patchify / unpatchify, the local attention mask (and its effect), the
// registers, the spatial variant's memory, parameter matching, MAE masking,
// the composite image, the masked patches never reaching the model, short
// training runs on synthetic images, ScheduledAdamW, and the error messages.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "tmem/models/image_metrics.h"
#include "tmem/models/scheduled_adamw.h"
#include "tmem/models/vit_trainer.h"
#include "tmem/nn/patch_embed.h"
#include "model_fixtures.h"
#include "test_util.h"

using namespace tmem;
using namespace tmem::models;
using tmem::test::check_close;
using tmem::test::halves;
using tmem::test::tiny_vit;

namespace {

Tensor random_images(int64_t B, int64_t size, uint64_t seed) {
  Generator gen(seed);
  return rand({B, size, size}, 0.0, 1.0, DType::Float32, gen);
}

// images with patch n (patch size P) of every image replaced by noise.
Tensor change_patch(const Tensor& images, int64_t n, int64_t P, uint64_t seed) {
  Tensor out = contiguous_data(images).detach();
  out = tensor(out.to_vector(), out.shape());
  const int64_t B = out.shape()[0], W = out.shape()[2], G = W / P;
  Generator gen(seed);
  float* p = out.data<float>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < P; ++i)
      for (int64_t j = 0; j < P; ++j)
        p[(b * out.shape()[1] + (n / G) * P + i) * W + (n % G) * P + j] = static_cast<float>(gen.uniform());
  return out;
}

// max |a[:, t] - b[:, t]| of two [B, T, C] tensors.
double token_change(const Tensor& a, const Tensor& b, int64_t t) {
  return max(abs(slice(a, 1, t, t + 1) - slice(b, 1, t, t + 1))).item();
}


}  // namespace

TEST_CASE("patchify: raster-order patches, and unpatchify inverts it exactly") {
  Tensor x = random_images(2, 12, 1);
  Tensor p = nn::patchify(slice(x, 1, 0, 8), 4);  // [2, 8, 12]: a 2 x 3 grid
  REQUIRE(p.shape() == Shape{2, 6, 16});
  const std::vector<double> xv = x.to_vector(), pv = p.to_vector();
  // image 1, patch 4 = (row 1, column 1), pixel (2, 3) = image pixel (4 + 2, 4 + 3)
  CHECK(pv[(1 * 6 + 4) * 16 + 2 * 4 + 3] == xv[(1 * 12 + 6) * 12 + 7]);
  Tensor back = nn::unpatchify(p, 4, 8, 12);
  CHECK(back.to_vector() == contiguous_data(slice(x, 1, 0, 8)).to_vector());
  Tensor y = random_images(3, 28, 2);
  for (int64_t P : {4, 7}) {
    INFO("patch " << P);
    Tensor q = nn::patchify(y, P);
    CHECK(q.shape() == Shape{3, (28 / P) * (28 / P), P * P});
    CHECK(nn::unpatchify(q, P, 28, 28).to_vector() == y.to_vector());
  }
  Generator gen(3);
  nn::PatchEmbed embed(7, 5, gen);
  CHECK(embed.forward(y).shape() == Shape{3, 16, 5});
  CHECK(embed.num_parameters() == 49 * 5 + 5);
}

TEST_CASE("ViT shapes: every method maps [B, 28, 28] to patch tokens [B, N, C] and logits [B, 10]") {
  Tensor x = random_images(2, 28, 4);
  for (const auto& m : vit_methods())
    for (int64_t P : {4, 7}) {
      INFO(m << " patch " << P);
      ViTConfig c = tiny_vit(m);
      c.patch = P;
      Generator gen(5);
      ViTClassifier model(c, gen);
      NoGradGuard no_grad;
      const int64_t N = (28 / P) * (28 / P);
      CHECK(vit_patches(c) == N);
      CHECK(model.encoder->forward(x).shape() == Shape{2, N, 16});
      CHECK(model.forward(x).shape() == Shape{2, 10});
    }
}

TEST_CASE("local_attention_mask: exactly the window x window neighbourhood on the patch grid") {
  // 3 x 3 grid, window 3: patch 0 (corner) sees 0, 1, 3, 4; patch 4 (centre) sees all.
  std::vector<int64_t> all(9);
  std::iota(all.begin(), all.end(), 0);
  Tensor m = local_attention_mask(tensor_int(all, {9}), 3, 3);
  REQUIRE(m.shape() == Shape{9, 9});
  const std::vector<double> v = m.to_vector();
  const double inf = std::numeric_limits<double>::infinity();
  for (int64_t t = 0; t < 9; ++t)
    for (int64_t s = 0; s < 9; ++s) {
      const bool near = std::abs(t / 3 - s / 3) <= 1 && std::abs(t % 3 - s % 3) <= 1;
      INFO("t " << t << " s " << s);
      CHECK(v[t * 9 + s] == (near ? 0.0 : -inf));
    }
  // Window 1: only itself. A batch of subsets: [B, 1, T, T] following each row's patches.
  check_close(local_attention_mask(tensor_int({0, 1}, {2}), 3, 1), {0, -inf, -inf, 0});
  Tensor b = local_attention_mask(tensor_int({0, 8, 0, 1}, {2, 2}), 3, 3);
  REQUIRE(b.shape() == Shape{2, 1, 2, 2});
  check_close(b, {0, -inf, -inf, 0, 0, 0, 0, 0});
  CHECK_THROWS_WITH_AS(local_attention_mask(tensor_int({0}, {1}), 3, 2), doctest::Contains("local_attention_mask"),
                       ValueError);
  CHECK_THROWS_AS(local_attention_mask(tensor_int({9}, {1}), 3, 3), IndexError);
  CHECK_THROWS_AS(local_attention_mask(zeros({3}), 3, 3), DtypeError);
}

TEST_CASE("local ViT: after one layer a patch is not influenced by a far patch (plain vit is)") {
  Tensor x = random_images(2, 28, 6);
  Tensor far = change_patch(x, 48, 4, 7);  // patch (6, 6)
  for (const auto m : {ViTMethod::local, ViTMethod::vit}) {
    INFO(to_string(m));
    Generator gen(8);
    ViTEncoder enc(tiny_vit(m, 1), gen);
    NoGradGuard no_grad;
    Tensor a = enc.forward(x), b = enc.forward(far);
    CHECK(token_change(a, b, 40) > 0);  // patch (5, 5) is a neighbour
    if (m == ViTMethod::local) {
      CHECK(token_change(a, b, 0) == 0.0);   // patch (0, 0)
      CHECK(token_change(a, b, 46) == 0.0);  // patch (6, 4): two columns away
    } else {
      CHECK(token_change(a, b, 0) > 0);
    }
  }
  // Two layers reach two windows: (6, 4) now hears (6, 6) through (6, 5).
  Generator gen(8);
  ViTEncoder enc(tiny_vit(ViTMethod::local, 2), gen);
  NoGradGuard no_grad;
  CHECK(token_change(enc.forward(x), enc.forward(far), 46) > 0);
  CHECK(token_change(enc.forward(x), enc.forward(far), 0) == 0.0);
}

TEST_CASE("registers: R learned tokens are attended to, trained, and discarded at the output") {
  Generator gen(9);
  ViTClassifier model(tiny_vit(ViTMethod::registers), gen);
  REQUIRE(model.encoder->registers.shape() == Shape{2, 16});
  Tensor x = random_images(2, 28, 10);
  Tensor y = model.encoder->forward(x);
  CHECK(y.shape() == Shape{2, 49, 16});  // registers dropped
  sum(model.forward(x)).backward();
  REQUIRE(model.encoder->registers.grad().defined());
  CHECK(max(abs(model.encoder->registers.grad())).item() > 0);
  NoGradGuard no_grad;
  fill_data(model.encoder->registers, 3.0);  // the patches attend to them
  CHECK(max(abs(model.encoder->forward(x) - y)).item() > 1e-6);
}

TEST_CASE("spatial ViT: a memory in every 2nd block, and its parameters get gradients") {
  ViTConfig c = tiny_vit(ViTMethod::spatial, 4);  // chunk 16 over 49 patches: 4 chunks
  Generator gen(11);
  ViTClassifier model(c, gen);
  const auto& blocks = model.encoder->backbone->blocks();
  REQUIRE(blocks.size() == 4);
  CHECK(!blocks[0]->memory);
  CHECK(blocks[1]->memory);
  CHECK(!blocks[2]->memory);
  CHECK(blocks[3]->memory);
  CHECK(blocks[1]->memory->gamma.item() == doctest::Approx(-2.0));
  cross_entropy(model.forward(random_images(2, 28, 12)), tensor_int({3, 7}, {2})).backward();
  for (int64_t l : {1, 3}) {
    const auto& mem = blocks[l]->memory;
    INFO("block " << l);
    for (const Tensor& t : {mem->gamma, mem->write_proj->weight, mem->coord->weight, mem->content->weight,
                            mem->sigma->weight, mem->read_out->weight, mem->cell->w.pw}) {
      REQUIRE(t.grad().defined());
      CHECK(max(abs(t.grad())).item() > 0);
    }
  }
}

TEST_CASE("parameter matching: the four methods within 1% at the classify and MAE defaults") {
  for (int64_t dim : {96, 192})
    for (int64_t chunk : {16, 4}) {
      INFO("dim " << dim << " chunk " << chunk);
      std::vector<int64_t> counts;
      for (const auto& m : vit_methods()) {
        ViTConfig c;
        c.method = m;
        c.dim = dim;
        c.memory.chunk = chunk;
        Generator gen(0);
        counts.push_back(ViTClassifier(c, gen).num_parameters());
      }
      const auto [lo, hi] = std::minmax_element(counts.begin(), counts.end());
      CHECK(static_cast<double>(*hi - *lo) / static_cast<double>(*hi) < 0.01);
    }
  ViTConfig c;
  CHECK(vit_backbone_config(c).mlp_hidden > 4 * c.dim);  // vit: widened
  c.method = ViTMethod::spatial;
  CHECK(vit_backbone_config(c).mlp_hidden == 0);  // the default ratio 4
  CHECK(!vit_backbone_config(c).causal);
  CHECK(vit_backbone_config(c).memory_every == 2);
  // A memory layer every 3rd of 2 blocks is none: "spatial" would be the plain ViT.
  c.layers = 2;
  c.memory_every = 3;
  Generator none_gen(0);
  CHECK_THROWS_WITH_AS(ViTClassifier(c, none_gen),
                       "Backbone: memory_every 3 is more than the 2 layers, so no block would hold a memory layer "
                       "(expected memory_every <= layers)",
                       ValueError);
  CHECK(parameter_matched_mlp_hidden(10, 0, 3) == 40);
  CHECK(parameter_matched_mlp_hidden(10, 21 * 3 * 5, 3) == 45);
  CHECK_THROWS_AS(parameter_matched_mlp_hidden(10, -1, 3), ValueError);
}

TEST_CASE("random_patch_mask: visible and masked partition the patches, ascending, at the ratio, seeded") {
  CHECK(masked_patch_count(49, 0.25) == 13);  // keep floor(49 * 0.75) = 36
  CHECK(masked_patch_count(49, 0.5) == 25);
  CHECK(masked_patch_count(49, 0.75) == 37);
  CHECK(masked_patch_count(16, 0.75) == 12);
  Generator g1(5), g2(5), g3(6);
  PatchMask a = random_patch_mask(4, 49, 0.75, g1), b = random_patch_mask(4, 49, 0.75, g2);
  PatchMask c = random_patch_mask(4, 49, 0.75, g3);
  REQUIRE(a.visible.shape() == Shape{4, 12});
  REQUIRE(a.masked.shape() == Shape{4, 37});
  CHECK(a.visible.to_int_vector() == b.visible.to_int_vector());
  CHECK(a.masked.to_int_vector() == b.masked.to_int_vector());
  CHECK(a.masked.to_int_vector() != c.masked.to_int_vector());
  const auto vis = a.visible.to_int_vector(), msk = a.masked.to_int_vector();
  std::vector<int64_t> first_rows;
  for (int64_t r = 0; r < 4; ++r) {
    std::vector<int64_t> v(vis.begin() + r * 12, vis.begin() + (r + 1) * 12);
    std::vector<int64_t> m(msk.begin() + r * 37, msk.begin() + (r + 1) * 37);
    CHECK(std::is_sorted(v.begin(), v.end()));
    CHECK(std::is_sorted(m.begin(), m.end()));
    std::vector<int64_t> all = v;
    all.insert(all.end(), m.begin(), m.end());
    std::sort(all.begin(), all.end());
    std::vector<int64_t> expect(49);
    std::iota(expect.begin(), expect.end(), 0);
    CHECK(all == expect);
    if (r < 2) first_rows.insert(first_rows.end(), m.begin(), m.end());
  }
  CHECK(std::vector<int64_t>(first_rows.begin(), first_rows.begin() + 37) !=
        std::vector<int64_t>(first_rows.begin() + 37, first_rows.end()));  // each image its own mask
  for (double bad : {0.0, 1.0, -0.1, 1.5, 0.99}) {
    INFO("ratio " << bad);
    CHECK_THROWS_WITH_AS(random_patch_mask(2, 16, bad, g1), doctest::Contains("random_patch_mask"), ValueError);
  }
}

TEST_CASE("mae_composite: visible patches equal the input exactly, masked ones the clamped prediction") {
  Tensor x = random_images(2, 28, 13);
  Generator gen(14);
  PatchMask mask = random_patch_mask(2, 49, 0.5, gen);
  Tensor pred = randn({2, 49, 16}, 0.5, 1.0, DType::Float32, gen);  // partly outside [0, 1]
  Tensor comp = mae_composite(x, pred, mask, 4);
  REQUIRE(comp.shape() == Shape{2, 28, 28});
  const std::vector<double> cp = nn::patchify(comp, 4).to_vector(), xp = nn::patchify(x, 4).to_vector(),
                            pp = pred.to_vector();
  const auto vis = mask.visible.to_int_vector(), msk = mask.masked.to_int_vector();
  const int64_t V = mask.visible.shape()[1], M = mask.masked.shape()[1];
  for (int64_t b = 0; b < 2; ++b) {
    for (int64_t j = 0; j < V; ++j)
      for (int64_t k = 0; k < 16; ++k) {
        const int64_t at = (b * 49 + vis[b * V + j]) * 16 + k;
        REQUIRE(cp[at] == xp[at]);
      }
    for (int64_t j = 0; j < M; ++j)
      for (int64_t k = 0; k < 16; ++k) {
        const int64_t at = (b * 49 + msk[b * M + j]) * 16 + k;
        REQUIRE(cp[at] == static_cast<double>(std::clamp(static_cast<float>(pp[at]), 0.0f, 1.0f)));
      }
  }
  CHECK(psnr(comp, x) < 100);
  CHECK_THROWS_WITH_AS(mae_composite(x, slice(pred, 1, 0, 48), mask, 4), doctest::Contains("mae_composite"),
                       ShapeError);
}

TEST_CASE("MAE: predictions [B, N, P*P], masked pixels never reach the model, the loss covers masked patches only") {
  for (const auto& m : vit_methods()) {
    INFO(to_string(m));
    MAEConfig c;
    c.encoder = tiny_vit(m);
    c.encoder.memory.chunk = 4;
    c.decoder_dim = 8;
    c.decoder_layers = 1;
    c.decoder_heads = 2;
    Generator gen(15);
    MaskedAutoencoder model(c, gen);
    Tensor x = random_images(2, 28, 16);
    PatchMask mask = random_patch_mask(2, 49, 0.75, gen);
    Tensor pred = model.forward(x, mask);
    REQUIRE(pred.shape() == Shape{2, 49, 16});
    const int64_t hidden = mask.masked.to_int_vector()[0];  // a masked patch of image 0
    {
      NoGradGuard no_grad;
      CHECK(max(abs(model.forward(change_patch(x, hidden, 4, 17), mask) - pred)).item() == 0.0);
    }
    Tensor loss = masked_patch_loss(pred, x, mask, 4);
    Tensor d = gather_rows(pred, mask.masked) - gather_rows(nn::patchify(x, 4), mask.masked);
    CHECK(loss.item() == doctest::Approx(mean(d * d).item()).epsilon(1e-6));
    loss.backward();
    REQUIRE(model.mask_token.grad().defined());
    CHECK(max(abs(model.mask_token.grad())).item() > 0);
    if (m == ViTMethod::spatial) {  // 12 visible patches, chunk 4: the memory reads what earlier chunks wrote
      const auto& mem = model.encoder->backbone->blocks()[1]->memory;
      for (const Tensor& t : {mem->gamma, mem->write_proj->weight, mem->coord->weight, mem->cell->w.pw})
        CHECK(max(abs(t.grad())).item() > 0);
    }
  }
}

TEST_CASE("MAE and ViT errors name the problem") {
  Generator gen(18);
  ViTConfig bad = tiny_vit(ViTMethod::vit);
  bad.patch = 5;
  CHECK_THROWS_WITH_AS(ViTClassifier(bad, gen), doctest::Contains("patch size 5"), ValueError);
  CHECK_THROWS_WITH_AS(parse_vit_method("swin"), doctest::Contains("swin"), ValueError);
  CHECK_THROWS_WITH_AS(parse_vit_method("swin"), "unknown ViT method \"swin\" (expected vit, local, registers or spatial)",
                       ValueError);
  for (const auto m : vit_methods()) {
    CHECK(parse_vit_method(to_string(m)) == m);
    CHECK(nlohmann::json(to_string(m)).get<ViTMethod>() == m);
  }
  ViTConfig even = tiny_vit(ViTMethod::local);
  even.window = 2;
  CHECK_THROWS_WITH_AS(ViTClassifier(even, gen), doctest::Contains("window"), ValueError);
  CHECK_THROWS_WITH_AS(nn::patchify(zeros({2, 30, 28}), 4), doctest::Contains("patchify"), ShapeError);
  CHECK_THROWS_WITH_AS(nn::patchify(zeros({2, 28, 28}), 0), doctest::Contains("patchify"), ValueError);
  CHECK_THROWS_WITH_AS(nn::unpatchify(zeros({2, 48, 16}), 4, 28, 28), doctest::Contains("unpatchify"), ShapeError);
  ViTClassifier model(tiny_vit(ViTMethod::vit), gen);
  CHECK_THROWS_WITH_AS(model.forward(zeros({2, 32, 32})), doctest::Contains("[2,32,32]"), ShapeError);
  MAEConfig c;
  c.encoder = tiny_vit(ViTMethod::vit);
  c.decoder_dim = 8;
  c.decoder_layers = 1;
  c.decoder_heads = 2;
  MaskedAutoencoder mae(c, gen);
  PatchMask mask = random_patch_mask(2, 49, 0.5, gen);
  CHECK_THROWS_AS(mae.forward(random_images(2, 28, 1), {slice(mask.visible, 1, 0, 20), slice(mask.masked, 1, 0, 20)}),
                  ShapeError);
  CHECK_THROWS_WITH_AS(mae.forward(random_images(2, 28, 1), {mask.visible, tensor_int(std::vector<int64_t>(
                                                                          2 * 25, 0), {2, 25})}),
                       doctest::Contains("partition"), ValueError);
  CHECK_THROWS_AS(mae.forward(random_images(3, 28, 1), mask), ShapeError);  // a mask for 2 images
  BackboneConfig bc;
  bc.attention = Attention::local;
  bc.causal = false;
  CHECK_THROWS_WITH_AS(Backbone(bc, gen), doctest::Contains("bidirectional"), ValueError);
  nn::AttentionOptions lin;
  lin.linear = true;
  nn::MultiheadAttention attn(8, 2, 0.0, gen, lin);
  CHECK_THROWS_AS(attn.forward(zeros({1, 3, 8}), true, Tensor(), Tensor(), zeros({3, 3})), ValueError);
  ViTTrainConfig t;
  t.task = "segment";
  CHECK_THROWS_WITH_AS(vit_parameters(t), doctest::Contains("segment"), ValueError);
  t.task = "classify";
  t.batch = 100;
  CHECK_THROWS_AS(vit_train_steps(t, 50), ValueError);  // no step
}

TEST_CASE("MultiheadAttention: an additive zero mask changes nothing, a -inf entry hides that key") {
  Generator gen(19);
  nn::MultiheadAttention attn(8, 2, 0.0, gen);
  Tensor x = randn({2, 4, 8}, 0, 1, DType::Float32, gen);
  NoGradGuard no_grad;
  check_close(attn.forward(x, false, Tensor(), Tensor(), zeros({4, 4})), attn.forward(x, false).to_vector());
  // Hiding key 3 from every query equals attention over the first three tokens for them.
  std::vector<double> hide(16, 0.0);
  for (int64_t t = 0; t < 4; ++t) hide[t * 4 + 3] = -std::numeric_limits<double>::infinity();
  Tensor masked = attn.forward(x, false, Tensor(), Tensor(), tensor(hide, {4, 4}));
  check_close(slice(masked, 1, 0, 3), attn.forward(slice(x, 1, 0, 3), false).to_vector(), 1e-6, 1e-5);
}

TEST_CASE("ScheduledAdamW: the warmup-cosine rate, weight decay on matrices only, a non-finite step skipped") {
  Tensor w = ones({2, 2}).requires_grad_(), b = ones({2}).requires_grad_();
  ScheduledAdamW opt({w, b}, {10, 1.0, 0.1, 2, 0.5, 1.0});
  sum(w * 0.0 + b * 0.0).backward();  // zero gradients: only the decay moves w
  CHECK(opt.step(0) == doctest::Approx(0.5));
  CHECK(!w.grad().defined());  // cleared
  CHECK(w.to_vector()[0] == doctest::Approx(1.0 - 0.5 * 0.5));
  CHECK(b.to_vector()[0] == 1.0);
  sum(w * std::numeric_limits<double>::quiet_NaN()).backward();
  const std::vector<double> before = w.to_vector();
  opt.step(1);
  CHECK(opt.skipped_steps() == 1);
  CHECK(w.to_vector() == before);
  CHECK_THROWS_AS(ScheduledAdamW({w}, {0, 1.0, 0.1, 2, 0.5, 1.0}), ValueError);
  CHECK_THROWS_AS(ScheduledAdamW({w}, {10, 1.0, 2.0, 2, 0.5, 1.0}), ValueError);
}

TEST_CASE("ViT training smoke test: classification and MAE losses fall on synthetic images") {
  const ImageDataset train = halves(96, 12, 20), test = halves(32, 12, 21);
  for (const auto m : {ViTMethod::vit, ViTMethod::spatial}) {
    INFO(to_string(m));
    ViTTrainConfig c;
    c.model.encoder = tiny_vit(m);
    c.model.encoder.image = 12;  // 3 x 3 patches of 4
    c.model.encoder.classes = 2;
    c.model.encoder.memory.chunk = 2;
    c.steps = 40;
    c.batch = 16;
    c.warmup = 4;
    c.lr = 5e-3;
    c.eval_batch = 16;
    int64_t train_reports = 0;
    ViTTrainResult r = train_vit(c, train, test, [&](const ViTTrainProgress& p) { train_reports += p.phase == "train"; });
    REQUIRE(r.losses.size() == 40);
    CHECK(train_reports == 40);
    CHECK((r.losses[38] + r.losses[39]) / 2 < 0.5 * (r.losses[0] + r.losses[1]) / 2);
    CHECK(r.test_accuracy > 0.9);
    CHECK(r.gates.size() == (m == ViTMethod::spatial ? 1u : 0u));

    c.task = "mae";
    c.model.decoder_dim = 8;
    c.model.decoder_layers = 1;
    c.model.decoder_heads = 2;
    c.lr = 1e-2;
    ViTTrainResult a = train_vit(c, train, test);
    CHECK((a.losses[37] + a.losses[38] + a.losses[39]) / 3 < 0.5 * (a.losses[0] + a.losses[1] + a.losses[2]) / 3);
    REQUIRE(a.reconstruction.size() == 3);
    CHECK(a.reconstruction[0].ratio == 0.25);
    for (const auto& s : a.reconstruction) {
      CHECK(s.psnr > 10);
      CHECK(s.ssim > 0);
    }
  }
}

TEST_CASE("evaluate_reconstruction: the same masks for the same seed, so scores repeat exactly") {
  MAEConfig c;
  c.encoder = tiny_vit(ViTMethod::vit);
  c.encoder.image = 12;
  c.decoder_dim = 8;
  c.decoder_layers = 1;
  c.decoder_heads = 2;
  Generator gen(22);
  MaskedAutoencoder model(c, gen);
  Tensor x = random_images(10, 12, 23);
  ReconstructionScore a = evaluate_reconstruction(model, x, 0.5, 7, 4);
  ReconstructionScore b = evaluate_reconstruction(model, x, 0.5, 7, 4);
  ReconstructionScore d = evaluate_reconstruction(model, x, 0.5, 8, 4);
  CHECK(a.psnr == b.psnr);
  CHECK(a.ssim == b.ssim);
  CHECK(a.psnr != d.psnr);
  CHECK(model.is_training());
  CHECK_THROWS_WITH_AS(evaluate_reconstruction(model, x, 1.0, 7, 4), doctest::Contains("random_patch_mask"),
                       ValueError);
}
