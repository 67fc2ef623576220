// The synthetic diagnostic tasks of docs/DESIGN.md §8, generated on the fly from a
// seeded Generator. Every task produces token sequences as
//   features [B, T, F] float32 (continuous inputs; undefined when F = 0),
//   ids      [B, T] int64 (categorical inputs; undefined when vocab = 0),
//   targets  [B, T] int64 (the class to predict; -100 where there is no loss),
//   observed [B, T] int64 (map-building, map-recall: 1 where the queried cell was seen).
// The segmented tasks (mqar, map-recall, coord-recall; docs/DESIGN.md §9) are cut
// into segments of Task::segment() tokens that a model processes one at a
// time, carrying only its recurrent state across segment boundaries.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "tmem/core/rng.h"
#include "tmem/core/tensor.h"

namespace tmem::models {

struct TaskBatch {
  Tensor features, ids, targets, observed;
};

/// Parameters of the tasks; each task reads the ones it uses.
struct TaskConfig {
  int64_t W = 20;         // coord-binding: write tokens
  double noise = 0.05;    // coord-binding: query key noise s
  int64_t queries = 4;    // coord-binding: query tokens
  int64_t T = 32;         // map-building: observation tokens
  int64_t L = 2;          // occlusion: frames the ball is hidden
  int64_t length = 32;    // no-harm: sequence length
  int64_t P = 64;         // mqar: key-value pairs
  int64_t G = 1;          // mqar, coord-recall: distractor segments
};

/// Tokens per segment of the segmented tasks.
constexpr int64_t kSegment = 16;
/// The largest batch and the largest count a task parameter (W, queries, T,
/// length, G) takes, as the command line's options: sizes stay far from
/// int64 overflow in every product a batch is made of.
constexpr int64_t kMaxTaskSize = 65536;

class Task {
 public:
  virtual ~Task() = default;
  virtual int64_t feature_dim() const = 0;  // F (0: no continuous input)
  virtual int64_t vocab() const = 0;        // id vocabulary (0: no ids)
  virtual int64_t classes() const = 0;      // output classes
  virtual int64_t seq_len() const = 0;      // T
  /// The memory chunk size that suits the task (1 token per step, or one
  /// frame for occlusion).
  virtual int64_t default_chunk() const { return 1; }
  /// The model width d of the reference configuration (docs/DESIGN.md §7: 64 for
  /// the binding tasks, 96 for map-building and occlusion).
  virtual int64_t default_dim() const { return 64; }
  /// Tokens per segment for the segmented tasks (kSegment); 0: one sequence
  /// that attention sees whole.
  virtual int64_t segment() const { return 0; }
  /// A batch of B sequences (shapes above) drawn from gen. Throws ValueError
  /// unless 1 <= B <= kMaxTaskSize.
  TaskBatch sample(int64_t B, Generator& gen) const;

 protected:
  virtual TaskBatch sample_batch(int64_t B, Generator& gen) const = 0;
};

/// coord-binding: W writes (type, key k ~ U[-1,1]^3, value v in 0..31), then
/// queries whose key is a written key + N(0, s^2) noise clamped to [-1, 1];
/// target: the value of the written key nearest the query (chance 1/32).
/// features = key (3); ids = value for writes, 32 ("query") for queries.
std::unique_ptr<Task> make_coord_binding(const TaskConfig& c);
/// map-building: a hidden 8x8 Bernoulli(0.5) grid; T observation tokens, each
/// a 2x2 patch at a random window + (row/8, col/8, 0); a final query token
/// (0,0,0,0, qr/8, qc/8, 1) asks for one cell's occupancy (2 classes).
std::unique_ptr<Task> make_map_building(const TaskConfig& c);
/// occlusion: 8 frames of 16x16 with a 2x2 ball moving with velocity in
/// {-1,0,1}^2 (not both 0), wrapping; tokens are 4x4 patches (16 pixels +
/// frame/8 + patch row/4 + patch col/4). The ball is hidden for L frames;
/// with `final_hidden` (tmem's `occlusion`) those are the last L frames, so the
/// answer must be carried through occlusion; otherwise (`occlusion-visible`,
/// the reference variant) the L frames before the last. Target at the last
/// token: the quadrant (4 classes) of the ball's top-left pixel in the last frame.
std::unique_ptr<Task> make_occlusion(const TaskConfig& c, bool final_hidden);
/// no-harm: s_t = (s_{t-1} + 1) mod 16 from a random s_0, `length` tokens;
/// next-token prediction at every position but the last.
std::unique_ptr<Task> make_no_harm(const TaskConfig& c);

/// mqar (multi-query associative recall, Arora et al. 2023 "Zoology"): P
/// key-value pairs in the first P/16 segments, one token per pair (ids = key
/// from 0..255, drawn without replacement; features = one-hot value of 64,
/// then a query flag); G distractor segments of 16 pairs whose keys come from
/// ids 256..511; a query segment of 16 distinct written keys in random order
/// (flag 1, no value); target: each queried key's value (chance 1/64).
/// T = P + 16 G + 16. Throws ValueError unless P is a multiple of 16 in
/// [16, 256] and G >= 0.
std::unique_ptr<Task> make_mqar(const TaskConfig& c);
/// map-recall: map-building's hidden 8x8 grid and observation tokens, T
/// observations (a multiple of 16, default 64) in T/16 segments, then a
/// query segment of 16 distinct cells (0,0,0,0, r/8, c/8, 1); target:
/// occupancy (chance 50%); `observed` marks queried cells that were seen.
std::unique_ptr<Task> make_map_recall(const TaskConfig& c);
/// coord-recall: coord-binding's W writes (key in [-1,1]^3, value 0..31; W a
/// multiple of 16, default 32) in W/16 segments, G distractor segments of 16
/// writes marked as distractors (ids 33 + value: their keys never answer a
/// query), a query segment of 16 queries (written key + N(0, s^2) noise,
/// clamped; id 32); target: the value of the nearest written key.
std::unique_ptr<Task> make_coord_recall(const TaskConfig& c);

/// The task named `name` (coord-binding, map-building, occlusion,
/// occlusion-visible, no-harm, mqar, map-recall, coord-recall). Throws
/// ValueError for an unknown name or bad parameters (every make_* function
/// also refuses W, queries, T, length or G above kMaxTaskSize).
std::unique_ptr<Task> make_task(const std::string& name, const TaskConfig& c);

/// True for the segmented tasks (mqar, map-recall, coord-recall), whose
/// models are the segment-recurrent methods (models/diagnostic.h
/// segmented_methods()); false for every other name.
bool is_segmented_task(const std::string& name);

/// The TaskConfig fields task `name` reads, by field name (W, noise,
/// queries, T, L, length, P, G); the others leave its batches unchanged, so
/// a command refuses an option that sets one of them. Throws ValueError for
/// an unknown name.
const std::vector<std::string>& task_parameters(const std::string& name);

}  // namespace tmem::models
