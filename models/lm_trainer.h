// Training runs of the language models (models/lm.h) on a token stream: the
// loop over contiguous segments with carried (detached) state, AdamW with
// linear warmup + cosine decay, gradient clipping, and the final validation
// and test perplexities.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tmem/models/lm.h"
#include "tmem/models/train_loop.h"

namespace tmem::models {

/// The inherited CheckpointOptions: the run directory, --resume and the
/// gradient dumps (train_loop).
struct LMTrainConfig : CheckpointOptions {
  LMConfig model;
  int64_t batch = 16;        // parallel streams per step (B); tokens per step = batch * model.seq
  int64_t steps = 0;         // optimizer steps; 0: tokens / (batch * seq)
  int64_t tokens = 4'000'000;  // training-token budget, used when steps == 0
  double lr = 1e-3, min_lr = 1e-4;  // peak and final learning rate
  int64_t warmup = 100;      // linear warmup steps (capped at steps - 1)
  double weight_decay = 0.1, clip = 1.0;
  uint64_t seed = 42;
  int64_t eval_batch = 16;   // parallel streams for the perplexity evaluation
  std::string device = "cpu";  // where the model trains and is evaluated: cpu, cuda or cuda:<index>
};

/// The number of optimizer steps a config runs: steps, or tokens / (batch *
/// seq) when steps == 0. Throws ValueError when both are 0, either is
/// negative, or the budget buys no step.
int64_t lm_train_steps(const LMTrainConfig& c);

/// Every key of an LMTrainConfig (and its model) as JSON, the device included.
nlohmann::json lm_config_to_json(const LMTrainConfig& c);

/// One progress report: phase "train" (step = optimizer steps done, loss =
/// this step's, lr = this step's) or "valid" / "test" (step = segments
/// evaluated, loss = the mean NLL so far, lr = 0); tokens per second and
/// seconds are the phase's so far.
struct LMTrainProgress {
  std::string phase;
  int64_t step, steps;
  double loss, lr, tokens_per_second, seconds;
  int64_t start = 0;  // the step this invocation began at (a resumed run's first; 0 in evaluation)
};

struct LMTrainResult {
  std::vector<double> losses;  // training loss (nats per token) of every step
  int64_t parameters = 0;
  double seconds = 0;          // training time, evaluation excluded
  double tokens_per_second = 0;
  PerplexityResult valid, test;  // empty (tokens 0) when that stream was not given
  std::vector<double> gates;     // sigmoid(gamma) of each memory layer at the end
  int64_t skipped_steps = 0;     // steps skipped for a non-finite gradient norm
};

/// Trains one LM on `train` on cfg.device (the model, its optimizer state
/// and every segment live there; the token streams stay on the host): the
/// stream is cut into cfg.batch rows read in order (StreamSegments), one
/// segment per step; the state (xl cache, memory states) is carried from
/// step to step, detached (truncated
/// backpropagation through one segment), and reset at the start of each
/// pass over the stream. Loss: mean cross-entropy of the next token.
/// ScheduledAdamW (models/scheduled_adamw.h): AdamW (beta 0.9, 0.95) with
/// weight decay on matrices and embeddings only (not on biases, LayerNorm
/// gains, memory gates), warmup_cosine_lr, clip_grad_norm_.
/// Then the perplexities of `valid` and `test` (when not empty) with
/// evaluate_perplexity. A step whose gradient norm is not finite is skipped
/// (counted in skipped_steps). `progress` is called every step and after
/// every evaluated segment. Throws ValueError for a bad config, a device
/// string that is not cpu, cuda or cuda:<index>, or a training stream
/// shorter than 2 tokens; DeviceError naming "train" before any work when the
/// device is not available, and DeviceError when an op the model needs has
/// no kernel on that device. The steps run in train_loop: checkpoints in
/// cfg.run_dir (with the carried state), bit-exact --resume and gradient
/// dumps as cfg's CheckpointOptions ask, with train_loop's errors.
/// In a tmem::dist job of R > 1 ranks it trains data-parallel: rank r trains
/// streams r, r + R, ... of the batch (dist::BatchShard) and carries their
/// state; the checkpoint holds every stream's state (gathered), so it is a
/// one-process checkpoint. Throws ValueError when batch % R != 0. Each rank
/// evaluates the whole valid and test streams.
LMTrainResult train_lm(const LMTrainConfig& cfg, const std::vector<int64_t>& train,
                       const std::vector<int64_t>& valid, const std::vector<int64_t>& test,
                       const std::function<void(const LMTrainProgress&)>& progress = {});

}  // namespace tmem::models
