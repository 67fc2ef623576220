// convlstm3d_cell (ops/convlstm.cpp): values and gradients against the cell
// composed in PyTorch (tools/fixtures/spatial.py) and against the same cell
// composed from primitive tmem ops, a gradcheck, in-place detection and shape
// errors.
#include <string>

#include "cell_util.h"
#include "op_test_util.h"
#include "test_util.h"

using namespace tmem;
using tmem::test::check_close;
using tmem::test::fixture_tensor;
using tmem::test::fixture_values;
using tmem::test::require_gradcheck;
using tmem::test::contains;
using tmem::test::spatial_fixture;
using tmem::test::leaf;
using tmem::test::shape_error;
using tmem::test::kAtol32;
using tmem::test::kRtol32;
using tmem::test::cell_inputs;
using tmem::test::weights_of;

namespace {

using V = std::vector<Tensor>;

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

TEST_CASE("convlstm3d_cell on an empty grid: empty h' and c', zero weight gradients") {
  for (const std::array<int64_t, 3> g : {std::array<int64_t, 3>{0, 2, 2}, {2, 0, 2}, {2, 2, 0}})
    for (const DType dt : {DType::Float32, DType::Float64}) {
      V v = cell_inputs(1, 2, 3, g, dt, 5);
      for (Tensor& t : v) t.requires_grad_();
      ConvLSTM3DState s = convlstm3d_cell(v[0], v[1], v[2], weights_of(v));
      CHECK(s.h.shape() == Shape{1, 3, g[0], g[1], g[2]});
      CHECK(s.c.shape() == Shape{1, 3, g[0], g[1], g[2]});
      (sum(s.h) + sum(s.c)).backward();
      for (size_t k = 0; k < v.size(); ++k) {
        REQUIRE(v[k].grad().defined());
        CHECK(v[k].grad().shape() == v[k].shape());
        for (double x : v[k].grad().to_vector()) CHECK(x == 0.0);
      }
    }
}
