// nn/ pieces of the everyday API (issue 16): Sequential / ModuleList /
// ModuleDict, optimizer parameter groups (against torch.optim) and their
// state_dict, weight_decay_groups, and the DataLoader.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <set>

#include "fixture.h"
#include "tmem/core/safetensors.h"
#include "tmem/nn/container.h"
#include "tmem/nn/data_loader.h"
#include "tmem/nn/layers.h"
#include "tmem/nn/optim.h"
#include "tmem/nn/recurrent.h"
#include "tmem/nn/tensor_memory.h"
#include "tmem/ops/gradcheck.h"
#include "test_util.h"

using namespace tmem;
using tmem::test::check_close;
using tmem::test::error_of;
using tmem::test::fixture_tensor;
using tmem::test::fixture_values;
using tmem::test::load_fixture;

namespace {

std::vector<std::string> names_of(const nn::Module& m) {
  std::vector<std::string> out;
  for (const auto& [n, t] : m.named_parameters()) out.push_back(n);
  return out;
}

std::vector<Tensor> fixture_params(const nlohmann::json& list) {
  std::vector<Tensor> ps;
  for (const auto& j : list) ps.push_back(fixture_tensor(j).requires_grad_());
  return ps;
}

// Sets each parameter's gradient to the fixture's step and steps opt.
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

void set_grads(const std::vector<Tensor>& ps, double scale) {
  for (size_t i = 0; i < ps.size(); ++i) {
    ps[i].zero_grad();
    Tensor g = mul(ones(ps[i].shape()), scale * static_cast<double>(i + 1));
    accumulate_grad(ps[i].impl(), g, "test");
  }
}

}  // namespace

TEST_CASE("Sequential: forward chains the modules, PyTorch names, state_dict round trip") {
  Generator g1(1), g2(2);
  auto make = [](Generator& g) {
    return std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(2, 2, true, g),
                                            std::make_shared<nn::Functional>([](const Tensor& x) { return relu(x); }),
                                            std::make_shared<nn::Linear>(2, 1, true, g));
  };
  auto seq = make(g1);
  CHECK(seq->size() == 3);
  CHECK(names_of(*seq) == std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"});
  seq->load_state_dict({{"0.weight", tensor({1, -1, 2, 0.5}, {2, 2})},
                        {"0.bias", tensor({0.5, -1}, {2})},
                        {"2.weight", tensor({1, -2}, {1, 2})},
                        {"2.bias", tensor({0.25}, {1})}});
  // torch.nn.Sequential(Linear(2, 2), ReLU(), Linear(2, 1)) with these weights:
  // row 1: relu([-0.5, 2]) . [1, -2] + 0.25 = -3.75; row 2: relu([-3.5, -1.5]) -> 0.25.
  Tensor x = tensor({1, 2, -1, 3}, {2, 2});
  CHECK(seq->forward(x).to_vector() == std::vector<double>{-3.75, 0.25});
  // Through a file, into a differently initialised copy.
  const std::string path = test::tmp_path("tmem_sequential.safetensors");
  save_safetensors(path, seq->state_dict());
  auto other = make(g2);
  CHECK(other->forward(x).to_vector() != std::vector<double>{-3.75, 0.25});
  other->load_state_dict(load_safetensors(path).tensors);
  CHECK(other->forward(x).to_vector() == std::vector<double>{-3.75, 0.25});
  // Nested: a Sequential inside a Sequential; empty is the identity.
  nn::Sequential outer(seq, std::make_shared<nn::Sequential>());
  CHECK(names_of(outer).front() == "0.0.weight");
  CHECK(outer.forward(x).to_vector() == std::vector<double>{-3.75, 0.25});
  CHECK(nn::Sequential().forward(x).to_vector() == x.to_vector());
  // The gradient reaches every layer.
  sum(seq->forward(x)).backward();
  for (const Tensor& p : seq->parameters()) CHECK(p.grad().defined());
  CHECK(seq->parameters()[3].grad().to_vector() == std::vector<double>{2});
  CHECK_THROWS_AS((*seq)[3], IndexError);
  CHECK_THROWS_AS(seq->push_back(std::shared_ptr<nn::Linear>()), ValueError);
}

TEST_CASE("a module shared under two names gives its parameters once, and unregister removes a name") {
  struct Tied : nn::Module {
    explicit Tied(Generator& g) {
      auto lin = std::make_shared<nn::Linear>(2, 2, true, g);
      register_module("a", lin);
      register_module("b", lin);
    }
    using nn::Module::unregister;
  };
  Generator gen(0);
  Tied m(gen);
  CHECK(names_of(m) == std::vector<std::string>{"a.weight", "a.bias"});
  CHECK(m.num_parameters() == 6);
  CHECK(m.state_dict().size() == 4);  // state_dict keeps both names, as torch
  m.unregister("a");
  CHECK(names_of(m) == std::vector<std::string>{"b.weight", "b.bias"});
  CHECK_THROWS_WITH_AS(m.unregister("a"), "unregister: no parameter, buffer or module is registered as 'a'", ValueError);
}

