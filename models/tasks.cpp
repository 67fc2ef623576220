#include "tmem/models/tasks.h"

#include <algorithm>
#include <map>
#include <vector>

namespace tmem::models {

namespace {

constexpr int64_t kIgnore = -100;

// The index of the key of keys[W, 3] nearest (squared distance) to q[3].
int64_t nearest_key(const double* keys, int64_t W, const double* q) {
  int64_t best = 0;
  double best_d = 1e300;
  for (int64_t i = 0; i < W; ++i) {
    double d = 0;
    for (int a = 0; a < 3; ++a) d += (q[a] - keys[i * 3 + a]) * (q[a] - keys[i * 3 + a]);
    if (d < best_d) best_d = d, best = i;
  }
  return best;
}

// out[3] = key[3] + N(0, noise^2) per axis, clamped to [-1, 1].
void noisy_copy(const double* key, double noise, Generator& gen, double* out) {
  for (int a = 0; a < 3; ++a) out[a] = std::clamp(key[a] + noise * gen.normal(), -1.0, 1.0);
}

// A hidden 8x8 Bernoulli(0.5) map.
void random_map(int (&grid)[8][8], Generator& gen) {
  for (auto& row : grid)
    for (int& v : row) v = gen.uniform() < 0.5;
}

// One map observation token x[7]: the 2x2 patch at a random window, its
// (row/8, col/8), 0; marks the patch's cells as seen.
void observe(const int (&grid)[8][8], bool (&seen)[8][8], Generator& gen, double* x) {
  int r = static_cast<int>(gen.randint(7)), cc = static_cast<int>(gen.randint(7));
  for (int dr = 0; dr < 2; ++dr)
    for (int dc = 0; dc < 2; ++dc) {
      x[dr * 2 + dc] = grid[r + dr][cc + dc];
      seen[r + dr][cc + dc] = true;
    }
  x[4] = r / 8.0;
  x[5] = cc / 8.0;
}

// k distinct values of 0..n-1 in random order (a partial Fisher-Yates shuffle).
std::vector<int64_t> distinct(int64_t n, int64_t k, Generator& gen) {
  std::vector<int64_t> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = i;
  for (int64_t i = 0; i < k; ++i) std::swap(v[i], v[i + gen.randint(n - i)]);
  v.resize(k);
  return v;
}

// coord-binding and coord-recall: W writes (key in [-1,1]^3, value id), then
// `distractors` writes marked as such (ids kValues + 1 + value), then
// `queries` queries (id kValues) of a written key + noise; target: the value
// of the nearest written key. Distractor ids exist only in the segmented
// task's vocabulary.
class CoordTask : public Task {
 public:
  CoordTask(const TaskConfig& c, int64_t distractors, int64_t queries, int64_t segment)
      : c_(c), distractors_(distractors), queries_(queries), segment_(segment) {}
  int64_t feature_dim() const override { return 3; }
  int64_t vocab() const override { return kValues + 1 + (segment_ > 0 ? kValues : 0); }
  int64_t classes() const override { return kValues; }
  int64_t seq_len() const override { return c_.W + distractors_ + queries_; }
  int64_t segment() const override { return segment_; }

  TaskBatch sample_batch(int64_t B, Generator& gen) const override {
    const int64_t W = c_.W, T = seq_len(), Q = W + distractors_;
    std::vector<double> keys(B * T * 3);
    std::vector<int64_t> ids(B * T, kValues), targets(B * T, kIgnore);
    for (int64_t b = 0; b < B; ++b) {
      double* k = keys.data() + b * T * 3;
      for (int64_t i = 0; i < Q; ++i) {
        for (int a = 0; a < 3; ++a) k[i * 3 + a] = -1.0 + 2.0 * gen.uniform();
        ids[b * T + i] = gen.randint(kValues) + (i < W ? 0 : kValues + 1);
      }
      for (int64_t q = Q; q < T; ++q) {
        noisy_copy(k + gen.randint(W) * 3, c_.noise, gen, k + q * 3);
        targets[b * T + q] = ids[b * T + nearest_key(k, W, k + q * 3)];
      }
    }
    return {tensor(keys, {B, T, 3}), tensor_int(ids, {B, T}), tensor_int(targets, {B, T}), Tensor()};
  }

  static constexpr int64_t kValues = 32;

