// The fast paths of the CPU backend: the BLIS-style GEMM and its small-K
// register tile, merged-dim strided iteration, the autograd engine's in-place
// gradient sums and leaf-gradient hand-over, the fused ConvLSTM cell at
// shapes that exercise its padding and tiling edges, and the vector
// sigmoid/tanh the fused kernels use.
#include <omp.h>

#include <cmath>
#include <random>
#include <vector>

#include "tmem/core/autograd.h"
#include "tmem/core/strided.h"
#include "tmem/ops/cpu/gemm.h"
#include "tmem/ops/cpu/simd.h"
#include "cell_util.h"
#include "test_util.h"

using namespace tmem;
using tmem::test::cell_inputs;
using tmem::test::weights_of;
using tmem::test::check_close;
using tmem::test::require_gradcheck;

namespace {

template <class T>
std::vector<T> random_values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<T> v(n);
  for (T& x : v) x = static_cast<T>(u(rng));
  return v;
}

// C = (acc ? C : 0) + A B in double, A(i,k) = A[i*a_rs + k*a_cs], likewise B.
template <class T>
std::vector<double> naive_gemm(int64_t M, int64_t N, int64_t K, const std::vector<T>& A,
                               int64_t a_rs, int64_t a_cs, const std::vector<T>& B, int64_t b_rs,
                               int64_t b_cs, const std::vector<T>& C0, int64_t ldc, bool acc) {
  std::vector<double> C(static_cast<size_t>(M * N));
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double s = acc ? static_cast<double>(C0[i * ldc + j]) : 0.0;
      for (int64_t k = 0; k < K; ++k)
        s += static_cast<double>(A[i * a_rs + k * a_cs]) *
             static_cast<double>(B[k * b_rs + j * b_cs]);
      C[i * N + j] = s;
    }
  return C;
}

struct GemmCase {
  int64_t M, N, K;
  bool trans_a, trans_b, acc;
};

template <class T>
void check_gemm(const GemmCase& g, bool parallel, double tol) {
  const int64_t M = g.M, N = g.N, K = g.K, ldc = N + 3;
  const std::vector<T> A = random_values<T>(static_cast<size_t>(std::max<int64_t>(M * K, 1)), 1);
  const std::vector<T> B = random_values<T>(static_cast<size_t>(std::max<int64_t>(K * N, 1)), 2);
  std::vector<T> C = random_values<T>(static_cast<size_t>(std::max<int64_t>(M * ldc, 1)), 3);
  const std::vector<T> C0 = C;
  const int64_t a_rs = g.trans_a ? 1 : K, a_cs = g.trans_a ? M : 1;
  const int64_t b_rs = g.trans_b ? 1 : N, b_cs = g.trans_b ? K : 1;
  cpu::gemm<T>(M, N, K, A.data(), a_rs, a_cs, B.data(), b_rs, b_cs, C.data(), ldc, g.acc, parallel);
  const std::vector<double> want =
      naive_gemm(M, N, K, A, a_rs, a_cs, B, b_rs, b_cs, C0, ldc, g.acc);
  CAPTURE(M);
  CAPTURE(N);
  CAPTURE(K);
  CAPTURE(g.trans_a);
  CAPTURE(g.trans_b);
  CAPTURE(g.acc);
  CAPTURE(parallel);
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      const double got = static_cast<double>(C[i * ldc + j]);
      const double w = want[i * N + j];
      if (std::abs(got - w) > tol * (1.0 + std::sqrt(static_cast<double>(K)))) {
        FAIL_CHECK("C[" << i << "," << j << "] = " << got << ", expected " << w);
        return;
      }
    }
    // The padding between rows is never written.
    for (int64_t j = N; j < ldc; ++j) REQUIRE(C[i * ldc + j] == C0[i * ldc + j]);
  }
}

