// Training runs of the Moving Fashion-MNIST video models (models/video.h):
// which items are in the clip, as a set. Training clips are drawn afresh every
// step from the Fashion-MNIST training images (MovingFashionMNIST, seeded);
// evaluation uses a fixed set of clips from the test images. Loss:
// set_cross_entropy; metric: set accuracy (set_correct). ScheduledAdamW.
// Shapes: B clips, T frames, S frame size, I items per clip, K classes.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tmem/data/moving_fmnist.h"
#include "tmem/models/train_loop.h"
#include "tmem/models/video.h"

namespace tmem::models {

/// The inherited CheckpointOptions: the run directory, --resume and the
/// gradient dumps (train_loop).
struct VideoTrainConfig : CheckpointOptions {
  VideoConfig model;                // model.frames and model.size must equal data.frames and data.size
  MovingFashionMNISTOptions data;   // the clips of training and evaluation (occlusion on or off)
  int64_t steps = 1000;             // optimizer steps, one fresh batch of clips each
  int64_t batch = 32;
  double lr = 1e-3, min_lr = 1e-5;  // peak and final learning rate
  int64_t warmup = 100;             // linear warmup steps (capped at steps - 1)
  double weight_decay = 0.05, clip = 1.0;
  uint64_t seed = 42;               // initialisation (Generator(seed)) and training clips (Generator(seed + 1))
  int64_t eval_clips = 1000;        // the fixed evaluation set
  uint64_t eval_seed = 1234;
  int64_t eval_batch = 100;
  std::string device = "cpu";       // where the model trains and is evaluated: cpu, cuda or cuda:<index>
};

/// Throws ValueError (naming "train_video") for steps < 1, batch < 1,
/// eval_clips < 1, eval_batch < 1, model.frames != data.frames or
/// model.size != data.size, and what video_backbone_config throws.
void check_video_train_config(const VideoTrainConfig& c);

/// Every key of a VideoTrainConfig (the device included) as JSON, with the
/// MLP width the method gets (the parameter-matched width, or 4C). Throws
/// what check_video_train_config throws.
nlohmann::json video_config_to_json(const VideoTrainConfig& c);

/// The parameters of the VideoModel a config trains. Throws ValueError for a
/// bad model config.
int64_t video_parameters(const VideoTrainConfig& c);

/// Clips [first, first + count) of the fixed evaluation set `seed` drawn
/// from `data`: clip i is data.sample(1, Generator(s_i)), s_i the (i + 1)-th
/// next_u64() of Generator(seed). So the set is the same for every method
/// and batch size, and with occlusion on and off clip i has the same items
/// and motion (the occluder's draws come after them). Returns the batch
/// [count, ...]. Throws ValueError for first < 0 or count < 1.
MovingFashionMNISTBatch evaluation_clips(const MovingFashionMNIST& data, uint64_t seed, int64_t first, int64_t count);

/// Scores on a set of clips. accuracy: the fraction of clips whose
/// predicted set equals their item set (set_correct). occluded_item: over
/// the clips with an occluded item, the fraction whose predicted set holds
/// that item's class (0 when no clip has one); occluded_clips: how many.
struct VideoScore {
  double accuracy = 0, occluded_item = 0;
  int64_t clips = 0, occluded_clips = 0;
};

/// Scores `model` on evaluation_clips(data, seed, 0, clips), `batch` clips
/// at a time, on the model's device (the frames of each batch are moved
/// there), in eval mode without autograd (the training mode is restored).
/// progress(score so far) after every batch. Throws ValueError for clips < 1
/// or batch < 1, ShapeError when the clips do not fit the model.
VideoScore evaluate_video(VideoModel& model, const MovingFashionMNIST& data, int64_t clips, uint64_t seed,
                          int64_t batch, const std::function<void(const VideoScore&)>& progress = {});

/// One progress report. phase "train": step = optimizer steps done, loss =
/// this step's, metric = the set accuracy of the training batches over the
/// last 50 steps, lr = this step's. phase "test": step = test batches done,
/// loss = 0, metric = the set accuracy so far, lr = 0. Clips per second and
/// seconds are the phase's so far.
struct VideoTrainProgress {
  std::string phase;
  int64_t step, steps;
  double loss, metric, lr, clips_per_second, seconds;
  int64_t start = 0;  // the step this invocation began at (a resumed run's first; 0 in the test phase)
};

struct VideoTrainResult {
  std::vector<double> losses;   // training loss of every step
  std::vector<double> metrics;  // set accuracy of every training batch
  int64_t parameters = 0;
  double seconds = 0;           // training time, evaluation excluded
  double clips_per_second = 0;  // training clips per second
  VideoScore test;              // on the fixed evaluation clips
  std::vector<double> gates;    // sigmoid(gamma) of each memory layer at the end (tensor)
  int64_t skipped_steps = 0;    // steps skipped for a non-finite gradient norm
};

/// Trains one VideoModel on clips from `train` images and scores it on the
/// fixed evaluation clips from `test` images (evaluate_video), both with
/// cfg.data's options, on cfg.device (the model, its optimizer state and the
/// frames of each batch live there; the clips are drawn on the host). Each
/// step draws a fresh batch of clips from Generator(seed + 1) (the same clips
/// for every method) and takes one
/// ScheduledAdamW step (warmup + cosine, clip, weight decay on matrices) on
/// set_cross_entropy; a step with a non-finite gradient norm is skipped.
/// `progress` is called every step and after every test batch. Throws what
/// check_video_train_config and the MovingFashionMNIST constructor throw,
/// ValueError for a device string that is not cpu, cuda or cuda:<index>,
/// DeviceError naming "train" before any work when the device is not
/// available, and DeviceError when an op the model needs has no kernel on
/// that device. The steps run in train_loop: checkpoints in cfg.run_dir,
/// bit-exact --resume and gradient dumps as cfg's CheckpointOptions ask,
/// with train_loop's errors. In a tmem::dist job of R > 1 ranks it trains
/// data-parallel: every rank draws the whole batch of clips and trains clips
/// r, r + R, ... (dist::BatchShard). Throws ValueError when batch % R != 0.
VideoTrainResult train_video(const VideoTrainConfig& cfg, const ImageDataset& train, const ImageDataset& test,
                             const std::function<void(const VideoTrainProgress&)>& progress = {});

}  // namespace tmem::models
