// Image-quality metrics for masked patch reconstruction (docs/DESIGN.md §10):
// PSNR and SSIM on single-channel images with pixel range [0, data_range].
// Shapes: H, W image rows and columns.
#pragma once
#include "tmem/core/tensor.h"

namespace tmem::models {

/// Peak signal-to-noise ratio in dB: 10 log10(data_range^2 / MSE(a, b)), the
/// MSE over every element (skimage.metrics.peak_signal_noise_ratio). +inf
/// when a == b. a, b: any equal shapes, float32 or float64.
/// Throws ShapeError for different shapes or empty tensors, ValueError for
/// data_range <= 0.
double psnr(const Tensor& a, const Tensor& b, double data_range = 1.0);

/// Mean structural similarity (Wang et al. 2004, "Image quality assessment:
/// from error visibility to structural similarity", eq. 13) of two [H, W]
/// images:
///   SSIM(p) = (2 mu_a mu_b + C1)(2 s_ab + C2) / ((mu_a^2 + mu_b^2 + C1)(s_a^2 + s_b^2 + C2))
/// with local means, variances and covariance weighted by a 7x7 Gaussian
/// window (sigma 1.5 pixels, normalised to sum 1; population covariance),
/// C1 = (0.01 L)^2, C2 = (0.03 L)^2, L = data_range; the mean over the
/// (H - 6) x (W - 6) positions where the window lies inside the image (22 x 22
/// on 28 x 28 Fashion-MNIST). The 7x7 window (Wang et al. use 11x11) suits
/// 28 x 28 images; the value equals scikit-image's structural_similarity with
/// gaussian_weights=True, sigma=1.5, use_sample_covariance=False, win_size=7
/// when its Gaussian filter is cut at radius 3 (tests/fixtures/ssim.json).
/// Throws ShapeError unless a and b are both [H, W] with H, W >= 7,
/// ValueError for data_range <= 0.
double ssim(const Tensor& a, const Tensor& b, double data_range = 1.0);

}  // namespace tmem::models
