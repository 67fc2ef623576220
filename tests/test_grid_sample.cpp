// grid_sample: PyTorch reference values, the exact border cases, non-finite
// coordinates, the size-1 departure, gradchecks and shape errors.
#include <omp.h>

#include <cmath>
#include <limits>
#include <string>

#include "fixture.h"
#include "test_util.h"

using namespace tmem;
using tmem::test::check_close;

namespace {

using Mode = GridSampleMode;
using Pad = GridSamplePadding;

Mode mode_of(const std::string& s) { return s == "nearest" ? Mode::Nearest : Mode::Bilinear; }
Pad pad_of(const std::string& s) {
  return s == "border" ? Pad::Border : s == "reflection" ? Pad::Reflection : Pad::Zeros;
}

Tensor leaf(const Tensor& t) {
  Tensor c = t.detach();
  c.requires_grad_();
  return c;
}

bool all_finite(const Tensor& t) {
  for (double v : t.to_vector())
    if (!std::isfinite(v)) return false;
  return true;
}

// Source positions relative to an axis of size s: within 0.01-0.03 cells of
// the borders (0, S-1) and of the reflection kinks (-0.5, S-0.5), outside
// (one or two reflections away), and inside cells.
std::vector<double> near_border_positions(double s) {
  return {0.01, 0.03, s - 1.01, s - 1.02, -0.47, -0.53, s - 0.48, s - 0.52,
          -1.4, 0.6,  1.35,     s + 0.3,  -0.02, s - 0.97};
}

// A float64 leaf grid whose coordinate j (x, y, z) sits at source index
// near_border_positions(S_j)[...] for input spatial sizes sizes_xyz.
Tensor grid_near_borders(const Shape& shape, const std::vector<int64_t>& sizes_xyz, bool align) {
  const size_t k = static_cast<size_t>(shape.back());
  std::vector<double> v(static_cast<size_t>(numel_of(shape)));
  for (size_t i = 0; i < v.size(); ++i) {
    const size_t j = i % k;
    const double s = static_cast<double>(sizes_xyz[j]);
    const std::vector<double> pos = near_border_positions(s);
    const double src = pos[(i * 7 + j * 5) % pos.size()];
    v[i] = align ? 2 * src / (s - 1) - 1 : (2 * src + 1) / s - 1;
  }
  Tensor t = tensor(v, shape, DType::Float64);
  t.requires_grad_();
  return t;
}

void check_shape_error(const Tensor& input, const Tensor& grid) {
  try {
    grid_sample(input, grid);
    FAIL("expected a ShapeError for input" << shape_str(input.shape()) << " grid"
                                           << shape_str(grid.shape()));
  } catch (const ShapeError& e) {
    const std::string msg = e.what();
    INFO(msg);
    CHECK(msg.find("grid_sample") != std::string::npos);
    CHECK(msg.find(shape_str(input.shape())) != std::string::npos);
    CHECK(msg.find(shape_str(grid.shape())) != std::string::npos);
  }
}

}  // namespace

