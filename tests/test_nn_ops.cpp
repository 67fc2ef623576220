// The nn ops: softmax, log_softmax, layer_norm, embedding, cross_entropy,
// dropout and scaled_dot_product_attention. Exact edge values, errors,
// PyTorch reference fixtures (tests/fixtures/nn.json, written by
// tools/fixtures/nn.py) and the attention gradchecks (attention has no OpId,
// so the op table does not run them).
#include <cmath>
#include <limits>
#include <map>
#include <string>

#include "fixture.h"
#include "test_util.h"

using namespace tmem;
using tmem::test::check_close;
using tmem::test::fixture_tensor;
using tmem::test::fixture_values;
using tmem::test::load_fixture;
using tmem::test::require_gradcheck;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// Runs f, expecting an exception of type E whose message holds every part.
template <class E, class F>
void check_throws_with(F f, std::initializer_list<std::string> parts) {
  try {
    f();
    FAIL_CHECK("expected an exception");
  } catch (const E& e) {
    for (const std::string& p : parts) {
      INFO("message: " << std::string(e.what()) << " / expected to contain: " << p);
      CHECK(contains(e.what(), p));
    }
  }
}

bool all_finite(const Tensor& t) {
  for (double v : t.to_vector())
    if (!std::isfinite(v)) return false;
  return true;
}

// Compares one fixture case: the op (given float32 inputs by name) against
// PyTorch's output and the gradients of sum(out * w).
void check_fixture_case(const nlohmann::json& c,
                        const std::function<Tensor(std::map<std::string, Tensor>&)>& fn,
                        double atol = 2e-6, double rtol = 1e-5) {
  std::map<std::string, Tensor> in;
  for (const auto& [name, j] : c.at("inputs").items()) {
    if (!c.at("grads").contains(name)) {  // class indices
      std::vector<int64_t> v;
      for (double x : fixture_values(j)) v.push_back(static_cast<int64_t>(x));
      in[name] = tensor_int(v, j.at("shape").get<Shape>());
      continue;
    }
    Tensor t = fixture_tensor(j);
    t.requires_grad_();
    in[name] = t;
  }
  Tensor out = fn(in);
  CHECK(out.shape() == c.at("out").at("shape").get<Shape>());
  {
    INFO("output");
    check_close(out, fixture_values(c.at("out")), atol, rtol);
  }
  sum(mul(out, fixture_tensor(c.at("w")))).backward();
  for (const auto& item : c.at("grads").items()) {
    const std::string name = item.key();  // a plain variable: INFO captures it
    const auto& j = item.value();
    INFO("gradient of " << name);
    REQUIRE(in[name].grad().defined());
    check_close(in[name].grad(), fixture_values(j), atol, rtol);
  }
}

}  // namespace

// ---------------------------------------------------------------- softmax

TEST_CASE("softmax: a fully -inf row gives zeros and zero gradient, never NaN") {
  Tensor x = tensor({1, 2, 3, -kInf, -kInf, -kInf, 0, -kInf, 0}, {3, 3});
  x.requires_grad_();
  Tensor y = softmax(x, -1);
  std::vector<double> v = y.to_vector();
  check_close(std::vector<double>(v.begin() + 3, v.begin() + 6), {0, 0, 0});
  check_close(std::vector<double>(v.begin() + 6, v.end()), {0.5, 0, 0.5});
  CHECK(all_finite(y));
  sum(mul(y, tensor({1, 2, 3, 4, 5, 6, 7, 8, 9}, {3, 3}))).backward();
  CHECK(all_finite(x.grad()));
  std::vector<double> g = x.grad().to_vector();
  check_close(std::vector<double>(g.begin() + 3, g.begin() + 6), {0, 0, 0});
  check_close(std::vector<double>(g.begin() + 6, g.end()), {-0.5, 0, 0.5});
}

