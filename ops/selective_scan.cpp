// Selective scan: shape checks, CPU forward and backward kernels, the device
// path, op-table entry. Shapes: u, delta, y [B,T,E]; A [E,N]; Bm, Cm
// [B,T,N]; D [E]; h0, h [B,E,N]. Formula: see ops/selective_scan.h.
//
// Every (b, e) is an independent chain over t. The forward runs the chains
// on OpenMP threads, keeping each running state in its row of h. The
// backward runs tasks (b, chunk of channels); per channel it recomputes the
// states h_0 = h0, ..., h_T (h_{t+1} is the state after step t) and the
// decays a_t = exp(delta_t A) into thread scratch, then sweeps t backwards
// with the adjoint g, which starts as gh:
//   g += gy_t Cm_t                                        (g = dL/dh_{t+1})
//   gCm_t += gy_t h_{t+1},  gD += gy_t u_t,  gu_t = gy_t D + delta_t sum_n g Bm_t
//   gdelta_t = sum_n g (A a_t h_t + Bm_t u_t),  gA += delta_t g a_t h_t
//   gBm_t += delta_t u_t g,  g = a_t g
// and ends with gh0 = g. gA and gD are kept per (b, e) and summed over b;
// gBm and gCm per (b, chunk) and summed over the chunks, so every sum runs
// in an order fixed by the shapes, whatever the thread count.
#include "tmem/ops/selective_scan.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <xsimd/xsimd.hpp>

#include "tmem/core/autograd.h"
#include "tmem/core/profiler.h"
#include "tmem/ops/cpu/scratch.h"
#include "tmem/ops/cpu/simd.h"
#include "tmem/ops/dispatch.h"
#include "tmem/ops/op_table.h"
#include "tmem/ops/shape.h"