TEST_CASE("ModuleList and ModuleDict register their modules under PyTorch's names") {
  nn::ModuleList list(std::make_shared<nn::Linear>(3, 2), std::make_shared<nn::LayerNorm>(2));
  list.push_back(std::make_shared<nn::Linear>(2, 2, false));
  CHECK(list.size() == 3);
  CHECK(names_of(list) ==
        std::vector<std::string>{"0.weight", "0.bias", "1.weight", "1.bias", "2.weight"});
  CHECK(list.at<nn::Linear>(0)->in_features == 3);
  CHECK(list.at<nn::LayerNorm>(1)->eps == 1e-5);
  CHECK_THROWS_WITH_AS(list.at<nn::Linear>(1), "ModuleList::at: module 1 is not of the requested type", ValueError);
  CHECK_THROWS_WITH_AS(list[3], "ModuleList: index 3 is out of range for 3 modules", IndexError);
  size_t visited = 0;
  for (const auto& m : list) visited += m->parameters().size();
  CHECK(visited == 5);

  nn::ModuleDict dict;
  dict.insert("decoder", std::make_shared<nn::Linear>(2, 3));
  dict.insert("encoder", std::make_shared<nn::ModuleList>(std::make_shared<nn::Linear>(3, 2, false)));
  CHECK(dict.keys() == std::vector<std::string>{"decoder", "encoder"});  // insertion order
  CHECK(names_of(dict) == std::vector<std::string>{"decoder.weight", "decoder.bias", "encoder.0.weight"});
  CHECK(dict.contains("encoder"));
  CHECK_FALSE(dict.contains("head"));
  CHECK(dict.at<nn::Linear>("decoder")->out_features == 3);
  CHECK_THROWS_WITH_AS(dict["head"], "ModuleDict: no module under key \"head\"", IndexError);
  CHECK_THROWS_WITH_AS(dict.insert("a.b", std::make_shared<nn::LayerNorm>(2)),
                       doctest::Contains("contain no '.'"), ValueError);
  CHECK_THROWS_WITH_AS(dict.insert("decoder", std::make_shared<nn::LayerNorm>(2)),
                       "ModuleDict::insert: key \"decoder\" is already present", ValueError);
  // state_dict round trip and train/eval reach the children.
  nn::ModuleDict copy;
  copy.insert("decoder", std::make_shared<nn::Linear>(2, 3));
  copy.insert("encoder", std::make_shared<nn::ModuleList>(std::make_shared<nn::Linear>(3, 2, false)));
  copy.load_state_dict(dict.state_dict());
  for (const auto& [n, t] : copy.state_dict()) CHECK(t.to_vector() == dict.state_dict().at(n).to_vector());
  dict.eval();
  CHECK_FALSE(dict["encoder"]->is_training());
  CHECK_FALSE(dict.at<nn::ModuleList>("encoder")->at<nn::Linear>(0)->is_training());
}

TEST_CASE("AdamW and SGD parameter groups match torch.optim's param_groups") {
  const auto fx = load_fixture("optim");
  {
    auto ps = fixture_params(fx["adamw_groups"]["init"]);
    nn::AdamW opt({{{ps[0]}, std::nullopt, std::nullopt}, {{ps[1]}, 3e-3, 0.0}}, 1e-2, 0.9, 0.999, 1e-8, 0.1);
    REQUIRE(opt.param_groups().size() == 2);
    CHECK(*opt.param_groups()[0].lr == 1e-2);
    CHECK(*opt.param_groups()[0].weight_decay == 0.1);
    CHECK(*opt.param_groups()[1].lr == 3e-3);
    CHECK(*opt.param_groups()[1].weight_decay == 0.0);
    run_steps(opt, ps, fx["adamw_groups"]["grads"]);
    for (size_t i = 0; i < ps.size(); ++i) check_close(ps[i], fixture_values(fx["adamw_groups"]["final"][i]), 1e-6, 0);
  }
  {
    auto ps = fixture_params(fx["sgd_groups"]["init"]);
    nn::SGD opt({{{ps[0]}, std::nullopt, 0.05}, {{ps[1]}, 0.02, std::nullopt}}, 0.1, 0.9, 0.01);
    run_steps(opt, ps, fx["sgd_groups"]["grads"]);
    for (size_t i = 0; i < ps.size(); ++i) check_close(ps[i], fixture_values(fx["sgd_groups"]["final"][i]), 1e-6, 0);
  }
  // set_lr: every group, or one.
  Tensor a = zeros({2}).requires_grad_(), b = zeros({2}).requires_grad_();
  nn::AdamW opt({{{a}, 1e-3, std::nullopt}, {{b}, 2e-3, std::nullopt}});
  opt.set_lr(1, 5e-4);
  CHECK(*opt.param_groups()[0].lr == 1e-3);
  CHECK(*opt.param_groups()[1].lr == 5e-4);
  opt.set_lr(0.1);
  CHECK(*opt.param_groups()[0].lr == 0.1);
  CHECK(*opt.param_groups()[1].lr == 0.1);
  CHECK_THROWS_AS(opt.set_lr(2, 0.1), IndexError);
  CHECK_THROWS_AS(opt.set_lr(-1.0), ValueError);
  CHECK_THROWS_WITH_AS(nn::AdamW({{{a}, std::nullopt, std::nullopt}, {{a}, std::nullopt, std::nullopt}}),
                       "AdamW: a parameter of shape [2] appears more than once (group 1)", ValueError);
  CHECK_THROWS_AS(nn::SGD({{{a}, -1.0, std::nullopt}}, 0.1), ValueError);
}

TEST_CASE("AdamW and SGD refuse a non-leaf tensor, which they would never update") {
  Tensor w = ones({2, 3}).requires_grad_();
  Tensor twice = mul(w, full({}, 2.0));
  const std::string why = ": can't optimize a non-leaf Tensor (a parameter of shape [2,3] is the output of an op; "
                          "pass the leaf it was computed from)";
  CHECK_THROWS_WITH_AS(nn::AdamW({twice}), ("AdamW" + why).c_str(), ValueError);
  CHECK_THROWS_WITH_AS(nn::SGD({w, twice}, 0.1), ("SGD" + why).c_str(), ValueError);
}