TEST_CASE("softmax: a fully -inf row of width 37 (vector body + tail) along a non-last dim") {
  Tensor x = full({37, 2}, -kInf);
  copy_data(slice(x, 1, 1, 2), rand({37, 1}));
  x.requires_grad_();
  Tensor y = softmax(x, 0);
  CHECK(all_finite(y));
  check_close(slice(y, 1, 0, 1).to_vector(), std::vector<double>(37, 0.0));
  check_close(sum(slice(y, 1, 1, 2)).to_vector(), {1.0}, 1e-6);
  sum(mul(y, rand({37, 2}))).backward();
  CHECK(all_finite(x.grad()));
  check_close(slice(x.grad(), 1, 0, 1).to_vector(), std::vector<double>(37, 0.0));
}

TEST_CASE("log_softmax: a fully -inf row gives -inf values and zero gradient") {
  Tensor x = tensor({-kInf, -kInf, -kInf, 1, 2, 3}, {2, 3});
  x.requires_grad_();
  Tensor y = log_softmax(x, 1);
  std::vector<double> v = y.to_vector();
  for (int i = 0; i < 3; ++i) CHECK(v[i] == -kInf);
  check_close(std::vector<double>(v.begin() + 3, v.end()), {-2.407606, -1.407606, -0.407606}, 1e-5);
  y.backward(tensor({1, 2, 3, 1, 1, 1}, {2, 3}));
  CHECK(all_finite(x.grad()));
  // Row 0 (masked): zero. Row 1: g - exp(y) * sum(g) = 1 - 3 softmax([1, 2, 3]).
  check_close(x.grad(), {0, 0, 0, 0.7299082, 0.2658145, -0.9957227}, 1e-6);
}

TEST_CASE("log_softmax: logits offset by 1e8 in float32 give -log 2") {
  Tensor y = log_softmax(tensor({1e8, 1e8}, {1, 2}), -1);
  check_close(y, {-std::log(2.0), -std::log(2.0)}, 1e-6);
}

TEST_CASE("softmax: a non-contiguous (transposed) input matches the contiguous path") {
  Generator gen(3);
  Tensor a = rand({5, 23}, -3, 3, DType::Float32, gen);
  Tensor at = transpose(a, 0, 1);  // [23, 5], not contiguous
  CHECK(!at.is_contiguous());
  check_close(softmax(at, 0), transpose(softmax(a, 1), 0, 1).to_vector(), 1e-7, 1e-6);
  check_close(log_softmax(at, -1), contiguous(transpose(log_softmax(a, 0), 0, 1)).to_vector(), 1e-6,
              1e-6);
}

TEST_CASE("softmax: errors name the op") {
  check_throws_with<IndexError>([] { softmax(zeros({2, 3}), 2); }, {"softmax", "2"});
  check_throws_with<DtypeError>([] { log_softmax(tensor_int({1, 2}, {2}), 0); },
                                {"log_softmax", "int64"});
  check_close(softmax(full({}, 5.0), 0), {1.0});
}

TEST_CASE("softmax / log_softmax: PyTorch fixtures") {
  nlohmann::json fx = load_fixture("nn");
  for (const char* name : {"softmax_dim1", "softmax_last_partly_masked"}) {
    SUBCASE(name) {
      const auto& c = fx.at(name);
      int64_t dim = c.at("params").at("dim").get<int64_t>();
      check_fixture_case(c, [dim](auto& in) { return softmax(in["x"], dim); });
    }
  }
  for (const char* name : {"log_softmax_dim0", "log_softmax_last"}) {
    SUBCASE(name) {
      const auto& c = fx.at(name);
      int64_t dim = c.at("params").at("dim").get<int64_t>();
      check_fixture_case(c, [dim](auto& in) { return log_softmax(in["x"], dim); });
    }
  }
}

// ---------------------------------------------------------------- layer_norm

TEST_CASE("layer_norm: [40000, 40001, 40002, 40003] in float32 (two-pass variance)") {
  Tensor x = tensor({40000, 40001, 40002, 40003}, {1, 4});
  Tensor y = layer_norm(x, Tensor(), Tensor());
  check_close(y, {-1.3416, -0.4472, 0.4472, 1.3416}, 1e-4, 0);
  check_close(y, {-1.3416355, -0.4472118, 0.4472118, 1.3416355}, 2e-6, 1e-6);
}