 private:
  TaskConfig c_;
  int64_t distractors_, queries_, segment_;
};

class MapBuilding : public Task {
 public:
  explicit MapBuilding(const TaskConfig& c) : c_(c) {
    check<ValueError>(c.T >= 1, "map-building: expected T >= 1, but got ", c.T);
  }
  int64_t feature_dim() const override { return 7; }
  int64_t vocab() const override { return 0; }
  int64_t classes() const override { return 2; }
  int64_t seq_len() const override { return c_.T + 1; }
  int64_t default_dim() const override { return 96; }

  TaskBatch sample_batch(int64_t B, Generator& gen) const override {
    const int64_t T = seq_len();
    std::vector<double> f(B * T * 7, 0.0);
    std::vector<int64_t> targets(B * T, kIgnore), observed(B * T, 0);
    for (int64_t b = 0; b < B; ++b) {
      int grid[8][8];
      bool seen[8][8] = {};
      random_map(grid, gen);
      for (int64_t t = 0; t < c_.T; ++t) {
        observe(grid, seen, gen, f.data() + (b * T + t) * 7);
      }
      int qr = static_cast<int>(gen.randint(8)), qc = static_cast<int>(gen.randint(8));
      double* q = f.data() + (b * T + c_.T) * 7;
      q[4] = qr / 8.0;
      q[5] = qc / 8.0;
      q[6] = 1.0;
      targets[b * T + c_.T] = grid[qr][qc];
      observed[b * T + c_.T] = seen[qr][qc];
    }
    return {tensor(f, {B, T, 7}), Tensor(), tensor_int(targets, {B, T}), tensor_int(observed, {B, T})};
  }

 private:
  TaskConfig c_;
};

class Occlusion : public Task {
 public:
  Occlusion(const TaskConfig& c, bool final_hidden) : c_(c), final_hidden_(final_hidden) {
    check<ValueError>(c.L >= 0 && c.L < kFrames, "occlusion: expected 0 <= L < ", kFrames, ", but got ", c.L);
  }
  int64_t feature_dim() const override { return 19; }
  int64_t vocab() const override { return 0; }
  int64_t classes() const override { return 4; }
  int64_t seq_len() const override { return kFrames * 16; }
  int64_t default_chunk() const override { return 16; }
  int64_t default_dim() const override { return 96; }

  TaskBatch sample_batch(int64_t B, Generator& gen) const override {
    const int64_t T = seq_len();
    std::vector<double> f(B * T * 19, 0.0);
    std::vector<int64_t> targets(B * T, kIgnore);
    // Hidden frames: the last L (final_hidden), or the L before the last.
    const int64_t hide_end = final_hidden_ ? kFrames : kFrames - 1;
    const int64_t hide_begin = hide_end - c_.L;
    for (int64_t b = 0; b < B; ++b) {
      int x = static_cast<int>(gen.randint(16)), y = static_cast<int>(gen.randint(16));
      int vx, vy;
      do {
        vx = static_cast<int>(gen.randint(3)) - 1;
        vy = static_cast<int>(gen.randint(3)) - 1;
      } while (vx == 0 && vy == 0);
      for (int64_t fr = 0; fr < kFrames; ++fr) {
        const bool hidden = fr >= hide_begin && fr < hide_end;
        for (int p = 0; p < 16; ++p) {
          double* tok = f.data() + (b * T + fr * 16 + p) * 19;
          tok[16] = fr / 8.0;
          tok[17] = (p / 4) / 4.0;
          tok[18] = (p % 4) / 4.0;
        }
        if (!hidden)
          for (int dy = 0; dy < 2; ++dy)
            for (int dx = 0; dx < 2; ++dx) {
              int px = (x + dx) % 16, py = (y + dy) % 16;
              int patch = (py / 4) * 4 + px / 4;
              f[(b * T + fr * 16 + patch) * 19 + (py % 4) * 4 + px % 4] = 1.0;
            }
        if (fr + 1 < kFrames) {
          x = (x + vx + 16) % 16;
          y = (y + vy + 16) % 16;
        }
      }
      targets[b * T + T - 1] = (y >= 8) * 2 + (x >= 8);
    }
    return {tensor(f, {B, T, 19}), Tensor(), tensor_int(targets, {B, T}), Tensor()};
  }

  static constexpr int64_t kFrames = 8;

 private:
  TaskConfig c_;
  bool final_hidden_;
};

class NoHarm : public Task {
 public:
  explicit NoHarm(const TaskConfig& c) : c_(c) {
    check<ValueError>(c.length >= 2, "no-harm: expected length >= 2, but got ", c.length);
  }
  int64_t feature_dim() const override { return 0; }
  int64_t vocab() const override { return 16; }
  int64_t classes() const override { return 16; }
  int64_t seq_len() const override { return c_.length; }