TEST_CASE("weight_decay_groups: no decay on biases, gains and the memory gate") {
  Generator gen(0);
  nn::TensorMemoryOptions o;
  o.D = o.H = o.W = 2;
  o.channels = 2;
  nn::TensorMemory mem(8, o, gen);
  const auto groups = nn::weight_decay_groups(mem, 0.05);
  REQUIRE(groups.size() == 2);
  CHECK(*groups[0].weight_decay == 0.05);
  CHECK(*groups[1].weight_decay == 0.0);
  CHECK_FALSE(groups[0].lr.has_value());
  std::set<const TensorImpl*> no_decay;
  for (const Tensor& p : groups[1].params) no_decay.insert(&p.impl());
  size_t total = 0;
  for (const auto& named : mem.named_parameters()) {
    const std::string name = named.first;
    const Tensor& p = named.second;
    INFO(name);
    ++total;
    const bool exempt = name == "gamma" || name.ends_with(".bias") || name.ends_with("db_d") ||
                        name.ends_with("db_h") || name.ends_with("db_w") || name.ends_with(".pb");
    CHECK(no_decay.count(&p.impl()) == (exempt ? 1u : 0u));
  }
  CHECK(groups[0].params.size() + groups[1].params.size() == total);
  CHECK(no_decay.count(&mem.gamma.impl()) == 1);
  CHECK(no_decay.count(&mem.write_proj->bias.impl()) == 1);
  CHECK(no_decay.count(&mem.write_proj->weight.impl()) == 0);
  // Decoupled decay of 0 leaves a parameter with a zero gradient unchanged.
  nn::LayerNorm ln(3);
  nn::AdamW opt(nn::weight_decay_groups(ln, 0.5), 0.1);
  for (const Tensor& p : ln.parameters()) accumulate_grad(p.impl(), zeros(p.shape()), "test");
  opt.step();
  CHECK(ln.weight.to_vector() == std::vector<double>{1, 1, 1});
  CHECK_THROWS_AS(nn::weight_decay_groups(ln, -0.1), ValueError);
}

TEST_CASE("AdamW state_dict with groups: exact resume, and a group layout that does not fit is refused") {
  auto make_params = [] {
    return std::vector<Tensor>{tensor({1, 2, 3, 4}, {2, 2}).requires_grad_(), tensor({0.5, -0.5}, {2}).requires_grad_()};
  };
  auto ps = make_params(), qs = make_params();
  nn::AdamW a(nn::weight_decay_groups(ps, 0.1), 1e-2), b(nn::weight_decay_groups(qs, 0.1), 1e-2);
  for (int s = 0; s < 3; ++s) {
    set_grads(ps, 0.1 * (s + 1));
    a.step();
  }
  const auto state = a.state_dict();
  CHECK(state.at("group_sizes").to_int_vector() == std::vector<int64_t>{1, 1});
  CHECK(state.at("step").to_int_vector() == std::vector<int64_t>{3});
  for (size_t i = 0; i < ps.size(); ++i) copy_data(qs[i], ps[i]);
  b.load_state_dict(state);
  set_grads(ps, 0.4);
  set_grads(qs, 0.4);
  a.step();
  b.step();
  for (size_t i = 0; i < ps.size(); ++i) CHECK(qs[i].to_vector() == ps[i].to_vector());
  // One group of two parameters: the same moments, another layout.
  nn::AdamW one(make_params(), 1e-2);
  CHECK_THROWS_WITH_AS(one.load_state_dict(state),
                       "AdamW::load_state_dict: the state has groups of [1,1] parameters, but this optimizer has [2]",
                       ValueError);
  // A state from before groups (no "group_sizes") is one group.
  auto legacy = one.state_dict();
  legacy.erase("group_sizes");
  one.load_state_dict(legacy);
  CHECK_THROWS_AS(b.load_state_dict(legacy), ValueError);
  // A moment of a parameter this optimizer does not have: another model's state.
  auto extra = one.state_dict();
  extra["m.2"] = extra.at("m.0");
  extra["momentum"] = extra.at("step");
  CHECK_THROWS_WITH_AS(one.load_state_dict(extra), "AdamW::load_state_dict: unexpected key(s) \"m.2\", \"momentum\"",
                       ValueError);
}

TEST_CASE("DataLoader: batches in order, drop_last, and several tensors gathered together") {
  Tensor x = reshape(arange(20), {10, 2});  // example i is [2i, 2i + 1]
  Tensor y = arange(10, DType::Int64);
  nn::DataLoader loader({x, y}, {4, false, false});
  CHECK(loader.size() == 3);
  CHECK(loader.dataset_size() == 10);
  std::vector<std::vector<int64_t>> seen;
  for (const std::vector<Tensor>& b : loader) {
    REQUIRE(b.size() == 2);
    CHECK(b[0].shape() == Shape{b[1].numel(), 2});
    const auto xs = b[0].to_vector();
    const auto ys = b[1].to_int_vector();
    for (size_t k = 0; k < ys.size(); ++k) CHECK(xs[2 * k] == 2.0 * static_cast<double>(ys[k]));
    seen.push_back(ys);
  }
  CHECK(seen == std::vector<std::vector<int64_t>>{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9}});
  nn::DataLoader dropped({y}, {4, false, true});
  CHECK(dropped.size() == 2);
  CHECK(dropped.next()[0].to_int_vector() == std::vector<int64_t>{0, 1, 2, 3});
  CHECK(dropped.next()[0].to_int_vector() == std::vector<int64_t>{4, 5, 6, 7});
  CHECK(dropped.next()[0].to_int_vector() == std::vector<int64_t>{0, 1, 2, 3});  // a new epoch
  // drop_last with fewer examples than a batch: no batch at all.
  nn::DataLoader none({y}, {11, false, true});
  CHECK(none.size() == 0);
  CHECK(none.begin() == none.end());
  CHECK_THROWS_WITH_AS(none.next(), "DataLoader: an epoch of 10 examples has no batch of 11 with drop_last", ValueError);
  CHECK_THROWS_AS(nn::DataLoader({y}, {0, false, false}), ValueError);
  CHECK_THROWS_AS(nn::DataLoader({x, arange(9)}, {2, false, false}), ShapeError);
  CHECK_THROWS_AS(nn::DataLoader({tensor({1}, {})}, {1, false, false}), ShapeError);
  CHECK_THROWS_AS(nn::DataLoader({}, {1, false, false}), ShapeError);
}

