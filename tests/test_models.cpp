// Diagnostic models: causality of every backbone (and the leaky-memory
// ablation failing it), bit-exact resume, config validation.
#include <algorithm>
#include <filesystem>
#include <limits>
#include <map>

#include "tmem/models/diagnostic.h"
#include "tmem/models/trainer.h"
#include "test_util.h"

using namespace tmem;
using namespace tmem::models;

namespace {

BackboneConfig tiny(BackboneMethod method, bool leaky = false) {
  BackboneConfig c;
  c.method = method;
  c.dim = 16;
  c.layers = 2;
  c.heads = 2;
  c.max_len = 16;
  c.memory.channels = 4;
  c.memory.D = c.memory.H = c.memory.W = 3;
  c.leaky_memory = leaky;
  return c;
}

// A short coord-binding run (W=5, 2 queries, 1 eval batch) of the tiny backbone.
TrainConfig tiny_run(BackboneMethod method, int64_t steps, int64_t batch) {
  TrainConfig c;
  c.model = tiny(method);
  c.task_cfg.W = 5;
  c.task_cfg.queries = 2;
  c.batch = batch;
  c.eval_batches = 1;
  c.steps = steps;
  return c;
}

// Largest |change| of the backbone output at positions < t when the input at
// position t changes.
double change_before(const BackboneConfig& cfg, int64_t t, int64_t chunk = 1) {
  BackboneConfig c = cfg;
  c.memory.chunk = chunk;
  Generator gen(11);
  Backbone model(c, gen);
  NoGradGuard no_grad;
  Tensor x = randn({2, 10, c.dim}, 0, 1, DType::Float32, gen);
  Tensor y1 = model.forward(x);
  Tensor x2 = contiguous_data(x);
  Tensor row = make_view(x2, {2, c.dim}, {x2.strides()[0], 1}, t * x2.strides()[1]);
  copy_data(row, randn({2, c.dim}, 0, 1, DType::Float32, gen));
  Tensor y2 = model.forward(x2);
  Tensor diff = abs(slice(y1, 1, 0, t) - slice(y2, 1, 0, t));
  double after = max(abs(slice(y1, 1, t, 10) - slice(y2, 1, t, 10))).item();
  CHECK(after > 0);  // the change is visible from t on
  return max(diff).item();
}

}  // namespace

TEST_CASE("causality: changing token t changes no output before t (base, base_wide, slots, tensor)") {
  for (const auto m : {BackboneMethod::base, BackboneMethod::base_wide, BackboneMethod::slots, BackboneMethod::tensor})
    for (int64_t t : {1, 4, 9}) {
      INFO(to_string(m) << " t=" << t);
      CHECK(change_before(tiny(m), t) == 0.0);
    }
  INFO("tensor with chunk 2: tokens see only earlier chunks through memory");
  CHECK(change_before(tiny(BackboneMethod::tensor), 4, 2) == 0.0);
}

TEST_CASE("causality holds for the ablation variants (hard write, pointwise only, separate coords)") {
  BackboneConfig c = tiny(BackboneMethod::tensor);
  c.memory.hard_write = true;
  c.memory.factorized = false;
  c.memory.shared_coords = false;
  CHECK(change_before(c, 5) == 0.0);
}

TEST_CASE("ablation variants: pointwise-only has no depthwise parameters - hard write lights one cell") {
  Generator gen(2);
  nn::TensorMemoryOptions o;
  o.channels = 4;
  o.D = o.H = o.W = 5;
  nn::TensorMemory full(8, o, gen);
  o.factorized = false;
  nn::TensorMemory pointwise(8, o, gen);
  CHECK(full.num_parameters() - pointwise.num_parameters() == 3 * 8 * (3 + 1));  // 3 axes x Cz=8 x (3 taps + bias)
  Tensor onehot = pointwise.nearest_cell(tensor({-1, 1, 0.1, 0.49, -0.51, 0.0}, {2, 3}));
  auto v = onehot.to_vector();
  CHECK(sum(onehot).item() == 2.0);
  CHECK(v[(0 * 5 + 2) * 25 + 4 * 5 + 0] == 1.0);          // x=-1 -> 0, y=1 -> 4, z=0.1 -> 2
  CHECK(v[125 + (2 * 5 + 1) * 5 + 3] == 1.0);             // x=0.49 -> 3, y=-0.51 -> 1, z=0 -> 2
}

