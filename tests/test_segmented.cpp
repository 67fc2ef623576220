// The segment-recurrent comparison (docs/DESIGN.md §9): the segmented tasks, the
// state each method carries, causality, gradient flow across segments, and
// the `none` floor at chance.
#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "tmem/models/diagnostic.h"
#include "tmem/models/trainer.h"
#include "test_util.h"

using namespace tmem;
using namespace tmem::models;

namespace {

// A small model config of `method` on a segmented task: d = 16, 2 layers, 2
// heads, small state sizes.
BackboneConfig small_config(BackboneMethod method) {
  BackboneConfig b;
  b.method = method;
  b.dim = 16;
  b.layers = 2;
  b.heads = 2;
  b.cache_len = 20;
  b.linear_features = 3;
  b.ssm_state = 5;
  b.memory_tokens = 3;
  b.memory.channels = 2;
  b.memory.D = b.memory.H = b.memory.W = 3;
  b.memory.chunk = 1;
  return b;
}

TaskConfig small_mqar() {
  TaskConfig t;
  t.P = 16;
  t.G = 1;
  return t;
}

}  // namespace

TEST_CASE("task_parameters: a task reads exactly the fields it lists") {
  // Each field set to another valid value changes the batches of a task that
  // reads it and of no other: the list tmem train and frontier refuse
  // ignored options by.
  const std::vector<std::pair<std::string, std::function<void(TaskConfig&)>>> fields = {
      {"W", [](TaskConfig& c) { c.W = 48; }},         {"noise", [](TaskConfig& c) { c.noise = 0.3; }},
      {"queries", [](TaskConfig& c) { c.queries = 7; }}, {"T", [](TaskConfig& c) { c.T = 48; }},
      {"L", [](TaskConfig& c) { c.L = 4; }},           {"length", [](TaskConfig& c) { c.length = 24; }},
      {"P", [](TaskConfig& c) { c.P = 32; }},          {"G", [](TaskConfig& c) { c.G = 2; }}};
  auto batch = [](const std::string& task, const TaskConfig& c) {
    Generator gen(7);
    const TaskBatch b = make_task(task, c)->sample(2, gen);
    std::vector<double> all;
    for (const Tensor& t : {b.features, b.ids, b.targets, b.observed})
      if (t.defined())
        for (double x : t.to_vector()) all.push_back(x);
    return all;
  };
  for (const std::string task : {"coord-binding", "map-building", "occlusion", "occlusion-visible", "no-harm", "mqar",
                                 "map-recall", "coord-recall"}) {
    TaskConfig base;
    if (task == "coord-recall") base.W = 32;
    if (task == "map-recall") base.T = 64;
    const std::vector<double> before = batch(task, base);
    const std::vector<std::string>& read = task_parameters(task);
    for (const auto& entry : fields) {
      const std::string& field = entry.first;
      CAPTURE(task);
      CAPTURE(field);
      TaskConfig changed = base;
      entry.second(changed);
      const bool reads = std::find(read.begin(), read.end(), field) != read.end();
      CHECK((batch(task, changed) != before) == reads);
    }
  }
  CHECK_THROWS_WITH_AS(task_parameters("mqr"), doctest::Contains("unknown task \"mqr\""), ValueError);
}