TEST_CASE("DataLoader: a seeded shuffle per epoch, drawn from the generator at the epoch's start") {
  Tensor y = arange(7, DType::Int64);
  Generator gen(7);
  nn::DataLoader loader({y}, {3, true, false}, gen);
  // The documented shuffle: Fisher-Yates from Generator(7).
  Generator ref(7);
  std::vector<int64_t> order(7);
  std::iota(order.begin(), order.end(), int64_t{0});
  for (int64_t k = 6; k > 0; --k) std::swap(order[k], order[ref.randint(k + 1)]);
  std::vector<int64_t> epoch1;
  for (const auto& b : loader) {
    const auto v = b[0].to_int_vector();
    epoch1.insert(epoch1.end(), v.begin(), v.end());
  }
  CHECK(epoch1 == order);
  CHECK(gen.state() == ref.state());  // only the shuffle drew from it
  std::vector<int64_t> epoch2;
  for (int i = 0; i < 3; ++i) {
    const auto v = loader.next()[0].to_int_vector();
    epoch2.insert(epoch2.end(), v.begin(), v.end());
  }
  CHECK(epoch2 != epoch1);
  std::vector<int64_t> sorted = epoch2;
  std::sort(sorted.begin(), sorted.end());
  CHECK(sorted == y.to_int_vector());  // a permutation: each example once per epoch
  // Same seed, same batches.
  Generator g2(7);
  nn::DataLoader again({y}, {3, true, false}, g2);
  CHECK(again.next()[0].to_int_vector() == std::vector<int64_t>(epoch1.begin(), epoch1.begin() + 3));
}

TEST_CASE("TensorMemoryProbe: records each forward's internals while alive, innermost first, nothing after") {
  Generator gen(3);
  nn::TensorMemoryOptions o;
  o.channels = 2;
  o.D = o.H = o.W = 3;
  o.chunk = 2;
  nn::TensorMemory mem(8, o, gen);
  const Tensor x = randn({2, 5, 8}, 0, 1, DType::Float32, gen);
  NoGradGuard no_grad;
  CHECK(nn::TensorMemoryProbe::active() == nullptr);
  nn::TensorMemoryOutput first;
  {
    nn::TensorMemoryProbe outer;
    first = mem.forward(x, mem.initial_state(2));
    {
      nn::TensorMemoryProbe inner;
      CHECK(nn::TensorMemoryProbe::active() == &inner);
      mem.forward(slice(x, 1, 0, 2), first.state);
      REQUIRE(inner.records().size() == 1);
      CHECK(inner.records()[0].mu_read.shape() == Shape{2, 1, 3});
    }
    CHECK(nn::TensorMemoryProbe::active() == &outer);
    REQUIRE(outer.records().size() == 1);  // the inner forward went to the inner probe only
    const nn::TensorMemoryProbe::Record* r = outer.last(mem);
    REQUIRE(r != nullptr);
    CHECK(r->layer == &mem);
    CHECK(r->mu_read.shape() == Shape{2, 3, 3});  // ceil(5 / 2) chunks
    CHECK(r->mu_write.shape() == Shape{2, 3, 3});
    CHECK(r->sigma.shape() == Shape{2, 3, 1});
    CHECK_FALSE(r->mu_read.requires_grad());
    for (double v : r->sigma.to_vector()) CHECK(v > 0.0);
    nn::TensorMemory other(8, o, gen);
    CHECK(outer.last(other) == nullptr);
  }
  CHECK(nn::TensorMemoryProbe::active() == nullptr);
  // The state is returned, not written through the argument: the same input
  // state gives the same output twice.
  const ConvLSTM3DState s0 = mem.initial_state(2);
  CHECK(mem.forward(x, s0).out.to_vector() == first.out.to_vector());
  CHECK(s0.h.to_vector() == std::vector<double>(static_cast<size_t>(s0.h.numel()), 0.0));
}

TEST_CASE("ConvLSTM3D forget_bias starts the forget gate's biases there, and the cell keeps sigmoid(b) of c") {
  NoGradGuard no_grad;
  const double b = 3.0;
  nn::ConvLSTM3D cell(2, 3, true, default_generator(), b);
  // pb [4C]: gates i, f, o, g; only the forget rows C..2C move.
  CHECK(cell.w.pb.to_vector() == std::vector<double>{0, 0, 0, b, b, b, 0, 0, 0, 0, 0, 0});
  // With the pointwise weights at 0, every gate is its bias: from x = h = 0
  // and c = 1, c' = sigmoid(b) * 1 + sigmoid(0) * tanh(0) = sigmoid(b).
  fill_data(cell.w.pw, 0.0);
  const ConvLSTM3DState s = cell.forward(zeros({1, 2, 2, 2, 2}), {zeros({1, 3, 2, 2, 2}), ones({1, 3, 2, 2, 2})});
  for (double v : s.c.to_vector()) CHECK(v == doctest::Approx(1 / (1 + std::exp(-b))).epsilon(1e-6));
  CHECK_THROWS_WITH_AS(nn::ConvLSTM3D(2, 3, true, default_generator(), std::nan("")),
                       "ConvLSTM3D: expected a forget_bias finite in float32, but got nan", ValueError);
  CHECK_THROWS_WITH_AS(nn::ConvLSTM3D(2, 3, true, default_generator(), 1e300),
                       "ConvLSTM3D: expected a forget_bias finite in float32, but got 1e+300", ValueError);
  nn::TensorMemoryOptions o;
  o.forget_bias = -1.5;
  nn::TensorMemory mem(8, o);
  CHECK(mem.cell->w.pb.to_vector()[static_cast<size_t>(o.channels)] == -1.5);
}

