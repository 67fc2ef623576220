// Training runs of the Fashion-MNIST ViT family (models/vit.h): image
// classification (cross-entropy, test accuracy) and MAE-style masked patch
// reconstruction (MSE on the masked patches; PSNR and SSIM of the composite
// image at several mask ratios), with ScheduledAdamW. Shapes: N images,
// B batch, H = W image size.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tmem/data/idx.h"
#include "tmem/models/train_loop.h"
#include "tmem/models/vit.h"

namespace tmem::models {

/// The inherited CheckpointOptions: the run directory, --resume and the
/// gradient dumps (train_loop).
struct ViTTrainConfig : CheckpointOptions {
  std::string task = "classify";  // classify | mae
  MAEConfig model;                // model.encoder: the ViT of both tasks; the decoder: mae only
  int64_t epochs = 1;             // passes over the training images, used when steps == 0
  int64_t steps = 0;              // optimizer steps; 0: epochs * floor(N / batch)
  int64_t batch = 64;
  double lr = 1e-3, min_lr = 1e-5;  // peak and final learning rate
  int64_t warmup = 200;             // linear warmup steps (capped at steps - 1)
  double weight_decay = 0.05, clip = 1.0;
  double mask_ratio = 0.75;                          // mae: training mask ratio
  std::vector<double> eval_ratios{0.25, 0.5, 0.75};  // mae: test mask ratios
  uint64_t seed = 42;        // initialisation, data order and training masks
  uint64_t mask_seed = 1234;  // mae: the test masks (the same for every method)
  int64_t eval_batch = 250;
  std::string device = "cpu";  // where the model trains and is evaluated: cpu, cuda or cuda:<index>
};

/// Throws ValueError naming `task` unless it is classify or mae.
void check_vit_task(const std::string& task);

/// The optimizer steps of a run on `train_images` images: steps, or
/// epochs * floor(train_images / batch) when steps == 0. Throws ValueError
/// for a negative count, batch < 1, or a budget that buys no step.
int64_t vit_train_steps(const ViTTrainConfig& c, int64_t train_images);

/// Every key of a ViTTrainConfig (its model and device included) as JSON,
/// with the encoder's MLP width for the method (the parameter-matched width,
/// or 4C) and the steps for `train_images`. Throws ValueError for a bad config.
nlohmann::json vit_config_to_json(const ViTTrainConfig& c, int64_t train_images);

/// The parameters of the model a config trains (ViTClassifier for classify,
/// MaskedAutoencoder for mae). Throws ValueError for a bad config.
int64_t vit_parameters(const ViTTrainConfig& c);

/// One progress report. phase "train": step = optimizer steps done, loss =
/// this step's, metric = accuracy (classify) or the composite PSNR in dB of
/// the training batch (mae), each the mean over the last 50 steps, lr = this
/// step's. phase "test": step = test batches done (over every mask ratio for
/// mae), loss = 0, metric = accuracy so far (classify) or the last finished
/// ratio's PSNR (mae, NaN before the first), lr = 0. Images per second and seconds are
/// the phase's so far.
struct ViTTrainProgress {
  std::string phase;
  int64_t step, steps;
  double loss, metric, lr, images_per_second, seconds;
  int64_t start = 0;  // the step this invocation began at (a resumed run's first; 0 in the test phase)
};

/// PSNR and SSIM of the composite images at one mask ratio: psnr() over every
/// pixel of every composite (10 log10(1 / MSE) of the whole test set) and the
/// mean per-image ssim() (models/image_metrics.h, pixel range [0, 1]).
struct ReconstructionScore {
  double ratio = 0, psnr = 0, ssim = 0;
};

struct ViTTrainResult {
  std::vector<double> losses;   // training loss of every step
  std::vector<double> metrics;  // the training metric of every step (accuracy or PSNR, per batch)
  int64_t parameters = 0;
  double seconds = 0;           // training time, evaluation excluded
  double images_per_second = 0;
  double test_accuracy = 0;     // classify
  std::vector<ReconstructionScore> reconstruction;  // mae: one per eval ratio
  std::vector<double> gates;    // sigmoid(gamma) of each memory layer at the end
  int64_t skipped_steps = 0;    // steps skipped for a non-finite gradient norm
};

/// Accuracy of `model` on `data` (argmax of the logits), on the model's
/// device (each batch of images is moved there; data may be on any device),
/// in eval mode without autograd, `batch` images at a time; the training
/// mode is restored.
/// progress(correct_so_far, images_so_far) after every batch. Throws
/// ValueError for batch < 1, ShapeError for images of the wrong size.
double evaluate_accuracy(ViTClassifier& model, const ImageDataset& data, int64_t batch,
                         const std::function<void(int64_t, int64_t)>& progress = {});

/// Reconstruction quality at one mask ratio: the images in order, `batch`
/// at a time, each batch masked by random_patch_mask drawn from one
/// Generator(mask_seed) (so every method sees the same masks), predicted on
/// the model's device in eval mode without autograd; scores of the
/// composites (mae_composite), made and scored on the host.
/// images [N, H, W]. progress(batches_done) after every batch. Throws
/// ValueError for batch < 1 or a bad ratio, ShapeError for no images or
/// images of the wrong size.
ReconstructionScore evaluate_reconstruction(MaskedAutoencoder& model, const Tensor& images, double ratio,
                                            uint64_t mask_seed, int64_t batch,
                                            const std::function<void(int64_t)>& progress = {});

/// Trains one model on `train` and evaluates it on `test`, on cfg.device
/// (the model, its optimizer state and each batch live there; the datasets
/// and the masks stay on the host, PSNR and SSIM are computed there): the
/// training images in a fresh random order every epoch (drawn from the
/// seed), one batch per step; classify: cross-entropy of ViTClassifier's
/// logits, then the test accuracy; mae: masked_patch_loss with a fresh
/// random_patch_mask at mask_ratio per batch, then evaluate_reconstruction
/// at every eval ratio.
/// ScheduledAdamW (warmup + cosine, clip, weight decay on matrices). A step
/// with a non-finite gradient norm is skipped. `progress` is called every
/// step and after every test batch. Throws ValueError for a bad config, task
/// or device string, ShapeError for images that are not [N, image, image]
/// or labels not [N], DeviceError naming "train" before any work when the
/// device is not available, and DeviceError when an op the model needs has
/// no kernel on that device. The steps run in train_loop: checkpoints in
/// cfg.run_dir (with the loader's order), bit-exact --resume and gradient
/// dumps as cfg's CheckpointOptions ask, with train_loop's errors.
/// In a tmem::dist job of R > 1 ranks it trains data-parallel: every rank
/// draws the whole batch and mask and trains rows r, r + R, ...
/// (dist::BatchShard); the mae training PSNR is then the mean of the ranks'.
/// Throws ValueError when min(batch, N) % R != 0.
ViTTrainResult train_vit(const ViTTrainConfig& cfg, const ImageDataset& train, const ImageDataset& test,
                         const std::function<void(const ViTTrainProgress&)>& progress = {});

}  // namespace tmem::models
