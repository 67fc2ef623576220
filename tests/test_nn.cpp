// nn/: Module bookkeeping, Linear, and the optimizers against torch.optim.
#include <cmath>
#include <optional>

#include "fixture.h"
#include "tmem/nn/layers.h"
#include "tmem/nn/linear.h"
#include "tmem/nn/optim.h"
#include "tmem/ops/shape.h"
#include "test_util.h"

using namespace tmem;
using tmem::test::check_close;
using tmem::test::fixture_tensor;
using tmem::test::fixture_values;
using tmem::test::load_fixture;

namespace {

/// A Module whose protected registration functions a test can call.
struct Open : nn::Module {
  using nn::Module::register_buffer;
  using nn::Module::register_module;
  using nn::Module::register_parameter;
  using nn::Module::replace;
  using nn::Module::unregister;
};

struct TwoLayer : nn::Module {
  std::shared_ptr<nn::Linear> fc1, fc2;
  TwoLayer() {
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(4, 8));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(8, 2, false));
  }
};

std::vector<Tensor> fixture_params(const nlohmann::json& list) {
  std::vector<Tensor> ps;
  for (const auto& j : list) ps.push_back(fixture_tensor(j).requires_grad_());
  return ps;
}

template <class Opt>
void run_steps(Opt& opt, std::vector<Tensor>& ps, const nlohmann::json& grads) {
  for (const auto& step : grads) {
    for (size_t i = 0; i < ps.size(); ++i) {
      ps[i].zero_grad();
      accumulate_grad(ps[i].impl(), fixture_tensor(step[i]), "test");
    }
    opt.step();
  }
}

}  // namespace

TEST_CASE("Module: dotted parameter names, state_dict round trip, strict key checks") {
  TwoLayer m;
  auto named = m.named_parameters();
  REQUIRE(named.size() == 3);
  CHECK(named[0].first == "fc1.weight");
  CHECK(named[1].first == "fc1.bias");
  CHECK(named[2].first == "fc2.weight");
  CHECK(m.num_parameters() == 4 * 8 + 8 + 8 * 2);
  TwoLayer other;
  other.load_state_dict(m.state_dict());
  check_close(other.fc1->weight, m.fc1->weight.to_vector());
  auto bad = m.state_dict();
  bad["fc3.weight"] = zeros({1});
  CHECK_THROWS_AS(other.load_state_dict(bad), ValueError);
  auto wrong = m.state_dict();
  wrong["fc1.bias"] = zeros({3});
  CHECK_THROWS_WITH_AS(other.load_state_dict(wrong), doctest::Contains("fc1.bias"), ShapeError);
}

TEST_CASE("Module: named_buffers and named_children list each tensor or child once, under its first name") {
  auto child = std::make_shared<Open>();
  Tensor steps = child->register_buffer("steps", tensor_int({3}, {1}));
  child->register_parameter("w", tensor({1.0}, {1}));
  Open root;
  Tensor mean = root.register_buffer("mean", zeros({2}));
  root.register_module("a", child);
  root.register_module("b", child);  // shared: named_state lists it twice, PyTorch's named_buffers once
  auto lin = root.register_module("c", std::make_shared<nn::Linear>(2, 2));
  const nn::NamedTensors buffers = root.named_buffers();
  REQUIRE(buffers.size() == 2);
  CHECK(buffers[0].first == "mean");
  CHECK(buffers[0].second.impl_ptr() == mean.impl_ptr());
  CHECK(buffers[1].first == "a.steps");
  CHECK(buffers[1].second.impl_ptr() == steps.impl_ptr());
  CHECK(root.buffers().size() == 2);
  CHECK(lin->named_buffers().empty());
  const auto children = root.named_children();
  REQUIRE(children.size() == 2);
  CHECK((children[0].first == "a" && children[0].second == child));
  CHECK((children[1].first == "c" && children[1].second == lin));
  CHECK(lin->named_children().empty());
}

