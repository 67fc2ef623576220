#include "tmem/models/image_metrics.h"

#include <array>
#include <cmath>
#include <limits>
#include <vector>

#include "tmem/core/error.h"

namespace tmem::models {

namespace {

void check_pair(const char* op, const Tensor& a, const Tensor& b, double data_range) {
  check<ShapeError>(a.shape() == b.shape() && a.numel() > 0, op, ": expected two non-empty images of one shape, but got ",
                    shape_str(a.shape()), " and ", shape_str(b.shape()));
  check<ValueError>(data_range > 0, op, ": expected data_range > 0, but got ", data_range);
}

constexpr int kRadius = 3;  // 7x7 window

// The normalised 1-D Gaussian (sigma 1.5) of the separable 7x7 window.
std::array<double, 2 * kRadius + 1> gaussian_taps() {
  std::array<double, 2 * kRadius + 1> g{};
  double sum = 0;
  for (int i = -kRadius; i <= kRadius; ++i) sum += g[i + kRadius] = std::exp(-0.5 * i * i / (1.5 * 1.5));
  for (double& v : g) v /= sum;
  return g;
}

}  // namespace

double psnr(const Tensor& a, const Tensor& b, double data_range) {
  check_pair("psnr", a, b, data_range);
  const std::vector<double> x = a.to_vector(), y = b.to_vector();
  double se = 0;
  for (size_t i = 0; i < x.size(); ++i) se += (x[i] - y[i]) * (x[i] - y[i]);
  const double mse = se / static_cast<double>(x.size());
  if (mse == 0) return std::numeric_limits<double>::infinity();
  return 10.0 * std::log10(data_range * data_range / mse);
}

double ssim(const Tensor& a, const Tensor& b, double data_range) {
  check_pair("ssim", a, b, data_range);
  check<ShapeError>(a.dim() == 2 && a.shape()[0] >= 2 * kRadius + 1 && a.shape()[1] >= 2 * kRadius + 1,
                    "ssim: expected [H, W] images with H, W >= 7, but got ", shape_str(a.shape()));
  const int64_t H = a.shape()[0], W = a.shape()[1];
  const std::vector<double> x = a.to_vector(), y = b.to_vector();
  const auto g = gaussian_taps();
  const double c1 = std::pow(0.01 * data_range, 2), c2 = std::pow(0.03 * data_range, 2);
  double total = 0;
  for (int64_t i = kRadius; i < H - kRadius; ++i)
    for (int64_t j = kRadius; j < W - kRadius; ++j) {
      double mx = 0, my = 0, mxx = 0, myy = 0, mxy = 0;
      for (int di = -kRadius; di <= kRadius; ++di)
        for (int dj = -kRadius; dj <= kRadius; ++dj) {
          const double w = g[di + kRadius] * g[dj + kRadius];
          const double u = x[(i + di) * W + j + dj], v = y[(i + di) * W + j + dj];
          mx += w * u, my += w * v, mxx += w * u * u, myy += w * v * v, mxy += w * u * v;
        }
      const double vx = mxx - mx * mx, vy = myy - my * my, cxy = mxy - mx * my;
      total += (2 * mx * my + c1) * (2 * cxy + c2) / ((mx * mx + my * my + c1) * (vx + vy + c2));
    }
  return total / static_cast<double>((H - 2 * kRadius) * (W - 2 * kRadius));
}

}  // namespace tmem::models