TEST_CASE("layer_norm: gradients of x, weight and bias - weight/bias undefined") {
  Tensor x = gc_input({2, 3, 7}, -2, 2, 21);
  Tensor w = gc_input({7}, 0.5, 1.5, 22);
  Tensor b = gc_input({7}, -1, 1, 23);
  require_gradcheck([](const std::vector<Tensor>& v) { return layer_norm(v[0], v[1], v[2]); },
                    {x, w, b});
  Tensor x2 = gc_input({4, 33}, -2, 2, 24);
  require_gradcheck(
      [](const std::vector<Tensor>& v) { return layer_norm(v[0], Tensor(), Tensor()); }, {x2});
  // Only the bias needs a gradient: x's and weight's are skipped.
  Tensor xf = rand({3, 5}), wf = rand({5}), bf = zeros({5});
  bf.requires_grad_();
  sum(layer_norm(xf, wf, bf)).backward();
  check_close(bf.grad(), {3, 3, 3, 3, 3});
}

TEST_CASE("layer_norm: shape errors name both shapes") {
  check_throws_with<ShapeError>([] { layer_norm(zeros({2, 5}), ones({4}), Tensor()); },
                                {"layer_norm", "weight", "[4]", "[2,5]"});
  check_throws_with<ShapeError>([] { layer_norm(zeros({2, 5}), Tensor(), zeros({5, 1})); },
                                {"layer_norm", "bias", "[5,1]", "[2,5]"});
  check_throws_with<ShapeError>([] { layer_norm(full({}, 1.0), Tensor(), Tensor()); },
                                {"layer_norm", "[]"});
  check_throws_with<DtypeError>(
      [] { layer_norm(zeros({2, 5}), ones({5}, DType::Float64), Tensor()); },
      {"layer_norm", "float64"});
}

TEST_CASE("layer_norm: PyTorch fixtures") {
  nlohmann::json fx = load_fixture("nn");
  SUBCASE("affine") {
    check_fixture_case(fx.at("layer_norm_affine"),
                       [](auto& in) { return layer_norm(in["x"], in["weight"], in["bias"], 1e-5); },
                       1e-5);
  }
  SUBCASE("no weight or bias") {
    check_fixture_case(fx.at("layer_norm_plain"),
                       [](auto& in) { return layer_norm(in["x"], Tensor(), Tensor(), 1e-5); },
                       1e-5);
  }
}

// ---------------------------------------------------------------- embedding

TEST_CASE("embedding: rows are gathered and the gradient is scatter-added") {
  Tensor w = tensor({0, 1, 10, 11, 20, 21}, {3, 2});
  w.requires_grad_();
  Tensor out = embedding(w, tensor_int({2, 0, 2, 2}, {2, 2}));
  CHECK(out.shape() == Shape{2, 2, 2});
  check_close(out, {20, 21, 0, 1, 20, 21, 20, 21});
  sum(mul(out, tensor({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2}))).backward();
  check_close(w.grad(), {3, 4, 0, 0, 1 + 5 + 7, 2 + 6 + 8});
}

TEST_CASE("embedding: an index out of range or negative is an IndexError naming index and size") {
  Tensor w = zeros({3, 4});
  check_throws_with<IndexError>([&] { embedding(w, tensor_int({0, 999}, {2})); },
                                {"embedding", "999", "3 rows"});
  check_throws_with<IndexError>([&] { embedding(w, tensor_int({1, -1}, {1, 2})); },
                                {"embedding", "-1", "3 rows"});
  check_throws_with<IndexError>([&] { embedding(w, tensor_int({3}, {})); }, {"3 rows"});
  check_throws_with<DtypeError>([&] { embedding(w, tensor({0, 1}, {2})); }, {"embedding", "int64"});
  check_throws_with<ShapeError>([&] { embedding(zeros({12}), tensor_int({0}, {1})); },
                                {"embedding", "[12]", "[1]"});
}

