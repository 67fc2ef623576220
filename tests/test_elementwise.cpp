// Values of the elementwise ops (ops/elementwise.cpp): broadcasting, edge
// points against PyTorch's definitions, limits at +-inf. (Gradients are
// covered by the op-table gradchecks.)
#include "test_util.h"

using namespace tmem;
using tmem::test::check_close;

TEST_CASE("broadcasting follows NumPy rules") {
  Tensor a = reshape(arange(0, 3), {3, 1});
  Tensor b = arange(0, 4);
  Tensor c = a * 10.0 + b;
  CHECK(c.shape() == Shape{3, 4});
  check_close(c, {0, 1, 2, 3, 10, 11, 12, 13, 20, 21, 22, 23});
  CHECK(broadcast_shapes({2, 1, 4, 64}, {2, 1, 4, 1}, "t") == Shape{2, 1, 4, 64});
  CHECK_THROWS_AS(broadcast_shapes({2, 3}, {4}, "t"), ShapeError);
}

TEST_CASE("elementwise values at edge points match PyTorch's definitions") {
  check_close(relu(tensor({-1, 0, 2}, {3})), {0, 0, 2});
  check_close(softplus(tensor({-30, 0, 30}, {3})), {9.357623e-14, 0.6931472, 30}, 1e-6);
  check_close(pow(tensor({0, -2}, {2}), 0.0), {1, 1});
  check_close(pow(tensor({-2}, {1}), 3.0), {-8});
  check_close(gelu(tensor({1}, {1})), {0.8413447});
  check_close(gelu(tensor({1}, {1}), true), {0.8411920});
  check_close(clamp(tensor({-2, 0.5, 3}, {3}), -1, 1), {-1, 0.5, 1});
  check_close(where(tensor({1, 0}, {2}), tensor({1, 2}, {2}), tensor({3, 4}, {2})), {1, 4});
  check_close(masked_fill(tensor({1, 2}, {2}), tensor({0, 1}, {2}), -5), {1, -5});
  // A mask larger than the input broadcasts the result (torch 1.13: [[1, 0, 1],
  // [0, 0, 1]], and the input's gradient counts the unmasked rows: [1, 2, 0]).
  Tensor x = zeros({3}).requires_grad_();
  Tensor y = masked_fill(x, tensor({1, 0, 1, 0, 0, 1}, {2, 3}), 1.0);
  CHECK(y.shape() == Shape{2, 3});
  check_close(y, {1, 0, 1, 0, 0, 1});
  sum(y).backward();
  check_close(x.grad(), {1, 2, 0});
}

TEST_CASE("exp, sigmoid, softplus at +-inf and NaN: exact limits in the vector body and the tail") {
  // NaN lanes: xsimd's exp converted them to an integer exponent, undefined
  // behaviour UBSan reports for doubles on AVX2.
  const double inf = std::numeric_limits<double>::infinity();
  for (DType dt : {DType::Float32, DType::Float64}) {
    INFO(dtype_name(dt));
    std::vector<double> x(37);  // 37: whole batches and a scalar tail on every ISA
    for (size_t i = 0; i < x.size(); ++i) x[i] = i % 4 == 0 ? -inf : i % 4 == 1 ? inf : i % 4 == 2 ? 0.0 : NAN;
    const Tensor t = tensor(x, {37}, dt);
    const std::vector<double> e = exp(t).to_vector(), s = sigmoid(t).to_vector(), p = softplus(t).to_vector();
    for (size_t i = 0; i < x.size(); ++i) {
      INFO("element " << i);
      if (i % 4 == 3) {
        CHECK((std::isnan(e[i]) && std::isnan(s[i]) && std::isnan(p[i])));
        continue;
      }
      CHECK(e[i] == (i % 4 == 0 ? 0.0 : i % 4 == 1 ? inf : 1.0));
      CHECK(s[i] == (i % 4 == 0 ? 0.0 : i % 4 == 1 ? 1.0 : 0.5));
      CHECK(p[i] == (i % 4 == 0 ? 0.0 : i % 4 == 1 ? inf : p[2]));
    }
    CHECK(p[2] == doctest::Approx(std::log(2.0)).epsilon(1e-6));
  }
}

TEST_CASE("to_dtype to int64 rounds toward zero (torch's .long()), records nothing, and refuses what int64 cannot "
          "hold") {
  Tensor x = tensor({-1.7, 2.9, 0.5, -0.0, 3e15}, {5}, DType::Float64).requires_grad_();
  Tensor i = to_dtype(x, DType::Int64);
  CHECK(i.dtype() == DType::Int64);
  CHECK(i.to_vector() == std::vector<double>{-1, 2, 0, 0, 3e15});
  CHECK(!i.requires_grad());
  CHECK(to_dtype(transpose(reshape(arange(0, 6), {2, 3}), 0, 1), DType::Int64).to_vector() ==
        std::vector<double>{0, 3, 1, 4, 2, 5});
  for (double bad : {std::nan(""), HUGE_VAL, 1e19, -1e19})
    CHECK_THROWS_WITH_AS(to_dtype(tensor({1.0, bad}, {2}), DType::Int64),
                         doctest::Contains("to_dtype: copy: value "), ValueError);
}