  TaskBatch sample_batch(int64_t B, Generator& gen) const override {
    const int64_t T = seq_len();
    std::vector<int64_t> ids(B * T), targets(B * T, kIgnore);
    for (int64_t b = 0; b < B; ++b) {
      int64_t s = gen.randint(16);
      for (int64_t t = 0; t < T; ++t) {
        ids[b * T + t] = s;
        s = (s + 1) % 16;
        if (t + 1 < T) targets[b * T + t] = s;
      }
    }
    return {Tensor(), tensor_int(ids, {B, T}), tensor_int(targets, {B, T}), Tensor()};
  }

 private:
  TaskConfig c_;
};

// mqar: pairs (key id + one-hot value) in the first P/16 segments, G
// distractor segments of pairs with keys from the second id range, then 16
// queries (key id + flag) of distinct written keys.
class Mqar : public Task {
 public:
  explicit Mqar(const TaskConfig& c) : c_(c) {
    check<ValueError>(c.P >= kSegment && c.P <= kKeys && c.P % kSegment == 0 && c.G >= 0,
                      "mqar: expected P a multiple of ", kSegment, " in [", kSegment, ", ", kKeys,
                      "] and G >= 0, but got P ", c.P, " G ", c.G);
  }
  int64_t feature_dim() const override { return kValues + 1; }
  int64_t vocab() const override { return 2 * kKeys; }
  int64_t classes() const override { return kValues; }
  int64_t seq_len() const override { return c_.P + kSegment * (c_.G + 1); }
  int64_t segment() const override { return kSegment; }

  TaskBatch sample_batch(int64_t B, Generator& gen) const override {
    const int64_t T = seq_len(), F = feature_dim(), Q = T - kSegment;
    std::vector<double> f(B * T * F, 0.0);
    std::vector<int64_t> ids(B * T), targets(B * T, kIgnore);
    for (int64_t b = 0; b < B; ++b) {
      std::vector<int64_t> keys = distinct(kKeys, c_.P, gen), values(c_.P);
      for (int64_t t = 0; t < Q; ++t) {
        const bool pair = t < c_.P;
        const int64_t v = gen.randint(kValues);
        if (pair) values[t] = v;
        ids[b * T + t] = pair ? keys[t] : kKeys + gen.randint(kKeys);
        f[(b * T + t) * F + v] = 1.0;
      }
      const std::vector<int64_t> asked = distinct(c_.P, kSegment, gen);
      for (int64_t q = 0; q < kSegment; ++q) {
        ids[b * T + Q + q] = keys[asked[q]];
        f[(b * T + Q + q) * F + kValues] = 1.0;
        targets[b * T + Q + q] = values[asked[q]];
      }
    }
    return {tensor(f, {B, T, F}), tensor_int(ids, {B, T}), tensor_int(targets, {B, T}), Tensor()};
  }

  static constexpr int64_t kKeys = 256, kValues = 64;

 private:
  TaskConfig c_;
};

class MapRecall : public Task {
 public:
  explicit MapRecall(const TaskConfig& c) : c_(c) {
    check<ValueError>(c.T >= kSegment && c.T % kSegment == 0,
                      "map-recall: expected T a positive multiple of ", kSegment, ", but got ", c.T);
  }
  int64_t feature_dim() const override { return 7; }
  int64_t vocab() const override { return 0; }
  int64_t classes() const override { return 2; }
  int64_t seq_len() const override { return c_.T + kSegment; }
  int64_t segment() const override { return kSegment; }

  TaskBatch sample_batch(int64_t B, Generator& gen) const override {
    const int64_t T = seq_len();
    std::vector<double> f(B * T * 7, 0.0);
    std::vector<int64_t> targets(B * T, kIgnore), observed(B * T, 0);
    for (int64_t b = 0; b < B; ++b) {
      int grid[8][8];
      bool seen[8][8] = {};
      random_map(grid, gen);
      for (int64_t t = 0; t < c_.T; ++t) observe(grid, seen, gen, f.data() + (b * T + t) * 7);
      const std::vector<int64_t> cells = distinct(64, kSegment, gen);
      for (int64_t q = 0; q < kSegment; ++q) {
        const int64_t r = cells[q] / 8, cc = cells[q] % 8, t = c_.T + q;
        double* x = f.data() + (b * T + t) * 7;
        x[4] = r / 8.0;
        x[5] = cc / 8.0;
        x[6] = 1.0;
        targets[b * T + t] = grid[r][cc];
        observed[b * T + t] = seen[r][cc];
      }
    }
    return {tensor(f, {B, T, 7}), Tensor(), tensor_int(targets, {B, T}), tensor_int(observed, {B, T})};
  }