// ---------------------------------------------------------------- cross_entropy

TEST_CASE("cross_entropy: logits [1e8, 1e8] with target 1 give log 2 (float32)") {
  Tensor logits = tensor({1e8, 1e8}, {1, 2});
  logits.requires_grad_();
  Tensor loss = cross_entropy(logits, tensor_int({1}, {1}));
  check_close(loss, {0.6931}, 1e-4, 0);
  check_close(loss, {std::log(2.0)}, 1e-6, 1e-6);
  loss.backward();
  check_close(logits.grad(), {0.5, -0.5}, 1e-6);
}

TEST_CASE("cross_entropy: logits [2, -1] + 1e8 with target 0 give 0.04859 (float64)") {
  // float64 here: float32 cannot represent 1e8 + 2 (its spacing at 1e8 is 8),
  // so in float32 the two logits would be equal and the loss log 2.
  Tensor logits = tensor({2 + 1e8, -1 + 1e8}, {1, 2}, DType::Float64);
  Tensor loss = cross_entropy(logits, tensor_int({0}, {1}));
  check_close(loss, {0.04859}, 1e-5, 0);
  check_close(loss, {std::log1p(std::exp(-3.0))}, 1e-12, 1e-9);
}

TEST_CASE("cross_entropy: ignore_index, label smoothing, reductions (by hand)") {
  // Row 0: logits [0, ln 3] -> p = [1/4, 3/4]; row 1 ignored.
  Tensor logits = tensor({0, std::log(3.0), 5, 7}, {2, 2}, DType::Float64);
  Tensor target = tensor_int({0, -100}, {2});
  const double nll = std::log(4.0);
  check_close(cross_entropy(logits, target), {nll}, 1e-12);
  check_close(cross_entropy(logits, target, -100, 0.0, "sum"), {nll}, 1e-12);
  check_close(cross_entropy(logits, target, -100, 0.0, "none"), {nll, 0.0}, 1e-12);
  // Smoothing 0.2: (1 - 0.2) * nll + 0.2 * mean_c(-lsm_c).
  const double smooth = 0.8 * nll + 0.2 * 0.5 * (std::log(4.0) + std::log(4.0 / 3.0));
  check_close(cross_entropy(logits, target, -100, 0.2), {smooth}, 1e-12);
  // A custom ignore_index; the ignored row gets a zero gradient.
  Tensor l2 = tensor({0, std::log(3.0), 5, 7}, {2, 2}, DType::Float64);
  l2.requires_grad_();
  cross_entropy(l2, tensor_int({0, 1}, {2}), 1).backward();
  check_close(l2.grad(), {0.25 - 1, 0.75, 0, 0}, 1e-12);
  // Every target ignored: mean is NaN (0/0, as PyTorch), the gradient zero.
  Tensor l3 = tensor({1, 2}, {1, 2});
  l3.requires_grad_();
  Tensor all_ignored = cross_entropy(l3, tensor_int({-100}, {1}));
  CHECK(std::isnan(all_ignored.item()));
  all_ignored.backward();
  check_close(l3.grad(), {0, 0});
}

TEST_CASE("cross_entropy: errors") {
  Tensor logits = zeros({2, 3});
  check_throws_with<IndexError>([&] { cross_entropy(logits, tensor_int({0, 3}, {2})); },
                                {"cross_entropy", "target 3", "3 classes"});
  check_throws_with<IndexError>([&] { cross_entropy(logits, tensor_int({-1, 0}, {2})); },
                                {"cross_entropy", "target -1"});
  check_throws_with<ShapeError>([&] { cross_entropy(logits, tensor_int({0, 1, 2}, {3})); },
                                {"cross_entropy", "[2,3]", "[3]"});
  check_throws_with<ShapeError>([&] { cross_entropy(zeros({6}), tensor_int({0}, {1})); },
                                {"cross_entropy", "[6]", "[1]"});
  check_throws_with<DtypeError>([&] { cross_entropy(logits, tensor({0, 1}, {2})); }, {"int64"});
  check_throws_with<ValueError>(
      [&] { cross_entropy(logits, tensor_int({0, 1}, {2}), -100, 0.0, "avg"); }, {"avg"});
  check_throws_with<ValueError>([&] { cross_entropy(logits, tensor_int({0, 1}, {2}), -100, 1.5); },
                                {"label_smoothing", "1.5"});
}