TEST_CASE("grid_sample: PyTorch fixtures, every mode x padding x align_corners, 4-D and 5-D") {
  const nlohmann::json fx = tmem::test::load_fixture("grid_sample");
  int compared = 0;
  for (const auto& item : fx.items()) {
    const std::string name = item.key();  // a plain variable: INFO captures it
    const auto& c = item.value();
    // The size-1 / align_corners / zeros case departs from PyTorch on
    // purpose; it is checked in its own test below.
    if (c.contains("departs_from_pytorch")) continue;
    const Mode mode = mode_of(c.at("mode").get<std::string>());
    const Pad pad = pad_of(c.at("padding").get<std::string>());
    const bool align = c.at("align_corners").get<bool>();
    for (DType dt : {DType::Float32, DType::Float64}) {
      INFO("case " << name << " " << std::string(dtype_name(dt)));
      // float32 against float64 references: 1e-5 relative plus a small
      // absolute term; float64 against the 10-digit references: 1e-9.
      const double tol = dt == DType::Float32 ? 1e-5 : 1e-9;
      Tensor x = leaf(tmem::test::fixture_tensor(c.at("input"), dt));
      Tensor g = leaf(tmem::test::fixture_tensor(c.at("grid"), dt));
      Tensor w = tmem::test::fixture_tensor(c.at("w"), dt);
      Tensor out = grid_sample(x, g, mode, pad, align);
      CHECK(out.shape() == c.at("output").at("shape").get<Shape>());
      check_close(out, tmem::test::fixture_values(c.at("output")), tol, tol);
      sum(mul(out, w)).backward();
      check_close(x.grad(), tmem::test::fixture_values(c.at("grad_input")), tol, tol);
      check_close(g.grad(), tmem::test::fixture_values(c.at("grad_grid")), tol, tol);
    }
    ++compared;
  }
  CHECK(compared == 27);
}

TEST_CASE("grid_sample: identity grid on a column-index image, border and reflection") {
  // 1x1x5x5 image whose value is its column index; grid x = linspace(-1,1,5)
  // per column, y likewise per row; align_corners = true, loss = sum(out).
  std::vector<double> img, grid;
  for (int r = 0; r < 5; ++r)
    for (int c = 0; c < 5; ++c) {
      img.push_back(c);
      grid.push_back(-1.0 + 0.5 * c);
      grid.push_back(-1.0 + 0.5 * r);
    }
  for (Pad pad : {Pad::Border, Pad::Reflection}) {
    INFO("padding " << std::string(grid_sample_padding_name(pad)));
    Tensor x = tensor(img, {1, 1, 5, 5});
    Tensor g = tensor(grid, {1, 5, 5, 2});
    g.requires_grad_();
    Tensor out = grid_sample(x, g, Mode::Bilinear, pad, true);
    check_close(out, img);
    sum(out).backward();
    const std::vector<double> gg = g.grad().to_vector();
    for (int r = 0; r < 5; ++r)
      for (int c = 0; c < 5; ++c) {
        INFO("row " << r << " column " << c);
        const size_t i = static_cast<size_t>(2 * (5 * r + c));
        CHECK(gg[i] == doctest::Approx(c == 0 || c == 4 ? 0.0 : 2.0));
        CHECK(gg[i + 1] == doctest::Approx(0.0));
      }
  }
}

