// softmax and log_softmax (ops/softmax.cpp): exact edge values (-inf rows,
// large offsets), a transposed input, errors, PyTorch fixtures
// (tests/fixtures/nn.json, tools/fixtures/nn.py), and the threaded paths of
// softmax, layer_norm and cross_entropy against row-by-row calls.
#include <cmath>
#include <limits>

#include "op_test_util.h"
#include "test_util.h"

using namespace tmem;
using tmem::test::check_close;
using tmem::test::load_fixture;
using tmem::test::check_throws_with;
using tmem::test::all_finite;
using tmem::test::check_fixture_case;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

}  // namespace

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
  // A 0-d input takes dims -1 and 0; the error said "a tensor of rank 1".
  check_close(softmax(full({}, 5.0), -1), {1.0});
  check_throws_with<IndexError>([] { softmax(full({}, 5.0), 1); },
                                {"softmax: dim 1 is out of range [-1, 0] for a tensor of rank 0"});
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