TEST_CASE("Backbone: block parameters keep their checkpoint names blocks.<l>.*, in registration order") {
  // The blocks sit in a ModuleList "blocks" (a module name has no '.'); the
  // names and order are those of checkpoints written before.
  Generator gen(3);
  Backbone model(tiny(BackboneMethod::tensor), gen);
  const nn::NamedTensors named = model.named_parameters();
  REQUIRE(named.size() > 4);
  CHECK(named.front().first == "pos");
  CHECK(named[1].first.rfind("blocks.0.", 0) == 0);
  CHECK(named[named.size() - 2].first == "ln_f.weight");
  CHECK(named.back().first == "ln_f.bias");
  const nn::NamedTensors second = model.blocks()[1]->named_parameters();
  auto at = std::find_if(named.begin(), named.end(), [](const auto& e) { return e.first.rfind("blocks.1.", 0) == 0; });
  REQUIRE(at != named.end());
  CHECK(at->first == "blocks.1." + second.front().first);
  CHECK(at->second.impl_ptr() == second.front().second.impl_ptr());
  CHECK(std::all_of(named.begin() + 1, at, [](const auto& e) { return e.first.rfind("blocks.0.", 0) == 0; }));
}

TEST_CASE("Backbone refuses a memory chunk above max_len, before sizing the write projection for it") {
  Generator gen(3);
  for (BackboneMethod method : {BackboneMethod::tensor, BackboneMethod::slots}) {
    BackboneConfig c = tiny(method);
    c.memory.chunk = c.max_len + 1;
    const std::string message = "expected the memory chunk <= max_len " + std::to_string(c.max_len) +
                                " (the most tokens a forward takes), but got chunk " + std::to_string(c.max_len + 1);
    CHECK_THROWS_WITH_AS(Backbone(c, gen), doctest::Contains(message.c_str()), ValueError);
    c.memory.chunk = c.max_len;
    CHECK_NOTHROW(Backbone(c, gen));
  }
  BackboneConfig base = tiny(BackboneMethod::base);
  base.memory.chunk = base.max_len + 1;  // no memory reads it
  CHECK_NOTHROW(Backbone(base, gen));
}

TEST_CASE("causality check has teeth: --leaky-memory lets tokens read later writes") {
  CHECK(change_before(tiny(BackboneMethod::tensor, /*leaky=*/true), 6) > 1e-6);
}

TEST_CASE("coord-binding batches: targets are the value of the nearest written key") {
  Generator gen(5);
  TaskConfig tc;
  tc.W = 5;
  tc.queries = 2;
  tc.noise = 0.0;
  auto task = make_task("coord-binding", tc);
  TaskBatch b = task->sample(3, gen);
  CHECK(b.features.shape() == Shape{3, 7, 3});
  auto keys = b.features.to_vector();
  auto ids = b.ids.to_int_vector(), tg = b.targets.to_int_vector();
  for (int64_t s = 0; s < 3; ++s)
    for (int64_t q = 5; q < 7; ++q) {
      CHECK(ids[s * 7 + q] == 32);
      bool found = false;  // with noise 0 the query key equals a written key
      for (int64_t i = 0; i < 5; ++i) {
        bool same = true;
        for (int a = 0; a < 3; ++a) same = same && keys[(s * 7 + q) * 3 + a] == keys[(s * 7 + i) * 3 + a];
        if (same && ids[s * 7 + i] == tg[s * 7 + q]) found = true;
      }
      CHECK(found);
    }
  CHECK(tg[0] == -100);
  tc.W = 0;
  CHECK_THROWS_AS(make_task("coord-binding", tc), ValueError);
  CHECK_THROWS_WITH_AS(make_task("coord-bind", TaskConfig{}), doctest::Contains("coord-bind"), ValueError);
}

