// Gaussian splat (docs/DESIGN.md §7): the Tensor Memory write. Each batch
// item paints its content vector into a D x H x W volume, weighted by an
// isotropic Gaussian centred at mu.
#pragma once
#include <cstdint>

#include "tmem/core/tensor.h"

namespace tmem {

/// Splats content[B,C] at mu[B,3] (ordered x, y, z) with width sigma[B] into
/// a volume [B,C,D,H,W] (the Tensor Memory write, Swain et al. 2026):
///   vol[b,c,z,y,x] = content[b,c] exp(-|p(z,y,x) - mu[b]|^2 / (2 sigma[b]^2 + 1e-6)),
/// p the cell centres on linspace(-1, 1, n) per axis (0 when n = 1).
/// truncate = t > 0 zeroes cells beyond t sigma. Edges, gradients and the
/// factorised kernel: docs/OPS.md §2. Throws ShapeError (every shape) unless
/// content is [B,C], mu [B,3] and sigma [B], or when D, H or W < 1;
/// DtypeError for mixed or non-floating dtypes (float32 on a device);
/// DeviceError for mixed devices or a backend without the kernel; ValueError
/// for a sigma that is not finite and positive (value and index named) or a
/// negative or NaN truncate.
Tensor gaussian_splat(const Tensor& content, const Tensor& mu, const Tensor& sigma, int64_t D,
                      int64_t H, int64_t W, double truncate = 0.0);

}  // namespace tmem