TEST_CASE("Module: load_state_dict lists every fault and copies nothing from a state that does not fit") {
  // It once stopped at the first fault, having copied the keys before it.
  TwoLayer m, other;
  const std::vector<double> before = other.fc1->weight.to_vector();
  auto state = m.state_dict();
  state["fc2.weight"] = zeros({3, 8});
  state["fc1.bias"] = zeros({3});
  CHECK_THROWS_WITH_AS(other.load_state_dict(state),
                       "load_state_dict: size mismatch for \"fc1.bias\" expected shape [8], but got [3], "
                       "\"fc2.weight\" expected shape [2,8], but got [3,8].", ShapeError);
  CHECK(other.fc1->weight.to_vector() == before);
  state = m.state_dict();
  state.erase("fc1.bias");
  state.erase("fc2.weight");
  state["fc3.weight"] = zeros({1});
  CHECK_THROWS_WITH_AS(other.load_state_dict(state),
                       "load_state_dict: missing key(s) \"fc1.bias\", \"fc2.weight\". unexpected key(s) \"fc3.weight\".",
                       ValueError);
  CHECK(other.fc1->weight.to_vector() == before);
  const nn::Module::IncompatibleKeys keys = other.load_state_dict(state, false);
  CHECK(keys.missing_keys == std::vector<std::string>{"fc1.bias", "fc2.weight"});
  CHECK(keys.unexpected_keys == std::vector<std::string>{"fc3.weight"});
  CHECK(other.fc1->weight.to_vector() == m.fc1->weight.to_vector());
  // named_state and the missing keys come in module order, as PyTorch lists
  // them: weight before bias (the order Linear registers them), not sorted.
  std::vector<std::string> names;
  for (const auto& [n, t] : other.named_state()) names.push_back(n);
  CHECK(names == std::vector<std::string>{"fc1.weight", "fc1.bias", "fc2.weight"});
  state.erase("fc1.weight");
  CHECK(other.load_state_dict(state, false).missing_keys ==
        std::vector<std::string>{"fc1.weight", "fc1.bias", "fc2.weight"});
  const nn::Module::IncompatibleKeys none = other.load_state_dict(m.state_dict());
  CHECK((none.missing_keys.empty() && none.unexpected_keys.empty()));
  m.eval();
  CHECK(!m.fc1->is_training());
  m.set_training(true);  // this module only, as PyTorch's module.training = True
  CHECK((m.is_training() && !m.fc1->is_training()));
}

// It also refuses a value an int64 buffer cannot hold, copying nothing.
TEST_CASE("Module: load_state_dict reads a value that shares memory with the module whole") {
  nn::Linear l(3, 3);
  copy_data(l.weight, tensor({0, 1, 2, 3, 4, 5, 6, 7, 8}, {3, 3}));
  l.load_state_dict({{"weight", transpose(l.weight, 0, 1)}, {"bias", l.bias}});
  CHECK(l.weight.to_vector() == std::vector<double>{0, 3, 6, 1, 4, 7, 2, 5, 8});  // PyTorch: the transpose

  Open m;
  Tensor count = m.register_buffer("count", tensor_int({7}, {1}));
  Tensor w = m.register_parameter("w", tensor({1.5}, {1}));
  for (double bad : {std::nan(""), 1e30}) {
    std::string what;
    try {
      m.load_state_dict({{"count", tensor({bad}, {1})}, {"w", tensor({2.5}, {1})}});
    } catch (const ValueError& e) {
      what = e.what();
    }
    CHECK(what.starts_with("load_state_dict: \"count\": "));
    CHECK(what.ends_with(" cannot be converted to int64 without overflow"));
    CHECK((count.to_vector() == std::vector<double>{7} && w.to_vector() == std::vector<double>{1.5}));
  }
  m.load_state_dict({{"count", tensor({9.0}, {1})}, {"w", tensor({2.5}, {1})}});
  CHECK((count.to_vector() == std::vector<double>{9} && w.to_vector() == std::vector<double>{2.5}));
}