TEST_CASE("TensorMemory, ConvLSTM3D and MultiheadAttention check their options when built") {
  // Negative channels, a NaN gate or dropout 2 were taken, failing at the
  // first forward with another op's message (or giving NaN outputs).
  CHECK_THROWS_WITH_AS(nn::ConvLSTM3D(-1, 4), "ConvLSTM3D: expected positive in_channels and channels, but got "
                                              "in_channels -1 channels 4", ValueError);
  CHECK_THROWS_WITH_AS(nn::ConvLSTM3D(4, 0), "ConvLSTM3D: expected positive in_channels and channels, but got "
                                             "in_channels 4 channels 0", ValueError);
  nn::TensorMemoryOptions o;
  o.dropout = 2;
  CHECK_THROWS_WITH_AS(nn::TensorMemory(8, o), "TensorMemory: expected dropout in [0, 1], but got 2", ValueError);
  o.dropout = 0;
  o.gamma_init = std::nan("");
  CHECK_THROWS_WITH_AS(nn::TensorMemory(8, o), "TensorMemory: expected a gamma_init finite in float32, but got nan",
                       ValueError);
  CHECK_THROWS_WITH_AS(nn::MultiheadAttention(8, 2, -0.5), "MultiheadAttention: expected dropout in [0, 1], but got -0.5",
                       ValueError);
  // A window is causal: forward(x, causal false) dropped it silently.
  nn::AttentionOptions windowed;
  windowed.window = 2;
  Generator mha_gen(0);
  const nn::MultiheadAttention local(4, 2, 0.0, mha_gen, windowed);
  CHECK_THROWS_WITH_AS(local.forward(zeros({1, 3, 4}), false),
                       "MultiheadAttention: a window (2) is a causal sliding window, but forward was called with "
                       "causal false",
                       ValueError);
  CHECK(local.forward(zeros({1, 3, 4}), true).shape() == Shape{1, 3, 4});
  // heads 0 was reported as "not divisible by heads 0".
  CHECK_THROWS_WITH_AS(nn::MultiheadAttention(4, 0), "MultiheadAttention: expected dim > 0 and heads > 0, but got dim 4, "
                                                     "heads 0", ValueError);
}

TEST_CASE("AdamW and SGD refuse an infinite or NaN lr, momentum, eps or weight decay") {
  // An infinite lr was taken and made every parameter inf or NaN on the first step.
  const double inf = std::numeric_limits<double>::infinity();
  Tensor p = zeros({2}).requires_grad_();
  CHECK_THROWS_WITH_AS(nn::SGD({p}, inf), "SGD: expected a finite lr >= 0, but got inf", ValueError);
  CHECK_THROWS_WITH_AS(nn::SGD({p}, 0.1, std::nan("")),
                       "SGD: expected finite momentum, weight_decay >= 0, but got nan, 0", ValueError);
  CHECK_THROWS_WITH_AS(nn::AdamW({p}, inf), "AdamW: expected a finite lr >= 0, but got inf", ValueError);
  CHECK_THROWS_WITH_AS(nn::AdamW({p}, 1e-3, 0.9, 0.999, inf), doctest::Contains("a finite eps > 0"), ValueError);
  // An eps below float32's least subnormal was taken, and is 0 in a float32 step.
  CHECK_THROWS_WITH_AS(nn::AdamW({p}, 1e-3, 0.9, 0.999, 1e-50), doctest::Contains("also as float32"), ValueError);
  CHECK(nn::AdamW({p}, 1e-3, 0.9, 0.999, 1e-45).eps() == 1e-45);
  CHECK_THROWS_WITH_AS(nn::AdamW({p}, 1e-3, 0.9, 0.999, 1e-8, inf),
                       "AdamW: expected a finite weight_decay >= 0, but got inf", ValueError);
  CHECK_THROWS_WITH_AS(nn::AdamW({{{p}, inf, std::nullopt}}), doctest::Contains("but group 0 has lr inf"), ValueError);
  nn::AdamW opt({p}, 1e-3);
  CHECK_THROWS_WITH_AS(opt.set_lr(inf), "AdamW::set_lr: expected a finite lr >= 0, but got inf", ValueError);
  opt.set_lr(2e-3);
  CHECK(*opt.param_groups()[0].lr == 2e-3);
  CHECK_THROWS_WITH_AS(opt.set_weight_decay(0, -1), "AdamW::set_weight_decay: expected a finite weight_decay >= 0, "
                       "but got -1", ValueError);
  CHECK_THROWS_WITH_AS(opt.set_weight_decay(1, 0.1), "AdamW::set_weight_decay: group 1 is out of range for 1 groups",
                       IndexError);
  opt.set_weight_decay(0, 0.5);
  CHECK(*opt.param_groups()[0].weight_decay == 0.5);
}

TEST_CASE("AdamW refuses eps 0, which made a parameter whose gradient stayed 0 NaN") {
  Tensor p = ones({2}).requires_grad_();
  CHECK_THROWS_WITH_AS(nn::AdamW({p}, 1e-3, 0.9, 0.999, 0.0),
                       "AdamW: expected a finite eps > 0, also as float32 (eps 0 divides 0 by 0 where a gradient has been 0), but got 0",
                       ValueError);
  nn::AdamW opt({p}, 1e-3, 0.9, 0.999, 1e-12, 0.0);
  set_grads({p}, 0.0);
  opt.step();
  CHECK(p.to_vector() == std::vector<double>{1.0, 1.0});
}

