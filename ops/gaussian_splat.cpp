// Gaussian splat: shape checks, CPU forward and backward kernels, op-table
// entry. Shapes: content[B,C], mu[B,3] ordered (x,y,z), sigma[B] ->
// volume[B,C,D,H,W]. Formula and gradients: see ops/gaussian_splat.h.
//
// Per batch item the kernels build 1-D tables along each axis a in {x,y,z}:
// d_a[i] = p_a[i] - mu[b,a] and e_a[i] = exp(-d_a[i]^2 / den), den = 2
// sigma^2 + eps; a voxel's weight is ez[z] ey[y] ex[x] (zero outside the
// truncation ball), so there is no exp per voxel and every inner loop runs
// contiguously along x. Tensors on another device run that backend's kernels
// (cuda/gaussian_splat.cu) behind the same checks.
#include "tmem/ops/gaussian_splat.h"

#include <cmath>
#include <limits>
#include <vector>

#include "tmem/core/autograd.h"
#include "tmem/core/profiler.h"
#include "tmem/ops/cpu/scratch.h"
#include "tmem/ops/dispatch.h"
#include "tmem/ops/op_table.h"

namespace tmem {

namespace {

using Grads = std::vector<Tensor>;
constexpr const char* kOp = "gaussian_splat";
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

void check_inputs(const Tensor& content, const Tensor& mu, const Tensor& sigma, int64_t D,
                  int64_t H, int64_t W, double truncate) {
  check<DeviceError>(content.device() == mu.device() && content.device() == sigma.device(), kOp,
                     ": expected content, mu and sigma on one device, but got ", content.device().str(),
                     ", ", mu.device().str(), " and ", sigma.device().str());
  check<ShapeError>(content.dim() == 2 && mu.dim() == 2 && sigma.dim() == 1 &&
                        mu.size(0) == content.size(0) && mu.size(1) == 3 &&
                        sigma.size(0) == content.size(0),
                    kOp, ": expected content[B,C], mu[B,3] and sigma[B], but got content",
                    shape_str(content.shape()), " mu", shape_str(mu.shape()), " sigma",
                    shape_str(sigma.shape()));
  check<ShapeError>(D >= 1 && H >= 1 && W >= 1, kOp,
                    ": expected a grid shape (D,H,W) >= 1, but got (", D, ",", H, ",", W, ")");
  check<DtypeError>(content.dtype() == mu.dtype() && content.dtype() == sigma.dtype(), kOp,
                    ": expected content, mu and sigma of one dtype, but got ",
                    dtype_name(content.dtype()), ", ", dtype_name(mu.dtype()), " and ",
                    dtype_name(sigma.dtype()));
  check<ValueError>(!std::isnan(truncate) && truncate >= 0, kOp,
                    ": expected truncate >= 0 (0 = no truncation), but got ", truncate);
  dispatch_floating(sigma.dtype(), kOp, [&]<class T>() {
    Tensor s = contiguous_data(sigma.device().is_cpu() ? sigma : sigma.detach().to(Device::cpu()));
    const T* p = s.data<T>();
    for (int64_t b = 0; b < s.numel(); ++b)
      check<ValueError>(std::isfinite(p[b]) && p[b] > T(0), kOp,
                        ": expected every sigma to be finite and > 0, but got sigma[", b, "] = ",
                        p[b]);
  });
}

// gaussian_splat on the device of its inputs (checked by check_inputs): the
// backend's kernels, saving and returning what the CPU path does.
Tensor splat_device(const Tensor& content, const Tensor& mu, const Tensor& sigma, int64_t D, int64_t H,
                    int64_t W, double truncate) {
  const OpKernels& kern = device_kernels(OpId::GaussianSplat, content);
  const Device dev = content.device();
  OpKernels::SplatArgs args;
  args.B = content.size(0);
  args.C = content.size(1);
  args.D = D;
  args.H = H;
  args.W = W;
  args.truncate = truncate;
  Tensor cc = contiguous_data(content), mc = contiguous_data(mu), sc = contiguous_data(sigma);
  Tensor out = empty({args.B, args.C, D, H, W}, content.dtype(), dev);
  kern.gaussian_splat_forward(dev.index, args, cc.data<float>(), mc.data<float>(), sc.data<float>(),
                              out.data<float>());
  record(OpId::GaussianSplat, {content, mu, sigma}, {out}, {cc, mc, sc},
         [args](const Node& n, const Grads& g) {
           const Tensor &cv = n.saved_tensor(0), &mv = n.saved_tensor(1), &sv = n.saved_tensor(2);
           const Shape vol{args.B, args.C, args.D, args.H, args.W};
           check<ShapeError>(g[0].shape() == vol, kOp, ": expected grad_output of shape ",
                             shape_str(vol), ", but got ", shape_str(g[0].shape()));
           const OpKernels& kern = device_kernels(OpId::GaussianSplat, g[0]);
           const Device dev = g[0].device();
           Tensor go = contiguous_data(g[0]);
           Tensor gc = n.needs_input_grad(0) ? empty(cv.shape(), cv.dtype(), dev) : Tensor();
           Tensor gm = n.needs_input_grad(1) ? empty(mv.shape(), mv.dtype(), dev) : Tensor();
           Tensor gs = n.needs_input_grad(2) ? empty(sv.shape(), sv.dtype(), dev) : Tensor();
           kern.gaussian_splat_backward(dev.index, args, cv.data<float>(), mv.data<float>(),
                                        sv.data<float>(), go.data<float>(),
                                        gc.defined() ? gc.data<float>() : nullptr,
                                        gm.defined() ? gm.data<float>() : nullptr,
                                        gs.defined() ? gs.data<float>() : nullptr);
           return Grads{gc, gm, gs};
         });
  return out;
}

}  // namespace

Tensor gaussian_splat(const Tensor& content, const Tensor& mu, const Tensor& sigma, int64_t D,
                      int64_t H, int64_t W, double truncate) {
  const OpRange range(OpId::GaussianSplat);
  check_inputs(content, mu, sigma, D, H, W, truncate);
  if (!content.device().is_cpu()) return splat_device(content, mu, sigma, D, H, W, truncate);
  const int64_t B = content.size(0), C = content.size(1);
  Tensor cc = contiguous_data(content), mc = contiguous_data(mu), sc = contiguous_data(sigma);
  Tensor out = empty({B, C, D, H, W}, content.dtype());
  dispatch_floating(content.dtype(), kOp, [&]<class T>() {
    splat_forward<T>(cc.data<T>(), mc.data<T>(), sc.data<T>(), out.data<T>(), B, C, D, H, W,
                     truncate);
  });
  record(OpId::GaussianSplat, {content, mu, sigma}, {out}, {cc, mc, sc},
         [D, H, W, truncate](const Node& n, const Grads& g) {
           const Tensor &cv = n.saved_tensor(0), &mv = n.saved_tensor(1), &sv = n.saved_tensor(2);
           const int64_t B = cv.size(0), C = cv.size(1);
           check<ShapeError>(g[0].shape() == Shape{B, C, D, H, W}, kOp,
                             ": expected grad_output of shape ",
                             shape_str(Shape{B, C, D, H, W}), ", but got ",
                             shape_str(g[0].shape()));
           Tensor go = contiguous_data(g[0]);
           Tensor gc = n.needs_input_grad(0) ? empty(cv.shape(), cv.dtype()) : Tensor();
           Tensor gm = n.needs_input_grad(1) ? empty(mv.shape(), mv.dtype()) : Tensor();
           Tensor gs = n.needs_input_grad(2) ? empty(sv.shape(), sv.dtype()) : Tensor();
           dispatch_floating(cv.dtype(), kOp, [&]<class T>() {
             splat_backward<T>(cv.data<T>(), mv.data<T>(), sv.data<T>(), go.data<T>(),
                               gc.defined() ? gc.data<T>() : nullptr,
                               gm.defined() ? gm.data<T>() : nullptr,
                               gs.defined() ? gs.data<T>() : nullptr, B, C, D, H, W, truncate);
           });
           return Grads{gc, gm, gs};
         });
  return out;
}

void register_gaussian_splat_ops(std::vector<OpInfo>& t) {
  using V = std::vector<Tensor>;
  // Random mu in [-0.9, 0.9]^3 and sigma in [0.3, 0.8]. With truncation the
  // central differences are valid only if no cell lies within a step of the
  // truncation sphere (where the function jumps); these inputs have none.
  auto inputs = [] {
    return V{gc_input({2, 3}, -1, 1, 11), gc_input({2, 3}, -0.9, 0.9, 12),
             gc_input({2}, 0.3, 0.8, 13)};
  };
  t.push_back({OpId::GaussianSplat, {"cpu"}, {"content", "mu", "sigma"},
               {{"B=2 C=3 grid 3x4x5", inputs,
                 [](const V& v) { return gaussian_splat(v[0], v[1], v[2], 3, 4, 5); }},
                {"truncate 1.5 sigmas", inputs,
                 [](const V& v) { return gaussian_splat(v[0], v[1], v[2], 3, 4, 5, 1.5); }},
                {"grid 1x3x4 (a single depth cell at 0)", inputs,
                 [](const V& v) { return gaussian_splat(v[0], v[1], v[2], 1, 3, 4); }}}});
}

}  // namespace tmem