TEST_CASE("Module: register_module refuses a cycle (the module itself, or one that contains it)") {
  auto a = std::make_shared<Open>();
  a->register_parameter("w", zeros({2}));
  CHECK_THROWS_WITH_AS(a->register_module("me", a),
                       "register_module: module \"me\" is this module or contains it; registering it would make a cycle",
                       ValueError);
  auto b = std::make_shared<Open>();
  b->register_module("a", a);
  CHECK_THROWS_WITH_AS(a->register_module("b", b), doctest::Contains("register_module: module \"b\" is this module"),
                       ValueError);
  // Deeper: a -> x -> y, then y -> a.
  auto x = std::make_shared<Open>(), y = std::make_shared<Open>();
  a->register_module("x", x);
  x->register_module("y", y);
  CHECK_THROWS_WITH_AS(y->register_module("top", a), doctest::Contains("would make a cycle"), ValueError);
  CHECK_THROWS_WITH_AS(a->register_module("none", std::shared_ptr<Open>()),
                       "register_module: module \"none\" is null", ValueError);
  // The refused registrations left the tree as it was: walks end.
  CHECK(a->state_dict().size() == 1);
  CHECK(b->num_parameters() == 2);
  CHECK(b->named_parameters()[0].first == "a.w");
  b->train(false);
  CHECK(!a->is_training());
  // One module under two names (shared, no cycle) is allowed, as in PyTorch.
  auto shared = std::make_shared<nn::Linear>(1, 1);
  a->register_module("s1", shared);
  a->register_module("s2", shared);
  CHECK(a->state_dict().count("s2.weight") == 1);
}

TEST_CASE("Module: a chain of modules deeper than the C++ stack is walked and freed without recursion") {
  constexpr int depth = 100000;  // a recursive walk or release overflows 8 MiB here
  auto root = std::make_shared<Open>();
  Open* last = root.get();
  for (int i = 0; i < depth; ++i) {
    auto child = std::make_shared<Open>();
    last->register_module("c", child);
    last = child.get();
  }
  last->register_parameter("w", tensor({1.0}, {1}));
  last->register_buffer("b", zeros({1}));
  std::string name;
  for (int i = 0; i < depth; ++i) name += "c.";
  const nn::NamedTensors params = root->named_parameters();
  REQUIRE(params.size() == 1);
  CHECK(params[0].first == name + "w");
  CHECK(root->named_buffers()[0].first == name + "b");
  CHECK(root->state_dict().size() == 2);
  root->eval();
  CHECK(!last->is_training());
  CHECK_THROWS_WITH_AS(last->register_module("top", root), doctest::Contains("would make a cycle"), ValueError);
  root.reset();  // frees the whole chain
}

TEST_CASE("Module: a cycle is refused however the tree was built, and a chain built bottom-up is linear") {
  const auto cycle = doctest::Contains("is this module or contains it; registering it would make a cycle");
  // Bottom-up, each new root takes the chain so far: its check was a walk of
  // the whole chain (quadratic: minutes here), a root needs none.
  constexpr int depth = 100000;
  auto chain = std::make_shared<Open>();
  for (int i = 0; i < depth; ++i) {
    auto parent = std::make_shared<Open>();
    parent->register_module("c", chain);
    chain = parent;
  }
  auto a = std::make_shared<Open>(), b = std::make_shared<Open>(), c = std::make_shared<Open>();
  CHECK_THROWS_WITH_AS(a->register_module("self", a), cycle, ValueError);
  a->register_module("b", b);
  CHECK_THROWS_WITH_AS(b->register_module("up", a), cycle, ValueError);
  // Unregistered or replaced, b is a root again and may hold a.
  a->unregister("b");
  b->register_module("up", a);
  b->unregister("up");
  a->register_module("b", b);
  a->replace("b", c);
  CHECK_THROWS_WITH_AS(c->register_module("up", a), cycle, ValueError);
  CHECK_THROWS_WITH_AS(a->replace("b", a), doctest::Contains("replace: module \"b\" is this module"), ValueError);
  b->register_module("up", a);
  b->unregister("up");
  // A copy of a holds c too: c keeps a parent after a goes, so a cycle
  // through the copy is still seen.
  auto copy = std::make_shared<Open>(*a);
  a.reset();
  CHECK_THROWS_WITH_AS(c->register_module("up", copy), cycle, ValueError);
  Open assigned;
  assigned = *copy;
  copy.reset();
  CHECK_THROWS_AS(c->register_module("up", std::make_shared<Open>(assigned)), ValueError);
}