namespace tmem {

namespace {

using Grads = std::vector<Tensor>;
constexpr const char* kOp = "selective_scan";

// Inputs of the tape node, in this order.
enum Input { kU, kDelta, kA, kBm, kCm, kD, kH0, kNumInputs };
constexpr const char* kNames[kNumInputs] = {"u", "delta", "A", "Bm", "Cm", "D", "h0"};

// Work (B T E N) below which the kernels stay on one thread: waking a
// sleeping OpenMP thread costs tens of microseconds.
constexpr int64_t kSpawnWork = int64_t{1} << 15;
// Backward tasks per call: with fewer batch items than this, each item's
// channels are split into chunks.
constexpr int64_t kTasks = 64;

struct Dims {
  int64_t B, T, E, N;
  int64_t work() const { return B * T * E * N; }
};

OpKernels::ScanArgs scan_args(const Dims& d) {
  OpKernels::ScanArgs a;
  a.B = d.B;
  a.T = d.T;
  a.E = d.E;
  a.N = d.N;
  return a;
}

// t's data, or null for an undefined t.
template <class S>
S* ptr(const Tensor& t) {
  return t.defined() ? t.data<S>() : nullptr;
}

// The inputs' data, contiguous (h0 null: zeros).
template <class S>
struct Inputs {
  const S *u, *delta, *A, *Bm, *Cm, *D, *h0;
};

template <class S>
Inputs<S> inputs_of(const std::vector<Tensor>& t) {
  return {ptr<S>(t[kU]), ptr<S>(t[kDelta]), ptr<S>(t[kA]), ptr<S>(t[kBm]),
          ptr<S>(t[kCm]), ptr<S>(t[kD]),    ptr<S>(t[kH0])};
}

// The input gradients to compute (null: not needed).
template <class S>
struct GradPtrs {
  S *u, *delta, *A, *Bm, *Cm, *D, *h0;
};

template <class S>
GradPtrs<S> grad_ptrs(const Grads& g) {
  return {ptr<S>(g[kU]), ptr<S>(g[kDelta]), ptr<S>(g[kA]), ptr<S>(g[kBm]),
          ptr<S>(g[kCm]), ptr<S>(g[kD]),    ptr<S>(g[kH0])};
}

// Contiguous data of the inputs (an undefined h0 stays undefined).
std::vector<Tensor> contiguous_inputs(const std::vector<Tensor>& inputs) {
  std::vector<Tensor> cont;
  for (const Tensor& t : inputs) cont.push_back(t.defined() ? contiguous_data(t) : Tensor());
  return cont;
}

// The inputs the node saved (their contiguous data; h0 undefined when it was).
std::vector<Tensor> saved_inputs(const Node& n) {
  std::vector<Tensor> saved;
  for (int i = 0; i < kNumInputs; ++i) saved.push_back(n.saved_tensor(i));
  return saved;
}

// Uninitialised gradient tensors on `dev` for the inputs that need one.
Grads grad_tensors(const Node& n, Device dev) {
  Grads out(kNumInputs);
  for (int i = 0; i < kNumInputs; ++i)
    if (n.needs_input_grad(i)) out[i] = empty(n.input_shapes[i], n.input_dtypes[i], dev);
  return out;
}

// ---- CPU kernels ----

// out[n] = exp(s a[n]) for n < N: the decays of one step, in xsimd batches
// (then one value at a time).
template <class S>
void decays(const S* a, S s, S* out, int64_t N) {
  using V = xsimd::batch<S>;
  constexpr int64_t L = V::size;
  int64_t n = 0;
  for (; n + L <= N; n += L) cpu::vexp(V(V(s) * V::load_unaligned(a + n))).store_unaligned(out + n);
  for (; n < N; ++n) out[n] = std::exp(s * a[n]);
}

template <class S>
void scan_forward(const Dims& d, const Inputs<S>& in, S* y, S* h) {
  const int64_t T = d.T, E = d.E, N = d.N;
  cpu::ThreadScratch<S> decay("selective_scan", N);
#pragma omp parallel if (d.work() >= kSpawnWork)
  {
    S* a = decay.slot();
#pragma omp for schedule(static)
    for (int64_t be = 0; be < d.B * E; ++be) {
      const int64_t b = be / E, e = be % E;
      const S* Ae = in.A + e * N;
      S* hr = h + be * N;
      for (int64_t n = 0; n < N; ++n) hr[n] = in.h0 ? in.h0[be * N + n] : S(0);
      for (int64_t t = 0; t < T; ++t) {
        const int64_t i = (b * T + t) * E + e;
        const S dt = in.delta[i], x = in.u[i], dx = dt * x;
        const S* Bt = in.Bm + (b * T + t) * N;
        const S* Ct = in.Cm + (b * T + t) * N;
        decays(Ae, dt, a, N);
        S acc = S(0);
#pragma omp simd reduction(+ : acc)
        for (int64_t n = 0; n < N; ++n) {
          hr[n] = a[n] * hr[n] + dx * Bt[n];
          acc += Ct[n] * hr[n];
        }
        y[i] = acc + in.D[e] * x;
      }
    }
  }
}

// Each batch item's E channels in `count` chunks of `size` channels (the
// last may be shorter), about kTasks chunks in all.
struct Chunks {
  int64_t size, count;
  explicit Chunks(const Dims& d) {
    const int64_t B = std::max<int64_t>(d.B, 1), E = std::max<int64_t>(d.E, 1);
    const int64_t want = std::min(E, (kTasks + B - 1) / B);
    size = (E + want - 1) / want;
    count = (E + size - 1) / size;
  }
};

// The backward from gy [B,T,E] and gh [B,E,N] (either null: zero).
template <class S>
void scan_backward(const Dims& d, const Inputs<S>& in, const S* gy, const S* gh, const GradPtrs<S>& gr) {
  const int64_t B = d.B, T = d.T, E = d.E, N = d.N, TN = T * N;
  const bool need_g = gr.u || gr.delta || gr.A || gr.Bm || gr.h0;
  const Chunks ch(d);
  // Per-item parts of the sums over b (A, D) and over the channel chunks
  // (Bm, Cm; with one chunk per item the gradients themselves).
  std::vector<S> partA(gr.A ? B * E * N : 0), partD(gr.D ? B * E : 0);
  std::vector<S> partB(gr.Bm && ch.count > 1 ? B * ch.count * TN : 0);
  std::vector<S> partC(gr.Cm && ch.count > 1 ? B * ch.count * TN : 0);
  S* dBm = ch.count > 1 ? partB.data() : gr.Bm;
  S* dCm = ch.count > 1 ? partC.data() : gr.Cm;
  // Per thread: the states h_0 .. h_T [T+1, N], the decays [T, N], the
  // adjoint and the gradient of A along one chain [N].
  cpu::ThreadScratch<S> hs_s("selective_scan backward", (T + 1) * N), dec_s("selective_scan backward", TN),
      g_s("selective_scan backward", N), gA_s("selective_scan backward", N);
#pragma omp parallel if (d.work() >= kSpawnWork && B * ch.count > 1)
  {
    S *hs = hs_s.slot(), *dec = dec_s.slot(), *g = g_s.slot(), *gA = gA_s.slot();
#pragma omp for schedule(static)
    for (int64_t task = 0; task < B * ch.count; ++task) {
      const int64_t b = task / ch.count, e0 = task % ch.count * ch.size, e1 = std::min(E, e0 + ch.size);
      S* tB = gr.Bm ? dBm + task * TN : nullptr;
      S* tC = gr.Cm ? dCm + task * TN : nullptr;
      if (tB) std::fill(tB, tB + TN, S(0));
      if (tC) std::fill(tC, tC + TN, S(0));
      for (int64_t e = e0; e < e1; ++e) {
        const int64_t be = b * E + e;
        const S* Ae = in.A + e * N;
        for (int64_t n = 0; n < N; ++n) hs[n] = in.h0 ? in.h0[be * N + n] : S(0);
        if (need_g || tC)
          for (int64_t t = 0; t < T; ++t) {
            const int64_t i = (b * T + t) * E + e;
            const S dt = in.delta[i], dx = dt * in.u[i];
            const S* Bt = in.Bm + (b * T + t) * N;
            S* at = dec + t * N;
            decays(Ae, dt, at, N);
#pragma omp simd
            for (int64_t n = 0; n < N; ++n) hs[(t + 1) * N + n] = at[n] * hs[t * N + n] + dx * Bt[n];
          }
        for (int64_t n = 0; n < N; ++n) {
          g[n] = gh ? gh[be * N + n] : S(0);
          gA[n] = S(0);
        }
        S gD = S(0);
        for (int64_t t = T - 1; t >= 0; --t) {
          const int64_t i = (b * T + t) * E + e;
          const S gyt = gy ? gy[i] : S(0), dt = in.delta[i], x = in.u[i];
          gD += gyt * x;
          const S* next = hs + (t + 1) * N;
          if (tC)
            for (int64_t n = 0; n < N; ++n) tC[t * N + n] += gyt * next[n];
          if (!need_g) continue;
          const S* Bt = in.Bm + (b * T + t) * N;
          const S* Ct = in.Cm + (b * T + t) * N;
          const S* prev = hs + t * N;
          const S* at = dec + t * N;
          S su = S(0), sd = S(0);
#pragma omp simd reduction(+ : su, sd)
          for (int64_t n = 0; n < N; ++n) {
            const S gn = g[n] + gyt * Ct[n];
            const S gah = gn * at[n] * prev[n];
            sd += gah * Ae[n] + gn * Bt[n] * x;
            gA[n] += gah * dt;
            su += gn * Bt[n];
            if (tB) tB[t * N + n] += gn * dt * x;
            g[n] = gn * at[n];
          }
          if (gr.u) gr.u[i] = gyt * in.D[e] + dt * su;
          if (gr.delta) gr.delta[i] = sd;
        }
        if (gr.h0) std::copy(g, g + N, gr.h0 + be * N);
        if (gr.A) std::copy(gA, gA + N, partA.begin() + be * N);
        if (gr.D) partD[be] = gD;
      }
    }
  }
  // The sums, in a fixed order: over b for A and D, over the chunks for Bm
  // and Cm.
  auto sum_parts = [](S* out, const std::vector<S>& part, int64_t outer, int64_t parts, int64_t len) {
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < len; ++j) {
        S s = S(0);
        for (int64_t p = 0; p < parts; ++p) s += part[(o * parts + p) * len + j];
        out[o * len + j] = s;
      }
  };
  if (gr.A) sum_parts(gr.A, partA, 1, B, E * N);
  if (gr.D) sum_parts(gr.D, partD, 1, B, E);
  if (gr.Bm && ch.count > 1) sum_parts(gr.Bm, partB, B, ch.count, TN);
  if (gr.Cm && ch.count > 1) sum_parts(gr.Cm, partC, B, ch.count, TN);
}

// ---- checks ----

std::string shape_or_none(const Tensor& t) {
  return t.defined() ? shape_str(t.shape()) : std::string("(undefined)");
}

Dims check_inputs(const std::vector<Tensor>& in) {
  const Tensor &u = in[kU], &Bm = in[kBm];
  check<ShapeError>(u.defined() && u.dim() == 3, kOp, ": expected u [B,T,E], but got ", shape_or_none(u));
  check<ShapeError>(Bm.defined() && Bm.dim() == 3, kOp, ": expected Bm [B,T,N], but got ", shape_or_none(Bm));
  const Dims d{u.size(0), u.size(1), u.size(2), Bm.size(2)};
  const Shape want[kNumInputs] = {{d.B, d.T, d.E}, {d.B, d.T, d.E}, {d.E, d.N}, {d.B, d.T, d.N},
                                  {d.B, d.T, d.N}, {d.E},           {d.B, d.E, d.N}};
  const char* pattern[kNumInputs] = {"[B,T,E]", "[B,T,E]", "[E,N]", "[B,T,N]", "[B,T,N]", "[E]", "[B,E,N]"};
  for (int i = 0; i < kNumInputs; ++i) {
    if (i == kH0 && !in[i].defined()) continue;
    check<ShapeError>(in[i].defined() && in[i].shape() == want[i], kOp, ": expected ", kNames[i], " ",
                      pattern[i], " = ", shape_str(want[i]), ", but got ", shape_or_none(in[i]),
                      " (B,T,E from u", shape_str(u.shape()), ", N from Bm", shape_str(Bm.shape()), ")");
  }
  for (int i = 0; i < kNumInputs; ++i) {
    if (!in[i].defined()) continue;
    check<DeviceError>(in[i].device() == u.device(), kOp, ": expected every input on u's device ",
                       u.device().str(), ", but ", kNames[i], " is on ", in[i].device().str());
    check<DtypeError>(in[i].dtype() == u.dtype(), kOp, ": expected every input of u's dtype ",
                      dtype_name(u.dtype()), ", but ", kNames[i], " is ", dtype_name(in[i].dtype()));
  }
  check<DtypeError>(is_floating(u.dtype()), kOp, ": expected a floating dtype (float32 or float64), but got ",
                    dtype_name(u.dtype()));
  return d;
}

// Throws ShapeError unless the output gradients (y's and h's, where
// defined) have the outputs' shapes.
void check_output_grads(const Dims& d, const Grads& g) {
  const Shape want[2] = {{d.B, d.T, d.E}, {d.B, d.E, d.N}};
  for (int k = 0; k < 2; ++k)
    if (g[k].defined())
      check<ShapeError>(g[k].shape() == want[k], kOp, ": expected grad_output ", k == 0 ? "y" : "h",
                        " of shape ", shape_str(want[k]), ", but got ", shape_str(g[k].shape()));
}

// The output gradients, contiguous (undefined where none came).
Grads output_grads(const Grads& g) {
  return {g[0].defined() ? contiguous_data(g[0]) : Tensor(), g[1].defined() ? contiguous_data(g[1]) : Tensor()};
}

// ---- device path ----
//
// The forward is one kernel. The backward runs the forward again keeping
// every state [B,E,T,N]; Cm's gradient is then a sum over e of gy times the
// states; the reverse sweep overwrites the states with the adjoints and
// writes the gradients of u, delta and h0 and per-item parts of A's and D's
// (summed over b by sum_rows); Bm's gradient is a sum over e of delta u
// times the adjoints.

Grads scan_device_backward(const Dims& d, const Node& n, const Grads& g) {
  const std::vector<Tensor> saved = saved_inputs(n);
  const OpKernels& k = device_kernels(OpId::SelectiveScan, saved[kU]);
  const Device dev = saved[kU].device();
  const OpKernels::ScanArgs a = scan_args(d);
  const Inputs<float> in = inputs_of<float>(saved);
  const Grads go = output_grads(g);
  const float *gy = ptr<float>(go[0]), *gh = ptr<float>(go[1]);
  Grads out = grad_tensors(n, dev);
  const GradPtrs<float> gr = grad_ptrs<float>(out);
  Tensor states = empty({d.B, d.E, d.T, d.N}, DType::Float32, dev);
  k.selective_scan_forward(dev.index, a, in.u, in.delta, in.A, in.Bm, in.Cm, in.D, in.h0, nullptr, nullptr,
                           states.data<float>());
  if (gr.Cm) k.selective_scan_reduce(dev.index, a, gy, nullptr, states.data<float>(), gr.Cm);
  if (!(gr.u || gr.delta || gr.A || gr.Bm || gr.D || gr.h0)) return out;
  Tensor partA = gr.A ? empty({d.E, d.N, d.B}, DType::Float32, dev) : Tensor();
  Tensor partD = gr.D ? empty({d.E, d.B}, DType::Float32, dev) : Tensor();
  k.selective_scan_backward(dev.index, a, in.u, in.delta, in.A, in.Bm, in.Cm, in.D, in.h0, gy, gh,
                            states.data<float>(), gr.u, gr.delta, ptr<float>(partA), ptr<float>(partD), gr.h0);
  if (gr.A) k.sum_rows(dev.index, partA.data<float>(), gr.A, d.E * d.N, d.B, 1.0);
  if (gr.D) k.sum_rows(dev.index, partD.data<float>(), gr.D, d.E, d.B, 1.0);
  if (gr.Bm) k.selective_scan_reduce(dev.index, a, in.delta, in.u, states.data<float>(), gr.Bm);
  return out;
}

// selective_scan on the device of its inputs (checked by check_inputs).
SelectiveScanResult scan_device(const Dims& d, const std::vector<Tensor>& inputs) {
  const OpKernels& k = device_kernels(OpId::SelectiveScan, inputs[kU]);
  const Device dev = inputs[kU].device();
  const std::vector<Tensor> cont = contiguous_inputs(inputs);
  const Inputs<float> in = inputs_of<float>(cont);
  Tensor y = empty({d.B, d.T, d.E}, DType::Float32, dev), h = empty({d.B, d.E, d.N}, DType::Float32, dev);
  k.selective_scan_forward(dev.index, scan_args(d), in.u, in.delta, in.A, in.Bm, in.Cm, in.D, in.h0,
                           y.data<float>(), h.data<float>(), nullptr);
  record(OpId::SelectiveScan, inputs, {y, h}, cont, [d](const Node& n, const Grads& g) {
    check_output_grads(d, g);
    return scan_device_backward(d, n, g);
  });
  return {y, h};
}

}  // namespace

