// layer_norm (ops/layer_norm.cpp): the two-pass variance, gradients with and
// without weight and bias, shape errors, PyTorch fixtures
// (tests/fixtures/nn.json).
#include <algorithm>
#include <cmath>

#include "op_test_util.h"
#include "test_util.h"

using namespace tmem;
using tmem::test::check_close;
using tmem::test::load_fixture;
using tmem::test::require_gradcheck;
using tmem::test::check_throws_with;
using tmem::test::check_fixture_case;

TEST_CASE("layer_norm: [40000, 40001, 40002, 40003] in float32 (two-pass variance)") {
  Tensor x = tensor({40000, 40001, 40002, 40003}, {1, 4});
  Tensor y = layer_norm(x, Tensor(), Tensor());
  check_close(y, {-1.3416, -0.4472, 0.4472, 1.3416}, 1e-4, 0);
  check_close(y, {-1.3416355, -0.4472118, 0.4472118, 1.3416355}, 2e-6, 1e-6);
}

TEST_CASE("layer_norm: rows whose sums overflow float32 are measured scaled, as float64 measures them") {
  // Row 0: sum (x - mu)^2 overflows (|x| ~ 1e19; y was all zeros, as torch's). Row 1: the sum itself overflows.
  const std::vector<double> v{1e19, -1e19, 3e19, 0, 3e38, 3e38, -1e38, 1e38};
  Tensor x = tensor(v, {2, 4}).requires_grad_();
  Tensor x64 = tensor(v, {2, 4}, DType::Float64).requires_grad_();
  Tensor w = tensor({1.0, -2.0, 0.5, 3.0}, {4});
  Tensor y = layer_norm(x, Tensor(), Tensor()), y64 = layer_norm(x64, Tensor(), Tensor());
  check_close(y, to_dtype(y64, DType::Float32).to_vector(), 1e-5, 1e-6);
  const std::vector<double> by_hand{0.1690309, -1.1832160, 1.5212777, -0.5070926};  // row 0, in float64
  for (size_t i = 0; i < 4; ++i) CHECK(y.to_vector()[i] == doctest::Approx(by_hand[i]).epsilon(1e-5));
  sum(layer_norm(x, Tensor(), Tensor()) * w).backward();
  sum(layer_norm(x64, Tensor(), Tensor()) * to_dtype(w, DType::Float64)).backward();
  // Row 0's gradients (about 1e-19; row 1's, about 1e-38, are below float32's normal range).
  const std::vector<double> g = x.grad().to_vector(), g64 = x64.grad().to_vector();
  const double scale = std::abs(g64[2]);
  CHECK(scale > 1e-21);
  for (size_t i = 0; i < 4; ++i) CHECK(std::abs(g[i] - g64[i]) <= 1e-5 * scale);
  // A row whose x - mu overflows has no finite y: NaN, not zeros.
  const std::vector<double> huge = layer_norm(tensor({3e38, -3e38, -3e38, -3e38}, {1, 4}), Tensor(), Tensor()).to_vector();
  CHECK(std::all_of(huge.begin(), huge.end(), [](double a) { return std::isnan(a); }));
  // A NaN still makes its row NaN.
  const std::vector<double> nan_row = layer_norm(tensor({1.0, NAN, 2.0}, {1, 3}), Tensor(), Tensor()).to_vector();
  CHECK(std::all_of(nan_row.begin(), nan_row.end(), [](double a) { return std::isnan(a); }));
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