TEST_CASE("Module: parameters, zero_grad, num_parameters and to of a deep chain build no dotted names") {
  // With a parameter at every level the names alone total depth^2 / 2 * 2
  // bytes (10 GB here): these walks ran out of memory building names they
  // then dropped.
  constexpr int depth = 100000;
  auto root = std::make_shared<Open>();
  Open* last = root.get();
  for (int i = 0; i < depth; ++i) {
    last->register_parameter("w", tensor({static_cast<double>(i)}, {1}));
    auto child = std::make_shared<Open>();
    last->register_module("c", child);
    last = child.get();
  }
  const std::vector<Tensor> params = root->parameters();
  REQUIRE(params.size() == depth);
  CHECK((params[0].item() == 0 && params[depth - 1].item() == depth - 1));
  CHECK(root->num_parameters() == depth);
  accumulate_grad(params[7].impl(), ones({1}), "test");
  root->zero_grad();
  CHECK(!params[7].grad().defined());
  root->to(Device::cpu());
  CHECK(root->buffers().empty());
  root.reset();
}

TEST_CASE("Module: replace puts a tensor or child in the place of the one registered under its name") {
  auto sub = std::make_shared<nn::Linear>(1, 1);
  Open m;
  m.register_parameter("w", zeros({2}));
  m.register_module("sub", sub);
  m.register_buffer("count", zeros({1}));
  const Tensor w = tensor({1.0, 2.0, 3.0}, {3});
  m.replace("w", w);
  CHECK(w.requires_grad());  // a parameter, as register_parameter marks it
  m.replace("count", ones({2}));
  m.replace("sub", std::make_shared<nn::Linear>(2, 1));
  const nn::NamedTensors state = m.named_state();
  std::vector<std::string> names;
  for (const auto& [n, t] : state) names.push_back(n);
  CHECK(names == std::vector<std::string>{"w", "count", "sub.weight", "sub.bias"});
  CHECK(state[0].second.impl_ptr() == w.impl_ptr());
  CHECK(state[2].second.shape() == Shape{1, 2});
  CHECK_THROWS_WITH_AS(m.replace("v", zeros({1})), "replace: no parameter or buffer is registered as 'v'", ValueError);
  CHECK_THROWS_WITH_AS(m.replace("w", std::make_shared<nn::Linear>(1, 1)), "replace: no module is registered as 'w'",
                       ValueError);
  CHECK_THROWS_WITH_AS(m.replace("sub", std::shared_ptr<nn::Module>()), "replace: module \"sub\" is null", ValueError);
  auto outer = std::make_shared<Open>();
  auto inner = std::make_shared<Open>();
  outer->register_module("inner", inner);
  inner->register_module("leaf", std::make_shared<Open>());
  CHECK_THROWS_WITH_AS(inner->replace("leaf", outer), doctest::Contains("would make a cycle"), ValueError);
  CHECK(outer->named_state().empty());
}

TEST_CASE("Module: parameter, buffer and module names are non-empty, dot-free and unique") {
  Open m;
  m.register_parameter("weight", zeros({2}));
  m.register_buffer("count", zeros({1}));
  m.register_module("sub", std::make_shared<nn::Linear>(1, 1));
  CHECK_THROWS_WITH_AS(m.register_parameter("sub.weight", zeros({5})),
                       "register_parameter: parameter name can't contain \".\", but got \"sub.weight\"", ValueError);
  CHECK_THROWS_WITH_AS(m.register_buffer("a.b", zeros({1})),
                       "register_buffer: buffer name can't contain \".\", but got \"a.b\"", ValueError);
  CHECK_THROWS_WITH_AS(m.register_module("x.y", std::make_shared<nn::Linear>(1, 1)),
                       "register_module: module name can't contain \".\", but got \"x.y\"", ValueError);
  CHECK_THROWS_WITH_AS(m.register_parameter("", zeros({1})),
                       "register_parameter: parameter name can't be empty string \"\"", ValueError);
  CHECK_THROWS_WITH_AS(m.register_buffer("", zeros({1})), "register_buffer: buffer name can't be empty string \"\"",
                       ValueError);
  CHECK_THROWS_WITH_AS(m.register_module("", std::make_shared<nn::Linear>(1, 1)),
                       "register_module: module name can't be empty string \"\"", ValueError);
  // Every kind against every other.
  CHECK_THROWS_WITH_AS(m.register_parameter("weight", zeros({2})), "register_parameter: attribute 'weight' already exists",
                       ValueError);
  CHECK_THROWS_WITH_AS(m.register_parameter("count", zeros({2})), "register_parameter: attribute 'count' already exists",
                       ValueError);
  CHECK_THROWS_WITH_AS(m.register_parameter("sub", zeros({2})), "register_parameter: attribute 'sub' already exists",
                       ValueError);
  CHECK_THROWS_WITH_AS(m.register_buffer("weight", zeros({2})), "register_buffer: attribute 'weight' already exists",
                       ValueError);
  CHECK_THROWS_WITH_AS(m.register_module("count", std::make_shared<nn::Linear>(1, 1)),
                       "register_module: attribute 'count' already exists", ValueError);
  CHECK_THROWS_WITH_AS(m.register_module("sub", std::make_shared<nn::Linear>(1, 1)),
                       "register_module: attribute 'sub' already exists", ValueError);
  const auto sd = m.state_dict();
  std::vector<std::string> keys;
  for (const auto& [k, t] : sd) keys.push_back(k);
  CHECK(keys == std::vector<std::string>{"count", "sub.bias", "sub.weight", "weight"});
  CHECK(sd.at("sub.weight").shape() == Shape{1, 1});
}

