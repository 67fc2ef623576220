// The fused scaled_dot_product_attention (ops/attention.cpp) against the same
// attention composed from primitive ops, across its key and query blocks
// (32 queries, 64 keys), with every mask it takes; its memory, which must
// not grow with T x S; and which path a call takes. Gradchecks (causal, mask,
// window, dropout), causality, shape errors and PyTorch fixtures
// (tests/fixtures/nn.json).
#include <limits>

#include "op_test_util.h"
#include "test_util.h"
#include "tmem/core/allocator.h"
#include "tmem/core/autograd.h"

using namespace tmem;
using tmem::test::check_close;
using tmem::test::load_fixture;
using tmem::test::require_gradcheck;
using tmem::test::check_throws_with;
using tmem::test::all_finite;
using tmem::test::check_fixture_case;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

Tensor input(const Shape& shape, uint64_t seed, DType dtype = DType::Float64) {
  Generator gen(seed);
  Tensor t = rand(shape, -1.0, 1.0, dtype, gen);
  t.requires_grad_();
  return t;
}

// The additive band mask [T, S]: -inf where query t may not see key s.
Tensor band(int64_t T, int64_t S, bool causal, int64_t window) {
  Tensor m = zeros({T, S}, DType::Float64);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t s = 0; s < S; ++s)
      if (((causal || window > 0) && s > t) || (window > 0 && s <= t - window)) m.data<double>()[t * S + s] = -kInf;
  return m;
}

// softmax(q k^T scale + mask + band) v from matmul, softmax and add: the
// definition the fused op must equal.
Tensor reference(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, bool causal, int64_t window,
                 double scale) {
  Tensor s = mul(matmul(q, transpose(k, -2, -1)), scale);
  if (mask.defined()) s = add(s, mask);
  s = add(s, band(q.shape()[2], k.shape()[2], causal, window));
  return matmul(softmax(s, -1), v);
}

struct Case {
  const char* what;
  int64_t B, H, T, S, Dh, Dv;
  bool causal;
  int64_t window;
  bool key_padding;
};

// Output and the gradients of q, k, v under a random weighting of the output.
std::vector<std::vector<double>> run(const Case& c, bool fused) {
  Tensor q = input({c.B, c.H, c.T, c.Dh}, 11), k = input({c.B, c.H, c.S, c.Dh}, 12),
         v = input({c.B, c.H, c.S, c.Dv}, 13);
  Tensor mask;
  if (c.key_padding) {  // item 0 loses its first 3 keys, item 1 its last 70
    mask = zeros({c.B, 1, 1, c.S}, DType::Float64);
    for (int64_t s = 0; s < c.S; ++s)
      if (s < 3 || (c.B > 1 && s >= c.S - 70)) mask.data<double>()[(s < 3 ? 0 : c.S) + s] = -kInf;
  }
  const double scale = 0.3;
  Tensor out = fused ? scaled_dot_product_attention(q, k, v, mask, c.causal, c.window, 0.0, scale)
                     : reference(q, k, v, mask, c.causal, c.window, scale);
  Generator gen(14);
  sum(mul(out, rand(out.shape(), -1.0, 1.0, DType::Float64, gen))).backward();
  return {out.to_vector(), q.grad().to_vector(), k.grad().to_vector(), v.grad().to_vector()};
}

}  // namespace

TEST_CASE("scaled_dot_product_attention (fused) equals the composed definition across blocks, float64") {
  const Case cases[] = {
      {"causal T=S=100 (4 query blocks, 2 key blocks)", 2, 2, 100, 100, 8, 8, true, 0, false},
      {"no mask T=37 S=130, Dv != Dh", 1, 3, 37, 130, 8, 5, false, 0, false},
      {"causal T=70 S=150 (keys beyond the last query)", 1, 2, 70, 150, 4, 4, true, 0, false},
      {"window 17, T=S=130", 2, 1, 130, 130, 4, 6, false, 17, false},
      {"causal window 70 (a band wider than a key block)", 1, 2, 140, 140, 4, 4, true, 70, false},
      {"key padding: item 0 loses keys 0-2, item 1 the last 70 (queries that see no key)", 2, 2, 100, 100, 4, 4,
       true, 0, true},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    const auto fused = run(c, true), ref = run(c, false);
    for (size_t i = 0; i < fused.size(); ++i) {
      INFO("0 out, 1 gq, 2 gk, 3 gv: " << i);
      check_close(fused[i], ref[i], 1e-12, 1e-10);
    }
  }
}

