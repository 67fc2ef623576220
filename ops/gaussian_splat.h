// Gaussian splat (docs/DESIGN.md §7): the Tensor Memory write. Each batch
// item paints its content vector into a D x H x W volume, weighted by an
// isotropic Gaussian centred at mu.
#pragma once
#include <cstdint>

#include "tmem/core/tensor.h"

namespace tmem {

/// Splats content[B,C] at mu[B,3] with width sigma[B] into a volume
/// [B,C,D,H,W]:
///
///   vol[b,c,z,y,x] = content[b,c] * exp(-|p(z,y,x) - mu[b]|^2 / (2 sigma[b]^2 + eps)),
///   eps = 1e-6,
///
/// where p(z,y,x) = (px[x], py[y], pz[z]) are the cell centres on
/// linspace(-1, 1, n) per axis (x -> W, y -> H, z -> D), mu is ordered
/// (x, y, z), and linspace(-1, 1, n)[i] = -1 + 2 i / (n - 1). For n = 1 the
/// single cell sits at 0, the centre of [-1, 1] (torch.linspace would give -1).
/// The extremes -1 and 1 are the centres of the first and last cells, the same
/// convention as grid_sample with align_corners=true.
///
/// truncate = 0 means no truncation; truncate = t > 0 zeroes every cell with
/// |p - mu| > t * sigma[b] (a ball of radius t sigmas), and the gradients are
/// the exact gradients of that truncated function (the cut-off cells
/// contribute 0; the ball's edge moving with mu and sigma is not
/// differentiated, as its measure-zero jump has no derivative).
///
/// The Gaussian factorises, exp(-|d|^2/den) = exp(-dx^2/den) exp(-dy^2/den)
/// exp(-dz^2/den), so the kernels evaluate W + H + D exponentials per batch
/// item, not one per voxel. With M[b,v] = G[b,v] sum_c g[b,c,v] content[b,c]
/// (g = dL/dvol, v a voxel, den = 2 sigma^2 + eps):
///   dL/dcontent[b,c] = sum_v g[b,c,v] G[b,v]
///   dL/dmu[b,a]      = (2 / den) sum_v M[b,v] (p_a(v) - mu[b,a])
///   dL/dsigma[b]     = (4 sigma / den^2) sum_v M[b,v] |p(v) - mu[b]|^2
/// sigma = 1e-4 (den ~ eps) and sigma = 1e4 give finite values and gradients.
/// Source: the Tensor Memory write (Swain et al. 2026; docs/DESIGN.md §7).
///
/// Throws ShapeError (naming the op and every shape) unless content is [B,C],
/// mu is [B,3] and sigma is [B], or when D, H or W < 1; DtypeError for mixed or
/// non-floating dtypes (float32 on a device); DeviceError when the inputs are
/// on different devices or the device's backend has no kernel for this op;
/// ValueError when some sigma is not a finite positive number (the value and
/// its index are named) or when truncate is negative or NaN.
Tensor gaussian_splat(const Tensor& content, const Tensor& mu, const Tensor& sigma, int64_t D,
                      int64_t H, int64_t W, double truncate = 0.0);

}  // namespace tmem
