// The spatial ops: gaussian_splat, conv3d_depthwise and convlstm3d_cell.
// Values and gradients against PyTorch fixtures (tools/fixtures/spatial.py),
// exact small cases, edge points (sigma tiny/huge, mu on centres/corners), the
// fused ConvLSTM cell against the same cell composed from primitive ops, and
// shape errors.
#include <cmath>
#include <string>

#include "fixture.h"
#include "cell_util.h"
#include "test_util.h"

using namespace tmem;
using tmem::test::cell_inputs;
using tmem::test::weights_of;
using tmem::test::check_close;
using tmem::test::fixture_tensor;
using tmem::test::fixture_values;
using tmem::test::load_fixture;
using tmem::test::require_gradcheck;

namespace {

using V = std::vector<Tensor>;
using A3 = std::array<int64_t, 3>;

// Float32 against the float64 PyTorch values: 1e-5 relative plus a small absolute.
constexpr double kAtol32 = 2e-5, kRtol32 = 1e-5;

const nlohmann::json& spatial_fixture() {
  static const nlohmann::json j = load_fixture("spatial");
  return j;
}

Tensor leaf(const nlohmann::json& j, DType dt) {
  Tensor t = fixture_tensor(j, dt);
  t.requires_grad_();
  return t;
}

A3 arr3(const nlohmann::json& j) { return {j[0].get<int64_t>(), j[1].get<int64_t>(), j[2].get<int64_t>()}; }

// The message of the ShapeError that f throws ("" when it throws none).
template <class F>
std::string shape_error(F&& f) {
  try {
    f();
  } catch (const ShapeError& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }


// The cell of ops/convlstm.h (docs/DESIGN.md §7) composed from primitive tmem ops.
ConvLSTM3DState composed_cell(const Tensor& x, const Tensor& h, const Tensor& c,
                              const ConvLSTM3DWeights& w) {
  const int64_t B = x.size(0), C = h.size(1), Cz = x.size(1) + C;
  const int64_t D = x.size(2), H = x.size(3), W = x.size(4);
  Tensor z = cat({x, h}, 1);
  Tensor a = conv3d_depthwise(z, reshape(w.dw_d, {Cz, 1, 3, 1, 1}), w.db_d, {1, 1, 1}, {1, 0, 0});
  a = conv3d_depthwise(a, reshape(w.dw_h, {Cz, 1, 1, 3, 1}), w.db_h, {1, 1, 1}, {0, 1, 0});
  a = conv3d_depthwise(a, reshape(w.dw_w, {Cz, 1, 1, 1, 3}), w.db_w, {1, 1, 1}, {0, 0, 1});
  Tensor p = matmul(w.pw, reshape(a, {B, Cz, D * H * W})) + reshape(w.pb, {4 * C, 1});
  p = reshape(p, {B, 4 * C, D, H, W});
  Tensor i = sigmoid(slice(p, 1, 0, C));
  Tensor f = sigmoid(slice(p, 1, C, 2 * C));
  Tensor o = sigmoid(slice(p, 1, 2 * C, 3 * C));
  Tensor g = tanh(slice(p, 1, 3 * C, 4 * C));
  Tensor c2 = f * c + i * g;
  Tensor h2 = o * tanh(c2);
  return {h2, c2};
}


// Runs cell (fused or composed) on fresh leaves copied from `base` (requires_grad
// where `grad_mask` says), backpropagates sum(h' wh) + sum(c' wc), and returns
// {h', c', grad of each input (undefined where not required)}.
template <class Cell>
V run_cell(Cell cell, const V& base, const std::vector<bool>& grad_mask, uint64_t seed) {
  V in;
  for (size_t k = 0; k < base.size(); ++k) {
    Tensor t = contiguous_data(base[k]).detach();
    Tensor copy = empty(t.shape(), t.dtype());
    copy_data(copy, t);
    if (grad_mask[k]) copy.requires_grad_();
    in.push_back(copy);
  }
  ConvLSTM3DState s = cell(in[0], in[1], in[2], weights_of(in));
  Generator gen(seed);
  Tensor wh = rand(s.h.shape(), 0.5, 1.5, s.h.dtype(), gen);
  Tensor wc = rand(s.c.shape(), 0.5, 1.5, s.c.dtype(), gen);
  (sum(s.h * wh) + sum(s.c * wc)).backward();
  V out{s.h, s.c};
  for (const Tensor& t : in) out.push_back(t.requires_grad() ? t.grad() : Tensor());
  return out;
}

const char* kCellNames[] = {"x", "h", "c", "dw_d", "dw_h", "dw_w", "db_d", "db_h", "db_w", "pw", "pb"};

void compare_fused_composed(const V& base, const std::vector<bool>& mask, double atol, double rtol) {
  V fused = run_cell(convlstm3d_cell, base, mask, 7);
  V comp = run_cell(composed_cell, base, mask, 7);
  INFO("h'");
  check_close(fused[0], comp[0].to_vector(), atol, rtol);
  INFO("c'");
  check_close(fused[1], comp[1].to_vector(), atol, rtol);
  for (size_t k = 0; k < base.size(); ++k) {
    INFO("gradient of " << kCellNames[k]);
    REQUIRE(fused[2 + k].defined() == mask[k]);
    REQUIRE(comp[2 + k].defined() == mask[k]);
    if (mask[k]) check_close(fused[2 + k], comp[2 + k].to_vector(), atol, rtol);
  }
}

}  // namespace

// ---------------------------------------------------------------- conv3d_depthwise

TEST_CASE("conv3d_depthwise matches PyTorch F.conv3d(groups=C): values and gradients") {
  const auto& fx = spatial_fixture();
  for (const char* name : {"conv3d_k311", "conv3d_k131", "conv3d_k113", "conv3d_k333",
                           "conv3d_k333_s2", "conv3d_k325_s123_nobias", "conv3d_k531_s211"}) {
    const auto& c = fx.at(name);
    for (DType dt : {DType::Float32, DType::Float64}) {
      CAPTURE(name);
      CAPTURE(dtype_name(dt));
      const double atol = dt == DType::Float32 ? kAtol32 : 1e-9;
      const double rtol = dt == DType::Float32 ? kRtol32 : 1e-8;
      Tensor x = leaf(c["input"], dt), w = leaf(c["weight"], dt);
      Tensor b = c.contains("bias") ? leaf(c["bias"], dt) : Tensor();
      Tensor out = conv3d_depthwise(x, w, b, arr3(c["stride"]), arr3(c["padding"]));
      CHECK(out.shape() == c["out"]["shape"].get<Shape>());
      check_close(out, fixture_values(c["out"]), atol, rtol);
      sum(out * fixture_tensor(c["w_out"], dt)).backward();
      check_close(x.grad(), fixture_values(c["grad_input"]), atol, rtol);
      check_close(w.grad(), fixture_values(c["grad_weight"]), atol, rtol);
      if (b.defined()) check_close(b.grad(), fixture_values(c["grad_bias"]), atol, rtol);
    }
  }
}

TEST_CASE("conv3d_depthwise weight gradient, exact: ones 6x6, 3x3 ones, stride 2, padding 1") {
  // 24 channels, a 6x6 input of ones as depth 1, kernel (1,3,3), stride (1,2,2),
  // padding (0,1,1), grad_output of ones: each tap sees 2 or 3 valid rows times
  // 2 or 3 valid columns.
  Tensor x = ones({1, 24, 1, 6, 6});
  Tensor w = ones({24, 1, 1, 3, 3});
  w.requires_grad_();
  Tensor out = conv3d_depthwise(x, w, Tensor(), {1, 2, 2}, {0, 1, 1});
  REQUIRE(out.shape() == Shape{1, 24, 1, 3, 3});
  out.backward(ones(out.shape()));
  std::vector<double> want;
  for (int c = 0; c < 24; ++c)
    for (double v : {4, 6, 6, 6, 9, 9, 6, 9, 9}) want.push_back(v);
  check_close(w.grad(), want, 0, 0);
}

TEST_CASE("conv3d_depthwise: only the gradients asked for - non-contiguous input") {
  Generator gen(5);
  Tensor x = rand({2, 3, 4, 5, 6}, -1, 1, DType::Float32, gen);
  Tensor w = rand({3, 1, 3, 3, 3}, -1, 1, DType::Float32, gen);
  Tensor b = rand({3}, -1, 1, DType::Float32, gen);
  b.requires_grad_();
  Tensor out = conv3d_depthwise(x, w, b, {1, 1, 1}, {1, 1, 1});
  sum(out).backward();
  CHECK(!x.grad().defined());
  CHECK(!w.grad().defined());
  check_close(b.grad(), std::vector<double>(3, 2 * 4 * 5 * 6), 1e-3, 1e-6);

  // The same data read through a permuted (non-contiguous) view.
  Tensor xt = contiguous(permute(x, {0, 1, 2, 4, 3}));
  Tensor xv = permute(xt, {0, 1, 2, 4, 3});
  REQUIRE(!xv.is_contiguous());
  check_close(conv3d_depthwise(xv, w, Tensor(), {2, 1, 1}, {0, 1, 1}),
              conv3d_depthwise(x, w, Tensor(), {2, 1, 1}, {0, 1, 1}).to_vector(), 0, 0);
}

TEST_CASE("conv3d_depthwise gradcheck, float64: even kernel, padding wider than the kernel") {
  require_gradcheck(
      [](const V& v) { return conv3d_depthwise(v[0], v[1], v[2], {2, 1, 3}, {1, 2, 0}); },
      {gc_input({1, 2, 3, 4, 7}, -1, 1, 1), gc_input({2, 1, 2, 1, 4}, -1, 1, 2),
       gc_input({2}, -1, 1, 3)});
}

TEST_CASE("conv3d_depthwise: bad shapes raise ShapeError with both shapes - bad options ValueError") {
  Tensor x = zeros({2, 3, 4, 5, 6});
  Tensor w = zeros({3, 1, 3, 3, 3});
  std::string m = shape_error([&] { conv3d_depthwise(zeros({3, 4, 5, 6}), w, Tensor()); });
  CHECK(contains(m, "conv3d_depthwise"));
  CHECK(contains(m, "[3,4,5,6]"));
  CHECK(contains(m, "[3,1,3,3,3]"));
  m = shape_error([&] { conv3d_depthwise(x, zeros({4, 1, 3, 3, 3}), Tensor()); });
  CHECK(contains(m, "[2,3,4,5,6]"));
  CHECK(contains(m, "[4,1,3,3,3]"));
  m = shape_error([&] { conv3d_depthwise(x, zeros({3, 3, 3, 3}), Tensor()); });
  CHECK(contains(m, "[2,3,4,5,6]"));
  CHECK(contains(m, "[3,3,3,3]"));
  m = shape_error([&] { conv3d_depthwise(x, zeros({3, 2, 3, 3, 3}), Tensor()); });
  CHECK(contains(m, "[3,2,3,3,3]"));
  m = shape_error([&] { conv3d_depthwise(x, w, zeros({4})); });
  CHECK(contains(m, "[4]"));
  CHECK(contains(m, "[2,3,4,5,6]"));
  m = shape_error([&] { conv3d_depthwise(x, zeros({3, 1, 7, 1, 1}), Tensor()); });
  CHECK(contains(m, "[2,3,4,5,6]"));
  CHECK(contains(m, "[3,1,7,1,1]"));
  CHECK_THROWS_AS(conv3d_depthwise(x, w, Tensor(), {0, 1, 1}, {1, 1, 1}), ValueError);
  CHECK_THROWS_AS(conv3d_depthwise(x, w, Tensor(), {1, 1, 1}, {-1, 1, 1}), ValueError);
  CHECK_THROWS_AS(conv3d_depthwise(x, zeros({3, 1, 3, 3, 3}, DType::Float64), Tensor()), DtypeError);
}

// ---------------------------------------------------------------- convlstm3d_cell

TEST_CASE("convlstm3d_cell matches the cell composed in PyTorch: values and all gradients") {
  const auto& fx = spatial_fixture();
  const char* names[] = {"dw_d", "dw_h", "dw_w", "db_d", "db_h", "db_w", "pw", "pb"};
  for (const char* name : {"convlstm_B2_Cx2_C3_234", "convlstm_B1_Cx4_C2_616"}) {
    const auto& c = fx.at(name);
    for (DType dt : {DType::Float32, DType::Float64}) {
      CAPTURE(name);
      CAPTURE(dtype_name(dt));
      const double atol = dt == DType::Float32 ? kAtol32 : 1e-9;
      const double rtol = dt == DType::Float32 ? kRtol32 : 1e-8;
      V in{leaf(c["x"], dt), leaf(c["h"], dt), leaf(c["c"], dt)};
      for (const char* n : names) in.push_back(leaf(c[n], dt));
      ConvLSTM3DState s = convlstm3d_cell(in[0], in[1], in[2], weights_of(in));
      check_close(s.h, fixture_values(c["h_out"]), atol, rtol);
      check_close(s.c, fixture_values(c["c_out"]), atol, rtol);
      (sum(s.h * fixture_tensor(c["w_h"], dt)) + sum(s.c * fixture_tensor(c["w_c"], dt))).backward();
      for (size_t k = 0; k < in.size(); ++k) {
        INFO("gradient of " << kCellNames[k]);
        check_close(in[k].grad(), fixture_values(c[std::string("grad_") + kCellNames[k]]), atol, rtol);
      }
    }
  }
}

TEST_CASE("convlstm3d_cell: the fused op equals the cell composed from primitive tmem ops") {
  const std::vector<bool> all(11, true);
  SUBCASE("float64, B=2 Cx=2 C=3 grid 3x4x5, every input differentiable") {
    compare_fused_composed(cell_inputs(2, 2, 3, {3, 4, 5}, DType::Float64, 1), all, 1e-12, 1e-10);
  }
  SUBCASE("float64, grid with size-1 and size-2 axes") {
    compare_fused_composed(cell_inputs(3, 1, 2, {1, 2, 5}, DType::Float64, 2), all, 1e-12, 1e-10);
  }
  SUBCASE("float32, the reference size B=8 C=16 Cx=16 grid 6^3 (batch-parallel path)") {
    compare_fused_composed(cell_inputs(8, 16, 16, {6, 6, 6}, DType::Float32, 3), all, 1e-4, 1e-4);
  }
  SUBCASE("float32, B=1 (the GEMM parallelises inside)") {
    compare_fused_composed(cell_inputs(1, 16, 16, {6, 6, 6}, DType::Float32, 4), all, 1e-4, 1e-4);
  }
  SUBCASE("only the weights need gradients") {
    std::vector<bool> m(11, true);
    m[0] = m[1] = m[2] = false;
    compare_fused_composed(cell_inputs(2, 2, 3, {3, 4, 5}, DType::Float64, 5), m, 1e-12, 1e-10);
  }
  SUBCASE("only c needs a gradient") {
    std::vector<bool> m(11, false);
    m[2] = true;
    compare_fused_composed(cell_inputs(2, 2, 3, {3, 4, 5}, DType::Float64, 6), m, 1e-12, 1e-10);
  }
  SUBCASE("only x and the depthwise biases need gradients") {
    std::vector<bool> m(11, false);
    m[0] = m[6] = m[7] = m[8] = true;
    compare_fused_composed(cell_inputs(2, 2, 3, {3, 4, 5}, DType::Float64, 7), m, 1e-12, 1e-10);
  }
}

TEST_CASE("convlstm3d_cell gradcheck, float64, both outputs at once") {
  V in = cell_inputs(2, 2, 3, {2, 3, 4}, DType::Float64, 9);
  for (Tensor& t : in) t.requires_grad_();
  require_gradcheck(
      [](const V& v) {
        ConvLSTM3DState s = convlstm3d_cell(v[0], v[1], v[2], weights_of(v));
        return cat({s.h, s.c}, 1);
      },
      in);
}

TEST_CASE("convlstm3d_cell: changing the saved c' in place before backward is reported") {
  V v = cell_inputs(2, 2, 3, {2, 3, 4}, DType::Float32, 2);
  v[0].requires_grad_();
  ConvLSTM3DState s = convlstm3d_cell(v[0], v[1], v[2], weights_of(v));
  mul_(s.c, 2.0);
  try {
    sum(s.h).backward();
    FAIL("expected an error");
  } catch (const ValueError& e) {
    CHECK(contains(e.what(), "convlstm3d_cell"));
    CHECK(contains(e.what(), "modified in place"));
  }
}

TEST_CASE("convlstm3d_cell: bad shapes raise ShapeError with both shapes") {
  V v = cell_inputs(2, 2, 3, {3, 4, 5}, DType::Float32, 1);
  ConvLSTM3DWeights w = weights_of(v);
  std::string m = shape_error([&] { convlstm3d_cell(zeros({2, 2, 3, 4}), v[1], v[2], w); });
  CHECK(contains(m, "convlstm3d_cell"));
  CHECK(contains(m, "[2,2,3,4]"));
  CHECK(contains(m, "[2,3,3,4,5]"));
  m = shape_error([&] { convlstm3d_cell(zeros({2, 2, 3, 4, 6}), v[1], v[2], w); });
  CHECK(contains(m, "[2,2,3,4,6]"));
  CHECK(contains(m, "[2,3,3,4,5]"));
  m = shape_error([&] { convlstm3d_cell(v[0], v[1], zeros({2, 4, 3, 4, 5}), w); });
  CHECK(contains(m, "[2,3,3,4,5]"));
  CHECK(contains(m, "[2,4,3,4,5]"));
  ConvLSTM3DWeights bad = w;
  bad.dw_h = zeros({4, 3});
  m = shape_error([&] { convlstm3d_cell(v[0], v[1], v[2], bad); });
  CHECK(contains(m, "dw_h"));
  CHECK(contains(m, "[5,3]"));
  CHECK(contains(m, "[4,3]"));
  bad = w;
  bad.pw = zeros({12, 5, 1, 1, 1});
  m = shape_error([&] { convlstm3d_cell(v[0], v[1], v[2], bad); });
  CHECK(contains(m, "[12,5]"));
  CHECK(contains(m, "[12,5,1,1,1]"));
  bad = w;
  bad.pb = Tensor();
  m = shape_error([&] { convlstm3d_cell(v[0], v[1], v[2], bad); });
  CHECK(contains(m, "pb"));
  CHECK(contains(m, "(undefined)"));
  bad = w;
  bad.db_w = zeros({5}, DType::Float64);
  CHECK_THROWS_AS(convlstm3d_cell(v[0], v[1], v[2], bad), DtypeError);
}

// ---------------------------------------------------------------- gaussian_splat

TEST_CASE("gaussian_splat matches the formula composed in PyTorch: values and gradients") {
  const auto& fx = spatial_fixture();
  for (const char* name : {"splat_B2_C3_345", "splat_B2_C3_456_trunc", "splat_B3_C2_135"}) {
    const auto& c = fx.at(name);
    for (DType dt : {DType::Float32, DType::Float64}) {
      CAPTURE(name);
      CAPTURE(dtype_name(dt));
      const double atol = dt == DType::Float32 ? kAtol32 : 1e-9;
      const double rtol = dt == DType::Float32 ? kRtol32 : 1e-8;
      Tensor content = leaf(c["content"], dt), mu = leaf(c["mu"], dt), sigma = leaf(c["sigma"], dt);
      const auto g = c["grid"];
      Tensor out = gaussian_splat(content, mu, sigma, g[0].get<int64_t>(), g[1].get<int64_t>(),
                                  g[2].get<int64_t>(), c["truncate"].get<double>());
      CHECK(out.shape() == c["out"]["shape"].get<Shape>());
      check_close(out, fixture_values(c["out"]), atol, rtol);
      sum(out * fixture_tensor(c["w_out"], dt)).backward();
      check_close(content.grad(), fixture_values(c["grad_content"]), atol, rtol);
      check_close(mu.grad(), fixture_values(c["grad_mu"]), atol, rtol);
      check_close(sigma.grad(), fixture_values(c["grad_sigma"]), atol, rtol);
    }
  }
}

TEST_CASE("gaussian_splat edge points: sigma 1e-4 and 1e4, mu on a cell centre and on corners") {
  // Grid 3x4x5: x centres -1,-0.5,0,0.5,1; y -1,-1/3,1/3,1; z -1,0,1.
  const int64_t D = 3, H = 4, W = 5;
  struct Case { const char* label; std::vector<double> mu; double sigma; };
  const Case cases[] = {
      {"sigma 1e-4, mu on the cell centre (x=0.5, y=1/3, z=0)", {0.5, 1.0 / 3.0, 0.0}, 1e-4},
      {"sigma 1e-4, mu on the volume corner (-1,-1,-1)", {-1, -1, -1}, 1e-4},
      {"sigma 1e-4, mu on a cell corner (between 8 centres)", {0.25, 0.0, 0.5}, 1e-4},
      {"sigma 1e4, mu on the cell centre", {0.5, 1.0 / 3.0, 0.0}, 1e4},
      {"sigma 1e4, mu on the volume corner (1,1,1)", {1, 1, 1}, 1e4},
  };
  for (const Case& k : cases)
    for (DType dt : {DType::Float32, DType::Float64})
      for (double truncate : {0.0, 3.0}) {
        CAPTURE(k.label);
        CAPTURE(dtype_name(dt));
        CAPTURE(truncate);
        Tensor content = tensor({1.5, -2.0}, {1, 2}, dt);
        Tensor mu = tensor(k.mu, {1, 3}, dt);
        Tensor sigma = tensor({k.sigma}, {1}, dt);
        content.requires_grad_();
        mu.requires_grad_();
        sigma.requires_grad_();
        Tensor out = gaussian_splat(content, mu, sigma, D, H, W, truncate);
        Generator gen(3);
        Tensor w = rand(out.shape(), 0.5, 1.5, dt, gen);
        sum(out * w).backward();
        for (const Tensor& t : {out, content.grad(), mu.grad(), sigma.grad()})
          for (double v : t.to_vector()) REQUIRE(std::isfinite(v));
        std::vector<double> vol = out.to_vector();
        if (k.sigma == 1e4) {
          // The Gaussian is flat: every voxel holds the content (to 1e-7).
          for (int64_t i = 0; i < out.numel(); ++i)
            CHECK(std::abs(vol[i] - (i < D * H * W ? 1.5 : -2.0)) < 1e-6);
        } else if (k.mu[1] == 0.0) {
          // Between centres: the nearest centre is 0.25^2 + (1/3)^2 + 0.5^2 away.
          for (double v : vol) CHECK(v == 0.0);
          for (double v : mu.grad().to_vector()) CHECK(v == 0.0);
        } else {
          // Exactly one voxel per channel is lit, with exactly the content.
          const int64_t hit = k.mu[0] < 0 ? 0 : (1 * H + 2) * W + 3;
          for (int64_t i = 0; i < D * H * W; ++i) {
            CHECK(vol[i] == (i == hit ? 1.5 : 0.0));
            CHECK(vol[D * H * W + i] == (i == hit ? -2.0 : 0.0));
          }
          check_close(content.grad(), {w.to_vector()[hit], w.to_vector()[D * H * W + hit]}, 1e-6, 1e-6);
          check_close(mu.grad(), {0, 0, 0}, 1e-6, 0);
          check_close(sigma.grad(), {0}, 1e-6, 0);
        }
      }
}

TEST_CASE("gaussian_splat gradcheck, float64, at the smooth edge points") {
  auto f = [](double truncate) {
    return [truncate](const V& v) { return gaussian_splat(v[0], v[1], v[2], 3, 4, 5, truncate); };
  };
  auto in = [](std::vector<double> mu, double sigma) {
    V v{gc_input({1, 2}, -1, 1, 4), tensor(mu, {1, 3}, DType::Float64),
        tensor({sigma}, {1}, DType::Float64)};
    v[1].requires_grad_();
    v[2].requires_grad_();
    return v;
  };
  SUBCASE("sigma 1e-4, mu on a cell centre") { require_gradcheck(f(0), in({0.5, 1.0 / 3.0, 0.0}, 1e-4)); }
  SUBCASE("sigma 1e-4, mu on a cell corner") { require_gradcheck(f(0), in({0.25, 0.0, 0.5}, 1e-4)); }
  SUBCASE("sigma 1e4, mu on the volume corner") { require_gradcheck(f(0), in({-1, -1, -1}, 1e4)); }
  SUBCASE("sigma 0.3, mu on the volume corner") { require_gradcheck(f(0), in({1, 1, 1}, 0.3)); }
  SUBCASE("truncate 2, mu off-grid") { require_gradcheck(f(2.0), in({0.1, -0.2, 0.3}, 0.45)); }
}

TEST_CASE("gaussian_splat: a single cell per axis sits at 0") {
  Tensor out = gaussian_splat(tensor({1.0}, {1, 1}), tensor({0.0, 0.0, 0.0}, {1, 3}),
                              tensor({0.5}, {1}), 1, 1, 1);
  check_close(out, {1.0}, 0, 0);
  Tensor off = gaussian_splat(tensor({1.0}, {1, 1}), tensor({0.0, 0.0, 0.5}, {1, 3}),
                              tensor({0.5}, {1}), 1, 1, 1);
  check_close(off, {std::exp(-0.25 / (2 * 0.25 + 1e-6))}, 1e-7, 1e-6);
}

TEST_CASE("gaussian_splat: truncation zeroes exactly the cells beyond the radius") {
  Tensor content = ones({1, 1}, DType::Float64);
  Tensor mu = tensor({0.0, 0.0, 0.0}, {1, 3}, DType::Float64);
  Tensor sigma = tensor({0.4}, {1}, DType::Float64);
  std::vector<double> full = gaussian_splat(content, mu, sigma, 5, 5, 5).to_vector();
  std::vector<double> cut = gaussian_splat(content, mu, sigma, 5, 5, 5, 2.0).to_vector();
  int64_t kept = 0;
  for (int64_t z = 0; z < 5; ++z)
    for (int64_t y = 0; y < 5; ++y)
      for (int64_t x = 0; x < 5; ++x) {
        const double d2 = 0.25 * ((x - 2) * (x - 2) + (y - 2) * (y - 2) + (z - 2) * (z - 2));
        const int64_t i = (z * 5 + y) * 5 + x;
        const bool inside = d2 <= 0.8 * 0.8;
        CHECK(cut[i] == (inside ? full[i] : 0.0));
        kept += inside;
      }
  CHECK(kept == 19);  // radius 0.8 on a 0.5 grid: the centre, 6 at 0.5, 12 at 0.707 (0.866 is out)
}

TEST_CASE("gaussian_splat: bad shapes raise ShapeError with the shapes - bad sigma ValueError") {
  Tensor content = zeros({2, 3}), mu = zeros({2, 3}), sigma = ones({2});
  std::string m = shape_error([&] { gaussian_splat(content, zeros({2, 2}), sigma, 3, 4, 5); });
  CHECK(contains(m, "gaussian_splat"));
  CHECK(contains(m, "[2,3]"));
  CHECK(contains(m, "[2,2]"));
  m = shape_error([&] { gaussian_splat(content, mu, ones({3}), 3, 4, 5); });
  CHECK(contains(m, "[3]"));
  CHECK(contains(m, "[2,3]"));
  m = shape_error([&] { gaussian_splat(zeros({2, 3, 1}), mu, sigma, 3, 4, 5); });
  CHECK(contains(m, "[2,3,1]"));
  CHECK_THROWS_AS(gaussian_splat(content, mu, sigma, 0, 4, 5), ShapeError);
  for (double bad : {0.0, -0.5, std::nan(""), HUGE_VAL}) {
    try {
      gaussian_splat(content, mu, tensor({1.0, bad}, {2}), 3, 4, 5);
      FAIL("expected a ValueError for sigma " << bad);
    } catch (const ValueError& e) {
      CHECK(contains(e.what(), "gaussian_splat"));
      CHECK(contains(e.what(), "sigma[1]"));
    }
  }
  CHECK_THROWS_AS(gaussian_splat(content, mu, sigma, 3, 4, 5, -1.0), ValueError);
  CHECK_THROWS_AS(gaussian_splat(content, zeros({2, 3}, DType::Float64), sigma, 3, 4, 5), DtypeError);
}