TEST_CASE("mqar: pairs then distractors then queries, each target the value written with the queried key") {
  TaskConfig t = small_mqar();
  t.P = 32;
  auto task = make_mqar(t);
  CHECK(task->seq_len() == 32 + 16 + 16);
  CHECK(task->segment() == 16);
  Generator gen(3);
  TaskBatch b = task->sample(5, gen);
  const int64_t T = task->seq_len(), F = task->feature_dim();
  auto f = b.features.to_vector();
  auto ids = b.ids.to_int_vector(), tg = b.targets.to_int_vector();
  for (int64_t s = 0; s < 5; ++s) {
    std::map<int64_t, int64_t> written;
    std::set<int64_t> asked;
    for (int64_t t0 = 0; t0 < T; ++t0) {
      const int64_t i = s * T + t0, id = ids[i];
      int64_t value = -1, ones = 0;
      for (int64_t v = 0; v < 64; ++v)
        if (f[i * F + v] == 1.0) value = v, ++ones;
      if (t0 < 32) {
        REQUIRE(ones == 1);
        REQUIRE(id < 256);
        CHECK(written.count(id) == 0);  // keys drawn without replacement
        written[id] = value;
        CHECK(tg[i] == -100);
      } else if (t0 < 48) {
        CHECK(ones == 1);
        CHECK(id >= 256);  // distractor keys come from the other range
        CHECK(tg[i] == -100);
      } else {
        CHECK(ones == 0);
        CHECK(f[i * F + 64] == 1.0);
        REQUIRE(written.count(id) == 1);
        CHECK(tg[i] == written[id]);
        asked.insert(id);
      }
    }
    CHECK(asked.size() == 16);  // 16 distinct keys
  }
  t.P = 24;
  CHECK_THROWS_AS(make_mqar(t), ValueError);
  t.P = 272;
  CHECK_THROWS_AS(make_mqar(t), ValueError);
}

TEST_CASE("coord-recall: distractor writes never answer a query") {
  TaskConfig t;
  t.W = 16;
  t.G = 2;
  t.noise = 0.0;
  auto task = make_coord_recall(t);
  CHECK(task->seq_len() == 16 + 32 + 16);
  Generator gen(5);
  TaskBatch b = task->sample(4, gen);
  const int64_t T = task->seq_len();
  auto k = b.features.to_vector();
  auto ids = b.ids.to_int_vector(), tg = b.targets.to_int_vector();
  for (int64_t s = 0; s < 4; ++s)
    for (int64_t q = 48; q < T; ++q) {
      const int64_t i = s * T + q;
      CHECK(ids[i] == 32);
      // noise 0: the query key is one of the 16 written keys exactly.
      int64_t match = -1;
      for (int64_t w = 0; w < 16; ++w)
        if (k[i * 3] == k[(s * T + w) * 3] && k[i * 3 + 1] == k[(s * T + w) * 3 + 1] &&
            k[i * 3 + 2] == k[(s * T + w) * 3 + 2])
          match = w;
      REQUIRE(match >= 0);
      CHECK(tg[i] == ids[s * T + match]);
    }
  for (int64_t s = 0; s < 4; ++s)
    for (int64_t d = 16; d < 48; ++d) CHECK(ids[s * T + d] >= 33);
}

TEST_CASE("map-recall: 16 distinct queried cells after T observations") {
  TaskConfig t;
  t.T = 32;
  auto task = make_map_recall(t);
  CHECK(task->seq_len() == 48);
  Generator gen(9);
  TaskBatch b = task->sample(3, gen);
  auto f = b.features.to_vector();
  auto tg = b.targets.to_int_vector(), obs = b.observed.to_int_vector();
  for (int64_t s = 0; s < 3; ++s) {
    std::set<std::pair<double, double>> cells;
    for (int64_t q = 32; q < 48; ++q) {
      const int64_t i = s * 48 + q;
      CHECK(f[i * 7 + 6] == 1.0);
      CHECK((tg[i] == 0 || tg[i] == 1));
      cells.insert({f[i * 7 + 4], f[i * 7 + 5]});
      // an observed cell's occupancy appears in an observation covering it
      if (obs[i]) {
        const int r = static_cast<int>(std::lround(f[i * 7 + 4] * 8)), c = static_cast<int>(std::lround(f[i * 7 + 5] * 8));
        bool found = false;
        for (int64_t o = 0; o < 32; ++o) {
          const double* x = &f[(s * 48 + o) * 7];
          const int r0 = static_cast<int>(std::lround(x[4] * 8)), c0 = static_cast<int>(std::lround(x[5] * 8));
          if (r >= r0 && r < r0 + 2 && c >= c0 && c < c0 + 2) {
            CHECK(x[(r - r0) * 2 + (c - c0)] == tg[i]);
            found = true;
          }
        }
        CHECK(found);
      }
    }
    CHECK(cells.size() == 16);
  }
  t.T = 40;
  CHECK_THROWS_AS(make_map_recall(t), ValueError);
}