SelectiveScanResult selective_scan(const Tensor& u, const Tensor& delta, const Tensor& A, const Tensor& Bm,
                                   const Tensor& Cm, const Tensor& D, const Tensor& h0) {
  const OpRange range(OpId::SelectiveScan);
  const std::vector<Tensor> inputs{u, delta, A, Bm, Cm, D, h0};
  const Dims d = check_inputs(inputs);
  if (!u.device().is_cpu()) return scan_device(d, inputs);
  const std::vector<Tensor> cont = contiguous_inputs(inputs);
  Tensor y = empty({d.B, d.T, d.E}, u.dtype()), h = empty({d.B, d.E, d.N}, u.dtype());
  dispatch_floating(u.dtype(), kOp, [&]<class S>() {
    scan_forward<S>(d, inputs_of<S>(cont), y.data<S>(), h.data<S>());
  });
  record(OpId::SelectiveScan, inputs, {y, h}, cont, [d](const Node& n, const Grads& g) {
    check_output_grads(d, g);
    const Grads go = output_grads(g);
    Grads out = grad_tensors(n, Device::cpu());
    const std::vector<Tensor> saved = saved_inputs(n);
    dispatch_floating(n.input_dtypes[kU], kOp, [&]<class S>() {
      scan_backward<S>(d, inputs_of<S>(saved), ptr<S>(go[0]), ptr<S>(go[1]), grad_ptrs<S>(out));
    });
    return out;
  });
  return {y, h};
}

