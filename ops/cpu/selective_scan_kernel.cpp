// selective_scan's CPU kernels (ops/kernel_list.h TMEM_SELECTIVE_SCAN_KERNELS).
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
#include <algorithm>
#include <cmath>

#include <xsimd/xsimd.hpp>

#include "tmem/ops/cpu/kernels.h"
#include "tmem/ops/cpu/scratch.h"
#include "tmem/ops/cpu/simd.h"

namespace tmem::cpu {

namespace {

// Work (B T E N) below which the kernels stay on one thread: waking a
// sleeping OpenMP thread costs tens of microseconds.
constexpr int64_t kSpawnWork = int64_t{1} << 15;
// Backward tasks per call: with fewer batch items than this, each item's
// channels are split into chunks.
constexpr int64_t kTasks = 64;

int64_t work(const ScanArgs& d) { return d.B * d.T * d.E * d.N; }

// The inputs' data, contiguous (h0 null: zeros).
template <class S>
struct Inputs {
  const S *u, *delta, *A, *Bm, *Cm, *D, *h0;
};

// The input gradients to compute (null: not needed).
template <class S>
struct GradPtrs {
  S *u, *delta, *A, *Bm, *Cm, *D, *h0;
};

// out[n] = exp(s a[n]) for n < N: the decays of one step, in xsimd batches
// (then one value at a time).
template <class S>
void decays(const S* a, S s, S* out, int64_t N) {
  using V = xsimd::batch<S>;
  constexpr int64_t L = V::size;
  int64_t n = 0;
  for (; n + L <= N; n += L) vexp(V(V(s) * V::load_unaligned(a + n))).store_unaligned(out + n);
  for (; n < N; ++n) out[n] = std::exp(s * a[n]);
}

template <class S>
void scan_forward(const ScanArgs& d, const Inputs<S>& in, S* y, S* h) {
  const int64_t T = d.T, E = d.E, N = d.N;
  ThreadScratch<S> decay("selective_scan", N);
#pragma omp parallel if (work(d) >= kSpawnWork)
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
  explicit Chunks(const ScanArgs& d) {
    const int64_t B = std::max<int64_t>(d.B, 1), E = std::max<int64_t>(d.E, 1);
    const int64_t want = std::min(E, (kTasks + B - 1) / B);
    size = (E + want - 1) / want;
    count = (E + size - 1) / size;
  }
};

// The backward from gy [B,T,E] and gh [B,E,N] (either null: zero).
template <class S>
void scan_backward(const ScanArgs& d, const Inputs<S>& in, const S* gy, const S* gh, const GradPtrs<S>& gr) {
  const int64_t B = d.B, T = d.T, E = d.E, N = d.N, TN = T * N;
  const bool need_g = gr.u || gr.delta || gr.A || gr.Bm || gr.h0;
  const Chunks ch(d);
  // Per-item parts of the sums over b (A, D) and over the channel chunks
  // (Bm, Cm; with one chunk per item the gradients themselves).
  const char* op = "selective_scan backward";
  Scratch<S> partA(op, gr.A ? B * E * N : 0), partD(op, gr.D ? B * E : 0);
  Scratch<S> partB(op, gr.Bm && ch.count > 1 ? B * ch.count * TN : 0);
  Scratch<S> partC(op, gr.Cm && ch.count > 1 ? B * ch.count * TN : 0);
  S* dBm = ch.count > 1 ? partB.data() : gr.Bm;
  S* dCm = ch.count > 1 ? partC.data() : gr.Cm;
  // Per thread: the states h_0 .. h_T [T+1, N], the decays [T, N], the
  // adjoint and the gradient of A along one chain [N].
  ThreadScratch<S> hs_s(op, (T + 1) * N), dec_s(op, TN), g_s(op, N), gA_s(op, N);
#pragma omp parallel if (work(d) >= kSpawnWork && B * ch.count > 1)
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
        if (gr.A) std::copy(gA, gA + N, partA.data() + be * N);
        if (gr.D) partD[be] = gD;
      }
    }
  }
  // The sums, in a fixed order: over b for A and D, over the chunks for Bm
  // and Cm.
  auto sum_parts = [](S* out, const Scratch<S>& part, int64_t outer, int64_t parts, int64_t len) {
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

}  // namespace

template <class Scalar>
void Kernels<Scalar>::selective_scan_forward(int, const ScanArgs& a, const T* u, const T* delta, const T* A,
                                             const T* Bm, const T* Cm, const T* D, const T* h0, T* y, T* h) {
  scan_forward<T>(a, {u, delta, A, Bm, Cm, D, h0}, y, h);
}

template <class Scalar>
void Kernels<Scalar>::selective_scan_backward(int, const ScanArgs& a, const T* u, const T* delta, const T* A,
                                              const T* Bm, const T* Cm, const T* D, const T* h0, const T* gy,
                                              const T* gh, T* gu, T* gdelta, T* gA, T* gBm, T* gCm, T* gD,
                                              T* gh0) {
  scan_backward<T>(a, {u, delta, A, Bm, Cm, D, h0}, gy, gh, {gu, gdelta, gA, gBm, gCm, gD, gh0});
}

TMEM_SELECTIVE_SCAN_KERNELS(TMEM_CPU_INSTANTIATE)

}  // namespace tmem::cpu