const GemmCase kGemmCases[] = {
    {1, 1, 1, false, false, false},    {5, 7, 3, false, false, true},
    {12, 32, 256, false, false, false},  // exactly one micro-tile, one KC slice
    {13, 33, 257, false, false, true},   // one past each blocking edge
    {11, 31, 255, true, false, false},   {24, 96, 64, false, true, false},
    {37, 530, 300, false, false, false}, // two NC blocks, a partial micro-panel
    {200, 45, 513, true, true, true},    {64, 216, 32, false, false, false},
    {3, 600, 17, false, false, false},   // few rows: threads split the B panels
    {4200, 20, 9, false, false, false},  // more rows than one packed A chunk
    {50, 17, 0, false, false, false},    // K = 0 zeroes C
    // Transposed A read in place (narrow or small products): whole panels
    // over two KC slices, a packed edge panel, and with transposed B.
    {48, 16, 300, true, false, false},   {129, 16, 129, true, false, true},
    {26, 150, 40, true, true, false},
};

}  // namespace

TEST_CASE("cpu::gemm matches a naive product: blocking edges, strides, accumulate, threads") {
  for (const GemmCase& g : kGemmCases)
    for (bool par : {false, true}) {
      check_gemm<float>(g, par, 2e-5);
      check_gemm<double>(g, par, 1e-12);
    }
}

TEST_CASE("cpu::gemm gives the same bits on 1 and 2 threads") {
  const int64_t M = 301, N = 530, K = 700;
  const std::vector<float> A = random_values<float>(static_cast<size_t>(M * K), 4);
  const std::vector<float> B = random_values<float>(static_cast<size_t>(K * N), 5);
  std::vector<float> c1(static_cast<size_t>(M * N)), c2(c1.size());
  const int before = omp_get_max_threads();
  omp_set_num_threads(1);
  cpu::gemm<float>(M, N, K, A.data(), K, 1, B.data(), N, 1, c1.data(), N, false, true);
  omp_set_num_threads(2);
  cpu::gemm<float>(M, N, K, A.data(), K, 1, B.data(), N, 1, c2.data(), N, false, true);
  omp_set_num_threads(before);
  CHECK(c1 == c2);
}

TEST_CASE("batched matmul on 2 threads equals each product on its own (serial GEMMs inside a parallel loop)") {
  // 8 products of 40 x 24 @ 24 x 40: bmm splits the batch across threads and
  // runs each GEMM serially, which must not share its work with the others.
  Generator gen(9);
  const Tensor a = rand({8, 40, 24}, -1, 1, DType::Float32, gen), b = rand({8, 24, 40}, -1, 1, DType::Float32, gen);
  const int before = omp_get_max_threads();
  omp_set_num_threads(2);
  const Tensor c = matmul(a, b);
  omp_set_num_threads(before);
  for (int64_t i = 0; i < 8; ++i) {
    const Tensor ci = matmul(contiguous(slice(a, 0, i, i + 1)), contiguous(slice(b, 0, i, i + 1)));
    CHECK(contiguous(slice(c, 0, i, i + 1)).to_vector() == ci.to_vector());
  }
}

TEST_CASE("cpu::tile_kernel accumulates a packed-A register tile over in-place B rows") {
  using Vb = xsimd::batch<float>;
  constexpr int64_t L = Vb::size;
  constexpr int MR = 8, NV = 3;
  const int64_t K = 19, ldb = 4 * L;
  const std::vector<float> Ap = random_values<float>(static_cast<size_t>(K * MR), 6);
  std::vector<float> Bbuf = random_values<float>(static_cast<size_t>(K * ldb + L), 7);
  // B rows must start on a batch boundary.
  auto base = reinterpret_cast<uintptr_t>(Bbuf.data());
  const float* B = Bbuf.data() + ((64 - base % 64) % 64) / sizeof(float);
  Vb acc[MR][NV];
  for (int r = 0; r < MR; ++r)
    for (int j = 0; j < NV; ++j) acc[r][j] = Vb(static_cast<float>(r - j));
  cpu::tile_kernel<float, MR, NV>(K, Ap.data(), B, ldb, acc);
  for (int r = 0; r < MR; ++r)
    for (int j = 0; j < NV; ++j) {
      alignas(64) float got[L];
      acc[r][j].store_aligned(got);
      for (int64_t l = 0; l < L; ++l) {
        double want = r - j;
        for (int64_t k = 0; k < K; ++k) want += double(Ap[k * MR + r]) * B[k * ldb + j * L + l];
        REQUIRE(std::abs(got[l] - want) < 1e-4);
      }
    }
}