void register_selective_scan_ops(std::vector<OpInfo>& t) {
  using V = std::vector<Tensor>;
  // B=2, T=5, E=3, N=4; delta > 0 (as after softplus) and A < 0 (Mamba's
  // A = -exp(A_log)); every input differentiable.
  auto inputs = [] {
    return V{gc_input({2, 5, 3}, -1, 1, 51), gc_input({2, 5, 3}, 0.1, 0.9, 52), gc_input({3, 4}, -1.5, -0.2, 53),
             gc_input({2, 5, 4}, -1, 1, 54), gc_input({2, 5, 4}, -1, 1, 55),  gc_input({3}, -1, 1, 56),
             gc_input({2, 3, 4}, -1, 1, 57)};
  };
  auto no_h0 = [inputs] {
    V v = inputs();
    v.pop_back();
    return v;
  };
  // y and h side by side in one output, so the checked loss weighs both.
  auto both = [](const SelectiveScanResult& r) { return cat({reshape(r.y, {-1}), reshape(r.h, {-1})}, 0); };
  t.push_back({OpId::SelectiveScan, {"cpu"}, {"u", "delta", "A", "Bm", "Cm", "D", "h0"},
               {{"y and h of B=2 T=5 E=3 N=4", inputs,
                 [both](const V& v) { return both(selective_scan(v[0], v[1], v[2], v[3], v[4], v[5], v[6])); }},
                {"y and h from zeros (h0 undefined)", no_h0,
                 [both](const V& v) { return both(selective_scan(v[0], v[1], v[2], v[3], v[4], v[5], Tensor())); }}}});
}

}  // namespace tmem