TEST_CASE("segmented methods: the state carried equals state_floats, and none carries nothing") {
  auto task = make_mqar(small_mqar());  // 48 tokens: 3 segments
  Generator data(1);
  TaskBatch batch = task->sample(2, data);
  for (const auto& method : segmented_methods()) {
    INFO(to_string(method));
    BackboneConfig b = small_config(method);
    Generator gen(0);
    DiagnosticModel model(*task, b, gen);
    BackboneState state;
    Tensor logits = model.forward(batch, state);
    CHECK(logits.shape() == Shape{2, 48, 64});
    const int64_t carried = state.floats_per_sequence();
    if (method == BackboneMethod::none || method == BackboneMethod::full) {
      CHECK(carried == 0);
      continue;
    }
    CHECK(carried == state_floats(backbone_config_for(*task, b)));
  }
  // The formulas at the frontier's middle sizes (d = 64, 2 layers, 4 heads).
  BackboneConfig m = small_config(BackboneMethod::tensor);
  m.dim = 64;
  m.heads = 4;
  m.memory.channels = 16;
  m.memory.D = m.memory.H = m.memory.W = 4;
  CHECK(state_floats(m) == 2 * 2 * 16 * 64);
  m.method = BackboneMethod::ssm;
  m.ssm_state = 32;
  CHECK(state_floats(m) == 2 * 64 * 32);
  m.method = BackboneMethod::linear;
  m.linear_features = 32;
  CHECK(state_floats(m) == 2 * 4 * 32 * 17);
  m.method = BackboneMethod::rmt;
  m.memory_tokens = 32;
  CHECK(state_floats(m) == 32 * 64);
}

TEST_CASE("segmented methods are causal: changing a token changes no earlier output") {
  auto task = make_mqar(small_mqar());
  Generator data(2);
  TaskBatch batch = task->sample(2, data);
  for (const auto& method : segmented_methods()) {
    INFO(to_string(method));
    Generator gen(0);
    DiagnosticModel model(*task, small_config(method), gen);
    const std::vector<double> before = model.forward(batch).to_vector();
    for (int64_t p : {5, 16, 37}) {  // inside the first segment, a segment's first token, inside the third
      TaskBatch changed = batch;
      std::vector<int64_t> ids = batch.ids.to_int_vector();
      ids[p] = (ids[p] + 7) % 256;
      ids[48 + p] = (ids[48 + p] + 11) % 256;
      changed.ids = tensor_int(ids, {2, 48});
      const std::vector<double> after = model.forward(changed).to_vector();
      bool later_changed = false;
      for (int64_t s = 0; s < 2; ++s)
        for (int64_t t = 0; t < 48; ++t)
          for (int64_t v = 0; v < 64; ++v) {
            const size_t i = (s * 48 + t) * 64 + v;
            if (t < p) REQUIRE(after[i] == before[i]);
            else later_changed = later_changed || after[i] != before[i];
          }
      CHECK(later_changed);
    }
  }
}

TEST_CASE("segmented methods: gradients reach the first segment through the state, and none's do not") {
  auto task = make_mqar(small_mqar());
  Generator data(4);
  TaskBatch batch = task->sample(2, data);
  for (const auto& method : segmented_methods()) {
    INFO(to_string(method));
    Generator gen(0);
    DiagnosticModel model(*task, small_config(method), gen);
    TaskBatch b = batch;
    b.features = batch.features.detach().requires_grad_();
    Tensor logits = model.forward(b);
    // The loss on the query segment only (tokens 32..47).
    sum(slice(logits, 1, 32, 48)).backward();
    const std::vector<double> g = b.features.grad().to_vector();
    const int64_t F = task->feature_dim();
    double first = 0;  // |grad| over the first segment's features
    for (int64_t s = 0; s < 2; ++s)
      for (int64_t i = 0; i < 16 * F; ++i) first += std::abs(g[s * 48 * F + i]);
    if (method == BackboneMethod::none) CHECK(first == 0.0);
    else CHECK(first > 0.0);
  }
}

