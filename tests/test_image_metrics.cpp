// PSNR and SSIM (models/image_metrics.h) against scikit-image's values
// (tests/fixtures/ssim.json, tools/fixtures/ssim.py).
#include <doctest/doctest.h>

#include <cmath>

#include "tmem/core/rng.h"
#include "tmem/models/image_metrics.h"
#include "fixture.h"

namespace {

using namespace tmem;

Tensor image(const nlohmann::json& pixels) {
  std::vector<double> v;
  for (const auto& k : pixels) v.push_back(k.get<double>() / 255.0);
  return tensor(v, {28, 28});
}

}  // namespace

TEST_CASE("ssim and psnr equal scikit-image's on six image pairs") {
  const auto fx = test::load_fixture("ssim");
  const Tensor a = image(fx.at("reference").at("pixels"));
  int checked = 0;
  for (const auto& item : fx.items()) {
    const std::string name = item.key();  // a plain variable: CAPTURE takes it
    const auto& c = item.value();
    if (name == "reference") continue;
    CAPTURE(name);
    const Tensor b = image(c.at("pixels"));
    CHECK(models::ssim(a, b) == doctest::Approx(c.at("ssim").get<double>()).epsilon(1e-6));
    const double want = number_from_json(c.at("psnr"));
    if (std::isinf(want))
      CHECK(std::isinf(models::psnr(a, b)));
    else
      CHECK(models::psnr(a, b) == doctest::Approx(want).epsilon(1e-6));
    ++checked;
  }
  CHECK(checked == 6);
}

TEST_CASE("ssim is symmetric, 1 for identical images, and checks its input") {
  Generator gen(3);
  const Tensor a = rand({9, 11}, 0, 1, DType::Float32, gen), b = rand({9, 11}, 0, 1, DType::Float32, gen);
  CHECK(models::ssim(a, b) == doctest::Approx(models::ssim(b, a)).epsilon(1e-12));
  CHECK(models::ssim(a, a) == doctest::Approx(1.0).epsilon(1e-12));
  CHECK_THROWS_AS(models::ssim(a, rand({9, 10}, 0, 1, DType::Float32, gen)), ShapeError);
  CHECK_THROWS_AS(models::ssim(rand({6, 11}, 0, 1, DType::Float32, gen), rand({6, 11}, 0, 1, DType::Float32, gen)),
                  ShapeError);
  CHECK_THROWS_AS(models::ssim(a, b, 0.0), ValueError);
  CHECK_THROWS_AS(models::psnr(a, rand({9}, 0, 1, DType::Float32, gen)), ShapeError);
}

TEST_CASE("psnr of a uniform error of 0.1 is 20 dB") {
  const Tensor a = zeros({4, 4}), b = full({4, 4}, 0.1);
  CHECK(models::psnr(a, b) == doctest::Approx(20.0).epsilon(1e-6));
  CHECK(models::psnr(a, full({4, 4}, 0.2), 2.0) == doctest::Approx(20.0).epsilon(1e-6));
}