TEST_CASE("for_each_row merges dims laid out alike and keeps row-major order") {
  SUBCASE("a contiguous tensor is one row") {
    int calls = 0;
    int64_t seen = 0;
    for_each_row<1>({4, 3, 5}, {Shape{15, 5, 1}}, [&](std::array<int64_t, 1>, int64_t len,
                                                       std::array<int64_t, 1> st) {
      ++calls;
      seen += len;
      CHECK(st[0] == 1);
    }, false);
    CHECK(calls == 1);
    CHECK(seen == 60);
  }
  SUBCASE("a transposed operand splits the rows where the layouts differ") {
    int calls = 0;
    // The second operand is a [5,3,4] tensor seen through permute(2, 1, 0).
    for_each_row<2>({4, 3, 5}, {Shape{15, 5, 1}, Shape{1, 4, 12}},
                    [&](std::array<int64_t, 2>, int64_t len, std::array<int64_t, 2>) {
                      ++calls;
                      CHECK(len == 5);
                    }, false);
    CHECK(calls == 12);
  }
  SUBCASE("for_each_element visits a permuted view in row-major order") {
    Tensor t = arange(0, 24).requires_grad_(false);
    Tensor v = permute(reshape(t, {2, 3, 4}), {2, 0, 1});  // [4, 2, 3]
    std::vector<double> got = v.to_vector();
    std::vector<double> want;
    for (int64_t a = 0; a < 4; ++a)
      for (int64_t b = 0; b < 2; ++b)
        for (int64_t c = 0; c < 3; ++c) want.push_back(static_cast<double>(b * 12 + c * 4 + a));
    CHECK(got == want);
  }
  SUBCASE("elementwise ops over broadcast and sliced views, serial and split across threads") {
    Generator gen(11);
    Tensor a = rand({6, 70, 90}, -1, 1, DType::Float32, gen);  // 37,800 elements: parallel
    Tensor b = rand({70, 1}, -1, 1, DType::Float32, gen);
    Tensor s = slice(a, 2, 5, 85);
    Tensor out = s * b + 1.0;
    std::vector<double> av = a.to_vector(), bv = b.to_vector(), ov = out.to_vector();
    size_t k = 0;
    for (int64_t i = 0; i < 6; ++i)
      for (int64_t j = 0; j < 70; ++j)
        for (int64_t l = 5; l < 85; ++l, ++k)
          REQUIRE(std::abs(ov[k] - (av[(i * 70 + j) * 90 + l] * bv[j] + 1.0)) < 1e-6);
  }
}

TEST_CASE("autograd sums gradients in place only where nobody else can see them") {
  SUBCASE("the same gradient handed to two inputs is not changed under either") {
    Tensor x = tensor({1, 2, 3}, {3});
    x.requires_grad_();
    Tensor y = x * 2.0;
    Tensor z = y + y;  // add's backward hands g to both inputs
    Tensor seed = tensor({1, 10, 100}, {3});
    backward(z, seed);
    check_close(x.grad(), {4, 40, 400});
    check_close(seed, {1, 10, 100});  // the caller's seed is untouched
  }
  SUBCASE("a leaf gradient taken over without a copy still accumulates across backwards") {
    Tensor w = tensor({1, -1, 2, 0.5}, {4});
    w.requires_grad_();
    for (int rep = 0; rep < 3; ++rep) {
      Tensor loss = sum(w * w);
      loss.backward();
    }
    check_close(w.grad(), {6, -6, 12, 3});
  }
  SUBCASE("a gradient also kept by the user is copied into .grad, not shared") {
    Tensor w = tensor({1, 2}, {2});
    w.requires_grad_();
    Tensor g = tensor({5, 7}, {2});
    backward(w, g);
    Tensor g2 = w.grad();
    CHECK(g2.impl().storage != g.impl().storage);
    check_close(g2, {5, 7});
  }
  SUBCASE("many consumers of one tensor: x used by 12 slices and a sum") {
    Generator gen(3);
    Tensor x = rand({12, 5}, -1, 1, DType::Float64, gen);
    x.requires_grad_();
    Tensor total = sum(x) * 0.5;
    for (int64_t i = 0; i < 12; ++i) total = total + sum(slice(x, 0, i, i + 1) * double(i));
    total.backward();
    std::vector<double> want;
    for (int64_t i = 0; i < 12; ++i)
      for (int64_t j = 0; j < 5; ++j) want.push_back(0.5 + static_cast<double>(i));
    check_close(x.grad(), want, 1e-12, 1e-12);
  }
}

