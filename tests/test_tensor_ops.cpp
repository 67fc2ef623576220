// Values of the core ops: views, broadcasting, reductions, matmul vs a naive
// reference, shape ops. (Gradients are covered by the op-table gradchecks.)
#include <omp.h>

#include "test_util.h"

using namespace tmem;
using tmem::test::check_close;

namespace {
// Reference C = A @ B for 2-D row-major data.
std::vector<double> naive_mm(const std::vector<double>& a, const std::vector<double>& b, int64_t M,
                             int64_t K, int64_t N) {
  std::vector<double> c(M * N, 0.0);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < N; ++j) c[i * N + j] += a[i * K + k] * b[k * N + j];
  return c;
}
}  // namespace

TEST_CASE("views share storage and the version counter") {
  Tensor a = reshape(arange(0, 6), {2, 3});
  Tensor t = transpose(a, 0, 1);
  CHECK(t.shape() == Shape{3, 2});
  CHECK(!t.is_contiguous());
  check_close(t, {0, 3, 1, 4, 2, 5});
  CHECK(t.impl().storage == a.impl().storage);
  uint64_t v = a.version();
  fill_data(t, 1.0);
  CHECK(a.version() == v + 1);
  check_close(a, {1, 1, 1, 1, 1, 1});
  check_close(slice(reshape(arange(0, 10), {10}), 0, 1, 8, 3), {1, 4, 7});
  check_close(expand(tensor({1, 2}, {2, 1}), {2, 3}), {1, 1, 1, 2, 2, 2});
  CHECK_THROWS_AS(view(transpose(reshape(arange(0, 6), {2, 3}), 0, 1), {6}), ShapeError);
  check_close(reshape(transpose(reshape(arange(0, 6), {2, 3}), 0, 1), {6}), {0, 3, 1, 4, 2, 5});
}

TEST_CASE("reshape and view of a non-contiguous tensor are views when the strides allow (PyTorch computeStride)") {
  // [2, 3, 4] permuted to [4, 2, 3] (strides 1, 12, 4): its last two dims are
  // contiguous with each other, the first is not.
  Tensor a = reshape(arange(0, 24), {2, 3, 4});
  Tensor p = permute(a, {2, 0, 1});
  Tensor merged = view(p, {4, 6});  // dims 1 and 2 merge: a view
  CHECK(merged.impl().storage == a.impl().storage);
  CHECK(merged.strides() == Shape{1, 4});
  Tensor unsq = view(p, {4, 1, 2, 3});  // a size-1 dim added
  CHECK(unsq.impl().storage == a.impl().storage);
  Tensor split = view(p, {2, 2, 6});  // the first dim split
  CHECK(split.strides() == Shape{2, 1, 4});
  CHECK(split.to_vector() == contiguous(p).to_vector());
  Tensor sq = squeeze(slice(permute(reshape(arange(0, 24), {2, 3, 1, 4}), {2, 0, 3, 1}), 0, 0, 1), 0);
  CHECK(sq.shape() == Shape{2, 4, 3});
  CHECK(sq.impl().storage != nullptr);
  CHECK(!sq.is_contiguous());  // a view of the permuted storage, not a copy
  check_close(sq, contiguous(sq).to_vector());
  // Not viewable: dims 0 and 1 of p are not one stride apart; reshape copies.
  CHECK_THROWS_WITH_AS(view(p, {8, 3}), doctest::Contains("cannot be seen as shape [8,3]"), ShapeError);
  Tensor copied = reshape(p, {8, 3});
  CHECK(copied.impl().storage != a.impl().storage);
  CHECK(copied.to_vector() == contiguous(p).to_vector());
  // Gradients flow through the views as through copies.
  Generator gen(5);
  Tensor x = randn({2, 3, 4}, 0, 1, DType::Float64, gen);
  x.requires_grad_();
  const Tensor w = randn({2, 2, 6}, 0, 1, DType::Float64, gen);
  tmem::test::require_gradcheck(
      [&](const std::vector<Tensor>& v) {
        return sum(squeeze(unsqueeze(view(permute(v[0], {2, 0, 1}), {2, 2, 6}), 1), 1) * w);
      },
      {x});
}

TEST_CASE("broadcasting follows NumPy rules") {
  Tensor a = reshape(arange(0, 3), {3, 1});
  Tensor b = arange(0, 4);
  Tensor c = a * 10.0 + b;
  CHECK(c.shape() == Shape{3, 4});
  check_close(c, {0, 1, 2, 3, 10, 11, 12, 13, 20, 21, 22, 23});
  CHECK(broadcast_shapes({2, 1, 4, 64}, {2, 1, 4, 1}, "t") == Shape{2, 1, 4, 64});
  CHECK_THROWS_AS(broadcast_shapes({2, 3}, {4}, "t"), ShapeError);
}

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

