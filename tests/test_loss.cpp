// cross_entropy (ops/loss.cpp): exact values at large logits, ignore_index,
// label smoothing, reductions, errors, PyTorch fixtures (tests/fixtures/nn.json).
#include <cmath>
#include <string>

#include "op_test_util.h"
#include "test_util.h"

using namespace tmem;
using tmem::test::check_close;
using tmem::test::load_fixture;
using tmem::test::check_throws_with;
using tmem::test::check_fixture_case;

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