TEST_CASE("map-building: the query asks one cell - observed marks cells some patch covered") {
  Generator gen(8);
  TaskConfig tc;
  tc.T = 64;
  auto task = make_task("map-building", tc);
  TaskBatch b = task->sample(50, gen);
  CHECK(b.features.shape() == Shape{50, 65, 7});
  auto f = b.features.to_vector();
  auto tg = b.targets.to_int_vector(), obs = b.observed.to_int_vector();
  int64_t consistent = 0, observed = 0;
  for (int64_t s = 0; s < 50; ++s) {
    const double* q = f.data() + (s * 65 + 64) * 7;
    CHECK(q[6] == 1.0);
    int qr = static_cast<int>(q[4] * 8 + 0.5), qc = static_cast<int>(q[5] * 8 + 0.5);
    bool seen = false;
    for (int64_t t = 0; t < 64; ++t) {
      const double* x = f.data() + (s * 65 + t) * 7;
      int r = static_cast<int>(x[4] * 8 + 0.5), c = static_cast<int>(x[5] * 8 + 0.5);
      if (qr >= r && qr < r + 2 && qc >= c && qc < c + 2) {
        seen = true;
        consistent += x[(qr - r) * 2 + (qc - c)] == static_cast<double>(tg[s * 65 + 64]);
      }
    }
    CHECK(obs[s * 65 + 64] == static_cast<int64_t>(seen));
    observed += seen;
  }
  CHECK(observed > 25);  // 64 random 2x2 patches cover most of an 8x8 grid
  CHECK(consistent > 0);
}

TEST_CASE("occlusion: the ball moves with constant velocity and is hidden in the last L frames") {
  Generator gen(9);
  TaskConfig tc;
  tc.L = 2;
  for (bool final_hidden : {true, false}) {
    auto task = make_task(final_hidden ? "occlusion" : "occlusion-visible", tc);
    TaskBatch b = task->sample(4, gen);
    CHECK(b.features.shape() == Shape{4, 128, 19});
    auto f = b.features.to_vector();
    for (int64_t s = 0; s < 4; ++s) {
      int pixels[8] = {};
      for (int64_t t = 0; t < 128; ++t)
        for (int k = 0; k < 16; ++k) pixels[t / 16] += f[(s * 128 + t) * 19 + k] > 0.5;
      for (int fr = 0; fr < 8; ++fr) {
        bool hidden = final_hidden ? fr >= 6 : (fr >= 5 && fr < 7);
        CHECK(pixels[fr] == (hidden ? 0 : 4));
      }
      int64_t target = b.targets.to_int_vector()[s * 128 + 127];
      CHECK((target >= 0 && target < 4));
    }
  }
}

TEST_CASE("no-harm: next token is (s + 1) mod 16") {
  Generator gen(1);
  auto task = make_task("no-harm", TaskConfig{});
  TaskBatch b = task->sample(2, gen);
  auto ids = b.ids.to_int_vector(), tg = b.targets.to_int_vector();
  for (int64_t t = 0; t + 1 < 32; ++t) CHECK(tg[t] == (ids[t] + 1) % 16);
  CHECK(tg[31] == -100);
}