TEST_CASE("cross_entropy: PyTorch fixtures") {
  nlohmann::json fx = load_fixture("nn");
  for (const char* name : {"cross_entropy_mean", "cross_entropy_sum", "cross_entropy_none",
                           "cross_entropy_ignore2_smooth", "cross_entropy_smooth_none"}) {
    SUBCASE(name) {
      const auto& c = fx.at(name);
      const auto& p = c.at("params");
      int64_t ignore = p.at("ignore_index").get<int64_t>();
      double ls = p.at("label_smoothing").get<double>();
      std::string red = p.at("reduction").get<std::string>();
      check_fixture_case(c, [=](auto& in) {
        return cross_entropy(in["logits"], in["target"], ignore, ls, red);
      });
    }
  }
}

// ---------------------------------------------------------------- dropout

TEST_CASE("dropout: inverted scaling, seeded mask, identity in eval, p = 1 gives zeros") {
  Tensor x = ones({100, 50});
  x.requires_grad_();
  Generator g1(5);
  Tensor y = dropout(x, 0.3, true, g1);
  std::vector<double> v = y.to_vector();
  int64_t kept = 0;
  for (double e : v) {
    CHECK((e == 0.0 || std::abs(e - 1.0 / 0.7) < 1e-6));
    kept += e != 0.0;
  }
  CHECK(std::abs(static_cast<double>(kept) / 5000.0 - 0.7) < 0.03);
  sum(y).backward();
  check_close(x.grad(), v);  // dx = mask
  Generator g2(5);
  CHECK(dropout(x, 0.3, true, g2).to_vector() == v);

  Tensor same = dropout(x, 0.3, false);
  CHECK(same.impl_ptr() == x.impl_ptr());
  CHECK(dropout(x, 0.0, true).impl_ptr() == x.impl_ptr());

  Tensor x1 = rand({4, 3});
  x1.requires_grad_();
  Tensor z = dropout(x1, 1.0, true);
  check_close(z, std::vector<double>(12, 0.0));
  sum(z).backward();
  check_close(x1.grad(), std::vector<double>(12, 0.0));
}

TEST_CASE("dropout: p outside [0, 1] is a ValueError") {
  check_throws_with<ValueError>([] { dropout(ones({3}), 1.5, true); }, {"dropout", "1.5"});
  check_throws_with<ValueError>([] { dropout(ones({3}), -0.1, false); }, {"dropout", "-0.1"});
}

// ---------------------------------------------------------------- threaded paths

