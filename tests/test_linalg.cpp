// Values of matmul (ops/linalg.cpp) against a naive reference across shapes,
// strides, blocking edges and broadcast batch dims. (Gradients are covered
// by the op-table gradchecks.)
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