TEST_CASE("Linear: y = x W^T + b, PyTorch init bounds, shape errors") {
  nn::Linear lin(3, 2);
  for (double w : lin.weight.to_vector()) CHECK(std::abs(w) <= 1 / std::sqrt(3.0));
  Tensor x = tensor({1, 2, 3}, {1, 3});
  std::vector<double> w = lin.weight.to_vector(), b = lin.bias.to_vector();
  check_close(lin.forward(x), {w[0] + 2 * w[1] + 3 * w[2] + b[0], w[3] + 2 * w[4] + 3 * w[5] + b[1]}, 1e-5);
  CHECK_THROWS_AS(lin.forward(zeros({2, 4})), ShapeError);
  // A float64 input was refused by matmul, which the caller never called.
  CHECK_THROWS_WITH_AS(lin.forward(zeros({2, 3}, DType::Float64)),
                       "Linear: the input is float64 but the weight is float32; convert the input (to_dtype)", DtypeError);
}

TEST_CASE("AdamW: three steps match torch.optim.AdamW to 1e-6") {
  auto fx = load_fixture("optim")["adamw"];
  auto ps = fixture_params(fx["init"]);
  auto cfg = fx["config"];
  nn::AdamW opt(ps, cfg["lr"], cfg["beta1"], cfg["beta2"], cfg["eps"], cfg["weight_decay"]);
  run_steps(opt, ps, fx["grads"]);
  for (size_t i = 0; i < ps.size(); ++i) check_close(ps[i], fixture_values(fx["final"][i]), 1e-6, 0);
}

TEST_CASE("AdamW in float32 gives torch.optim.AdamW's float32 values exactly (1 - beta rounded from double)") {
  // Values from torch 1.13 (python3-torch): 1 - 0.999f in float32 would put
  // the first two 6.6e-6 off.
  for (const auto& [wd, expected] : {std::pair{0.5, -0.75}, std::pair{0.0, -0.5}}) {
    Tensor x = tensor({0.5}, {1}).requires_grad_();
    nn::AdamW opt({x}, 1.0, 0.9, 0.999, 1e-8, wd);
    sum(mul(x, 3.0)).backward();
    opt.step();
    CHECK(x.to_vector()[0] == expected);
  }
  Tensor x = tensor({0.5, -1.25}, {2}).requires_grad_();
  nn::AdamW opt({x}, 0.01, 0.9, 0.999, 1e-8, 0.01);
  for (int i = 0; i < 3; ++i) {
    opt.zero_grad();
    sum(mul(mul(x, x), tensor({3.0, 0.7}, {2}))).backward();
    opt.step();
  }
  CHECK(x.to_vector() == std::vector<double>{0.46987444162368774, -1.2196359634399414});
}