TEST_CASE("softmax, layer_norm, cross_entropy: large inputs (threaded paths) match row by row") {
  Generator gen(23);
  const int64_t N = 64, C = 600;  // N * C above the parallel grain; C spans 3 column blocks
  Tensor x = randn({N, C}, 0, 2, DType::Float32, gen);
  Tensor g = randn({N, C}, 0, 1, DType::Float32, gen);
  Tensor w = rand({C}, 0.5, 1.5, DType::Float32, gen), b = rand({C}, -1, 1, DType::Float32, gen);
  Tensor target = randint({N}, C, gen);
  Tensor xb = x.detach(), wb = w.detach(), bb = b.detach();
  xb.requires_grad_();
  wb.requires_grad_();
  bb.requires_grad_();
  Tensor sm = softmax(xb, -1), ln = layer_norm(xb, wb, bb);
  Tensor ce = cross_entropy(xb, target, -100, 0.1, "sum");
  (sum(mul(sm, g)) + sum(mul(ln, g)) + ce).backward();

  Tensor ws = w.detach(), bs = b.detach();
  ws.requires_grad_();
  bs.requires_grad_();
  std::vector<double> gx_rows;
  for (int64_t i = 0; i < N; ++i) {
    Tensor xi = contiguous_data(slice(x, 0, i, i + 1));
    xi.requires_grad_();
    Tensor gi = slice(g, 0, i, i + 1);
    Tensor smi = softmax(xi, -1), lni = layer_norm(xi, ws, bs);
    Tensor cei = cross_entropy(xi, slice(target, 0, i, i + 1), -100, 0.1, "sum");
    check_close(smi.to_vector(), slice(sm, 0, i, i + 1).to_vector(), 1e-7, 1e-6);
    check_close(lni.to_vector(), slice(ln, 0, i, i + 1).to_vector(), 1e-6, 1e-6);
    (sum(mul(smi, gi)) + sum(mul(lni, gi)) + cei).backward();
    for (double v : xi.grad().to_vector()) gx_rows.push_back(v);
  }
  check_close(xb.grad().to_vector(), gx_rows, 1e-6, 1e-5);
  check_close(wb.grad().to_vector(), ws.grad().to_vector(), 1e-4, 1e-4);
  check_close(bb.grad().to_vector(), bs.grad().to_vector(), 1e-4, 1e-4);
}

// ---------------------------------------------------------------- attention

namespace {

using V = std::vector<Tensor>;

Tensor attend(const V& v, const Tensor& mask = Tensor(), bool causal = false, int64_t window = 0) {
  return scaled_dot_product_attention(v[0], v[1], v[2], mask, causal, window);
}

void check_attention_error(const Shape& q, const Shape& k, const Shape& v, const Shape& mask,
                           std::initializer_list<std::string> parts) {
  check_throws_with<ShapeError>(
      [&] {
        scaled_dot_product_attention(zeros(q), zeros(k), zeros(v),
                                     mask.empty() ? Tensor() : zeros(mask));
      },
      parts);
}

}  // namespace

TEST_CASE("scaled_dot_product_attention: gradcheck causal, additive mask, window, dropout") {
  V qkv{gc_input({2, 2, 4, 3}, -1, 1, 31), gc_input({2, 2, 4, 3}, -1, 1, 32),
        gc_input({2, 2, 4, 5}, -1, 1, 33)};
  SUBCASE("causal") {
    require_gradcheck([](const V& v) { return attend(v, Tensor(), true); }, qkv);
  }
  SUBCASE("additive mask [T,S] with -inf entries and a fully masked query row; mask gradient") {
    Tensor mask = gc_input({4, 4}, -1, 1, 34);
    double* m = mask.data<double>();
    m[1] = -kInf;
    for (int s = 0; s < 4; ++s) m[2 * 4 + s] = -kInf;  // query 2 sees nothing
    V in = qkv;
    in.push_back(mask);
    require_gradcheck([](const V& v) { return attend(v, v[3]); }, in);
    Tensor out = attend(in, in[3]);
    CHECK(all_finite(out));
    check_close(slice(out, 2, 2, 3).to_vector(), std::vector<double>(2 * 2 * 5, 0.0));
  }
  SUBCASE("additive mask [B,1,1,S] (padding), causal, scale 0.7") {
    V in = qkv;
    in.push_back(gc_input({2, 1, 1, 4}, -1, 1, 35));
    require_gradcheck(
        [](const V& v) {
          return scaled_dot_product_attention(v[0], v[1], v[2], v[3], true, 0, 0.0, 0.7);
        },
        in);
  }
  SUBCASE("window 2") {
    require_gradcheck([](const V& v) { return attend(v, Tensor(), false, 2); }, qkv);
  }
  SUBCASE("T != S, causal (top-left)") {
    V in{gc_input({1, 2, 3, 4}, -1, 1, 36), gc_input({1, 2, 5, 4}, -1, 1, 37),
         gc_input({1, 2, 5, 2}, -1, 1, 38)};
    require_gradcheck([](const V& v) { return attend(v, Tensor(), true); }, in);
  }
  SUBCASE("dropout 0.3 with a fixed generator per call") {
    require_gradcheck(
        [](const V& v) {
          Generator gen(9);
          return scaled_dot_product_attention(v[0], v[1], v[2], Tensor(), true, 0, 0.3,
                                              std::nullopt, gen);
        },
        qkv);
  }
}