TEST_CASE("TensorMemory refuses a chunk * dim past int64 and a sigma_scale that is infinite in float32") {
  // chunk 2^61 with dim 8 wrapped to a write_proj of width 0 ("Linear:
  // expected positive sizes, but got in 0"), and sigma_scale inf was taken.
  nn::TensorMemoryOptions o;
  o.chunk = int64_t{1} << 61;
  CHECK_THROWS_WITH_AS(nn::TensorMemory(8, o),
                       "TensorMemory: expected dim > 0 and chunk * dim within int64, but got dim 8 chunk "
                       "2305843009213693952",
                       ValueError);
  o.chunk = 1;
  CHECK_THROWS_WITH_AS(nn::TensorMemory(0, o), doctest::Contains("expected dim > 0"), ValueError);
  o.sigma_scale = INFINITY;
  CHECK_THROWS_WITH_AS(nn::TensorMemory(8, o),
                       "TensorMemory: expected a sigma_scale > 0 and finite in float32, but got inf", ValueError);
  o.sigma_scale = 1e300;
  CHECK_THROWS_AS(nn::TensorMemory(8, o), ValueError);
  o.sigma_scale = 0.5;
  nn::TensorMemory ok(8, o);
  CHECK(ok.write_proj->in_features == 8);
}

TEST_CASE("TensorMemory: no tokens give an empty output and leave the state as it was") {
  // N = 0 once failed inside stack ("expected a non-empty list of tensors").
  nn::TensorMemoryOptions o;
  o.channels = 2;
  o.D = o.H = o.W = 3;
  o.chunk = 2;
  nn::TensorMemory mem(8, o);
  const ConvLSTM3DState s0 = {ones({2, 2, 3, 3, 3}), full({2, 2, 3, 3, 3}, 2.0)};
  const nn::TensorMemoryOutput r = mem.forward(zeros({2, 0, 8}), s0);
  CHECK(r.out.shape() == Shape{2, 0, 8});
  CHECK(r.state.h.to_vector() == s0.h.to_vector());
  CHECK(r.state.c.to_vector() == s0.c.to_vector());
}

TEST_CASE("TensorMemory names non-finite tokens and a state of another dtype itself, on both write paths") {
  // A NaN token was reported by gaussian_splat ("every sigma to be finite"),
  // and with hard_write it was written into cell 0 and read as 0 silently; a
  // float64 state was reported by grid_sample.
  for (const bool hard : {false, true}) {
    CAPTURE(hard);
    nn::TensorMemoryOptions o;
    o.channels = 2;
    o.D = o.H = o.W = 3;
    o.chunk = 2;
    o.hard_write = hard;
    Generator gen(3);
    nn::TensorMemory mem(4, o, gen);
    const ConvLSTM3DState s0 = mem.initial_state(2);
    std::vector<double> x(2 * 5 * 4, 0.25);
    x[(1 * 5 + 3) * 4 + 2] = std::numeric_limits<double>::quiet_NaN();  // row 1, token 3: chunk 1's write token
    CHECK_THROWS_WITH_AS(mem.forward(tensor(x, {2, 5, 4}), s0),
                         "TensorMemory: the write coordinates are not finite for row 1, tokens 2-3: x[1, 2:4] or the "
                         "layer's weights hold NaN or Inf", ValueError);
    x[(1 * 5 + 3) * 4 + 2] = 0.25;
    x[(0 * 5 + 4) * 4 + 0] = std::numeric_limits<double>::quiet_NaN();  // row 0, token 4: the last chunk, alone
    CHECK_THROWS_WITH_AS(mem.forward(tensor(x, {2, 5, 4}), s0),
                         "TensorMemory: the read coordinates are not finite for row 0, tokens 4-4: x[0, 4:5] or the "
                         "layer's weights hold NaN or Inf", ValueError);
    // -inf: tanh and softplus keep the coordinates and the width finite, the content is infinite.
    x[(0 * 5 + 4) * 4 + 0] = 0.25;
    x[(1 * 5 + 1) * 4 + 1] = -std::numeric_limits<double>::infinity();
    CHECK_THROWS_WITH_AS(mem.forward(tensor(x, {2, 5, 4}), s0),
                         doctest::Contains("for row 1, tokens 0-1: x[1, 0:2] or the layer's weights hold NaN or Inf"),
                         ValueError);
    const ConvLSTM3DState f64{to_dtype(s0.h, DType::Float64), to_dtype(s0.c, DType::Float64)};
    CHECK_THROWS_WITH_AS(mem.forward(zeros({2, 5, 4}), f64),
                         "TensorMemory: expected state h, c of x's dtype float32, but got h float64 c float64",
                         DtypeError);
  }
}

TEST_CASE("ConvLSTM3D names its channel counts when x or the state has others") {
  Generator gen(1);
  nn::ConvLSTM3D cell(3, 4, true, gen);
  const ConvLSTM3DState s{zeros({2, 4, 3, 3, 3}), zeros({2, 4, 3, 3, 3})};
  CHECK_THROWS_WITH_AS(cell.forward(zeros({2, 5, 3, 3, 3}), s),
                       "ConvLSTM3D: expected x [B, 3, D, H, W] and state h, c [B, 4, D, H, W] (in_channels 3, "
                       "channels 4), but got x [2,5,3,3,3] h [2,4,3,3,3] c [2,4,3,3,3]", ShapeError);
  CHECK_THROWS_WITH_AS(cell.forward(zeros({2, 3, 3, 3, 3}), {zeros({2, 5, 3, 3, 3}), zeros({2, 4, 3, 3, 3})}),
                       doctest::Contains("but got x [2,3,3,3,3] h [2,5,3,3,3] c [2,4,3,3,3]"), ShapeError);
  CHECK(cell.forward(zeros({2, 3, 3, 3, 3}), s).h.shape() == Shape{2, 4, 3, 3, 3});
}