TEST_CASE("scaled_dot_product_attention (fused): a window of INT64_MAX is the causal mask, gradients included") {
  Case c{"T=S=70 (two key blocks)", 1, 2, 70, 70, 4, 4, true, 0, false};
  const auto causal = run(c, true);
  c.causal = false;
  c.window = std::numeric_limits<int64_t>::max();
  const auto huge = run(c, true);
  for (size_t i = 0; i < causal.size(); ++i) {
    INFO("0 out, 1 gq, 2 gk, 3 gv: " << i);
    check_close(huge[i], causal[i], 0.0, 0.0);
  }
}

TEST_CASE("scaled_dot_product_attention (fused): a query that sees no key gives a zero row and zero gradients") {
  Tensor q = input({1, 1, 3, 4}, 21), k = input({1, 1, 3, 4}, 22), v = input({1, 1, 3, 2}, 23);
  Tensor mask = zeros({3, 3}, DType::Float64);
  for (int64_t s = 0; s < 3; ++s) mask.data<double>()[1 * 3 + s] = -kInf;  // query 1 sees nothing
  Tensor out = scaled_dot_product_attention(q, k, v, mask);
  check_close(slice(out, 2, 1, 2), {0.0, 0.0}, 0.0, 0.0);
  sum(out).backward();
  check_close(slice(q.grad(), 2, 1, 2), {0.0, 0.0, 0.0, 0.0}, 0.0, 0.0);
  for (double x : q.grad().to_vector()) CHECK(std::isfinite(x));
}

TEST_CASE("scaled_dot_product_attention (fused): a NaN score or a +inf mask makes a NaN row and NaN gradients") {
  // They gave a zero row and zero gradients (a query that sees no key), as
  // PyTorch does not: a diverged model looked like one training at loss 0.
  for (DType dtype : {DType::Float64, DType::Float32}) {
    CAPTURE(dtype_name(dtype));
    Tensor q = input({1, 1, 4, 4}, 31, dtype), k = input({1, 1, 5, 4}, 32, dtype), v = input({1, 1, 5, 2}, 33, dtype);
    Tensor mask = zeros({4, 5}, dtype);
    auto put = [&mask](int64_t t, int64_t s, double x) {
      if (mask.dtype() == DType::Float64) mask.data<double>()[t * 5 + s] = x;
      else mask.data<float>()[t * 5 + s] = static_cast<float>(x);
    };
    put(1, 2, std::nan(""));  // one NaN among seen keys
    put(2, 0, kInf);          // +inf - +inf in the softmax
    for (int64_t s = 0; s < 5; ++s) put(3, s, s == 4 ? std::nan("") : -kInf);  // NaN among masked keys
    Tensor out = scaled_dot_product_attention(q, k, v, mask);
    sum(out).backward();
    for (int64_t t = 0; t < 4; ++t) {
      CAPTURE(t);
      for (double x : slice(out, 2, t, t + 1).to_vector()) CHECK(std::isnan(x) == (t != 0));
      for (double x : slice(q.grad(), 2, t, t + 1).to_vector()) CHECK(std::isnan(x) == (t != 0));
    }
  }
  // A NaN query row: every score of that row NaN.
  Tensor q = input({1, 1, 2, 4}, 34), k = input({1, 1, 3, 4}, 35), v = input({1, 1, 3, 2}, 36);
  q.data<double>()[1 * 4] = std::nan("");
  Tensor out = scaled_dot_product_attention(q, k, v);
  check_close(slice(out, 2, 1, 2), {std::nan(""), std::nan("")}, 0.0, 0.0);
  CHECK(all_finite(slice(out, 2, 0, 1)));
}