TEST_CASE("grid_sample: NaN, Inf and huge grid coordinates never crash - values as documented") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<double> specials = {nan, inf, -inf, 2.5e38, -3.2e38};
  // Points (v, 0), (0, v), (v, v) for each special v, then the centre (0, 0).
  std::vector<double> pts;
  for (double v : specials) pts.insert(pts.end(), {v, 0.0, 0.0, v, v, v});
  pts.insert(pts.end(), {0.0, 0.0});
  const int64_t npts = static_cast<int64_t>(pts.size() / 2);
  std::vector<double> img;
  for (int i = 1; i <= 9; ++i) img.push_back(i);  // value = 1 + 3 row + col

  for (Mode mode : {Mode::Bilinear, Mode::Nearest})
    for (Pad pad : {Pad::Zeros, Pad::Border, Pad::Reflection})
      for (bool align : {false, true}) {
        const std::string label = std::string(grid_sample_mode_name(mode)) + " " +
                                  grid_sample_padding_name(pad) + (align ? " align_corners" : "");
        INFO(label);
        Tensor x = tensor(img, {1, 1, 3, 3});
        Tensor g = tensor(pts, {1, 1, npts, 2});
        x.requires_grad_();
        g.requires_grad_();
        Tensor out = grid_sample(x, g, mode, pad, align);
        const std::vector<double> o = out.to_vector();
        CHECK(all_finite(out));
        sum(out).backward();
        CHECK(all_finite(x.grad()));
        CHECK(all_finite(g.grad()));
        CHECK(o[static_cast<size_t>(npts - 1)] == 5.0);  // the centre
        // A NaN coordinate reads 0 in every mode and padding.
        for (int k = 0; k < 3; ++k) CHECK(o[static_cast<size_t>(k)] == 0.0);
        if (pad == Pad::Zeros) {
          for (int64_t k = 0; k + 1 < npts; ++k) CHECK(o[static_cast<size_t>(k)] == 0.0);
        } else if (pad == Pad::Border) {
          // +Inf and 2.5e38 clip to the last cell, -Inf and -3.2e38 to the first.
          const std::vector<double> want = {6, 8, 9, 4, 2, 1, 6, 8, 9, 4, 2, 1};
          for (size_t k = 0; k < want.size(); ++k) CHECK(o[3 + k] == want[k]);
        } else {
          // Reflection of +-Inf is NaN, which reads 0.
          for (size_t k = 3; k < 9; ++k) CHECK(o[k] == 0.0);
        }
        // Every special axis passes zero gradient to the grid.
        const std::vector<double> gg = g.grad().to_vector();
        for (int64_t k = 0; k + 1 < npts; ++k) {
          const size_t p = static_cast<size_t>(k);
          if (!std::isfinite(pts[2 * p]) || std::abs(pts[2 * p]) > 1e30) CHECK(gg[2 * p] == 0.0);
          if (!std::isfinite(pts[2 * p + 1]) || std::abs(pts[2 * p + 1]) > 1e30)
            CHECK(gg[2 * p + 1] == 0.0);
        }
      }
}

TEST_CASE("grid_sample: size-1 depth, align_corners, zeros padding: |z| > 1 reads the padding") {
  // PyTorch maps every z to depth index 0 on a size-1 axis with
  // align_corners=True and returns the value; its docs say 0. tmem returns 0.
  const nlohmann::json fx = tmem::test::load_fixture("grid_sample");
  const nlohmann::json& c = fx.at("d1_align_zeros_departure");
  CHECK(tmem::test::fixture_values(c.at("pytorch_output")) == std::vector<double>{1.0});

  Tensor x = leaf(tmem::test::fixture_tensor(c.at("input")));
  Tensor g = leaf(tmem::test::fixture_tensor(c.at("grid")));
  for (Mode mode : {Mode::Bilinear, Mode::Nearest}) {
    x.zero_grad();
    g.zero_grad();
    Tensor out = grid_sample(x, g, mode, Pad::Zeros, true);
    check_close(out, {0.0});
    sum(out).backward();
    check_close(x.grad(), {0, 0, 0, 0});
    check_close(g.grad(), {0, 0, 0});
  }
  // |z| <= 1 reads depth 0 as PyTorch does, with zero z-gradient; border and
  // reflection padding read depth 0 for every z.
  Tensor inside = tensor({-1.0, -1.0, 1.0, 1.0, 1.0, -0.25}, {1, 1, 1, 2, 3});
  check_close(grid_sample(x, inside, Mode::Bilinear, Pad::Zeros, true), {1.0, 4.0});
  Tensor far = tensor({-1.0, -1.0, -5.0, 1.0, 1.0, 7.0}, {1, 1, 1, 2, 3});
  check_close(grid_sample(x, far, Mode::Bilinear, Pad::Border, true), {1.0, 4.0});
  check_close(grid_sample(x, far, Mode::Bilinear, Pad::Reflection, true), {1.0, 4.0});
  // Without align_corners the size-1 axis is an ordinary cell: z = -5 is outside.
  check_close(grid_sample(x, far, Mode::Bilinear, Pad::Zeros, false), {0.0, 0.0});
}