TEST_CASE("AdamW load_state_dict refuses a corrupt step or moment and copies nothing from it") {
  // A negative "step" or "v" was loaded and made the next step's parameters
  // NaN; a "step" of two entries or of float32 was read silently; a state
  // refused at "v.1" had already overwritten "m.0".
  std::vector<Tensor> ps{tensor({1, 2}, {2}).requires_grad_(), tensor({3}, {1}).requires_grad_()};
  nn::AdamW a(ps, 1e-2);
  set_grads(ps, 0.5);
  a.step();
  const auto good = a.state_dict();
  const std::vector<double> m0 = good.at("m.0").to_vector();
  auto has = [](const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; };
  auto refused = [&](const std::string& key, const Tensor& value) {
    auto bad = good;
    bad[key] = value;
    std::string what;
    try {
      a.load_state_dict(bad);
    } catch (const Error& e) {
      what = e.what();
    }
    CHECK(a.steps() == 1);
    CHECK(a.state_dict().at("m.0").to_vector() == m0);
    return what;
  };
  CHECK(has(refused("step", tensor_int({-5}, {1})), "\"step\" must hold one count in [0, 2^63 - 1), but got [-5]"));
  CHECK(has(refused("step", tensor_int({INT64_MAX}, {1})), "\"step\" must hold one count"));
  CHECK(has(refused("step", tensor_int({1, 2}, {2})), "but got [1,2]"));
  CHECK(has(refused("step", tensor({1.0}, {1})), "AdamW::load_state_dict: \"step\" must be int64, but got float32"));
  CHECK(has(refused("group_sizes", zeros({1})), "\"group_sizes\" must be int64"));
  CHECK(has(refused("v.1", tensor({-1.0}, {1})),
            "\"v.1\" holds -1 at flat index 0, but a second moment must be finite and cannot be negative"));
  CHECK(has(refused("v.1", tensor({INFINITY}, {1})), "\"v.1\" holds inf at flat index 0"));
  CHECK(has(refused("m.0", tensor({0.0, NAN}, {2})),
            "AdamW::load_state_dict: \"m.0\" holds nan at flat index 1, but a moment must be finite"));
  auto partial = good;
  partial["m.0"] = zeros({2});
  partial.erase("v.1");
  CHECK_THROWS_WITH_AS(a.load_state_dict(partial), doctest::Contains("missing key \"v.1\""), ValueError);
  CHECK(a.state_dict().at("m.0").to_vector() == m0);
  a.load_state_dict(good);
  CHECK(a.steps() == 1);
}

TEST_CASE("MultiheadAttention names itself for an input or context of another dtype than its weights") {
  // It was the inner Linear's (or matmul's, for the context) error.
  nn::MultiheadAttention mha(4, 2);
  CHECK_THROWS_WITH_AS(mha.forward(zeros({1, 2, 4}, DType::Float64)),
                       "MultiheadAttention: expected x of the weights' dtype float32, but got float64; convert them "
                       "(to_dtype)",
                       DtypeError);
  CHECK_THROWS_WITH_AS(mha.forward(zeros({1, 2, 4}), true, Tensor(), zeros({1, 3, 4}, DType::Float64)),
                       "MultiheadAttention: expected x and context of the weights' dtype float32, but got float32 and "
                       "float64; convert them (to_dtype)",
                       DtypeError);
}

namespace {
// A module with a float and an int64 buffer beside a Linear child.
struct Counted : nn::Module {
  Counted() {
    lin = register_module("lin", std::make_shared<nn::Linear>(3, 2));
    scale = register_buffer("scale", full({2}, 0.5));
    count = register_buffer("count", tensor(std::vector<int64_t>{7}, {1}));
  }
  std::shared_ptr<nn::Linear> lin;
  Tensor scale, count;
};
}  // namespace

TEST_CASE("Module::to(dtype) casts parameters, gradients and floating buffers in place, and AdamW follows") {
  Generator gen(5);
  const Tensor x = randn({4, 3}, 0.0, 1.0, DType::Float32, gen);
  Counted a, b;  // b stays float32: the reference for a's float64 steps
  b.load_state_dict(a.state_dict());
  nn::AdamW opt_a(a.parameters(), 0.1), opt_b(b.parameters(), 0.1);
  const auto step = [&x](Counted& m, nn::AdamW& opt) {
    opt.zero_grad();
    const Tensor in = to_dtype(x, m.lin->weight.dtype());
    sum(mul(mul(m.lin->forward(in), m.scale), m.lin->forward(in))).backward();
    opt.step();
  };
  step(a, opt_a);
  step(b, opt_b);
  sum(a.lin->forward(x)).backward();  // a gradient held across the cast
  const TensorImpl* w_impl = a.lin->weight.impl_ptr().get();
  const auto w_before = a.lin->weight.to_vector();
  const auto g_before = a.lin->weight.grad().to_vector();

  CHECK(&a.to(DType::Float64) == &a);
  CHECK(a.lin->weight.impl_ptr().get() == w_impl);  // the tensor an optimizer holds
  CHECK(a.lin->weight.dtype() == DType::Float64);
  CHECK(a.lin->bias.dtype() == DType::Float64);
  CHECK(a.lin->weight.requires_grad());
  CHECK(a.lin->weight.to_vector() == w_before);  // float32 -> float64 is exact
  CHECK(a.lin->weight.grad().dtype() == DType::Float64);
  CHECK(a.lin->weight.grad().to_vector() == g_before);
  CHECK(a.scale.dtype() == DType::Float64);
  CHECK(a.count.dtype() == DType::Int64);
  CHECK(a.count.to_vector() == std::vector<double>{7});

  // The moments made in float32 are cast at the next step; two more steps
  // agree with the float32 model's to float32 rounding.
  for (int i = 0; i < 2; ++i) {
    step(a, opt_a);
    step(b, opt_b);
  }
  CHECK(opt_a.state_dict().at("m.0").dtype() == DType::Float64);
  check_close(a.lin->weight.to_vector(), b.lin->weight.to_vector(), 1e-6, 1e-5);
  check_close(a.lin->bias.to_vector(), b.lin->bias.to_vector(), 1e-6, 1e-5);

  a.to(DType::Float32);
  CHECK(a.lin->weight.dtype() == DType::Float32);
  CHECK(a.count.dtype() == DType::Int64);
  CHECK(error_of<DtypeError>([&] { a.to(DType::Int64); }) ==
        "Module::to: expected a floating dtype (float32 or float64), but got int64");
  CHECK(a.lin->weight.dtype() == DType::Float32);
}