TEST_CASE("none trained briefly on each segmented task stays at chance (no leak across segments)") {
  struct Case {
    std::string task;
    double chance;
  };
  for (const Case& k : {Case{"mqar", 1.0 / 64}, Case{"coord-recall", 1.0 / 32}, Case{"map-recall", 0.5}}) {
    INFO(k.task);
    TrainConfig c;
    c.task = k.task;
    c.task_cfg = small_mqar();
    c.task_cfg.W = 16;
    c.task_cfg.T = 32;
    c.model = small_config(BackboneMethod::none);
    c.steps = 60;
    c.batch = 16;
    c.lr = 3e-3;
    c.eval_batches = 8;
    TrainResult r = train_diagnostic(c);
    // 8 x 16 sequences x 16 queries = 2048 queries: 4 standard errors of chance.
    const double n = 2048, tol = 4 * std::sqrt(k.chance * (1 - k.chance) / n);
    CHECK(std::abs(r.eval_accuracy - k.chance) < tol);
    CHECK(r.state_floats == 0);
  }
}

TEST_CASE("stop_accuracy ends training once the 100-step accuracy reaches it, and resume keeps the stop") {
  TrainConfig c;
  c.task = "no-harm";
  c.model.method = BackboneMethod::base;
  c.model.dim = 16;
  c.model.layers = 1;
  c.model.heads = 2;
  c.steps = 3000;
  c.batch = 8;
  c.lr = 3e-3;
  c.eval_batches = 1;
  c.stop_accuracy = 0.9;
  c.run_dir = test::tmp_path("tmem-stop-accuracy");
  std::filesystem::remove_all(c.run_dir);
  TrainResult r = train_diagnostic(c);
  REQUIRE(r.stopped_at >= 100);
  CHECK(r.stopped_at < 3000);
  CHECK(static_cast<int64_t>(r.losses.size()) == r.stopped_at);
  CHECK(r.train_accuracy >= 0.9);
  c.resume = true;
  TrainResult again = train_diagnostic(c);
  CHECK(again.stopped_at == r.stopped_at);
  CHECK(again.losses.size() == r.losses.size());
  c.stop_accuracy = 1.5;
  CHECK_THROWS_AS(train_diagnostic(c), ValueError);
  std::filesystem::remove_all(c.run_dir);
}

TEST_CASE("rmt refuses a max_len with no room for a segment beside its memory tokens") {
  BackboneConfig b = small_config(BackboneMethod::rmt);
  b.max_len = 16;
  b.memory_tokens = 8;
  Generator gen(0);
  CHECK_THROWS_WITH_AS(Backbone(b, gen),
                       "Backbone: rmt's 2 x 8 memory tokens leave no room for a segment in max_len 16 (expected "
                       "max_len > 2 memory_tokens)",
                       ValueError);
  b.memory_tokens = 7;
  CHECK(Backbone(b, gen).forward(zeros({1, 2, 16})).shape() == Shape{1, 2, 16});
}

TEST_CASE("segmented tasks take only the segmented methods, and the diagnostics not them") {
  auto task = make_mqar(small_mqar());
  Generator gen(0);
  CHECK_THROWS_WITH_AS(DiagnosticModel(*task, small_config(BackboneMethod::base), gen),
                       doctest::Contains("none, full, xl, linear, ssm, rmt or tensor, but got \"base\""), ValueError);
  TaskConfig t;
  auto binding = make_coord_binding(t);
  CHECK_THROWS_AS(DiagnosticModel(*binding, small_config(BackboneMethod::none), gen), ValueError);
}