TEST_CASE("grid_sample: float64 gradchecks with points near borders and kinks") {
  using V = std::vector<Tensor>;
  for (Pad pad : {Pad::Zeros, Pad::Border, Pad::Reflection})
    for (bool align : {false, true}) {
      const std::string label =
          std::string(grid_sample_padding_name(pad)) + (align ? " align_corners" : "");
      INFO(label);
      // 4-D, batch 2, 3 channels, the input read through a transposed view
      // (H = 4, W = 5).
      tmem::test::require_gradcheck(
          [pad, align](const V& v) {
            return grid_sample(transpose(v[0], 2, 3), v[1], Mode::Bilinear, pad, align);
          },
          V{gc_input({2, 3, 5, 4}, -1, 1, 31), grid_near_borders({2, 3, 4, 2}, {5, 4}, align)});
      // 5-D: D = 3, H = 4, W = 2.
      tmem::test::require_gradcheck(
          [pad, align](const V& v) { return grid_sample(v[0], v[1], Mode::Bilinear, pad, align); },
          V{gc_input({2, 2, 3, 4, 2}, -1, 1, 32),
            grid_near_borders({2, 2, 2, 2, 3}, {2, 4, 3}, align)});
      // Only the grid differentiable: the input is a constant of the function.
      Tensor fixed = gc_input({1, 2, 4, 3}, -1, 1, 33).detach();
      tmem::test::require_gradcheck(
          [fixed, pad, align](const V& v) {
            return grid_sample(fixed, v[0], Mode::Bilinear, pad, align);
          },
          V{grid_near_borders({1, 2, 3, 2}, {3, 4}, align)});
      // Nearest: only the input is differentiable.
      Tensor g = grid_near_borders({2, 2, 3, 2}, {4, 5}, align).detach();
      tmem::test::require_gradcheck(
          [g, pad, align](const V& v) { return grid_sample(v[0], g, Mode::Nearest, pad, align); },
          V{gc_input({2, 2, 5, 4}, -1, 1, 34)});
    }
}

TEST_CASE("grid_sample: the input gradient adds into a gradient already pending for the input") {
  // s also feeds s * s, made later, whose backward runs first: grid_sample's
  // backward then scatters into s's pending gradient instead of a zeroed one.
  using V = std::vector<Tensor>;
  for (Mode mode : {Mode::Bilinear, Mode::Nearest}) {
    INFO(grid_sample_mode_name(mode));
    Tensor g = grid_near_borders({2, 3, 2, 2, 3}, {2, 4, 3}, true).detach();
    tmem::test::require_gradcheck(
        [g, mode](const V& v) {
          Tensor s = v[0] * 1.5;
          Tensor read = grid_sample(s, g, mode, Pad::Border, true);
          return sum(read * read) + sum(s * s);
        },
        V{gc_input({2, 2, 3, 4, 2}, -1, 1, 35)});
  }
}

TEST_CASE("grid_sample: nearest rounds ties half to even on 4-D and 5-D inputs") {
  // Source indices -0.5, 0.5, 1.5, 2.5, 3.5 (align_corners = false, W = 4)
  // round to 0, 0, 2, 2, 4 (outside). torch 1.13's 3-D CPU kernel rounds half
  // away from zero instead (-1, 1, 2, 3, 4); its 2-D kernel agrees with this.
  Tensor x4 = tensor({10, 11, 12, 13}, {1, 1, 1, 4});
  Tensor g4 = tensor({-1, 0, -0.5, 0, 0, 0, 0.5, 0, 1, 0}, {1, 1, 5, 2});
  check_close(grid_sample(x4, g4, Mode::Nearest, Pad::Zeros, false), {10, 10, 12, 12, 0});
  Tensor x5 = tensor({10, 11, 12, 13}, {1, 1, 1, 1, 4});
  Tensor g5 = tensor({-1, 0, 0, -0.5, 0, 0, 0, 0, 0, 0.5, 0, 0, 1, 0, 0}, {1, 1, 1, 5, 3});
  check_close(grid_sample(x5, g5, Mode::Nearest, Pad::Zeros, false), {10, 10, 12, 12, 0});
}