namespace {

using V = std::vector<Tensor>;

// The cell of ops/convlstm.h by direct loops in double, for x, h, c and the
// weights of `v` (any float dtype): returns {h', c'}.
std::pair<std::vector<double>, std::vector<double>> reference_cell(const V& v) {
  const Shape& xs = v[0].shape();
  const int64_t B = xs[0], Cx = xs[1], C = v[1].shape()[1], D = xs[2], H = xs[3], W = xs[4];
  const int64_t Cz = Cx + C, S = D * H * W;
  std::vector<std::vector<double>> in;
  for (const Tensor& t : v) in.push_back(t.to_vector());
  std::vector<double> hn(static_cast<size_t>(B * C * S)), cn(hn.size());
  const int64_t n[3] = {D, H, W}, q[3] = {H * W, W, 1};
  for (int64_t b = 0; b < B; ++b) {
    std::vector<double> a(static_cast<size_t>(Cz * S));
    for (int64_t ch = 0; ch < Cz; ++ch)
      for (int64_t j = 0; j < S; ++j)
        a[ch * S + j] = ch < Cx ? in[0][(b * Cx + ch) * S + j] : in[1][(b * C + ch - Cx) * S + j];
    for (int ax = 0; ax < 3; ++ax) {
      std::vector<double> o(a.size());
      for (int64_t ch = 0; ch < Cz; ++ch)
        for (int64_t j = 0; j < S; ++j) {
          const int64_t i = (j / q[ax]) % n[ax];
          const double* k = &in[3 + ax][ch * 3];
          double s = in[6 + ax][ch] + k[1] * a[ch * S + j];
          if (i > 0) s += k[0] * a[ch * S + j - q[ax]];
          if (i < n[ax] - 1) s += k[2] * a[ch * S + j + q[ax]];
          o[ch * S + j] = s;
        }
      a = o;
    }
    for (int64_t ch = 0; ch < C; ++ch)
      for (int64_t j = 0; j < S; ++j) {
        double p[4];
        for (int gte = 0; gte < 4; ++gte) {
          const int64_t r = gte * C + ch;
          double s = in[10][r];
          for (int64_t k = 0; k < Cz; ++k) s += in[9][r * Cz + k] * a[k * S + j];
          p[gte] = s;
        }
        auto sg = [](double u) { return 1.0 / (1.0 + std::exp(-u)); };
        const double c2 = sg(p[1]) * in[2][(b * C + ch) * S + j] + sg(p[0]) * std::tanh(p[3]);
        cn[(b * C + ch) * S + j] = c2;
        hn[(b * C + ch) * S + j] = sg(p[2]) * std::tanh(c2);
      }
  }
  return {hn, cn};
}


ConvLSTM3DState run(const V& v) {
  return convlstm3d_cell(v[0], v[1], v[2], weights_of(v));
}

}  // namespace

TEST_CASE("convlstm3d_cell at tiling edges matches direct loops") {
  // (B, Cx, C, grid): odd C (a half channel pair), Cz not a multiple of 8,
  // voxels fewer than one batch, a grid whose last batch is partial, and the
  // reference size with more items than threads.
  struct Case {
    int64_t B, Cx, C;
    std::array<int64_t, 3> g;
  };
  const Case cases[] = {{2, 5, 7, {4, 3, 5}}, {3, 1, 1, {1, 1, 3}}, {1, 9, 4, {2, 5, 7}},
                        {5, 16, 16, {6, 6, 6}}, {2, 3, 5, {8, 8, 8}}};
  for (const Case& k : cases)
    for (DType dt : {DType::Float64, DType::Float32}) {
      CAPTURE(k.B);
      CAPTURE(k.Cx);
      CAPTURE(k.C);
      CAPTURE(dtype_name(dt));
      V in = cell_inputs(k.B, k.Cx, k.C, k.g, dt, 17);
      ConvLSTM3DState s = run(in);
      auto [hw, cw] = reference_cell(in);
      const double tol = dt == DType::Float64 ? 1e-12 : 2e-5;
      check_close(s.h, hw, tol, tol);
      check_close(s.c, cw, tol, tol);
    }
}

