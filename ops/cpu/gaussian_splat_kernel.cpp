// gaussian_splat's CPU kernels (ops/kernel_list.h TMEM_GAUSSIAN_SPLAT_KERNELS).
// Per batch item the kernels build 1-D tables along each axis a in {x,y,z}:
// d_a[i] = p_a[i] - mu[b,a] and e_a[i] = exp(-d_a[i]^2 / den), den = 2
// sigma^2 + eps; a voxel's weight is ez[z] ey[y] ex[x] (zero outside the
// truncation ball), so there is no exp per voxel and every inner loop runs
// contiguously along x.
#include <cmath>
#include <limits>
#include <vector>

#include "tmem/ops/cpu/kernels.h"
#include "tmem/ops/cpu/scratch.h"

namespace tmem::cpu {

namespace {

constexpr double kEps = 1e-6;
// Volume elements below which the kernels stay on one thread: waking a
// sleeping OpenMP thread (the passive wait policy that a shared machine
// needs) costs tens of microseconds, about as much as a [128, 16, 6, 6, 6]
// splat.
constexpr int64_t kSpawnWork = int64_t{1} << 21;

// Cell centre i of linspace(-1, 1, n); the single cell of n = 1 sits at 0.
double cell_centre(int64_t i, int64_t n) {
  return n == 1 ? 0.0 : -1.0 + 2.0 * static_cast<double>(i) / static_cast<double>(n - 1);
}

// The per-axis tables of one batch item, laid out [dx W | dy H | dz D | ex W |
// ey H | ez D] in a buffer of 2 (D + H + W) values.
template <class T>
struct Axes {
  const T *dx, *dy, *dz, *ex, *ey, *ez;
  T den;  // 2 sigma^2 + eps
  T r2;   // squared truncation radius (+inf without truncation)
};

template <class T>
Axes<T> build_axes(const T* mu, T s, int64_t D, int64_t H, int64_t W, double truncate, T* buf) {
  Axes<T> a;
  a.den = T(2) * s * s + T(kEps);
  a.r2 = truncate > 0 ? T(truncate) * s * T(truncate) * s : std::numeric_limits<T>::infinity();
  const int64_t n[3] = {W, H, D};
  T* d = buf;
  T* e = buf + (D + H + W);
  const T* dptr[3];
  const T* eptr[3];
  for (int axis = 0; axis < 3; ++axis) {
    for (int64_t i = 0; i < n[axis]; ++i) {
      T di = T(cell_centre(i, n[axis])) - mu[axis];
      d[i] = di;
      // A cell whose own axis distance already leaves the ball is zero, which
      // also keeps exp's argument away from -inf for tiny sigma.
      e[i] = di * di > a.r2 ? T(0) : std::exp(-(di * di) / a.den);
    }
    dptr[axis] = d;
    eptr[axis] = e;
    d += n[axis];
    e += n[axis];
  }
  a.dx = dptr[0], a.dy = dptr[1], a.dz = dptr[2];
  a.ex = eptr[0], a.ey = eptr[1], a.ez = eptr[2];
  return a;
}

// Writes the weight row G[z,y,:] into row[W]; returns false (row untouched)
// when the whole row lies outside the truncation ball.
template <class T>
bool weight_row(const Axes<T>& a, int64_t z, int64_t y, int64_t W, bool truncated, T* row) {
  const T zy = a.ez[z] * a.ey[y];
  if (!truncated) {
    const T* ex = a.ex;
#pragma omp simd
    for (int64_t x = 0; x < W; ++x) row[x] = zy * ex[x];
    return true;
  }
  const T rem = a.r2 - a.dz[z] * a.dz[z] - a.dy[y] * a.dy[y];
  if (rem < T(0)) return false;
  const T *ex = a.ex, *dx = a.dx;
#pragma omp simd
  for (int64_t x = 0; x < W; ++x) row[x] = dx[x] * dx[x] > rem ? T(0) : zy * ex[x];
  return true;
}

// Per batch item the weights G[D,H,W] once, then vol[b,c] = G * content[b,c]
// channel by channel (the same products, in the same order, as weighting
// each channel's rows separately).
template <class T>
void splat_forward(const T* content, const T* mu, const T* sigma, T* out, int64_t B, int64_t C,
                   int64_t D, int64_t H, int64_t W, double truncate) {
  const int64_t S = D * H * W, naxes = 2 * (D + H + W);
  const bool truncated = truncate > 0;
  cpu::ThreadScratch<T> tables_s("gaussian_splat", naxes), G_s("gaussian_splat", S);
#pragma omp parallel if (B * C * S >= kSpawnWork && B > 1)
  {
    T *tables = tables_s.slot(), *G = G_s.slot();
#pragma omp for schedule(static)
    for (int64_t b = 0; b < B; ++b) {
      const Axes<T> a = build_axes(mu + 3 * b, sigma[b], D, H, W, truncate, tables);
      for (int64_t zy = 0; zy < D * H; ++zy) {
        T* row = G + zy * W;
        if (!weight_row(a, zy / H, zy % H, W, truncated, row))
          for (int64_t x = 0; x < W; ++x) row[x] = T(0);
      }
      const T* __restrict gp = G;
      for (int64_t c = 0; c < C; ++c) {
        const T cv = content[b * C + c];
        T* __restrict o = out + (b * C + c) * S;
#pragma omp simd
        for (int64_t v = 0; v < S; ++v) o[v] = gp[v] * cv;
      }
    }
  }
}

// g[B,C,D,H,W] = dL/dvol -> gcontent[B,C], gmu[B,3], gsigma[B] (each null when
// not needed).
template <class T>
void splat_backward(const T* content, const T* mu, const T* sigma, const T* g, T* gcontent,
                    T* gmu, T* gsigma, int64_t B, int64_t C, int64_t D, int64_t H, int64_t W,
                    double truncate) {
  const int64_t S = D * H * W, naxes = 2 * (D + H + W);
  const bool truncated = truncate > 0;
  const bool geom = gmu || gsigma;
  cpu::ThreadScratch<T> tables_s("gaussian_splat backward", naxes), G_s("gaussian_splat backward", S),
      R_s("gaussian_splat backward", geom ? S : 0), Mg_s("gaussian_splat backward", D + H + W);
#pragma omp parallel if (B * C * S >= kSpawnWork && B > 1)
  {
    T *tables = tables_s.slot(), *G = G_s.slot(), *R = R_s.slot(), *Mg = Mg_s.slot();
#pragma omp for schedule(static)
    for (int64_t b = 0; b < B; ++b) {
      const T s = sigma[b];
      const Axes<T> a = build_axes(mu + 3 * b, s, D, H, W, truncate, tables);
      for (int64_t zy = 0; zy < D * H; ++zy) {
        T* row = G + zy * W;
        if (!weight_row(a, zy / H, zy % H, W, truncated, row))
          for (int64_t x = 0; x < W; ++x) row[x] = T(0);
      }
      const T* Gp = G;
      T* Rp = R;
      if (geom)
        for (int64_t v = 0; v < S; ++v) Rp[v] = T(0);
      // One pass over g: dL/dcontent, and R[v] = sum_c g[b,c,v] content[b,c].
      for (int64_t c = 0; c < C; ++c) {
        const T* gp = g + (b * C + c) * S;
        if (gcontent) {
          T acc = T(0);
#pragma omp simd reduction(+ : acc)
          for (int64_t v = 0; v < S; ++v) acc += gp[v] * Gp[v];
          gcontent[b * C + c] = acc;
        }
        if (geom) {
          const T cv = content[b * C + c];
#pragma omp simd
          for (int64_t v = 0; v < S; ++v) Rp[v] += gp[v] * cv;
        }
      }
      if (!geom) continue;
      // M = R G and its sums over the other two axes (marginals mx[W],
      // my[H], mz[D]); the moments along each axis follow from them:
      // sum M dx = sum_x dx mx, and likewise for y, z and the squares.
      T* mx = Mg;
      T* my = mx + W;
      T* mz = my + H;
      std::fill(mx, mx + W + H + D, T(0));
      for (int64_t z = 0; z < D; ++z)
        for (int64_t y = 0; y < H; ++y) {
          const int64_t off = (z * H + y) * W;
          T rs = T(0);
          for (int64_t x = 0; x < W; ++x) {
            const T m = Rp[off + x] * Gp[off + x];
            rs += m;
            mx[x] += m;
          }
          my[y] += rs;
          mz[z] += rs;
        }
      double sx = 0, sy = 0, sz = 0, s2 = 0;
      for (int64_t x = 0; x < W; ++x) {
        const double d = a.dx[x];
        sx += d * mx[x];
        s2 += d * d * mx[x];
      }
      for (int64_t y = 0; y < H; ++y) {
        const double d = a.dy[y];
        sy += d * my[y];
        s2 += d * d * my[y];
      }
      for (int64_t z = 0; z < D; ++z) {
        const double d = a.dz[z];
        sz += d * mz[z];
        s2 += d * d * mz[z];
      }
      if (gmu) {
        const double k = 2.0 / static_cast<double>(a.den);
        gmu[3 * b + 0] = T(k * sx);
        gmu[3 * b + 1] = T(k * sy);
        gmu[3 * b + 2] = T(k * sz);
      }
      // 4 s / den^2, divided twice so a huge den cannot overflow den^2.
      if (gsigma) gsigma[b] = T(4.0 * s / a.den / a.den * s2);
    }
  }
}

}  // namespace

template <class Scalar>
void Kernels<Scalar>::gaussian_splat_forward(int, const SplatArgs& a, const T* content, const T* mu,
                                             const T* sigma, T* vol) {
  splat_forward<T>(content, mu, sigma, vol, a.B, a.C, a.D, a.H, a.W, a.truncate);
}

template <class Scalar>
void Kernels<Scalar>::gaussian_splat_backward(int, const SplatArgs& a, const T* content,
                                              const T* mu, const T* sigma, const T* gvol,
                                              T* gcontent, T* gmu, T* gsigma) {
  splat_backward<T>(content, mu, sigma, gvol, gcontent, gmu, gsigma, a.B, a.C, a.D, a.H, a.W,
                    a.truncate);
}

TMEM_GAUSSIAN_SPLAT_KERNELS(TMEM_CPU_INSTANTIATE)

}  // namespace tmem::cpu