TEST_CASE("SGD with momentum and weight decay matches torch.optim.SGD") {
  auto fx = load_fixture("optim")["sgd"];
  auto ps = fixture_params(fx["init"]);
  auto cfg = fx["config"];
  nn::SGD opt(ps, cfg["lr"], cfg["momentum"], cfg["weight_decay"]);
  run_steps(opt, ps, fx["grads"]);
  for (size_t i = 0; i < ps.size(); ++i) check_close(ps[i], fixture_values(fx["final"][i]), 1e-6, 0);
}

TEST_CASE("SGD: a state_dict resumes the momentum exactly, and a state that does not fit is refused whole") {
  auto params = [] { return std::vector<Tensor>{tensor({1.0, -2.0}, {2}), tensor({0.5}, {1})}; };
  auto step = [](nn::SGD& opt, std::vector<Tensor>& ps, int k) {
    opt.zero_grad();
    accumulate_grad(ps[0].impl(), tensor({0.1 * k + 0.3, -0.2}, {2}), "test");
    accumulate_grad(ps[1].impl(), tensor({0.5 * k}, {1}), "test");
    opt.step();
  };
  std::vector<Tensor> a = params(), b = params();
  nn::SGD run(a, 0.1, 0.9, 0.01), resumed(b, 0.1, 0.9, 0.01);
  CHECK(run.state_dict().size() == 1);  // "group_sizes": no buffer before the first step
  for (int k = 1; k <= 2; ++k) step(run, a, k);
  const auto state = run.state_dict();
  REQUIRE(state.size() == 3);
  // b = g on the first step, then b = 0.9 b + g (weight decay adds 0.01 p to g).
  const double p0 = 1.0 - 0.1 * (0.4 + 0.01);
  CHECK(state.at("momentum_buffer.0").to_vector()[0] == doctest::Approx(0.9 * 0.41 + 0.5 + 0.01 * p0));
  resumed.load_state_dict(state);
  for (size_t i = 0; i < 2; ++i) copy_data(b[i], a[i]);
  step(run, a, 3);
  step(resumed, b, 3);
  for (size_t i = 0; i < 2; ++i) CHECK(a[i].to_vector() == b[i].to_vector());
  auto bad = state;
  bad["momentum_buffer.1"] = zeros({2});
  CHECK_THROWS_WITH_AS(resumed.load_state_dict(bad),
                       "SGD::load_state_dict: \"momentum_buffer.1\" expected shape [1], but got [2]", ShapeError);
  bad = state;
  bad["momentum_buffer.1"] = tensor_int({1}, {1});
  CHECK_THROWS_WITH_AS(resumed.load_state_dict(bad), doctest::Contains("must be floating, but got int64"), DtypeError);
  bad = state;
  bad["momentum_buffer.0"] = tensor({0.0, 1e300}, {2}, DType::Float64);  // inf as the float32 buffer would hold it
  CHECK_THROWS_WITH_AS(resumed.load_state_dict(bad), doctest::Contains("holds 1e+300 at flat index 1"), ValueError);
  bad["momentum_buffer.0"] = tensor({INFINITY, 0.0}, {2});
  CHECK_THROWS_WITH_AS(resumed.load_state_dict(bad),
                       "SGD::load_state_dict: \"momentum_buffer.0\" holds inf at flat index 0, but a moment must be finite",
                       ValueError);
  bad = state;
  bad["momentum_buffer.2"] = zeros({1});
  CHECK_THROWS_WITH_AS(resumed.load_state_dict(bad), "SGD::load_state_dict: unexpected key(s) \"momentum_buffer.2\"",
                       ValueError);
  bad = state;
  bad["group_sizes"] = tensor_int({1, 1}, {2});
  CHECK_THROWS_WITH_AS(resumed.load_state_dict(bad), doctest::Contains("the state has groups of [1,1] parameters"),
                       ValueError);
  CHECK(resumed.state_dict().at("momentum_buffer.1").to_vector() == run.state_dict().at("momentum_buffer.1").to_vector());
  // A state without a parameter's buffer starts its momentum again: b = g.
  bad = state;
  bad.erase("momentum_buffer.0");
  resumed.load_state_dict(bad);
  CHECK(resumed.state_dict().count("momentum_buffer.0") == 0);
}