TEST_CASE("int64 where, masked_fill, clamp, gather and matmul compute torch's int64 results on the CPU") {
  // They raised DtypeError (the kernel tables are floating only), so labels
  // and masks had to go through float32, which loses integers past 2^24.
  const int64_t big = (int64_t{1} << 62) + 1;  // not a float64 either
  const Tensor a = tensor_int({1, -2, big}, {3});
  const Tensor b = tensor_int({4, 5, 6}, {3});
  const Tensor cond = tensor({1.0, 0.0, 0.5}, {3});  // any dtype: non-zero selects a
  CHECK(where(cond, a, b).to_int_vector() == std::vector<int64_t>{1, 5, big});
  CHECK(where(tensor_int({0, 1}, {2, 1}), a, b).to_int_vector() == std::vector<int64_t>{4, 5, 6, 1, -2, big});
  CHECK(masked_fill(a, tensor_int({1, 0, 0}, {3}), 0.7).to_int_vector() == std::vector<int64_t>{0, -2, big});
  CHECK(masked_fill(a, tensor_int({0, 1, 0}, {3}), -1e15).to_int_vector() == std::vector<int64_t>{1, -1000000000000000, big});
  CHECK_THROWS_WITH_AS(masked_fill(a, b, 1e30), "masked_fill: value 1e+30 cannot be converted to int64 without overflow",
                       ValueError);
  const double inf = HUGE_VAL;
  CHECK(clamp(a, 0, 2).to_int_vector() == std::vector<int64_t>{1, 0, 2});
  CHECK(clamp(a, -inf, 0).to_int_vector() == std::vector<int64_t>{0, -2, 0});
  CHECK(clamp(a, -1, inf).to_int_vector() == std::vector<int64_t>{1, -1, big});
  CHECK_THROWS_WITH_AS(clamp(a, 0.5, 2), doctest::Contains("clamp: an int64 tensor takes whole-number bounds"), ValueError);
  // Bounds and fill values past 2^53 exactly, through the int64 overloads.
  CHECK(clamp(a, std::nullopt, big - 1).to_int_vector() == std::vector<int64_t>{1, -2, big - 1});
  CHECK(clamp(a, big - 2, std::nullopt).to_int_vector() == std::vector<int64_t>{big - 2, big - 2, big});
  CHECK_THROWS_WITH_AS(clamp(a, int64_t{3}, int64_t{2}), "clamp: expected min <= max, but got min 3 max 2", ValueError);
  CHECK_THROWS_AS(clamp(zeros({1}), int64_t{0}, std::nullopt), DtypeError);
  CHECK(masked_fill(b, tensor_int({0, 1, 0}, {3}), full_int({}, big)).to_int_vector() == std::vector<int64_t>{4, big, 6});
  CHECK_THROWS_WITH_AS(masked_fill(b, b, full_int({1}, 0)), "masked_fill: expected a 0-d value tensor, but got shape [1]",
                       ShapeError);
  CHECK_THROWS_AS(masked_fill(b, b, zeros({})), DtypeError);
  CHECK(gather(tensor_int({10, 11, 12, 13, 14, 15}, {2, 3}), 1, tensor_int({2, 0, 1, 1}, {2, 2})).to_int_vector() ==
        std::vector<int64_t>{12, 10, 14, 14});
  CHECK_THROWS_AS(gather(a, 0, tensor_int({3}, {1})), IndexError);
  // [2, 1, 3] @ [3, 2] broadcast, a transposed operand, and a product that
  // wraps (2^62 * 4) as torch's does.
  const Tensor m = tensor_int({1, 2, 3, 4, 5, 6}, {2, 1, 3});
  const Tensor n = transpose(tensor_int({1, 0, -1, 2, 1, 0}, {2, 3}), 0, 1);
  CHECK(matmul(m, n).to_int_vector() == std::vector<int64_t>{-2, 4, -2, 13});
  CHECK(matmul(tensor_int({1, 2, 3}, {3}), tensor_int({4, 5, 6}, {3})).to_int_vector() == std::vector<int64_t>{32});
  CHECK(matmul(tensor_int({int64_t{1} << 62}, {1, 1}), tensor_int({4}, {1, 1})).to_int_vector() ==
        std::vector<int64_t>{0});
  CHECK(matmul(zeros({2, 0}, DType::Int64), zeros({0, 3}, DType::Int64)).to_int_vector() == std::vector<int64_t>(6, 0));
}

TEST_CASE("masked_fill with a 0-d tensor value passes the gradient to the value, as torch's Tensor overload") {
  Tensor x = tensor({1.0, 2.0, 3.0}, {3}).requires_grad_();
  Tensor v = full({}, 4.0).requires_grad_();
  Tensor y = masked_fill(x, tensor_int({0, 1, 1}, {3}), v);
  CHECK(y.to_vector() == std::vector<double>{1, 4, 4});
  sum(mul(y, tensor({1.0, 2.0, 3.0}, {3}))).backward();
  CHECK(x.grad().to_vector() == std::vector<double>{1, 0, 0});
  CHECK(v.grad().item() == 5);
}