TEST_CASE("resume is bit-exact: 6 steps + resume to 12 equals 12 uninterrupted steps") {
  namespace fs = std::filesystem;
  TrainConfig c = tiny_run(BackboneMethod::tensor, 12, 4);
  c.run_dir = (fs::temp_directory_path() / "tmem_resume_full").string();
  fs::remove_all(c.run_dir);
  TrainResult full = train_diagnostic(c);

  TrainConfig half = c;
  half.run_dir = (fs::temp_directory_path() / "tmem_resume_half").string();
  fs::remove_all(half.run_dir);
  half.steps = 6;
  TrainResult first = train_diagnostic(half);
  half.steps = 12;
  half.resume = true;
  TrainResult second = train_diagnostic(half);
  CHECK(second.start_step == 6);
  REQUIRE(first.losses.size() == 6);
  REQUIRE(second.losses.size() == full.losses.size());  // the losses before the resume come from the checkpoint
  for (size_t i = 0; i < full.losses.size(); ++i) CHECK(second.losses[i] == full.losses[i]);
  for (size_t i = 0; i < first.losses.size(); ++i) CHECK(first.losses[i] == full.losses[i]);
  CHECK(second.eval_accuracy == full.eval_accuracy);
  CHECK(second.seconds > first.seconds);  // the time before the resume is counted
  TrainResult again = train_diagnostic(half);  // resumed at its last step: nothing to train
  CHECK(again.start_step == 12);
  CHECK(again.seconds >= second.seconds);

  TrainConfig other = half;  // a checkpoint continues only the run that wrote it
  other.lr = 1e-3;
  other.task_cfg.W = 6;
  const std::string err = test::error_of<ValueError>([&] { train_diagnostic(other); });
  CHECK(err.find("written with another config") != std::string::npos);
  CHECK(err.find("lr: saved 0.0003, now 0.001") != std::string::npos);
  CHECK(err.find("W: saved 5, now 6") != std::string::npos);
  TrainConfig shorter = half;
  shorter.steps = 4;
  CHECK(test::error_of<ValueError>([&] { train_diagnostic(shorter); }).find("at step 12, past the 4 steps") !=
        std::string::npos);
  fs::remove_all(c.run_dir);
  fs::remove_all(half.run_dir);
}

TEST_CASE("the training curve holds the 100-step accuracy at every 100th step") {
  TrainConfig c = tiny_run(BackboneMethod::base, 250, 2);
  std::vector<double> at_progress;
  TrainResult r = train_diagnostic(c, [&](const TrainProgress& p) {
    if (p.step % 100 == 0) at_progress.push_back(p.accuracy);
  });
  REQUIRE(r.accuracy_curve.size() == 2);
  CHECK(r.accuracy_curve[0].first == 100);
  CHECK(r.accuracy_curve[1].first == 200);
  CHECK(r.accuracy_curve[0].second == at_progress[0]);
  CHECK(r.accuracy_curve[1].second == at_progress[1]);
}

TEST_CASE("config JSON: a cell records the keys its method reads, and a default config has every key") {
  using enum BackboneMethod;
  const nlohmann::json defaults = default_config_json();
  CHECK(defaults.at("method") == "tensor");
  CHECK(defaults.at("forget_bias") == 0.0);
  for (const BackboneMethod method : {base, base_wide, slots, tensor, linear, ssm, rmt, none, full, xl}) {
    INFO(to_string(method));
    TrainConfig c;
    c.model.method = method;
    const nlohmann::json j = config_to_json(c);
    CHECK(j.at("method") == to_string(method));
    for (const auto& [key, methods] : method_config_keys())
      CHECK(j.contains(key) == (std::find(methods.begin(), methods.end(), method) != methods.end()));
    for (const auto& [key, v] : j.items()) CHECK(defaults.contains(key));
  }
  CHECK(config_to_json(TrainConfig{}).contains("mem_grid"));
  CHECK_FALSE(config_to_json(TrainConfig{}).contains("ssm_state"));
  TrainConfig c;
  c.model.memory.forget_bias = 3;
  TrainConfig back;
  apply_config_json(back, config_to_json(c));
  CHECK(back.model.memory.forget_bias == 3.0);

  // An ssm cell matches a run that differs only in other methods' options...
  TrainConfig ssm_cell;
  ssm_cell.model.method = ssm;
  TrainConfig other = ssm_cell;
  other.model.memory.D = other.model.memory.H = other.model.memory.W = 8;
  other.model.memory.forget_bias = 3;
  other.model.linear_features = 32;
  CHECK(config_differences(config_to_json(ssm_cell), config_to_json(other), defaults).empty());
  // ...also as saved before the keys were left out, and not in its own.
  nlohmann::json saved = config_to_json(ssm_cell);
  saved.update(config_to_json(TrainConfig{}));
  saved["method"] = "ssm";
  saved["forget_bias"] = 3.0;
  CHECK(config_differences(saved, config_to_json(other), defaults).empty());
  other.model.ssm_state = 2 * ssm_cell.model.ssm_state;
  CHECK(config_differences(saved, config_to_json(other), defaults).find("ssm_state") != std::string::npos);

  // A tensor cell saved before forget_bias existed matches at bias 0 only.
  nlohmann::json old = config_to_json(TrainConfig{});
  old.erase("forget_bias");
  CHECK(config_differences(old, config_to_json(TrainConfig{}), defaults).empty());
  CHECK(config_differences(old, config_to_json(c), defaults) == "\n  forget_bias: saved (missing), now 3.0");

  // The device is where a run computes, not what: a cell from CUDA is the
  // same run on the CPU, and another key still differs.
  nlohmann::json on_cuda = config_to_json(TrainConfig{});
  on_cuda["device"] = "cuda:0";
  CHECK(config_differences(on_cuda, config_to_json(TrainConfig{}), defaults).empty());
  on_cuda["lr"] = 1.0;
  CHECK(config_differences(on_cuda, config_to_json(TrainConfig{}), defaults).find("lr: saved 1.0") != std::string::npos);
}

