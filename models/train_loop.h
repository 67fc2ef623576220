// The one training loop of every trainer (diagnostic tasks, language models,
// ViTs, video): the trainer's forward step, backward, gradient dumps with the
// model's memory internals, ScheduledAdamW (clip, warmup + cosine, skipping
// non-finite steps), the recent training metric and its curve, progress,
// checkpoints and bit-exact resume (docs/DESIGN.md §11).
#pragma once
#include <algorithm>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "tmem/core/error.h"
#include "tmem/core/rng.h"
#include "tmem/models/scheduled_adamw.h"
#include "tmem/nn/module.h"
#include "tmem/nn/tensor_memory.h"

namespace tmem::models {

/// The files a run writes in its run directory: the checkpoint (train_loop)
/// and, from the commands, the result and the per-step losses. A gradient
/// dump must be none of them.
inline constexpr const char* kCheckpointFile = "checkpoint.safetensors";
inline constexpr const char* kResultFile = "result.json";
inline constexpr const char* kLossesFile = "losses.json";

/// Where a run keeps its checkpoint and gradient dump, and how often; every
/// trainer's config has these.
struct CheckpointOptions {
  std::string run_dir;           // checkpoints go here ("" = none)
  int64_t checkpoint_every = 0;  // steps; 0 = only at the end (when run_dir is set)
  bool resume = false;           // continue from run_dir/checkpoint.safetensors when it exists
  /// Gradient dump file ("" = none): not the checkpoint. A resumed run keeps
  /// the steps dumped before its checkpoint (GradDumpWriter).
  std::string dump_grads;
  int64_t dump_every = 100;      // and the last step
  bool dump_values = false;
};

/// What a trainer's forward step gives the loop: the loss (a scalar with its
/// graph; the loop backpropagates it), the rows of the batch this process
/// trained (the first axis of what its model's forward took), and the
/// step's training metric as hits of total (accuracy: correct predictions
/// of predictions; a mean such as PSNR: the value of 1). total 0: no metric.
struct StepOutput {
  Tensor loss;
  int64_t rows = 0;
  double hits = 0, total = 0;
};

struct LoopConfig {
  int64_t steps = 0;
  /// The rows of a step's whole batch (>= 1): every step, the rows the
  /// processes trained (StepOutput::rows, summed over the ranks when data
  /// parallel) must add up to it, else the step throws ValueError (a
  /// trainer that gives a rank more or less than its share).
  int64_t batch = 0;
  ScheduleConfig optim;          // optim.steps is set from steps (at least 1)
  CheckpointOptions files;
  /// The run's config (checkpoint metadata "config"): a resume refuses a
  /// checkpoint whose config differs in any key but "steps".
  nlohmann::json config;
  std::string model_name;        // checkpoint metadata "model", e.g. "tmem::models::DiagnosticModel"
  /// The config's keys at their defaults (config_differences): a checkpoint
  /// written before a key existed resumes while the run keeps its default.
  nlohmann::json config_defaults = nlohmann::json::object();
  int64_t window = 100;          // steps in the recent metric, and between points of its curve
  bool counts = true;            // hits and total are counts (checked on resume: integers, hits <= total)
  double stop_metric = 0;        // > 0: stop once the recent metric over a full window reaches it
  /// Data parallel over the ranks of tmem::dist (DistributedDataParallel):
  /// the loss is averaged and hits and total summed over the ranks; rank 0
  /// alone writes and reports progress; at the end the ranks' parameters are
  /// checked to be bit-identical (dist::check_replicas_match). The trainer
  /// gives each rank its share of the batch (dist::BatchShard) with equal
  /// rows, so the mean of the ranks' losses is the batch's.
  bool data_parallel = false;
};

struct LoopProgress {
  int64_t step, steps;           // steps done, of all
  double loss, metric, lr;       // this step's loss and rate; the recent metric
  double seconds;                // this invocation's training time so far
  double steps_per_second;       // of this invocation
  int64_t start = 0;             // the step this invocation began at (a resumed run's first)
};

/// The trainer's side of the loop. `step` is required; the generators are
/// checkpointed by name (metadata "<name>": their state); save_state /
/// load_state carry any other state a resume needs (tensors "extra.<key>":
/// an LM's carried BackboneState, a DataLoader's order); `probe` gives the
/// extra keys of each dumped step (the memory internals) from what the
/// TensorMemoryProbe alive during that step's forward recorded. Data parallel,
/// save_state is called on every rank (it may gather over the ranks) and
/// load_state gets rank 0's checkpoint on every rank; the generators must be
/// in the same state on every rank (each rank draws the whole batch; dropout
/// draws under dist::RankStream).
struct LoopHooks {
  std::function<StepOutput(int64_t step)> step;
  std::vector<std::pair<std::string, Generator*>> generators;
  std::function<std::map<std::string, Tensor>()> save_state;
  std::function<void(const std::map<std::string, Tensor>&)> load_state;
  std::function<nlohmann::json(const nn::TensorMemoryProbe&)> probe;
  std::function<void(const LoopProgress&)> progress;
};

struct LoopResult {
  std::vector<double> losses;    // per step from step 0 (a resumed run's include those before it)
  std::vector<double> metrics;   // hits / total per step (NaN without a metric)
  /// (step, recent metric) every `window` steps: the training curve.
  std::vector<std::pair<int64_t, double>> curve;
  double recent_metric = 0;      // over the last `window` steps
  double seconds = 0;            // training time, summed over a resumed run's invocations
  int64_t start_step = 0;        // > 0 when resumed
  int64_t stopped_at = -1;       // the step at which stop_metric was reached (-1: never)
  int64_t skipped_steps = 0;     // steps skipped for a non-finite gradient norm
};

/// How a saved config (a checkpoint's, a result.json's) differs from the
/// run's `now`, one "\n  key: saved X, now Y" line per key of `now`
/// (but `except`, and "device": where a run computes, not what it computes,
/// so a run continues or is reused on another device, as PyTorch's
/// map_location moves a checkpoint); empty when it describes the same run. A
/// key missing from `saved` (written by a tmem from before the key) matches
/// when now's value is the one in `defaults`, the key's default, which that
/// tmem used.
std::string config_differences(const nlohmann::json& saved, const nlohmann::json& now,
                               const nlohmann::json& defaults, const std::string& except = "");

/// Checks that every rank of a distributed job was given the same `mine`
/// (a run's options, a training loop's config and steps): a rank of other
/// steps would wait forever in a collective, one of another seed would train
/// on other rows. Keys named "device" are left out (a rank may have a GPU of
/// its own). All-gathers a hash of the rest; collective, a no-op on one
/// process. Throws ValueError on every rank naming `what`, the first rank
/// that differs from rank 0, and each differing key with both values.
void check_ranks_agree(const nlohmann::json& mine, const std::string& what);

/// Trains `model` (in training mode) for cfg.steps steps: hooks.step(step),
/// backward, the gradient dump (before clipping), ScheduledAdamW::step,
/// then the metric window, the checkpoint every files.checkpoint_every steps
/// and progress. With files.run_dir set, a checkpoint is also written at the
/// end; with files.resume and a checkpoint there, the run continues from it
/// bit-exactly (model "model.<name>", optimizer "optim.<key>", generators,
/// extra state, losses, metrics, window, curve). Throws ValueError for bad
/// options, a dump naming the checkpoint or a checkpoint of another config
/// (listing the keys that differ) or, data parallel, ranks of other configs,
/// steps, start steps or checkpoint intervals (check_ranks_agree); IOError
/// naming the checkpoint and the
/// entry for a malformed or unfitting checkpoint, or when a file cannot be
/// written. Throws Interrupted after a stop request (request_stop).
LoopResult train_loop(nn::Module& model, const LoopConfig& cfg, const LoopHooks& hooks);

/// Thrown by train_loop when a stop was requested (request_stop, which
/// tmem's Ctrl-C handler calls): between two steps, after saving the
/// checkpoint of the steps done when the run has a run directory. The
/// message says where it stopped and how to continue (--resume).
class Interrupted : public Error {
 public:
  using Error::Error;
};

/// Asks the train_loop running in this process to stop between two steps
/// (and the next one, if none is running, before its first); a
/// data-parallel loop stops when any of its ranks was asked to: the ranks
/// agree on it in the step's all_reduce, so they all stop after that step.
/// Only sets an atomic flag, so a signal handler may call it.
void request_stop() noexcept;

/// train_loop for a trainer whose progress reports are {"train", step,
/// steps, loss, metric, lr, samples per second, seconds, start} (ViTTrainProgress,
/// VideoTrainProgress), with `samples` training samples per step: reports
/// every step when `progress` is set, then copies the run into res's
/// training fields (parameters, losses, metrics, seconds, skipped_steps).
/// Returns the training samples per second. Throws what train_loop throws.
template <class Progress, class Result>
double train_and_report(nn::Module& model, const LoopConfig& cfg, LoopHooks hooks, int64_t samples,
                        const std::function<void(const Progress&)>& progress, Result& res) {
  const auto per_step = static_cast<double>(samples);
  if (progress)
    hooks.progress = [&](const LoopProgress& p) {
      progress({"train", p.step, p.steps, p.loss, p.metric, p.lr, p.steps_per_second * per_step, p.seconds, p.start});
    };
  const LoopResult run = train_loop(model, cfg, hooks);
  res.parameters = model.num_parameters();
  res.losses = run.losses;
  res.metrics = run.metrics;
  res.seconds = run.seconds;
  res.skipped_steps = run.skipped_steps;
  return static_cast<double>(cfg.steps * samples) / std::max(res.seconds, 1e-9);
}

}  // namespace tmem::models