TEST_CASE("grid_sample: nearest passes a zero gradient to the grid") {
  Tensor x = rand({1, 2, 3, 4});
  Tensor g = rand({1, 2, 2, 2}, -1.2, 1.2);
  x.requires_grad_();
  g.requires_grad_();
  sum(grid_sample(x, g, Mode::Nearest, Pad::Border, false)).backward();
  check_close(g.grad(), std::vector<double>(8, 0.0));
  CHECK(x.grad().shape() == x.shape());
  check_close(sum(x.grad()), {8.0});  // 4 points x 2 channels, each read once with weight 1
}

TEST_CASE("grid_sample: threaded backward equals the single-threaded one") {
  // N = 1 and 3 (below the thread count: points split over threads with
  // private accumulators) and N = 5 (samples spread over threads).
  const int saved_threads = omp_get_max_threads();
  for (int64_t n : {1, 3, 5})
    for (int k : {2, 3}) {
      INFO("N = " << n << ", " << k + 2 << "-D");
      Generator gen(40 + n);
      Shape ishape = k == 2 ? Shape{n, 2, 8, 8} : Shape{n, 2, 4, 4, 4};
      Shape gshape = k == 2 ? Shape{n, 64, 64, 2} : Shape{n, 16, 16, 16, 3};
      Tensor x0 = rand(ishape, -1, 1, DType::Float64, gen);
      Tensor g0 = rand(gshape, -1.2, 1.2, DType::Float64, gen);
      std::vector<double> ref[3];
      for (int threads : {1, 4}) {
        omp_set_num_threads(threads);
        Tensor x = leaf(x0), g = leaf(g0);
        Tensor out = grid_sample(x, g, Mode::Bilinear, Pad::Reflection, false);
        sum(mul(out, out)).backward();
        if (threads == 1) {
          ref[0] = out.to_vector();
          ref[1] = x.grad().to_vector();
          ref[2] = g.grad().to_vector();
        } else {
          check_close(out.to_vector(), ref[0], 1e-12, 1e-12);
          check_close(x.grad().to_vector(), ref[1], 1e-12, 1e-12);
          check_close(g.grad().to_vector(), ref[2], 1e-12, 1e-12);
        }
      }
    }
  omp_set_num_threads(saved_threads);
}

TEST_CASE("grid_sample: bad shapes raise ShapeError naming both shapes") {
  check_shape_error(zeros({1, 1, 3, 3}), zeros({1, 2, 2, 3}));        // wrong last dim
  check_shape_error(zeros({1, 1, 3, 3, 3}), zeros({1, 2, 2, 2, 2}));  // wrong last dim, 5-D
  check_shape_error(zeros({2, 1, 3, 3}), zeros({3, 2, 2, 2}));        // batch mismatch
  check_shape_error(zeros({1, 1, 3, 3}), zeros({1, 2, 2, 2, 3}));     // 4-D input, 5-D grid
  check_shape_error(zeros({1, 1, 3, 3, 3}), zeros({1, 2, 2, 3}));     // 5-D input, 4-D grid
  check_shape_error(zeros({1, 3, 3}), zeros({1, 2, 2, 2}));           // 3-D input
  check_shape_error(zeros({1, 1, 1, 3, 3, 3}), zeros({1, 2, 2, 2, 2, 3}));  // 6-D input
  check_shape_error(zeros({1, 1, 0, 3}), zeros({1, 2, 2, 2}));        // empty spatial dim
  CHECK_THROWS_AS(grid_sample(zeros({1, 1, 3, 3}), zeros({1, 2, 2, 2}, DType::Float64)),
                  DtypeError);
  // An empty batch or output is fine.
  CHECK(grid_sample(zeros({0, 2, 3, 3}), zeros({0, 2, 2, 2})).shape() == Shape{0, 2, 2, 2});
  CHECK(grid_sample(zeros({1, 2, 3, 3}), zeros({1, 0, 2, 2})).shape() == Shape{1, 2, 0, 2});
}
