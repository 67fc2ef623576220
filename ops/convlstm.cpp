// ConvLSTM3D cell: shape checks, fused CPU forward and backward kernels,
// op-table entry. Shapes: x[B,Cx,D,H,W], h and c [B,C,D,H,W], Cz = Cx + C,
// S = D*H*W voxels; weights as in ops/convlstm.h. Formula: see
// ops/convlstm.h.
//
// Each batch item is one independent task (OpenMP over B). Per item the
// volume is channels-first [Cz, S]: a depthwise stage along an axis is one
// contiguous pass over each channel's S voxels, reading the neighbours at
// +-inner elements (H*W, W or 1) under a precomputed border mask; the 1x1x1
// conv is one GEMM [4C,Cz] x [Cz,S]; the gates are one xsimd pass over [C,S].
#include "ops/convlstm.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include <omp.h>
#include <xsimd/xsimd.hpp>

#include "core/autograd.h"
#include "core/strided.h"
#include "ops/cpu/gemm.h"
#include "ops/op_table.h"

namespace tmem {

namespace {

using Grads = std::vector<Tensor>;
constexpr const char* kOp = "convlstm3d_cell";

// Inputs of the tape node, in this order.
enum Input { kX, kH, kC, kDwD, kDwH, kDwW, kDbD, kDbH, kDbW, kPw, kPb, kNumInputs };

struct Dims {
  int64_t B, Cx, C, D, H, W;
  int64_t Cz() const { return Cx + C; }
  int64_t S() const { return D * H * W; }
};

// ---- vector helpers: one functor body serves xsimd batches and the scalar tail ----

template <class V, class T>
V vload(const T* p) {
  if constexpr (std::is_same_v<V, T>) return *p;
  else return V::load_unaligned(p);
}
template <class V, class T>
void vstore(T* p, V v) {
  if constexpr (std::is_same_v<V, T>) *p = v;
  else v.store_unaligned(p);
}
template <class V>
V sigm(V x) {
  using std::exp;
  using xsimd::exp;
  return V(1) / (V(1) + V(exp(-x)));
}
template <class V>
V tnh(V x) {
  using std::tanh;
  using xsimd::tanh;
  return V(tanh(x));
}
// f(j, V{}) for j = 0, W, 2W, ... with V an xsimd batch, then f(j, T{}) on the tail.
template <class T, class F>
void simd_for(int64_t n, F&& f) {
  using Bt = xsimd::batch<T>;
  constexpr int64_t Wd = static_cast<int64_t>(Bt::size);
  int64_t j = 0;
  for (; j + Wd <= n; j += Wd) f(j, Bt{});
  for (; j < n; ++j) f(j, T{});
}

// ---- depthwise kernel-3 conv along one axis of a [Cz, D, H, W] volume ----

// For one channel block of S = D*H*W voxels and each axis: the distance
// `inner` (in elements) to the neighbouring cell along the axis (H*W, W, 1),
// and per voxel whether a previous / next cell exists (1) or lies in the zero
// padding (0). Built once per call, so each axis conv is one masked,
// contiguous pass over the whole channel block.
template <class T>
struct Stencil {
  int64_t S;
  int64_t inner[3];
  std::vector<T> prev[3], next[3];
  explicit Stencil(const Dims& dm) : S(dm.S()), inner{dm.H * dm.W, dm.W, 1} {
    const int64_t n[3] = {dm.D, dm.H, dm.W};
    for (int a = 0; a < 3; ++a) {
      prev[a].resize(static_cast<size_t>(S));
      next[a].resize(static_cast<size_t>(S));
      for (int64_t j = 0; j < S; ++j) {
        const int64_t i = (j / inner[a]) % n[a];
        prev[a][j] = T(i > 0);
        next[a][j] = T(i < n[a] - 1);
      }
    }
  }
};

// out = taps (k0, k1, k2) applied along axis a (k0 reads the previous cell,
// k2 the next; zero padding) plus bias, for the Cz channel blocks of in.
// flip applies (k2, k1, k0) instead: the transposed conv, i.e. the input
// gradient (bias must then be null). Padding cells are skipped by a select, not
// a multiply by 0, so an Inf next to the border cannot turn into NaN.
template <class T>
void axis_conv(const Stencil<T>& st, int a, int64_t Cz, const T* in, T* out, const T* w,
               const T* bias, bool flip) {
  const int64_t S = st.S, q = st.inner[a];
  const T* __restrict hp = st.prev[a].data();
  const T* __restrict hn = st.next[a].data();
  for (int64_t ch = 0; ch < Cz; ++ch) {
    T k0 = w[3 * ch], k1 = w[3 * ch + 1], k2 = w[3 * ch + 2];
    if (flip) std::swap(k0, k2);
    const T bb = bias ? bias[ch] : T(0);
    const T* __restrict s = in + ch * S;
    T* __restrict d = out + ch * S;
    if (S < 2 * q) {  // a single cell along the axis: no neighbours
#pragma omp simd
      for (int64_t j = 0; j < S; ++j) d[j] = bb + k1 * s[j];
      continue;
    }
    // The first cell row has no previous cell, the last no next one.
#pragma omp simd
    for (int64_t j = 0; j < q; ++j) d[j] = bb + k1 * s[j] + (hn[j] != T(0) ? k2 * s[j + q] : T(0));
#pragma omp simd
    for (int64_t j = q; j < S - q; ++j)
      d[j] = bb + k1 * s[j] + (hp[j] != T(0) ? k0 * s[j - q] : T(0)) +
             (hn[j] != T(0) ? k2 * s[j + q] : T(0));
#pragma omp simd
    for (int64_t j = S - q; j < S; ++j) d[j] = bb + k1 * s[j] + (hp[j] != T(0) ? k0 * s[j - q] : T(0));
  }
}

// gw[Cz,3] += dL/d(taps) and gb[Cz] += dL/d(bias) for out = axis_conv(in) with
// dL/dout = dout; either may be null.
template <class T>
void axis_conv_params(const Stencil<T>& st, int a, int64_t Cz, const T* in, const T* dout, T* gw,
                      T* gb) {
  const int64_t S = st.S, q = st.inner[a];
  const T* __restrict hp = st.prev[a].data();
  const T* __restrict hn = st.next[a].data();
  for (int64_t ch = 0; ch < Cz; ++ch) {
    const T* __restrict x = in + ch * S;
    const T* __restrict g = dout + ch * S;
    if (gb) {
      T sb = T(0);
#pragma omp simd reduction(+ : sb)
      for (int64_t j = 0; j < S; ++j) sb += g[j];
      gb[ch] += sb;
    }
    if (!gw) continue;
    T s0 = T(0), s1 = T(0), s2 = T(0);
#pragma omp simd reduction(+ : s1)
    for (int64_t j = 0; j < S; ++j) s1 += g[j] * x[j];
#pragma omp simd reduction(+ : s0)
    for (int64_t j = q; j < S; ++j) s0 += hp[j] != T(0) ? g[j] * x[j - q] : T(0);
#pragma omp simd reduction(+ : s2)
    for (int64_t j = 0; j < S - q; ++j) s2 += hn[j] != T(0) ? g[j] * x[j + q] : T(0);
    gw[3 * ch] += s0;
    gw[3 * ch + 1] += s1;
    gw[3 * ch + 2] += s2;
  }
}

template <class T>
struct WeightPtrs {
  const T *dw[3], *db[3], *pw, *pb;
};

// z[Cz,S] = cat(x[b], h[b]); then a1, a2, a3 by the three axis convs. a3 is
// written to `a[2]`; a[0], a[1] hold a1, a2.
template <class T>
void depthwise_stack(const Dims& dm, const Stencil<T>& st, int64_t b, const T* x, const T* h,
                     const WeightPtrs<T>& w, T* z, T* const a[3]) {
  const int64_t S = dm.S();
  std::memcpy(z, x + b * dm.Cx * S, sizeof(T) * dm.Cx * S);
  std::memcpy(z + dm.Cx * S, h + b * dm.C * S, sizeof(T) * dm.C * S);
  axis_conv(st, 0, dm.Cz(), z, a[0], w.dw[0], w.db[0], false);
  axis_conv(st, 1, dm.Cz(), a[0], a[1], w.dw[1], w.db[1], false);
  axis_conv(st, 2, dm.Cz(), a[1], a[2], w.dw[2], w.db[2], false);
}

// Batch items in parallel when there are several and the work is worth it;
// otherwise the GEMM parallelises inside.
bool batch_parallel(const Dims& dm) {
  return dm.B > 1 && omp_get_max_threads() > 1 && dm.B * dm.S() * dm.Cz() * 4 * dm.C >= 65536;
}

template <class T>
void cell_forward(const Dims& dm, const T* x, const T* h, const T* c, const WeightPtrs<T>& w,
                  T* gates, T* cn, T* hn) {
  const int64_t S = dm.S(), Cz = dm.Cz(), C4 = 4 * dm.C, CS = dm.C * S;
  const bool outer = batch_parallel(dm);
  const Stencil<T> st(dm);
#pragma omp parallel if (outer)
  {
    // z, a1, a2, a3 [Cz,S] each; every element is written before it is read.
    std::unique_ptr<T[]> ws(new T[static_cast<size_t>(4 * Cz * S)]);
    T* const a[3] = {ws.get() + Cz * S, ws.get() + 2 * Cz * S, ws.get() + 3 * Cz * S};
#pragma omp for schedule(static)
    for (int64_t b = 0; b < dm.B; ++b) {
      depthwise_stack(dm, st, b, x, h, w, ws.get(), a);
      // Pre-activations p = pw a3 + pb, written where the gates will live.
      T* p = gates + b * C4 * S;
      for (int64_t r = 0; r < C4; ++r) std::fill(p + r * S, p + (r + 1) * S, w.pb[r]);
      cpu::gemm<T>(C4, S, Cz, w.pw, Cz, 1, a[2], S, 1, p, S, true, !outer);
      T *pi = p, *pf = p + CS, *po = p + 2 * CS, *pg = p + 3 * CS;
      const T* cb = c + b * CS;
      T* cnb = cn + b * CS;
      T* hnb = hn + b * CS;
      simd_for<T>(CS, [&](int64_t j, auto tag) {
        using V = decltype(tag);
        V i = sigm(vload<V>(pi + j)), f = sigm(vload<V>(pf + j)), o = sigm(vload<V>(po + j));
        V g = tnh(vload<V>(pg + j));
        V c2 = f * vload<V>(cb + j) + i * g;
        vstore(pi + j, i);
        vstore(pf + j, f);
        vstore(po + j, o);
        vstore(pg + j, g);
        vstore(cnb + j, c2);
        vstore(hnb + j, o * tnh(c2));
      });
    }
  }
}

// Gradients of one call; a null pointer marks a gradient nobody needs.
template <class T>
struct GradPtrs {
  T *x, *h, *c, *dw[3], *db[3], *pw, *pb;
};

template <class T>
void cell_backward(const Dims& dm, const T* x, const T* h, const T* c, const T* cn,
                   const T* gates, const WeightPtrs<T>& w, const T* ghn, const T* gcn,
                   const GradPtrs<T>& gr) {
  const int64_t S = dm.S(), Cz = dm.Cz(), C4 = 4 * dm.C, CS = dm.C * S;
  const bool need_dz = gr.x || gr.h;
  const bool need_a1 = need_dz || gr.dw[0] || gr.db[0];
  const bool need_a2 = need_a1 || gr.dw[1] || gr.db[1];
  const bool need_a3 = need_a2 || gr.dw[2] || gr.db[2];
  const bool need_p = need_a3 || gr.pw || gr.pb;
  const bool recompute = gr.pw || gr.dw[0] || gr.dw[1] || gr.dw[2];
  // Per-thread partial sums of the weight gradients, reduced in thread order
  // afterwards so the result does not depend on timing.
  const int64_t n_pw = C4 * Cz, n_pb = C4, n_dw = 3 * Cz, n_db = Cz;
  const int64_t P = n_pw + n_pb + 3 * (n_dw + n_db);
  const bool outer = batch_parallel(dm);
  const int nthr = outer ? omp_get_max_threads() : 1;
  std::vector<T> partial(static_cast<size_t>(nthr * P), T(0));
  const Stencil<T> st(dm);
#pragma omp parallel if (outer)
  {
    T* part = partial.data() + omp_get_thread_num() * P;
    T* p_pw = part;
    T* p_pb = p_pw + n_pw;
    T* p_dw[3] = {p_pb + n_pb, p_pb + n_pb + n_dw, p_pb + n_pb + 2 * n_dw};
    T* p_db[3] = {p_dw[2] + n_dw, p_dw[2] + n_dw + n_db, p_dw[2] + n_dw + 2 * n_db};
    // z, a1, a2, a3 [Cz,S] each, dP [4C,S], and two ping-pong gradient buffers
    // [Cz,S] (needed unless only c's gradient is asked for).
    std::unique_ptr<T[]> ws(need_p ? new T[static_cast<size_t>((6 * Cz + C4) * S)] : nullptr);
    auto at = [&](int64_t off) { return need_p ? ws.get() + off * S : nullptr; };
    T* z = at(0);
    T* const a[3] = {at(Cz), at(2 * Cz), at(3 * Cz)};
    T* dp = at(4 * Cz);
    T* ga = at(4 * Cz + C4);
    T* gb = at(5 * Cz + C4);
#pragma omp for schedule(static)
    for (int64_t b = 0; b < dm.B; ++b) {
      const T* gt = gates + b * C4 * S;
      const T *gi = gt, *gf = gt + CS, *go = gt + 2 * CS, *gg = gt + 3 * CS;
      const T* cb = c + b * CS;
      const T* cnb = cn + b * CS;
      const T* ghb = ghn + b * CS;
      const T* gcb = gcn + b * CS;
      T* dcb = gr.c ? gr.c + b * CS : nullptr;
      T* dpi = dp;
      T* dpf = need_p ? dp + CS : nullptr;
      T* dpo = need_p ? dp + 2 * CS : nullptr;
      T* dpg = need_p ? dp + 3 * CS : nullptr;
      simd_for<T>(CS, [&](int64_t j, auto tag) {
        using V = decltype(tag);
        const V i = vload<V>(gi + j), f = vload<V>(gf + j), o = vload<V>(go + j), g = vload<V>(gg + j);
        const V tc = tnh(vload<V>(cnb + j)), gh = vload<V>(ghb + j);
        const V dc2 = vload<V>(gcb + j) + gh * o * (V(1) - tc * tc);
        if (dcb) vstore(dcb + j, dc2 * f);
        if (need_p) {
          vstore(dpi + j, dc2 * g * i * (V(1) - i));
          vstore(dpf + j, dc2 * vload<V>(cb + j) * f * (V(1) - f));
          vstore(dpo + j, gh * tc * o * (V(1) - o));
          vstore(dpg + j, dc2 * i * (V(1) - g * g));
        }
      });
      if (!need_p) continue;
      if (recompute) depthwise_stack(dm, st, b, x, h, w, z, a);
      if (gr.pb)
        for (int64_t r = 0; r < C4; ++r) {
          T acc = T(0);
          const T* row = dp + r * S;
#pragma omp simd reduction(+ : acc)
          for (int64_t j = 0; j < S; ++j) acc += row[j];
          p_pb[r] += acc;
        }
      // dpw += dP a3^T; da3 = pw^T dP.
      if (gr.pw) cpu::gemm<T>(C4, Cz, S, dp, S, 1, a[2], 1, S, p_pw, Cz, true, !outer);
      if (!need_a3) continue;
      cpu::gemm<T>(Cz, S, C4, w.pw, 1, Cz, dp, S, 1, ga, S, false, !outer);
      // Down the depthwise stack: W (input a2), H (input a1), D (input z).
      const T* stage_in[3] = {z, a[0], a[1]};
      const bool need_below[3] = {need_dz, need_a1, need_a2};
      T *cur = ga, *nxt = gb;
      for (int ax = 2; ax >= 0; --ax) {
        if (gr.dw[ax] || gr.db[ax])
          axis_conv_params(st, ax, Cz, stage_in[ax], cur, gr.dw[ax] ? p_dw[ax] : nullptr,
                           gr.db[ax] ? p_db[ax] : nullptr);
        if (!need_below[ax]) break;
        axis_conv(st, ax, Cz, cur, nxt, w.dw[ax], static_cast<const T*>(nullptr), true);
        std::swap(cur, nxt);
      }
      if (!need_dz) continue;
      if (gr.x) std::memcpy(gr.x + b * dm.Cx * S, cur, sizeof(T) * dm.Cx * S);
      if (gr.h) std::memcpy(gr.h + b * CS, cur + dm.Cx * S, sizeof(T) * CS);
    }
  }
  auto reduce = [&](T* dst, int64_t off, int64_t n) {
    if (!dst) return;
    std::fill(dst, dst + n, T(0));
    for (int t = 0; t < nthr; ++t) {
      const T* src = partial.data() + t * P + off;
      for (int64_t k = 0; k < n; ++k) dst[k] += src[k];
    }
  };
  reduce(gr.pw, 0, n_pw);
  reduce(gr.pb, n_pw, n_pb);
  for (int ax = 0; ax < 3; ++ax) {
    reduce(gr.dw[ax], n_pw + n_pb + ax * n_dw, n_dw);
    reduce(gr.db[ax], n_pw + n_pb + 3 * n_dw + ax * n_db, n_db);
  }
}

std::string shape_or_none(const Tensor& t) {
  return t.defined() ? shape_str(t.shape()) : std::string("(undefined)");
}

Dims check_inputs(const Tensor& x, const Tensor& h, const Tensor& c, const ConvLSTM3DWeights& w) {
  check<ShapeError>(x.defined() && h.defined() && c.defined() && x.dim() == 5 && h.dim() == 5 &&
                        c.dim() == 5,
                    kOp, ": expected 5-D x[B,Cx,D,H,W], h[B,C,D,H,W] and c[B,C,D,H,W], but got x",
                    shape_or_none(x), " h", shape_or_none(h), " c", shape_or_none(c));
  check<ShapeError>(x.size(0) == h.size(0) && x.size(2) == h.size(2) && x.size(3) == h.size(3) &&
                        x.size(4) == h.size(4),
                    kOp, ": expected x and h with one batch size and grid, but got x",
                    shape_str(x.shape()), " h", shape_str(h.shape()));
  check<ShapeError>(h.shape() == c.shape(), kOp, ": expected h and c of one shape, but got h",
                    shape_str(h.shape()), " c", shape_str(c.shape()));
  Dims dm{x.size(0), x.size(1), h.size(1), x.size(2), x.size(3), x.size(4)};
  const int64_t Cz = dm.Cz();
  auto check_w = [&](const Tensor& t, const char* name, const Shape& want) {
    check<ShapeError>(t.defined() && t.shape() == want, kOp, ": expected ", name, " of shape ",
                      shape_str(want), " (Cz = Cx + C = ", dm.Cx, " + ", dm.C,
                      "), but got ", name, shape_or_none(t), " for x", shape_str(x.shape()),
                      " h", shape_str(h.shape()));
  };
  check_w(w.dw_d, "dw_d", {Cz, 3});
  check_w(w.dw_h, "dw_h", {Cz, 3});
  check_w(w.dw_w, "dw_w", {Cz, 3});
  check_w(w.db_d, "db_d", {Cz});
  check_w(w.db_h, "db_h", {Cz});
  check_w(w.db_w, "db_w", {Cz});
  check_w(w.pw, "pw", {4 * dm.C, Cz});
  check_w(w.pb, "pb", {4 * dm.C});
  const Tensor* all[] = {&x, &h, &c, &w.dw_d, &w.dw_h, &w.dw_w, &w.db_d, &w.db_h, &w.db_w, &w.pw, &w.pb};
  const char* names[] = {"x", "h", "c", "dw_d", "dw_h", "dw_w", "db_d", "db_h", "db_w", "pw", "pb"};
  for (size_t i = 0; i < std::size(all); ++i) {
    check_cpu(*all[i], kOp);
    check<DtypeError>(all[i]->dtype() == x.dtype(), kOp, ": expected every input of x's dtype ",
                      dtype_name(x.dtype()), ", but ", names[i], " is ",
                      dtype_name(all[i]->dtype()));
  }
  return dm;
}

}  // namespace

ConvLSTM3DState convlstm3d_cell(const Tensor& x, const Tensor& h, const Tensor& c,
                                const ConvLSTM3DWeights& w) {
  const Dims dm = check_inputs(x, h, c, w);
  const std::vector<Tensor> inputs{x, h, c, w.dw_d, w.dw_h, w.dw_w, w.db_d, w.db_h, w.db_w,
                                   w.pw, w.pb};
  std::vector<Tensor> cont;
  for (const Tensor& t : inputs) cont.push_back(contiguous_data(t));
  const Shape state{dm.B, dm.C, dm.D, dm.H, dm.W};
  Tensor hn = empty(state, x.dtype()), cn = empty(state, x.dtype());
  Tensor gates = empty({dm.B, 4 * dm.C, dm.D, dm.H, dm.W}, x.dtype());
  dispatch_floating(x.dtype(), kOp, [&]<class T>() {
    WeightPtrs<T> wp{{cont[kDwD].data<T>(), cont[kDwH].data<T>(), cont[kDwW].data<T>()},
                     {cont[kDbD].data<T>(), cont[kDbH].data<T>(), cont[kDbW].data<T>()},
                     cont[kPw].data<T>(), cont[kPb].data<T>()};
    cell_forward<T>(dm, cont[kX].data<T>(), cont[kH].data<T>(), cont[kC].data<T>(), wp,
                    gates.data<T>(), cn.data<T>(), hn.data<T>());
  });
  // Saved: x, h, c, the depthwise weights and biases, pw, then c' and the gates.
  std::vector<Tensor> saved(cont.begin(), cont.begin() + kPb);
  saved.push_back(cn);
  saved.push_back(gates);
  record(OpId::Convlstm3dCell, inputs, {hn, cn}, saved, [dm](const Node& n, const Grads& g) {
    const Shape state{dm.B, dm.C, dm.D, dm.H, dm.W};
    for (int k = 0; k < 2; ++k)
      check<ShapeError>(g[k].shape() == state, kOp, ": expected grad_output ", k == 0 ? "h'" : "c'",
                        " of shape ", shape_str(state), ", but got ", shape_str(g[k].shape()));
    Tensor gh = contiguous_data(g[0]), gc = contiguous_data(g[1]);
    Grads out(kNumInputs);
    for (int i = 0; i < kNumInputs; ++i)
      if (n.needs_input_grad(i)) out[i] = empty(n.input_shapes[i], n.input_dtypes[i]);
    const Tensor& s_cn = n.saved_tensor(kPb);
    const Tensor& s_gates = n.saved_tensor(kPb + 1);
    dispatch_floating(gh.dtype(), kOp, [&]<class T>() {
      auto sp = [&](int i) { return n.saved_tensor(i).template data<T>(); };
      auto gp = [&](int i) { return out[i].defined() ? out[i].template data<T>() : nullptr; };
      WeightPtrs<T> wp{{sp(kDwD), sp(kDwH), sp(kDwW)}, {sp(kDbD), sp(kDbH), sp(kDbW)}, sp(kPw),
                       nullptr};
      GradPtrs<T> gr{gp(kX), gp(kH), gp(kC), {gp(kDwD), gp(kDwH), gp(kDwW)},
                     {gp(kDbD), gp(kDbH), gp(kDbW)}, gp(kPw), gp(kPb)};
      cell_backward<T>(dm, sp(kX), sp(kH), sp(kC), s_cn.template data<T>(),
                       s_gates.template data<T>(), wp, gh.template data<T>(),
                       gc.template data<T>(), gr);
    });
    return out;
  });
  return {hn, cn};
}

void register_convlstm_ops(std::vector<OpInfo>& t) {
  using V = std::vector<Tensor>;
  // B=2, Cx=2, C=3 (Cz=5), grid 3x4x5; every input differentiable.
  auto inputs = [] {
    return V{gc_input({2, 2, 3, 4, 5}, -1, 1, 31), gc_input({2, 3, 3, 4, 5}, -1, 1, 32),
             gc_input({2, 3, 3, 4, 5}, -1, 1, 33), gc_input({5, 3}, -1, 1, 34),
             gc_input({5, 3}, -1, 1, 35), gc_input({5, 3}, -1, 1, 36),
             gc_input({5}, -0.5, 0.5, 37), gc_input({5}, -0.5, 0.5, 38),
             gc_input({5}, -0.5, 0.5, 39), gc_input({12, 5}, -0.6, 0.6, 40),
             gc_input({12}, -0.5, 0.5, 41)};
  };
  auto cell = [](const V& v) {
    return convlstm3d_cell(v[0], v[1], v[2], {v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10]});
  };
  t.push_back({OpId::Convlstm3dCell, {"cpu"},
               {"x", "h", "c", "dw_d", "dw_h", "dw_w", "db_d", "db_h", "db_w", "pw", "pb"},
               {{"h' of B=2 Cx=2 C=3 grid 3x4x5", inputs, [cell](const V& v) { return cell(v).h; }},
                {"c' of B=2 Cx=2 C=3 grid 3x4x5", inputs, [cell](const V& v) { return cell(v).c; }}}});
}

}  // namespace tmem