 private:
  TaskConfig c_;
};

// Throws ValueError naming `task` when a count it may read is above
// kMaxTaskSize (Python passes any int: G = 2^62 wrapped the sequence length).
void check_sizes(const TaskConfig& c, const char* task) {
  for (const auto& [name, value] : {std::pair<const char*, int64_t>{"W", c.W}, {"queries", c.queries}, {"T", c.T},
                                    {"length", c.length}, {"G", c.G}})
    check<ValueError>(value <= kMaxTaskSize, task, ": expected ", name, " <= ", kMaxTaskSize, ", but got ", value);
}

}  // namespace

TaskBatch Task::sample(int64_t B, Generator& gen) const {
  check<ValueError>(B >= 1 && B <= kMaxTaskSize, "sample: expected a batch of 1 to ", kMaxTaskSize,
                    " sequences, but got ", B);
  return sample_batch(B, gen);
}

std::unique_ptr<Task> make_coord_binding(const TaskConfig& c) {
  check_sizes(c, "coord-binding");
  check<ValueError>(c.W >= 1 && c.queries >= 1 && c.noise >= 0,
                    "coord-binding: expected W >= 1, queries >= 1 and noise >= 0, but got W ", c.W, " queries ",
                    c.queries, " noise ", c.noise);
  return std::make_unique<CoordTask>(c, 0, c.queries, 0);
}
std::unique_ptr<Task> make_map_building(const TaskConfig& c) {
  check_sizes(c, "map-building");
  return std::make_unique<MapBuilding>(c);
}
std::unique_ptr<Task> make_occlusion(const TaskConfig& c, bool final_hidden) {
  check_sizes(c, final_hidden ? "occlusion" : "occlusion-visible");
  return std::make_unique<Occlusion>(c, final_hidden);
}
std::unique_ptr<Task> make_no_harm(const TaskConfig& c) {
  check_sizes(c, "no-harm");
  return std::make_unique<NoHarm>(c);
}
std::unique_ptr<Task> make_mqar(const TaskConfig& c) {
  check_sizes(c, "mqar");
  return std::make_unique<Mqar>(c);
}
std::unique_ptr<Task> make_map_recall(const TaskConfig& c) {
  check_sizes(c, "map-recall");
  return std::make_unique<MapRecall>(c);
}
std::unique_ptr<Task> make_coord_recall(const TaskConfig& c) {
  check_sizes(c, "coord-recall");
  check<ValueError>(c.W >= kSegment && c.W % kSegment == 0 && c.G >= 0 && c.noise >= 0,
                    "coord-recall: expected W a positive multiple of ", kSegment, ", G >= 0 and noise >= 0, but got W ",
                    c.W, " G ", c.G, " noise ", c.noise);
  return std::make_unique<CoordTask>(c, kSegment * c.G, kSegment, kSegment);
}

const std::vector<std::string>& task_parameters(const std::string& name) {
  static const std::map<std::string, std::vector<std::string>> read = {
      {"coord-binding", {"W", "noise", "queries"}}, {"map-building", {"T"}}, {"occlusion", {"L"}},
      {"occlusion-visible", {"L"}}, {"no-harm", {"length"}}, {"mqar", {"P", "G"}}, {"map-recall", {"T"}},
      {"coord-recall", {"W", "noise", "G"}}};
  const auto it = read.find(name);
  if (it == read.end()) {
    make_task(name, TaskConfig());  // throws the unknown-task error
    throw Error("task_parameters: task \"" + name + "\" has no entry");
  }
  return it->second;
}

bool is_segmented_task(const std::string& name) {
  return name == "mqar" || name == "map-recall" || name == "coord-recall";
}

std::unique_ptr<Task> make_task(const std::string& name, const TaskConfig& c) {
  if (name == "coord-binding") return make_coord_binding(c);
  if (name == "map-building") return make_map_building(c);
  if (name == "occlusion") return make_occlusion(c, true);
  if (name == "occlusion-visible") return make_occlusion(c, false);
  if (name == "no-harm") return make_no_harm(c);
  if (name == "mqar") return make_mqar(c);
  if (name == "map-recall") return make_map_recall(c);
  if (name == "coord-recall") return make_coord_recall(c);
  throw ValueError("unknown task \"" + printable(name) +
                   "\" (expected coord-binding, map-building, occlusion, occlusion-visible, no-harm, mqar, "
                   "map-recall or coord-recall)");
}

}  // namespace tmem::models