TEST_CASE("attention causality (causal, window): changing key/value t changes no output before t") {
  Generator gen(17);
  const int64_t T = 6;
  Tensor q = randn({2, 3, T, 4}, 0, 1, DType::Float32, gen);
  Tensor k = randn({2, 3, T, 4}, 0, 1, DType::Float32, gen);
  Tensor v = randn({2, 3, T, 5}, 0, 1, DType::Float32, gen);
  auto rows = [](const Tensor& t, int64_t a, int64_t b) { return slice(t, 2, a, b).to_vector(); };
  for (int64_t window : {0, 2}) {
    Tensor base = attend({q, k, v}, Tensor(), true, window);
    for (int64_t t = 0; t < T; ++t) {
      Tensor k2 = k + 0.0, v2 = v + 0.0;  // fresh copies
      copy_data(slice(k2, 2, t, t + 1), randn({2, 3, 1, 4}, 0, 1, DType::Float32, gen));
      copy_data(slice(v2, 2, t, t + 1), randn({2, 3, 1, 5}, 0, 1, DType::Float32, gen));
      Tensor out = attend({q, k2, v2}, Tensor(), true, window);
      INFO("window " << window << ", changed position " << t);
      if (t > 0) CHECK(rows(out, 0, t) == rows(base, 0, t));
      CHECK(rows(out, t, t + 1) != rows(base, t, t + 1));
      if (window > 0 && t + window < T)  // beyond the window, the change is forgotten
        CHECK(rows(out, t + window, T) == rows(base, t + window, T));
    }
  }
}

TEST_CASE("scaled_dot_product_attention: shape errors name both shapes") {
  check_attention_error({1, 2, 3, 4}, {1, 2, 3, 5}, {1, 2, 3, 5}, {},
                        {"scaled_dot_product_attention", "[1,2,3,4]", "[1,2,3,5]"});
  check_attention_error({1, 2, 3, 4}, {1, 2, 6, 4}, {1, 2, 5, 4}, {}, {"[1,2,6,4]", "[1,2,5,4]"});
  check_attention_error({2, 3, 4}, {2, 3, 4}, {2, 3, 4}, {}, {"4-D", "[2,3,4]"});
  check_attention_error({1, 2, 3, 4}, {1, 2, 5, 4}, {1, 2, 5, 4}, {3, 4},
                        {"attn_mask", "[3,4]", "[1,2,3,5]"});
  V small{zeros({1, 1, 2, 2}), zeros({1, 1, 2, 2}), zeros({1, 1, 2, 2})};
  check_throws_with<ValueError>([&] { attend(small, Tensor(), false, -1); }, {"window"});
}

TEST_CASE("scaled_dot_product_attention: PyTorch fixtures") {
  nlohmann::json fx = load_fixture("nn");
  SUBCASE("causal") {
    check_fixture_case(fx.at("sdpa_causal"), [](auto& in) {
      return scaled_dot_product_attention(in["q"], in["k"], in["v"], Tensor(), true);
    });
  }
  SUBCASE("additive mask") {
    check_fixture_case(fx.at("sdpa_additive_mask"), [](auto& in) {
      return scaled_dot_product_attention(in["q"], in["k"], in["v"], in["mask"]);
    });
  }
  SUBCASE("window 2") {
    check_fixture_case(fx.at("sdpa_window2"), [](auto& in) {
      return scaled_dot_product_attention(in["q"], in["k"], in["v"], Tensor(), false, 2);
    });
  }
}
