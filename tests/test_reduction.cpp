// Values of the reductions (ops/reduction.cpp): sum, mean, var, max/min with
// indices, and the leading-dim sum read in place as columns. (Gradients are
// covered by the op-table gradchecks.)
#include <omp.h>

#include "test_util.h"

using namespace tmem;
using tmem::test::check_close;

TEST_CASE("reductions: sum, mean, var, max/min with indices") {
  Tensor x = tensor({1, 5, 3, -2, 8, 0}, {2, 3});
  check_close(sum(x), {15});
  check_close(sum(x, {0}), {-1, 13, 3});
  check_close(mean(x, {1}, true), {3, 2});
  CHECK(mean(x, {1}, true).shape() == Shape{2, 1});
  check_close(var(x, {1}), {4, 28});
  check_close(var(x, {1}, 0), {8.0 / 3, 56.0 / 3}, 1e-5);
  auto mx = max(x, 1);
  check_close(mx.values, {5, 8});
  CHECK(mx.indices.to_int_vector() == std::vector<int64_t>{1, 1});
  auto mn = min(x, 0);
  check_close(mn.values, {-2, 5, 0});
  CHECK(mn.indices.to_int_vector() == std::vector<int64_t>{1, 0, 1});
  check_close(max(x), {8});
  // var of large values with a tiny spread: the two-pass formula keeps it.
  check_close(var(tensor({40000, 40001, 40002, 40003}, {4}), {}, 0), {1.25}, 1e-4);
  CHECK_THROWS_AS(sum(x, {2}), IndexError);
}

TEST_CASE("max and min over every element share the gradient evenly among ties, as torch.max(a)") {
  // torch 1.13: [[0, 1], [1, 0]], [0, 0.5, 0, 0.5], [0.5, 0, 0.5].
  Tensor x = tensor({1, 3, 3, -1}, {2, 2}).requires_grad_();
  mul(max(x), 2.0).backward();
  check_close(x.grad(), {0, 1, 1, 0});
  Tensor y = tensor({1, NAN, 2, NAN}, {4}).requires_grad_();
  max(y).backward();
  check_close(y.grad(), {0, 0.5, 0, 0.5});
  Tensor z = tensor({-1, 3, -1}, {3}, DType::Float64).requires_grad_();
  min(z).backward();
  check_close(z.grad(), {0.5, 0, 0.5});
  CHECK(z.grad().dtype() == DType::Float64);
}

TEST_CASE("sum over leading dims (read in place as columns) matches a naive sum, on 1 and 2 threads") {
  // [3, 200, 37]: 600 rows past one 256-row block, 37 columns (a vector tail);
  // [2, 5, 700]: columns over several per-thread chunks; a sliced input is
  // not contiguous and takes the transposed-rows path.
  Generator gen(3);
  for (const Shape& shape : std::vector<Shape>{{3, 200, 37}, {2, 5, 700}, {1, 4, 1}}) {
    Tensor x = randn(shape, 0, 1, DType::Float64, gen);
    const std::vector<double> v = x.to_vector();
    const int64_t R = shape[0] * shape[1], O = shape[2];
    std::vector<double> want(static_cast<size_t>(O), 0.0);
    for (int64_t i = 0; i < R; ++i)
      for (int64_t j = 0; j < O; ++j) want[j] += v[i * O + j];
    INFO("shape " << shape_str(shape));
    check_close(sum(x, {0, 1}), want, 1e-12, 1e-12);
    std::vector<double> mean_want = want;
    for (double& m : mean_want) m /= static_cast<double>(R);
    check_close(mean(x, {1, 0}, true), mean_want, 1e-12, 1e-12);
    const Tensor xf = to_dtype(x, DType::Float32);
    const int before = omp_get_max_threads();
    omp_set_num_threads(1);
    const std::vector<double> one = sum(xf, {0, 1}).to_vector();
    omp_set_num_threads(2);
    const std::vector<double> two = sum(xf, {0, 1}).to_vector();
    omp_set_num_threads(before);
    CHECK(one == two);
    check_close(sum(xf, {0, 1}), want, 1e-4, 1e-4);
  }
  Tensor y = randn({4, 6, 10}, 0, 1, DType::Float64, gen);
  Tensor ys = slice(y, 2, 0, 8);
  check_close(sum(ys, {0, 1}), sum(contiguous(ys), {0, 1}).to_vector(), 1e-12, 1e-12);
}
