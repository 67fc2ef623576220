// gaussian_splat (ops/gaussian_splat.cpp): values and gradients against the
// formula composed in PyTorch (tools/fixtures/spatial.py), edge points (sigma
// tiny/huge, mu on centres and corners), a gradcheck, truncation and errors.
#include <cmath>
#include <string>

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

namespace {

using V = std::vector<Tensor>;

}  // namespace

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
