// The synthetic diagnostic tasks of DESIGN.md 5, generated on the fly from a
// seeded Generator. Every task produces token sequences as
//   features [B, T, F] float32 (continuous inputs; undefined when F = 0),
//   ids      [B, T] int64 (categorical inputs; undefined when vocab = 0),
//   targets  [B, T] int64 (the class to predict; -100 where there is no loss),
//   observed [B, T] int64 (map-building only: 1 where the queried cell was seen).
#pragma once
#include <memory>
#include <string>

#include "core/rng.h"
#include "core/tensor.h"

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
};

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
  /// The model width d of the reference configuration (DESIGN.md 4: 64 for
  /// the binding tasks, 96 for map-building and occlusion).
  virtual int64_t default_dim() const { return 64; }
  virtual TaskBatch sample(int64_t B, Generator& gen) const = 0;
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

/// The task named `name` (coord-binding, map-building, occlusion,
/// occlusion-visible, no-harm). Throws ValueError for an unknown name or bad
/// parameters.
std::unique_ptr<Task> make_task(const std::string& name, const TaskConfig& c);

}  // namespace tmem::models
