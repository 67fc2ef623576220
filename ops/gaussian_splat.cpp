// Gaussian splat: the shape checks, the one body over the kernel tables
// (ops/cpu/gaussian_splat_kernel.cpp, cuda/gaussian_splat.cu) and the
// op-table entry. Shapes: content[B,C], mu[B,3] ordered (x,y,z), sigma[B] ->
// volume[B,C,D,H,W]. Formula and gradients: see ops/gaussian_splat.h.
#include "tmem/ops/gaussian_splat.h"

#include <cmath>

#include "tmem/core/autograd.h"
#include "tmem/core/profiler.h"
#include "tmem/ops/dispatch.h"
#include "tmem/ops/op_table.h"

namespace tmem {

namespace {

using Grads = std::vector<Tensor>;
constexpr const char* kOp = "gaussian_splat";

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

}  // namespace

Tensor gaussian_splat(const Tensor& content, const Tensor& mu, const Tensor& sigma, int64_t D,
                      int64_t H, int64_t W, double truncate) {
  const OpRange range(OpId::GaussianSplat);
  check_inputs(content, mu, sigma, D, H, W, truncate);
  const Device dev = content.device();
  SplatArgs args;
  args.B = content.size(0);
  args.C = content.size(1);
  args.D = D;
  args.H = H;
  args.W = W;
  args.truncate = truncate;
  Tensor cc = contiguous_data(content), mc = contiguous_data(mu), sc = contiguous_data(sigma);
  Tensor out = empty({args.B, args.C, D, H, W}, content.dtype(), dev);
  dispatch_kernels(OpId::GaussianSplat, content, [&]<class T>(const KernelTable<T>& k) {
    k.gaussian_splat_forward(dev.index, args, cc.data<T>(), mc.data<T>(), sc.data<T>(),
                             out.data<T>());
  });
  record(OpId::GaussianSplat, {content, mu, sigma}, {out}, {cc, mc, sc},
         [args](const Node& n, const Grads& g) {
           const Tensor &cv = n.saved_tensor(0), &mv = n.saved_tensor(1), &sv = n.saved_tensor(2);
           const Shape vol{args.B, args.C, args.D, args.H, args.W};
           check<ShapeError>(g[0].shape() == vol, kOp, ": expected grad_output of shape ",
                             shape_str(vol), ", but got ", shape_str(g[0].shape()));
           const Device dev = g[0].device();
           Tensor go = contiguous_data(g[0]);
           Tensor gc = n.needs_input_grad(0) ? empty(cv.shape(), cv.dtype(), dev) : Tensor();
           Tensor gm = n.needs_input_grad(1) ? empty(mv.shape(), mv.dtype(), dev) : Tensor();
           Tensor gs = n.needs_input_grad(2) ? empty(sv.shape(), sv.dtype(), dev) : Tensor();
           dispatch_kernels(OpId::GaussianSplat, g[0], [&]<class T>(const KernelTable<T>& k) {
             k.gaussian_splat_backward(dev.index, args, cv.data<T>(), mv.data<T>(), sv.data<T>(),
                                       go.data<T>(), gc.defined() ? gc.data<T>() : nullptr,
                                       gm.defined() ? gm.data<T>() : nullptr,
                                       gs.defined() ? gs.data<T>() : nullptr);
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