TEST_CASE("convlstm3d_cell gradcheck at tiling edges: Cz = 12, odd C, partial batches") {
  V in = cell_inputs(2, 5, 7, {2, 3, 3}, DType::Float64, 23);
  for (Tensor& t : in) t.requires_grad_();
  require_gradcheck(
      [](const V& v) {
        ConvLSTM3DState s = run(v);
        return cat({s.h, s.c}, 1);
      },
      in);
}

TEST_CASE("convlstm3d_cell backward is bit-for-bit repeatable") {
  V base = cell_inputs(9, 16, 16, {6, 6, 6}, DType::Float32, 29);
  std::vector<std::vector<double>> grads[2];
  for (int rep = 0; rep < 2; ++rep) {
    V in;
    for (const Tensor& t : base) {
      Tensor c = empty(t.shape(), t.dtype());
      copy_data(c, t);
      c.requires_grad_();
      in.push_back(c);
    }
    ConvLSTM3DState s = run(in);
    (sum(s.h * s.h) + sum(s.c)).backward();
    for (const Tensor& t : in) grads[rep].push_back(t.grad().to_vector());
  }
  CHECK(grads[0] == grads[1]);
}

TEST_CASE("cpu::sigmoid_v and cpu::tanh_v: a few ulp from the float64 functions, exact limits") {
  using Vb = xsimd::batch<float>;
  constexpr int64_t L = Vb::size;
  std::vector<float> xs;
  for (double x = -95; x <= 95; x += 0.0137) xs.push_back(static_cast<float>(x));
  for (double e = -30; e < 1; e += 0.05) {
    xs.push_back(static_cast<float>(std::pow(10.0, e)));
    xs.push_back(-static_cast<float>(std::pow(10.0, e)));
  }
  const float inf = std::numeric_limits<float>::infinity();
  for (float x : {0.0f, inf, -inf, 88.0f, -88.0f, 0.625f, -0.625f}) xs.push_back(x);
  while (xs.size() % L) xs.push_back(0.5f);
  double worst_s = 0, worst_t = 0;
  for (size_t i = 0; i < xs.size(); i += L) {
    alignas(64) float s[L], t[L];
    const Vb x = Vb::load_unaligned(&xs[i]);
    cpu::sigmoid_v<float>(x).store_aligned(s);
    cpu::tanh_v<float>(x).store_aligned(t);
    for (int64_t l = 0; l < L; ++l) {
      const double xd = xs[i + l];
      const double sr = 1.0 / (1.0 + std::exp(-xd)), tr = std::tanh(xd);
      if (sr > 1e-30) worst_s = std::max(worst_s, std::abs(s[l] - sr) / sr);
      else CHECK(s[l] <= 1e-30f);
      if (tr != 0) worst_t = std::max(worst_t, std::abs(t[l] - tr) / std::abs(tr));
      else CHECK(t[l] == 0.0f);
    }
  }
  CHECK(worst_s < 4 * 5.97e-8);
  CHECK(worst_t < 4 * 5.97e-8);
  alignas(64) float lim[L] = {};
  lim[0] = inf;
  lim[1] = -inf;
  lim[2] = std::numeric_limits<float>::quiet_NaN();
  alignas(64) float s[L], t[L];
  cpu::sigmoid_v<float>(Vb::load_aligned(lim)).store_aligned(s);
  cpu::tanh_v<float>(Vb::load_aligned(lim)).store_aligned(t);
  CHECK(s[0] == 1.0f);
  CHECK(s[1] == 0.0f);
  CHECK(std::isnan(s[2]));
  CHECK(t[0] == 1.0f);
  CHECK(t[1] == -1.0f);
  CHECK(std::isnan(t[2]));
}