TEST_CASE("matmul matches a naive product across shapes, strides and blocking edges") {
  Generator gen(7);
  for (const auto& mkn : std::vector<std::array<int64_t, 3>>{
           {1, 1, 1}, {5, 7, 3}, {6, 32, 32}, {13, 257, 35}, {97, 300, 70}, {128, 64, 129}}) {
    const int64_t M = mkn[0], K = mkn[1], N = mkn[2];  // plain variables: INFO captures them
    Tensor a = randn({M, K}, 0, 1, DType::Float64, gen);
    Tensor b = randn({K, N}, 0, 1, DType::Float64, gen);
    INFO("M " << M << " K " << K << " N " << N);
    check_close(matmul(a, b), naive_mm(a.to_vector(), b.to_vector(), M, K, N), 1e-10, 1e-10);
    // transposed operands are read through strides
    Tensor at = contiguous(transpose(a, 0, 1));
    Tensor bt = contiguous(transpose(b, 0, 1));
    check_close(matmul(transpose(at, 0, 1), transpose(bt, 0, 1)),
                naive_mm(a.to_vector(), b.to_vector(), M, K, N), 1e-10, 1e-10);
    Tensor af = to_dtype(a, DType::Float32), bf = to_dtype(b, DType::Float32);
    check_close(matmul(af, bf), naive_mm(af.to_vector(), bf.to_vector(), M, K, N), 1e-3, 1e-4);
  }
}

TEST_CASE("matmul broadcasting batch dims and 1-D operands") {
  Tensor a = reshape(arange(0, 12), {2, 1, 2, 3});
  Tensor b = reshape(arange(0, 18), {3, 3, 2});
  Tensor c = matmul(a, b);
  CHECK(c.shape() == Shape{2, 3, 2, 2});
  // c[1][2] = a[1][0] @ b[2]
  Tensor c12 = contiguous(slice(slice(c, 0, 1, 2), 1, 2, 3));
  std::vector<double> a1 = slice(a, 0, 1, 2).to_vector(), b2 = slice(b, 0, 2, 3).to_vector();
  check_close(c12, naive_mm(a1, b2, 2, 3, 2));
  CHECK(matmul(arange(0, 3), arange(0, 3)).dim() == 0);
  check_close(matmul(arange(0, 3), arange(0, 3)), {5});
  CHECK(matmul(arange(0, 3), reshape(arange(0, 6), {3, 2})).shape() == Shape{2});
  CHECK_THROWS_AS(bmm(zeros({2, 3, 4}), zeros({3, 4, 5})), ShapeError);
  // Batch dims that merge into two levels (a permuted batch) or three (copied
  // first) give the products of contiguous operands.
  Tensor x = permute(reshape(arange(0, 120), {2, 2, 3, 2, 5}), {0, 2, 1, 3, 4});
  Tensor y = reshape(arange(0, 180), {2, 3, 2, 5, 3});
  CHECK(matmul(x, y).to_vector() == matmul(contiguous(x), y).to_vector());
  Tensor p = permute(reshape(arange(0, 60), {2, 5, 2, 3}), {0, 2, 1, 3});
  Tensor q = permute(reshape(arange(0, 36), {2, 3, 2, 3}), {0, 2, 3, 1});
  CHECK(matmul(p, q).to_vector() == matmul(contiguous(p), contiguous(q)).to_vector());
}

TEST_CASE("shape ops: cat, stack, split, pad, gather, index_select, repeat_interleave") {
  Tensor a = reshape(arange(0, 6), {2, 3});
  check_close(cat({a, a * 10.0}, 0), {0, 1, 2, 3, 4, 5, 0, 10, 20, 30, 40, 50});
  CHECK(stack({a, a}, 1).shape() == Shape{2, 2, 3});
  auto parts = split(arange(0, 5), 2, 0);
  REQUIRE(parts.size() == 3);
  check_close(parts[2], {4});
  check_close(pad(tensor({1, 2}, {1, 2}), {1, 0, 0, 1}, -1), {-1, 1, 2, -1, -1, -1});
  check_close(gather(a, 1, tensor_int({2, 0, 1, 1}, {2, 2})), {2, 0, 4, 4});
  check_close(index_select(a, 0, tensor_int({1, 1, 0}, {3})), {3, 4, 5, 3, 4, 5, 0, 1, 2});
  check_close(repeat_interleave(tensor({1, 2}, {2}), 3, 0), {1, 1, 1, 2, 2, 2});
  CHECK_THROWS_AS(index_select(a, 0, tensor_int({2}, {1})), IndexError);
  CHECK_THROWS_AS(gather(a, 1, tensor_int({3, 0}, {2, 1})), IndexError);
  CHECK_THROWS_AS(cat({a, zeros({2, 2})}, 0), ShapeError);
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
}

TEST_CASE("exp, sigmoid, softplus at +-inf: exact limits in the vector body and the tail") {
  const double inf = std::numeric_limits<double>::infinity();
  for (DType dt : {DType::Float32, DType::Float64}) {
    INFO(dtype_name(dt));
    std::vector<double> x(37);  // 37: whole batches and a scalar tail on every ISA
    for (size_t i = 0; i < x.size(); ++i) x[i] = i % 3 == 0 ? -inf : i % 3 == 1 ? inf : 0.0;
    const Tensor t = tensor(x, {37}, dt);
    const std::vector<double> e = exp(t).to_vector(), s = sigmoid(t).to_vector(), p = softplus(t).to_vector();
    for (size_t i = 0; i < x.size(); ++i) {
      INFO("element " << i);
      CHECK(e[i] == (i % 3 == 0 ? 0.0 : i % 3 == 1 ? inf : 1.0));
      CHECK(s[i] == (i % 3 == 0 ? 0.0 : i % 3 == 1 ? 1.0 : 0.5));
      CHECK(p[i] == (i % 3 == 0 ? 0.0 : i % 3 == 1 ? inf : p[2]));
    }
    CHECK(p[2] == doctest::Approx(std::log(2.0)).epsilon(1e-6));
  }
}