TEST_CASE("config JSON: unknown keys and wrong types are errors naming the key") {
  TrainConfig c;
  apply_config_json(c, {{"W", 10}, {"method", "base"}, {"mem_grid", {4, 4, 4}}});
  CHECK(c.task_cfg.W == 10);
  CHECK(c.model.memory.H == 4);
  CHECK_THROWS_WITH_AS(apply_config_json(c, {{"Wx", 10}}), doctest::Contains("Wx"), ValueError);
  CHECK_THROWS_WITH_AS(apply_config_json(c, {{"steps", "many"}}), doctest::Contains("steps"), ValueError);
  CHECK_THROWS_WITH_AS(apply_config_json(c, {{"forget_bias", 1e308}}),
                       "config: key \"forget_bias\" expects a number in [-20, 20], but got 1e+308",
                       ValueError);
  CHECK_THROWS_WITH_AS(apply_config_json(c, {{"lr", 100}}), "config: key \"lr\" expects a number in [0, 10], but got 100",
                       ValueError);
  CHECK_THROWS_WITH_AS(apply_config_json(c, {{"sigma_scale", 1e6}}),
                       "config: key \"sigma_scale\" expects a number in [0.001, 1000], but got 1000000.0", ValueError);
  // The command line's ranges: --clip is in (0, 1e9); a task is a known one (it was dropped for the
  // command line's task unchecked).
  CHECK_THROWS_WITH_AS(apply_config_json(c, {{"clip", 0}}), "config: key \"clip\" expects a number in (0, 1e+09), but got 0",
                       ValueError);
  CHECK_THROWS_WITH_AS(apply_config_json(c, {{"task", "no-such-task"}}), doctest::Contains("unknown task \"no-such-task\""),
                       ValueError);
  CHECK(c.task == TrainConfig().task);
  apply_config_json(c, {{"forget_bias", -2.5}});
  CHECK(c.model.memory.forget_bias == -2.5);
  TrainConfig d;
  apply_config_json(d, config_to_json(c));  // the written config reads back
  CHECK(config_to_json(d) == config_to_json(c));
  CHECK(c.model.method == BackboneMethod::base);
  CHECK(config_to_json(c)["method"] == "base");
  CHECK_THROWS_AS(parse_backbone_method("slotz"), ValueError);
  CHECK_THROWS_WITH_AS(apply_config_json(c, {{"method", "slotz"}}),
                       "unknown method \"slotz\" (expected base, base_wide, slots, tensor, linear, ssm, rmt, none, "
                       "full or xl)",
                       ValueError);
  CHECK_THROWS_WITH_AS(apply_config_json(c, {{"method", 3}}), doctest::Contains("key \"method\" has a value of the wrong type"),
                       ValueError);
  CHECK_THROWS_WITH_AS(mlp_ratio_of(BackboneMethod::none), doctest::Contains("segment-recurrent"), ValueError);
  for (const auto m : {BackboneMethod::base, BackboneMethod::base_wide, BackboneMethod::slots, BackboneMethod::tensor,
                       BackboneMethod::linear, BackboneMethod::ssm, BackboneMethod::rmt, BackboneMethod::none,
                       BackboneMethod::full, BackboneMethod::xl})
    CHECK(parse_backbone_method(to_string(m)) == m);
  for (const auto a : {Attention::full, Attention::local, Attention::linear, Attention::xl})
    CHECK(parse_attention(to_string(a)) == a);
  CHECK_THROWS_WITH_AS(parse_attention("sparse"), "unknown attention \"sparse\" (expected full, local, linear or xl)",
                       ValueError);
}

