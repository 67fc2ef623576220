// Training runs of the diagnostic tasks: the loop (forward, backward,
// clip_grad_norm_, AdamW), evaluation, checkpoints with bit-exact resume, and
// JSON gradient dumps with the memory layers' internals.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tmem/models/tasks.h"
#include "tmem/models/train_loop.h"
#include "tmem/models/transformer.h"

namespace tmem::models {

/// The inherited CheckpointOptions: the run directory, --resume and the
/// gradient dumps.
struct TrainConfig : CheckpointOptions {
  TrainConfig() {
    model.dim = 0;
    model.memory.chunk = 0;
  }
  std::string task = "coord-binding";
  TaskConfig task_cfg;        // W, noise, queries, T, L, length, P, G
  int64_t steps = 2000, batch = 128;
  uint64_t seed = 42;
  /// AdamW; weight_decay applies to the parameters of rank >= 2 only, not to
  /// biases, LayerNorm gains or memory gates (nn::weight_decay_groups).
  double lr = 3e-4, weight_decay = 0.01, clip = 1.0;
  int64_t eval_batches = 16;  // held-out batches for the final accuracy
  BackboneConfig model;       // method, dim, layers, heads, memory, leaky_memory (dim 0, chunk 0: the task's)
  std::string device = "cpu";    // where the model trains: cpu, cuda or cuda:<index>
  /// > 0: stop once the query accuracy over the last 100 training steps
  /// reaches it (e.g. 0.99); 0: train every step.
  double stop_accuracy = 0;
};

/// Sets the values left at 0 to the task's defaults: model.dim
/// (Task::default_dim) and the memory chunk (Task::default_chunk). Throws
/// ValueError for an unknown task, task parameters out of range, or a
/// negative dim or chunk.
void resolve_task_defaults(TrainConfig& c);
/// The keys of a TrainConfig that only some methods read (the memory's for
/// tensor, chunk for tensor and slots, cache_len for xl, linear_features,
/// ssm_state, memory_tokens), with those methods.
const std::map<std::string, std::vector<BackboneMethod>>& method_config_keys();
/// A TrainConfig as JSON: every key its method reads (method_config_keys),
/// the exact config of a run. A cell is recorded and compared on these alone,
/// so an ssm cell of a run matches a run that differs only in --mem-grid.
nlohmann::json config_to_json(const TrainConfig& c);
/// A default TrainConfig with every key config_to_json can record, for any
/// method: what a key missing from a saved config (an older checkpoint or
/// result.json) is compared at (config_differences).
nlohmann::json default_config_json();
/// Applies the keys of `j` to `c`. Throws ValueError naming any unknown key,
/// and for a value of the wrong type (an integer key given 1.9, a number key
/// given true, a seed given -1).
void apply_config_json(TrainConfig& c, const nlohmann::json& j);

struct TrainProgress {
  int64_t step, steps;
  double loss, accuracy, steps_per_second;
  double seconds;     // this invocation's training time so far
  int64_t start = 0;  // the step this invocation began at (a resumed run's first)
};

struct TrainResult {
  std::vector<double> losses;       // per step from step 0 (a resumed run's include those before it)
  double train_accuracy = 0;        // query accuracy over the last 100 steps
  /// (step, query accuracy over the 100 steps up to it) every 100 steps from
  /// step 0: the training curve (bench/peer/coord_peer.py logs the same).
  std::vector<std::pair<int64_t, double>> accuracy_curve;
  double eval_accuracy = 0;         // on eval_batches fresh batches
  double eval_accuracy_observed = -1;  // map-building: on queries of observed cells (-1: n/a)
  std::vector<double> gates;        // sigmoid(gamma) of each memory layer at the end
  /// Tensor Memory models: the eval accuracy on the same batches with every
  /// memory gate sigmoid(gamma) set to 0, i.e. without the memory path (-1: no
  /// memory layers). Near eval_accuracy means the model does not use its memory.
  double eval_accuracy_memory_off = -1;
  double seconds = 0;               // training wall time, summed over a resumed run's invocations
  int64_t parameters = 0;
  int64_t start_step = 0;           // > 0 when resumed
  /// The step at which the accuracy over the last 100 training steps first
  /// reached stop_accuracy (training stopped there); -1 when it never did.
  int64_t stopped_at = -1;
  /// Floats per sequence of recurrent state the model carries (its
  /// BackboneState after the last eval batch: across segments on the
  /// segmented tasks; 0 for methods without state).
  int64_t state_floats = 0;
};

/// Trains one configuration of a diagnostic task (DiagnosticModel, cross
/// entropy on the target positions, query accuracy as the metric) in
/// train_loop: AdamW (0.9, 0.999) at a constant rate, a non-finite gradient
/// norm an error; checkpoints ("model": "tmem::models::DiagnosticModel",
/// generators "data_rng" and "model_rng"), bit-exact --resume and gradient
/// dumps as cfg's CheckpointOptions ask. dim and chunk left at 0 take the
/// task's defaults (resolve_task_defaults). `progress` is called every step.
/// The eval runs after the last step on eval_batches fresh batches from
/// generator seed + 2; for a model with Tensor Memory layers a second time
/// with their gates at 0. Data parallel when tmem::dist is initialized with
/// N > 1 ranks (every rank calls this with the same config): each rank
/// trains on its batch / N rows of the whole batch (DistributedSampler's
/// share) under DistributedDataParallel, the loss scaled so that the averaged
/// gradient is the whole batch's. Throws what train_loop throws, and
/// ValueError for a bad config or a batch that does not split evenly over
/// the ranks.
TrainResult train_diagnostic(const TrainConfig& config,
                             const std::function<void(const TrainProgress&)>& progress = {});

}  // namespace tmem::models