TEST_CASE("Module::to refuses a non-leaf tensor it would change, changing nothing, and leaves the others in place") {
  struct Derived : nn::Module {
    Derived() {
      lin = register_module("lin", std::make_shared<nn::Linear>(2, 2));
      twice = register_buffer("twice", mul(lin->weight, 2.0));  // the output of an op
    }
    std::shared_ptr<nn::Linear> lin;
    Tensor twice;
  };
  Derived m;
  CHECK(error_of<ValueError>([&] { m.to(DType::Float64); }) ==
        "Module::to: \"twice\" is the output of an op, not a leaf (a buffer registered as x * 2 rather than a "
        "detached tensor), so it cannot be changed in place; register its detach()");
  CHECK(m.lin->weight.dtype() == DType::Float32);
  CHECK(m.twice.dtype() == DType::Float32);
  const TensorImpl* impl = m.twice.impl_ptr().get();
  m.to(Device::cpu());  // already there: nothing to change, nothing refused
  CHECK(m.twice.impl_ptr().get() == impl);
  m.to(DType::Float32);
  CHECK(!m.twice.is_leaf());
}

TEST_CASE("AdamW and SGD refuse a parameter whose data became a strided view since they were built") {
  Tensor p = zeros({2, 3});
  p.requires_grad_();
  nn::SGD sgd({p}, 0.1);
  nn::AdamW adamw({p}, 0.1);
  p.set_data(transpose(tensor({1, 2, 3, 4, 5, 6}, {3, 2}), 0, 1));
  sum(mul(p, p)).backward();
  const std::string tail = " of shape [2,3] is not contiguous (strides [1,2]): its data was replaced by a strided "
                           "view (p.data = src); assign src.contiguous()";
  CHECK(error_of<ValueError>([&] { sgd.step(); }) == "SGD.step: parameter 0" + tail);
  CHECK(error_of<ValueError>([&] { adamw.step(); }) == "AdamW.step: parameter 0" + tail);
  CHECK(p.to_vector() == std::vector<double>{1, 3, 5, 2, 4, 6});
}

TEST_CASE("float64 recurrent layers (Module::to) pass gradcheck through their state, from a state of their dtype") {
  Generator gen(11);
  const Tensor x = randn({2, 3, 4}, 0.0, 1.0, DType::Float64, gen);
  const auto check_layer = [&](nn::Module& m, const std::function<Tensor(const Tensor&)>& run) {
    m.to(DType::Float64);
    std::vector<Tensor> inputs = {x.detach().requires_grad_()};
    for (const Tensor& p : m.parameters()) inputs.push_back(p);
    const GradcheckResult r =
        gradcheck([&](const std::vector<Tensor>& in) { return run(in[0]); }, inputs, 1e-6, 1e-6, 1e-4);
    CHECK_MESSAGE(r.ok, r.message);
  };
  for (const bool factorized : {true, false}) {
    SUBCASE(factorized ? "TensorMemory" : "TensorMemory, pointwise-only") {
      nn::TensorMemoryOptions o;
      o.channels = 2;
      o.D = o.H = o.W = 3;
      o.chunk = 1;
      o.factorized = factorized;  // false: fixed identity taps that are not parameters
      nn::TensorMemory mem(4, o, gen);
      check_layer(mem, [&](const Tensor& in) {
        const ConvLSTM3DState s = mem.initial_state(2);
        CHECK(s.h.dtype() == DType::Float64);
        const nn::TensorMemoryOutput r = mem.forward(in, s);
        return add(sum(r.out), sum(r.state.h));
      });
    }
  }
  SUBCASE("TensorMemory, hard write: float64 gives the float32 layer's output") {
    nn::TensorMemoryOptions o;
    o.channels = 2;
    o.D = o.H = o.W = 3;
    o.hard_write = true;
    nn::TensorMemory m32(4, o, gen), m64(4, o, gen);
    m64.load_state_dict(m32.state_dict());
    m64.to(DType::Float64);
    const Tensor y32 = m32.forward(to_dtype(x, DType::Float32), m32.initial_state(2)).out;
    const Tensor y64 = m64.forward(x, m64.initial_state(2)).out;
    CHECK(y64.dtype() == DType::Float64);
    check_close(y64.to_vector(), y32.to_vector(), 1e-5, 1e-4);
  }
  SUBCASE("SelectiveSSM") {
    nn::SelectiveSSM ssm(4, 3, gen);
    check_layer(ssm, [&](const Tensor& in) {
      Tensor s = ssm.initial_state(2);
      const Tensor y = ssm.forward(in, s);
      return add(sum(y), sum(s));
    });
  }
  SUBCASE("LinearAttentionMemory") {
    nn::LinearAttentionMemory lin(4, 2, 3, gen);
    check_layer(lin, [&](const Tensor& in) {
      nn::LinearAttentionState s = lin.initial_state(2);
      const Tensor y = lin.forward(in, s);
      return add(sum(y), sum(s.S));
    });
  }
}