TEST_CASE("resolve_task_defaults: each task's default d and chunk, explicit values kept") {
  for (const auto& tdc : {std::tuple<const char*, int64_t, int64_t>{"coord-binding", 64, 1},
                         {"no-harm", 64, 1},
                         {"map-building", 96, 1},
                         {"occlusion", 96, 16},
                         {"occlusion-visible", 96, 16}}) {
    const auto [task, dim, chunk] = tdc;
    const std::string task_name = task;  // a plain variable: INFO captures it
    INFO(task_name);
    TrainConfig c;
    c.task = task;
    resolve_task_defaults(c);
    CHECK(c.model.dim == dim);
    CHECK(c.model.memory.chunk == chunk);
  }
  TrainConfig c;
  c.task = "occlusion";
  c.model.dim = 32;
  c.model.memory.chunk = 4;
  resolve_task_defaults(c);
  CHECK(c.model.dim == 32);
  CHECK(c.model.memory.chunk == 4);
  c.model.dim = -5;
  CHECK_THROWS_WITH_AS(resolve_task_defaults(c), doctest::Contains("dim -5"), ValueError);
  c.model.dim = 32;
  c.task = "occlusion-hidden";
  CHECK_THROWS_WITH_AS(resolve_task_defaults(c), doctest::Contains("occlusion-hidden"), ValueError);
}

TEST_CASE("memory gate at 0 is the model without memory: a tensor model's output equals base's with its weights") {
  TaskConfig tc;
  tc.W = 5;
  tc.queries = 2;
  auto task = make_task("coord-binding", tc);
  Generator gen(3);
  DiagnosticModel tensor_model(*task, tiny(BackboneMethod::tensor), gen);
  DiagnosticModel base_model(*task, tiny(BackboneMethod::base), gen);
  std::map<std::string, Tensor> shared;
  for (auto& [k, t] : tensor_model.state_dict())
    if (k.find(".memory.") == std::string::npos && k.find(".ln_mem.") == std::string::npos) shared[k] = t;
  base_model.load_state_dict(shared);  // strict: every base parameter has a tensor-model twin
  for (const auto& blk : tensor_model.backbone->blocks())
    if (blk->memory) fill_data(blk->memory->gamma, -std::numeric_limits<double>::infinity());
  NoGradGuard no_grad;
  TaskBatch b = task->sample(3, gen);
  Tensor with_memory_off = tensor_model.forward(b), base = base_model.forward(b);
  test::check_close(with_memory_off.to_vector(), base.to_vector(), 0, 0);
}

TEST_CASE("eval_accuracy_memory_off: reported for Tensor Memory models only, gates restored after it") {
  TrainConfig c = tiny_run(BackboneMethod::tensor, 30, 8);
  c.lr = 1e-2;
  TrainResult r = train_diagnostic(c);
  CHECK(r.eval_accuracy_memory_off >= 0.0);
  CHECK(r.eval_accuracy_memory_off <= 1.0);
  REQUIRE(r.gates.size() == 2);
  for (double g : r.gates) CHECK(g > 0.1);  // the trained gates, not the 0 of the memory-off pass
  c.model = tiny(BackboneMethod::base);
  CHECK(train_diagnostic(c).eval_accuracy_memory_off == -1.0);
  c.model = tiny(BackboneMethod::slots);
  CHECK(train_diagnostic(c).eval_accuracy_memory_off == -1.0);
}