TEST_CASE("add_param_group: an added group steps as one given to the constructor, and a bad group is refused whole") {
  auto run = [](bool added) {
    std::vector<Tensor> ps{tensor({1.0, -2.0}, {2}), tensor({0.5}, {1})};
    std::optional<nn::AdamW> opt;
    if (added) {
      opt.emplace(std::vector<Tensor>{ps[0]}, 0.1, 0.9, 0.999, 1e-8, 0.01);
      opt->add_param_group({{ps[1]}, 0.05, std::nullopt});
    } else {
      opt.emplace(std::vector<nn::ParamGroup>{{{ps[0]}, std::nullopt, std::nullopt}, {{ps[1]}, 0.05, std::nullopt}}, 0.1,
                  0.9, 0.999, 1e-8, 0.01);
    }
    for (int k = 1; k <= 3; ++k) {
      opt->zero_grad();
      accumulate_grad(ps[0].impl(), tensor({0.3 * k, -0.1}, {2}), "test");
      accumulate_grad(ps[1].impl(), tensor({0.5 * k}, {1}), "test");
      opt->step();
    }
    CHECK(opt->state_dict().at("group_sizes").to_int_vector() == std::vector<int64_t>{1, 1});
    return std::vector<std::vector<double>>{ps[0].to_vector(), ps[1].to_vector()};
  };
  const auto added = run(true);
  CHECK(added == run(false));
  CHECK(added[1][0] != 0.5);
  const Tensor a = zeros({2}), b = zeros({3});
  nn::SGD sgd(std::vector<Tensor>{a}, 0.1, 0.9, 0.02);
  CHECK_THROWS_WITH_AS(sgd.add_param_group({{b, a}, std::nullopt, std::nullopt}),
                       "SGD::add_param_group: a parameter of shape [2] appears more than once (group 1)", ValueError);
  CHECK_THROWS_WITH_AS(sgd.add_param_group({{b}, -1.0, std::nullopt}), doctest::Contains("group 1 has lr -1"), ValueError);
  CHECK(sgd.param_groups().size() == 1);
  sgd.add_param_group({{b}, std::nullopt, std::nullopt});
  REQUIRE(sgd.param_groups().size() == 2);
  CHECK((*sgd.param_groups()[1].lr == 0.1 && *sgd.param_groups()[1].weight_decay == 0.02));
  // Without a default lr (torch's required lr) a later group must bring its
  // own; it took group 0's lr.
  nn::SGD own(std::vector<nn::ParamGroup>{{{a}, 0.2, std::nullopt}}, std::nullopt);
  CHECK(!own.default_lr());
  CHECK_THROWS_WITH_AS(own.add_param_group({{b}, std::nullopt, std::nullopt}),
                       "SGD::add_param_group: parameter group 1 didn't specify a value of required optimization "
                       "parameter lr",
                       ValueError);
  CHECK(own.param_groups().size() == 1);
  own.add_param_group({{b}, 0.3, std::nullopt});
  CHECK(*own.param_groups()[1].lr == 0.3);
}

TEST_CASE("clip_grad_norm_ matches PyTorch - a non-finite norm raises and leaves grads unchanged") {
  auto fx = load_fixture("optim")["clip"];
  std::vector<Tensor> ps;
  for (const auto& g : fx["grads"]) {
    Tensor p = zeros(g["shape"].get<Shape>()).requires_grad_();
    accumulate_grad(p.impl(), fixture_tensor(g), "test");
    ps.push_back(p);
  }
  double norm = nn::clip_grad_norm_(ps, fx["max_norm"]);
  CHECK(norm == doctest::Approx(fx["norm"].get<double>()).epsilon(1e-6));
  for (size_t i = 0; i < ps.size(); ++i) check_close(ps[i].grad(), fixture_values(fx["clipped"][i]), 1e-7, 1e-6);

  Tensor q = zeros({2}).requires_grad_();
  accumulate_grad(q.impl(), tensor({1.0, std::numeric_limits<double>::infinity()}, {2}), "test");
  CHECK_THROWS_AS(nn::clip_grad_norm_({q}, 1.0), ValueError);
  CHECK(q.grad().to_vector()[0] == 1.0);

  Tensor big = zeros({2}).requires_grad_();
  accumulate_grad(big.impl(), tensor({3e30, 4e30}, {2}), "test");
  CHECK(nn::clip_grad_norm_({big}, 1.0) == doctest::Approx(5e30));
  check_close(big.grad(), {0.6, 0.8}, 1e-6);
}

