#include "tmem/models/vit_trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>

#include "tmem/core/autograd.h"
#include "tmem/core/device_backend.h"
#include "tmem/dist/sampler.h"
#include "tmem/models/image_metrics.h"
#include "tmem/models/train_stats.h"
#include "tmem/nn/data_loader.h"
#include "tmem/ops/loss.h"
#include "tmem/ops/reduction.h"
#include "tmem/ops/shape.h"

namespace tmem::models {

using nlohmann::json;

void check_vit_task(const std::string& task) {
  check<ValueError>(task == "classify" || task == "mae", "unknown ViT task \"", printable(task),
                    "\" (expected classify or mae)");
}

int64_t vit_train_steps(const ViTTrainConfig& c, int64_t train_images) {
  check<ValueError>(c.steps >= 0 && c.epochs >= 0 && c.batch >= 1 && (c.steps > 0 || c.epochs > 0),
                    "train_vit: expected batch >= 1 and steps > 0 or epochs > 0, but got batch ", c.batch,
                    " steps ", c.steps, " epochs ", c.epochs);
  if (c.steps > 0) return c.steps;
  check<ValueError>(train_images >= c.batch, "train_vit: ", train_images, " training images buy no step of batch ",
                    c.batch);
  return c.epochs * (train_images / c.batch);
}

json vit_config_to_json(const ViTTrainConfig& c, int64_t train_images) {
  const ViTConfig& e = c.model.encoder;
  const int64_t matched = vit_backbone_config(e).mlp_hidden, mlp_hidden = matched > 0 ? matched : 4 * e.dim;
  json j = {{"task", c.task}, {"method", e.method}, {"image", e.image}, {"patch", e.patch}, {"dim", e.dim},
            {"layers", e.layers}, {"heads", e.heads}, {"mlp_hidden", mlp_hidden},
            {"dropout", e.dropout}, {"batch", c.batch}, {"epochs", c.epochs},
            {"steps", vit_train_steps(c, train_images)}, {"lr", c.lr}, {"min_lr", c.min_lr}, {"warmup", c.warmup},
            {"weight_decay", c.weight_decay}, {"clip", c.clip}, {"seed", c.seed}, {"eval_batch", c.eval_batch},
            {"device", c.device}};
  if (e.method == ViTMethod::local) j["window"] = e.window;
  if (e.method == ViTMethod::registers) j["registers"] = e.registers;
  if (e.method == ViTMethod::spatial)
    j["memory"] = {{"channels", e.memory.channels}, {"grid", {e.memory.D, e.memory.H, e.memory.W}},
                   {"chunk", e.memory.chunk}, {"every", e.memory_every}, {"gamma_init", e.memory.gamma_init},
                   {"sigma_scale", e.memory.sigma_scale}};
  if (c.task == "classify") {
    j["classes"] = e.classes;
  } else {
    j["decoder"] = {{"dim", c.model.decoder_dim}, {"layers", c.model.decoder_layers},
                    {"heads", c.model.decoder_heads}};
    j["mask_ratio"] = c.mask_ratio;
    j["eval_ratios"] = c.eval_ratios;
    j["mask_seed"] = c.mask_seed;
    j["target"] = "raw pixels in [0, 1], no per-patch normalisation";
  }
  return j;
}

int64_t vit_parameters(const ViTTrainConfig& c) {
  check_vit_task(c.task);
  Generator gen(0);
  if (c.task == "classify") return ViTClassifier(c.model.encoder, gen).num_parameters();
  return MaskedAutoencoder(c.model, gen).num_parameters();
}

namespace {

// Images [n0, n1) of `images` [N, H, W].
Tensor image_range(const Tensor& images, int64_t n0, int64_t n1) { return slice(images, 0, n0, n1); }

// Image n [H, W] of `images` [N, H, W].
Tensor image_at(const Tensor& images, int64_t n) { return squeeze(image_range(images, n, n + 1), 0); }

// The number of argmax(logits[b]) == labels[b].
int64_t correct(const Tensor& logits, const Tensor& labels) {
  const std::vector<int64_t> pred = max(logits.detach(), 1).indices.to_int_vector(), y = labels.to_int_vector();
  int64_t hit = 0;
  for (size_t i = 0; i < y.size(); ++i) hit += pred[i] == y[i];
  return hit;
}

void check_dataset(const char* what, const ImageDataset& d, int64_t image) {
  check<ShapeError>(d.images.dim() == 3 && d.images.shape()[1] == image && d.images.shape()[2] == image &&
                        d.labels.shape() == Shape{d.images.shape()[0]},
                    "train_vit: expected ", what, " images [N, ", image, ", ", image, "] and labels [N], but got ",
                    shape_str(d.images.shape()), " and ", shape_str(d.labels.shape()));
}

}  // namespace

double evaluate_accuracy(ViTClassifier& model, const ImageDataset& data, int64_t batch,
                         const std::function<void(int64_t, int64_t)>& progress) {
  check<ValueError>(batch >= 1, "evaluate_accuracy: expected batch >= 1, but got ", batch);
  const Device device = model.encoder->pos.device();
  const bool was_training = model.is_training();
  model.eval();
  NoGradGuard no_grad;
  const int64_t N = data.images.shape()[0];
  int64_t hit = 0;
  for (int64_t n0 = 0; n0 < N; n0 += batch) {
    const int64_t n1 = std::min(N, n0 + batch);
    hit += correct(model.forward(image_range(data.images, n0, n1).to(device)), slice(data.labels, 0, n0, n1));
    if (progress) progress(hit, n1);
  }
  model.train(was_training);
  return N ? static_cast<double>(hit) / static_cast<double>(N) : 0.0;
}

ReconstructionScore evaluate_reconstruction(MaskedAutoencoder& model, const Tensor& images, double ratio,
                                            uint64_t mask_seed, int64_t batch,
                                            const std::function<void(int64_t)>& progress) {
  check<ValueError>(batch >= 1, "evaluate_reconstruction: expected batch >= 1, but got ", batch);
  check<ShapeError>(images.dim() == 3 && images.shape()[0] >= 1,
                    "evaluate_reconstruction: expected images [N >= 1, H, W], but got ", shape_str(images.shape()));
  const ViTConfig& e = model.cfg.encoder;
  const int64_t N = images.shape()[0], patches = vit_patches(e);
  masked_patch_count(patches, ratio);
  const Device device = model.encoder->pos.device();
  const bool was_training = model.is_training();
  model.eval();
  NoGradGuard no_grad;
  Generator gen(mask_seed);
  std::vector<Tensor> composites;
  double ssim_sum = 0;
  for (int64_t n0 = 0, done = 0; n0 < N; n0 += batch) {
    Tensor x = image_range(images, n0, std::min(N, n0 + batch)).cpu();
    const int64_t B = x.shape()[0];
    PatchMask mask = random_patch_mask(B, patches, ratio, gen);
    Tensor comp = mae_composite(x, model.forward(x.to(device), mask).cpu(), mask, e.patch);
    for (int64_t b = 0; b < B; ++b) ssim_sum += ssim(image_at(comp, b), image_at(x, b));
    composites.push_back(comp);
    if (progress) progress(++done);
  }
  model.train(was_training);
  return {ratio, psnr(cat(composites, 0), images), N ? ssim_sum / static_cast<double>(N) : 0.0};
}

ViTTrainResult train_vit(const ViTTrainConfig& cfg, const ImageDataset& train, const ImageDataset& test,
                         const std::function<void(const ViTTrainProgress&)>& progress) {
  check_vit_task(cfg.task);
  const ViTConfig& e = cfg.model.encoder;
  check_dataset("training", train, e.image);
  check_dataset("test", test, e.image);
  check<ValueError>(cfg.eval_batch >= 1, "train_vit: expected eval_batch >= 1, but got ", cfg.eval_batch);
  const bool mae = cfg.task == "mae";
  const int64_t N = train.images.shape()[0], steps = vit_train_steps(cfg, N), patches = vit_patches(e);
  if (mae) {
    masked_patch_count(patches, cfg.mask_ratio);
    for (double r : cfg.eval_ratios) masked_patch_count(patches, r);
  }
  const Device device = parse_device(cfg.device);
  if (!device.is_cpu()) device_backend(device, "train");  // a clear error before any work
  Generator gen(cfg.seed);
  std::unique_ptr<ViTClassifier> classifier;
  std::unique_ptr<MaskedAutoencoder> autoencoder;
  if (mae) autoencoder = std::make_unique<MaskedAutoencoder>(cfg.model, gen);
  else classifier = std::make_unique<ViTClassifier>(e, gen);
  nn::Module& model = mae ? static_cast<nn::Module&>(*autoencoder) : *classifier;
  model.to(device);

  // Full batches, reshuffled every epoch; a set smaller than one batch is
  // one batch of all N, reshuffled every step. The loader draws from `gen`
  // when an epoch starts, before that step's mask.
  std::vector<Tensor> data{train.images};
  if (!mae) data.push_back(train.labels);
  nn::DataLoader loader(data, {cfg.batch, true, N >= cfg.batch}, gen);
  const int64_t B = std::min(cfg.batch, N);
  // Data parallel over the ranks of a tmem::dist job: every rank draws the
  // whole batch (and mask) in the one seeded order and trains its rows.
  const dist::BatchShard shard(B, "train_vit: batch");
  LoopConfig loop{steps, B, {steps, cfg.lr, cfg.min_lr, cfg.warmup, cfg.weight_decay, cfg.clip}, cfg,
                  vit_config_to_json(cfg, N), mae ? "tmem::models::MaskedAutoencoder" : "tmem::models::ViTClassifier"};
  loop.window = 50;
  loop.counts = !mae;  // the training PSNR of mae is a mean, not a count
  loop.data_parallel = shard.sharded();
  LoopHooks hooks;
  hooks.generators = {{"rng", &gen}};
  hooks.step = [&](int64_t step) {
    const std::vector<Tensor> batch = loader.next();
    Tensor x = shard.take(batch[0]).to(device);
    if (mae) {
      PatchMask whole = random_patch_mask(B, patches, cfg.mask_ratio, gen);
      const PatchMask mask{shard.take(whole.visible), shard.take(whole.masked)};
      const dist::RankStream own_dropout(gen, step);  // data parallel: this rank's dropout masks
      Tensor pred = autoencoder->forward(x, mask);
      const Tensor x_host = x.cpu();  // the training PSNR is measured on the host
      return StepOutput{masked_patch_loss(pred, x, mask, e.patch), x.size(0),
                        psnr(mae_composite(x_host, pred.detach().cpu(), mask, e.patch), x_host), 1.0};
    }
    const dist::RankStream own_dropout(gen, step);
    Tensor logits = classifier->forward(x);
    Tensor y = shard.take(batch[1]).to(device);
    return StepOutput{cross_entropy(logits, y), x.size(0), static_cast<double>(correct(logits, y)),
                      static_cast<double>(x.size(0))};
  };
  hooks.save_state = [&] { return loader.state_dict(); };
  hooks.load_state = [&](const std::map<std::string, Tensor>& state) { loader.load_state_dict(state); };
  const ViTEncoder& enc = mae ? *autoencoder->encoder : *classifier->encoder;
  hooks.probe = [&](const nn::TensorMemoryProbe& probe) {
    return json{{"memory", memory_internals(*enc.backbone, probe)}};
  };
  ViTTrainResult res;
  res.images_per_second = train_and_report(model, loop, hooks, B, progress, res);

  const int64_t Nt = test.images.shape()[0];
  const int64_t per_pass = (Nt + cfg.eval_batch - 1) / cfg.eval_batch;
  const auto e0 = std::chrono::steady_clock::now();
  auto report = [&](int64_t done, int64_t total, double metric, int64_t images) {
    if (!progress) return;
    const double secs = seconds_since(e0);
    progress({"test", done, total, 0.0, metric, 0.0, static_cast<double>(images) / std::max(secs, 1e-9), secs});
  };
  if (mae) {
    const auto total = static_cast<int64_t>(cfg.eval_ratios.size()) * per_pass;
    double last_psnr = std::numeric_limits<double>::quiet_NaN();
    for (size_t r = 0; r < cfg.eval_ratios.size(); ++r) {
      const auto before = static_cast<int64_t>(r) * per_pass;
      res.reconstruction.push_back(evaluate_reconstruction(
          *autoencoder, test.images, cfg.eval_ratios[r], cfg.mask_seed, cfg.eval_batch, [&](int64_t done) {
            report(before + done, total, last_psnr, std::min(Nt * static_cast<int64_t>(r) + done * cfg.eval_batch,
                                                             Nt * static_cast<int64_t>(r + 1)));
          }));
      last_psnr = res.reconstruction.back().psnr;
    }
  } else {
    res.test_accuracy = evaluate_accuracy(*classifier, test, cfg.eval_batch, [&](int64_t hit, int64_t seen) {
      report((seen + cfg.eval_batch - 1) / cfg.eval_batch, per_pass, static_cast<double>(hit) / seen, seen);
    });
  }
  res.gates = memory_gates(*enc.backbone);
  return res;
}

}  // namespace tmem::models