TEST_CASE("exp, log, sqrt, rsqrt, reciprocal, sigmoid, tanh, sin and cos take int64 as float32, as PyTorch") {
  const Tensor a = tensor_int({0, 1, 4}, {3});
  const std::vector<std::pair<Tensor (*)(const Tensor&), double (*)(double)>> ops = {
      {&exp, [](double x) { return std::exp(x); }},
      {&log, [](double x) { return std::log(x); }},
      {&sqrt, [](double x) { return std::sqrt(x); }},
      {&rsqrt, [](double x) { return 1 / std::sqrt(x); }},
      {&reciprocal, [](double x) { return 1 / x; }},
      {&sigmoid, [](double x) { return 1 / (1 + std::exp(-x)); }},
      {&tanh, [](double x) { return std::tanh(x); }},
      {&sin, [](double x) { return std::sin(x); }},
      {&cos, [](double x) { return std::cos(x); }}};
  for (const auto& [op, want] : ops) {
    const Tensor y = op(a);
    CHECK(y.dtype() == DType::Float32);
    const std::vector<double> got = y.to_vector(), xs = {0, 1, 4};
    for (size_t i = 0; i < xs.size(); ++i) {
      const double w = want(xs[i]);  // inf for log(0) and 1/0
      if (std::isinf(w)) CHECK(got[i] == w);
      else CHECK(got[i] == doctest::Approx(w).epsilon(1e-6));
    }
  }
}

TEST_CASE("floor, ceil, round (half to even), trunc and sign give PyTorch's values, int64 stays int64") {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  // torch 1.13 on x = [nan, -2.5, -1.5, -0.5, 0.5, 1.5, 2.5, inf, -inf]
  const Tensor x = tensor({nan, -2.5, -1.5, -0.5, 0.5, 1.5, 2.5, inf, -inf}, {9});
  const auto same = [](const Tensor& got, const std::vector<double>& want) {
    const std::vector<double> g = got.to_vector();
    REQUIRE(g.size() == want.size());
    for (size_t i = 0; i < g.size(); ++i) CHECK((std::isnan(want[i]) ? std::isnan(g[i]) : g[i] == want[i]));
  };
  same(floor(x), {nan, -3, -2, -1, 0, 1, 2, inf, -inf});
  same(ceil(x), {nan, -2, -1, -0.0, 1, 2, 3, inf, -inf});
  same(round(x), {nan, -2, -2, -0.0, 0, 2, 2, inf, -inf});
  same(trunc(x), {nan, -2, -1, -0.0, 0, 1, 2, inf, -inf});
  same(sign(x), {0, -1, -1, -1, 1, 1, 1, 1, -1});
  const Tensor big = tensor_int({(int64_t{1} << 62) + 1, -3, 0}, {3});
  CHECK(floor(big).to_int_vector() == big.to_int_vector());
  CHECK(round(big).dtype() == DType::Int64);
  CHECK(sign(big).to_int_vector() == std::vector<int64_t>{1, -1, 0});
  // log1p and expm1 keep the digits log(1 + x) and exp(x) - 1 lose
  check_close(log1p(tensor({1e-10, -0.5}, {2}, DType::Float64)), {1e-10 - 5e-21, std::log(0.5)}, 1e-15);
  check_close(expm1(tensor({1e-10, 1.0}, {2}, DType::Float64)), {1e-10 + 5e-21, std::exp(1.0) - 1}, 1e-15);
}

TEST_CASE("remainder and floor_divide are exact for large quotients and give PyTorch's values at 0 and inf") {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const std::vector<double> a = {123456789., 1e10, -7.5, 3., -3., 5.5, -5.5, inf, 7.0, 0.0, -0.0, 1.0};
  const std::vector<double> b = {7., 3., 2., inf, inf, -2., 2., 2., 0., 3., 3., -3.};
  // torch 1.13, float32: a % b and a // b
  const std::vector<double> rem = {4, 1, 0.5, 3, inf, -0.5, 0.5, nan, nan, 0, -0.0, -2};
  const std::vector<double> quo = {17636684, 3333333248, -4, 0, -1, -3, -3, nan, inf, 0, -0.0, -1};
  const Tensor x = tensor(a, {12}), y = tensor(b, {12});
  const std::vector<double> r = remainder(x, y).to_vector(), q = floor_divide(x, y).to_vector();
  for (size_t i = 0; i < a.size(); ++i) {
    INFO("element " << i);
    CHECK((std::isnan(rem[i]) ? std::isnan(r[i]) : r[i] == rem[i] && std::signbit(r[i]) == std::signbit(rem[i])));
    CHECK((std::isnan(quo[i]) ? std::isnan(q[i]) : q[i] == quo[i] && std::signbit(q[i]) == std::signbit(quo[i])));
  }
  CHECK(remainder(tensor({1e16}, {1}, DType::Float64), tensor({3.0}, {1}, DType::Float64)).item() == 1.0);
}