TEST_CASE("scaled_dot_product_attention (fused): memory does not grow with T x S") {
  // B=1, H=2, T=S=2048, Dh=16 in float32: the composed path's scores alone are
  // 2 x 2048 x 2048 x 4 bytes = 32 MiB; the fused op holds lse and per-thread
  // blocks.
  Tensor q = input({1, 2, 2048, 16}, 31, DType::Float32), k = input({1, 2, 2048, 16}, 32, DType::Float32),
         v = input({1, 2, 2048, 16}, 33, DType::Float32);
  const size_t before = cpu_allocator_stats().in_use;
  cpu_allocator_reset_peak();
  Tensor out = scaled_dot_product_attention(q, k, v, Tensor(), true);
  sum(out).backward();
  const size_t extra = cpu_allocator_stats().peak_in_use - before;
  MESSAGE("fused attention, T = S = 2048: peak " << extra << " bytes above the inputs");
  // out, its gradient, and q, k, v's gradients are 5 x 256 KiB; allow 4 MiB.
  CHECK(extra < (size_t{4} << 20));
}

TEST_CASE("scaled_dot_product_attention: one fused node without dropout, the composite with it") {
  Tensor q = input({1, 1, 4, 2}, 41), k = input({1, 1, 4, 2}, 42), v = input({1, 1, 4, 2}, 43);
  Tensor fused = scaled_dot_product_attention(q, k, v, Tensor(), true);
  REQUIRE(fused.impl().grad_fn);
  CHECK(fused.impl().grad_fn->op == OpId::ScaledDotProductAttention);
  Generator gen(1);
  Tensor composed = scaled_dot_product_attention(q, k, v, Tensor(), true, 0, 0.5, std::nullopt, gen);
  REQUIRE(composed.impl().grad_fn);
  CHECK(composed.impl().grad_fn->op == OpId::Matmul);
  // A mask that needs its own gradient also takes the composite.
  Tensor mask = input({4, 4}, 44);
  CHECK(scaled_dot_product_attention(q, k, v, mask).impl().grad_fn->op == OpId::Matmul);
}

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

TEST_CASE("scaled_dot_product_attention: a non-finite scale raises ValueError naming scale") {
  const Tensor q = ones({1, 1, 2, 2});
  for (double s : {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
                   -std::numeric_limits<double>::infinity()}) {
    const std::string got = s != s ? "nan" : s > 0 ? "inf" : "-inf";
    CHECK_THROWS_WITH_AS(scaled_dot_product_attention(q, q, q, Tensor(), false, 0, 0.0, s),
                         ("scaled_dot_product_attention: expected a finite scale, but got scale " + got).c_str(),
                         ValueError);
    // The composed path (dropout) checks it too.
    CHECK_THROWS_WITH_AS(scaled_dot_product_attention(q, q, q, Tensor(), false, 0, 0.5, s),
                         doctest::Contains("expected a finite scale"), ValueError);
  }
  // Finite scales, 0 included, still work: scale 0 gives uniform weights, the mean of v.
  const Tensor v = tensor({1.0, 2.0, 3.0, 5.0}, {1, 1, 2, 2});
  check_close(scaled_dot_product_attention(q, q, v, Tensor(), false, 0, 0.0, 0.0), {2, 3.5, 2, 3.5});
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

TEST_CASE("causal_linear_attention over no tokens is an empty output on v's tape") {
  Tensor q = zeros({2, 3, 0, 4}), k = zeros({2, 3, 0, 4}), v = zeros({2, 3, 0, 5});
  v.requires_grad_();
  const Tensor out = causal_linear_attention(q, k, v);
  CHECK(out.shape() == Shape{2, 3, 0, 5});
  CHECK(out.requires_grad());
  sum(out).backward();
  CHECK(v.grad().shape() == v.shape());
}