TEST_CASE("LayerNorm: a negative normalized_shape is a ValueError naming LayerNorm") {
  CHECK_THROWS_WITH_AS(nn::LayerNorm(-3), "LayerNorm: expected normalized_shape >= 0, but got -3", ValueError);
  CHECK(nn::LayerNorm(0).weight.numel() == 0);  // as torch.nn.LayerNorm(0)
}

TEST_CASE("LayerNorm: without elementwise_affine it has no parameters and normalises only, and bias=false drops the bias") {
  nn::LayerNorm plain(2, 1e-5, false);
  CHECK(plain.parameters().empty());
  CHECK_FALSE(plain.weight.defined());
  check_close(plain.forward(tensor({1, 3, 5, 5}, {2, 2})), {-1, 1, 0, 0}, 1e-4);
  nn::LayerNorm no_bias(2, 1e-5, true, false);
  CHECK(no_bias.named_parameters().size() == 1);
  CHECK(no_bias.named_parameters()[0].first == "weight");
  CHECK_FALSE(no_bias.bias.defined());
}

TEST_CASE("Embedding: padding_idx starts at zeros and is never trained, and a bad one is a ValueError") {
  nn::Embedding emb(4, 3, default_generator(), -1);
  CHECK(emb.padding_idx == 3);
  const std::vector<double> w = emb.weight.to_vector();
  CHECK(w[9] == 0.0);
  CHECK(w[10] == 0.0);
  CHECK(w[11] == 0.0);
  CHECK(w[0] != 0.0);
  sum(emb.forward(tensor_int({3, 0, 3}, {3}))).backward();
  check_close(emb.weight.grad(), {1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0});
  CHECK_THROWS_WITH_AS(nn::Embedding(4, 3, default_generator(), 4), "Embedding: padding_idx 4 is outside the 4 rows",
                       ValueError);
}

TEST_CASE("SGD's momentum and AdamW's beta1 are per group and settable (torch's OneCycleLR cycles them)") {
  Tensor a = zeros({1}).requires_grad_(), b = zeros({1}).requires_grad_();
  nn::SGD sgd({nn::ParamGroup{{a}, std::nullopt, std::nullopt, 0.0}, nn::ParamGroup{{b}, std::nullopt, std::nullopt}},
              0.1, 0.5);
  CHECK(*sgd.param_groups()[0].momentum == 0.0);
  CHECK(*sgd.param_groups()[1].momentum == 0.5);  // the constructor's default
  for (int step = 0; step < 2; ++step) {
    accumulate_grad(a.impl(), ones({1}), "test");
    accumulate_grad(b.impl(), ones({1}), "test");
    sgd.step();
    sgd.zero_grad();
  }
  check_close(a, {-0.2});   // p -= 0.1 g, twice
  check_close(b, {-0.25});  // b = g, then 0.5 b + g = 1.5
  sgd.set_momentum(0, 0.9);
  CHECK(*sgd.param_groups()[0].momentum == 0.9);
  CHECK_THROWS_WITH_AS(sgd.set_momentum(1, -1.0), "SGD::set_momentum: expected a finite momentum >= 0, but got -1",
                       ValueError);
  CHECK_THROWS_AS(sgd.set_momentum(2, 0.1), IndexError);

  Tensor w = ones({1}).requires_grad_();
  nn::AdamW adam(std::vector<Tensor>{w}, 0.1, 0.9, 0.999, 1e-8, 0.0);
  adam.set_beta1(0, 0.5);
  accumulate_grad(w.impl(), ones({1}), "test");
  adam.step();  // m = 0.5 g, bias-corrected by 1 - 0.5: the step is lr exactly
  check_close(w, {0.9}, 1e-6);
  CHECK_THROWS_WITH_AS(adam.set_beta1(0, 1.0), "AdamW::set_beta1: expected beta1 in [0, 1), but got 1", ValueError);
}
