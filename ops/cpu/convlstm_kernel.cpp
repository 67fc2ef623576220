// convlstm3d_cell's fused CPU kernels (ops/kernel_list.h TMEM_CONVLSTM_KERNELS).
// Each batch item is one independent task (OpenMP over B). Per item the
// volume is channels-first [Cz, S]: a depthwise stage along an axis is one
// contiguous pass over each channel's S voxels, reading the neighbours at
// +-q elements (H*W, W or 1) under precomputed border masks. The 1x1x1 conv
// [4C,Cz] x [Cz,S] is small (K = Cz), so it runs as register tiles
// (cpu::tile_kernel) over a weight packed once per call, reading the
// activations in place; in the forward a tile holds the four gate rows of two
// channels, whose gates, c' and h' then follow from an L1-resident row
// block. Weight gradients are summed lane-wise per thread and reduced once at
// the end, in thread order, so results do not depend on timing.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include <xsimd/xsimd.hpp>

#include "tmem/ops/cpu/gemm.h"
#include "tmem/ops/cpu/kernels.h"
#include "tmem/ops/cpu/scratch.h"
#include "tmem/ops/cpu/simd.h"

namespace tmem::cpu {

namespace {

using Dims = ConvLstmArgs;
template <class T>
using Weights = ConvLstmWeights<T>;
template <class T>
using GradPtrs = ConvLstmGrads<T>;

// ---- vector helpers ----

template <class T>
using Vec = xsimd::batch<T>;
template <class T>
using Msk = xsimd::batch_bool<T>;

int64_t round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

// ---- the voxel layout of one call ----

// Per channel the S voxels are handled as nv batches of L lanes; working rows
// hold Sp = nv * L values (the lanes past S are kept at 0) and start on a
// batch boundary. A depthwise stage along axis a reads the neighbours at
// +-q[a] elements (H*W, W, 1) under per-batch masks that say whether the
// previous / next cell along the axis exists (zero padding otherwise). A
// masked-off lane reads a neighbouring row, or a halo of `halo` (>= H*W)
// elements in front of and behind every block of rows, and its value is
// dropped: the masks select rather than multiply by 0, so an Inf next to the
// border cannot turn into NaN.
template <class T>
struct Plan {
  static constexpr int64_t L = static_cast<int64_t>(Vec<T>::size);
  int64_t S, nv, nfull, tail, Sp, halo;
  int64_t q[3];
  std::vector<Msk<T>> prev[3], next[3];
  Msk<T> last;  // the lanes of batch nv - 1 that are voxels

  explicit Plan(const Dims& dm)
      : S(dm.S()), nv((S + L - 1) / L), tail(S - (nv - 1) * L), Sp(nv * L),
        halo(round_up(dm.H * dm.W, L)), q{dm.H * dm.W, dm.W, 1} {
    nfull = tail == L ? nv : nv - 1;
    const int64_t n[3] = {dm.D, dm.H, dm.W};
    bool bp[L], bn[L];
    for (int a = 0; a < 3; ++a)
      for (int64_t v = 0; v < nv; ++v) {
        for (int64_t l = 0; l < L; ++l) {
          const int64_t j = v * L + l;
          const int64_t i = (j / q[a]) % n[a];
          bp[l] = j < S && i > 0;
          bn[l] = j < S && i < n[a] - 1;
        }
        prev[a].push_back(Msk<T>::load_unaligned(bp));
        next[a].push_back(Msk<T>::load_unaligned(bn));
      }
    for (int64_t l = 0; l < L; ++l) bp[l] = (nv - 1) * L + l < S;
    last = Msk<T>::load_unaligned(bp);
  }

  // Runs f.template operator()<false>(v) for the batches v < nv - 1 (all
  // voxels) and then f.template operator()<true>(nv - 1), the batch that may
  // end in lanes past S. Loops written this way keep no test of v and no
  // read of the plan in their body: a vector store may alias any memory, so
  // the compiler would reload every such value after each store.
  template <class F>
  void for_batches(F&& f) const {
    const int64_t n = nv - 1;
    for (int64_t v = 0; v < n; ++v) f.template operator()<false>(v);
    f.template operator()<true>(n);
  }
  // Batch v of a tensor row of S voxels (lanes past S read as 0); kLast: v
  // may be the last batch.
  template <bool kLast>
  Vec<T> rd(const T* row, int64_t v) const {
    if (!kLast || v < nfull) return Vec<T>::load_unaligned(row + v * L);
    return load_head(row + v * L, tail);
  }
  // Writes batch v to a tensor row of S voxels (lanes past S are dropped).
  template <bool kLast>
  void wr(T* row, int64_t v, Vec<T> x) const {
    if (!kLast || v < nfull) x.store_unaligned(row + v * L);
    else store_head(row + v * L, x, tail);
  }
  // x with its lanes past S set to 0 if it is the last batch.
  template <bool kLast>
  Vec<T> clip(Vec<T> x) const {
    return kLast ? xsimd::select(last, x, Vec<T>(T(0))) : x;
  }
  // Copies a tensor row of S voxels into a working row, zeroing the lanes past S.
  void to_row(const T* src, T* dst) const {
    for_batches([&]<bool kLast>(int64_t v) { rd<kLast>(src, v).store_aligned(dst + v * L); });
  }
};

// ---- depthwise kernel-3 conv along one axis, one channel row ----

// d = k0 s[j-q] + k1 s[j] + k2 s[j+q] + bias along axis a (zero padding);
// the lanes of d past S are set to 0.
template <class T>
void conv_row(const Plan<T>& pl, int a, const T* s, T* d, T k0, T k1, T k2, T bias) {
  using V = Vec<T>;
  constexpr int64_t L = Plan<T>::L;
  const int64_t q = pl.q[a];
  const V K0(k0), K1(k1), K2(k2), Bv(bias), Z(T(0));
  const Msk<T>* mp = pl.prev[a].data();
  const Msk<T>* mn = pl.next[a].data();
  pl.for_batches([&]<bool kLast>(int64_t v) {
    const T* p = s + v * L;
    V r = Bv + K1 * V::load_aligned(p);
    r += xsimd::select(mp[v], K0 * V::load_unaligned(p - q), Z);
    r += xsimd::select(mn[v], K2 * V::load_unaligned(p + q), Z);
    pl.template clip<kLast>(r).store_aligned(d + v * L);
  });
}

// Where conv_back_row writes dL/dx: nowhere, a working row, a tensor row.
enum class BackOut { kNone, kRow, kTensor };

// conv_back_row for one case known at compile time (kParams: aw or ab), so
// that its loop body holds no test.
template <class T, bool kParams, BackOut kOut>
void conv_back_row_as(const Plan<T>& pl, int a, const T* x, const T* g, const T* k, Vec<T>* aw,
                      Vec<T>* ab, T* out) {
  using V = Vec<T>;
  constexpr int64_t L = Plan<T>::L;
  const int64_t q = pl.q[a];
  const Msk<T>* mp = pl.prev[a].data();
  const Msk<T>* mn = pl.next[a].data();
  const V Z(T(0)), K0(k[0]), K1(k[1]), K2(k[2]);
  V s0 = aw ? aw[0] : Z, s1 = aw ? aw[1] : Z, s2 = aw ? aw[2] : Z, sb = ab ? *ab : Z;
  pl.for_batches([&]<bool kLast>(int64_t v) {
    const T* gp = g + v * L;
    const V gv = V::load_aligned(gp);
    if constexpr (kParams) {
      sb += gv;
      const T* p = x + v * L;
      s1 = xsimd::fma(gv, V::load_aligned(p), s1);
      s0 += xsimd::select(mp[v], gv * V::load_unaligned(p - q), Z);
      s2 += xsimd::select(mn[v], gv * V::load_unaligned(p + q), Z);
    }
    if constexpr (kOut != BackOut::kNone) {
      V r = K1 * gv;
      r += xsimd::select(mp[v], K2 * V::load_unaligned(gp - q), Z);
      r += xsimd::select(mn[v], K0 * V::load_unaligned(gp + q), Z);
      if constexpr (kOut == BackOut::kTensor) pl.template wr<kLast>(out, v, r);
      else pl.template clip<kLast>(r).store_aligned(out + v * L);
    }
  });
  if (aw) aw[0] = s0, aw[1] = s1, aw[2] = s2;
  if (ab) *ab = sb;
}

// The backward of d = conv_row(x) (taps k0, k1, k2) for one channel row,
// given g = dL/dd in a working row: adds the lane-wise partial sums of
// dL/d(taps) to aw[0..2] (if aw) and of dL/d(bias) to *ab (if ab), and, if
// out, writes dL/dx = the transposed conv of g (into a working row when
// to_tensor is false, else into a tensor row of S voxels). One pass over g.
template <class T>
void conv_back_row(const Plan<T>& pl, int a, const T* x, const T* g, const T* k, Vec<T>* aw,
                   Vec<T>* ab, T* out, bool to_tensor) {
  auto run = [&]<BackOut kOut>() {
    if (aw || ab) conv_back_row_as<T, true, kOut>(pl, a, x, g, k, aw, ab, out);
    else conv_back_row_as<T, false, kOut>(pl, a, x, g, k, aw, ab, out);
  };
  if (!out) run.template operator()<BackOut::kNone>();
  else if (to_tensor) run.template operator()<BackOut::kTensor>();
  else run.template operator()<BackOut::kRow>();
}

// ---- weights, packed once per call ----

// The 1x1x1 conv's weights as A panels of tile_kernel (8 rows each):
//  fwd: channel pair (2u, 2u+1) -> rows (i, f, o, g) of channel 2u then of
//       2u+1, so one tile yields all four gates of two channels, [Cz][8] each,
//       with their biases fwd_bias[8];
//  bwd: pw^T for the input gradient da3 = pw^T dP, z channels 8t..8t+7, [4C][8].
// Rows past C (odd C) or past Cz are zero.
template <class T>
struct Packed {
  int64_t npair, nt8;
  Scratch<T> fwd, fwd_bias, bwd;
  Packed(const Dims& dm, const T* pw, const T* pb, bool need_bwd)
      : npair((dm.C + 1) / 2),
        nt8((dm.Cz() + 7) / 8),
        fwd("convlstm3d_cell", npair * dm.Cz() * 8),
        fwd_bias("convlstm3d_cell", npair * 8),
        bwd("convlstm3d_cell backward", need_bwd ? nt8 * 4 * dm.C * 8 : 0) {
    const int64_t C = dm.C, Cz = dm.Cz(), C4 = 4 * C;
    for (int64_t u = 0; u < npair; ++u)
      for (int64_t r = 0; r < 8; ++r) {
        const int64_t ch = 2 * u + r / 4, gate = r % 4;
        if (ch >= C) continue;
        const int64_t src = gate * C + ch;
        if (pb) fwd_bias[u * 8 + r] = pb[src];
        for (int64_t k = 0; k < Cz; ++k) fwd[(u * Cz + k) * 8 + r] = pw[src * Cz + k];
      }
    if (!need_bwd) return;
    for (int64_t t = 0; t < nt8; ++t)
      for (int64_t k = 0; k < C4; ++k)
        for (int64_t i = 0; i < 8 && 8 * t + i < Cz; ++i)
          bwd[(t * C4 + k) * 8 + i] = pw[k * Cz + 8 * t + i];
  }
};

// Batch items in parallel when there are several and the work is worth it.
bool batch_parallel(const Dims& dm) {
  return dm.B > 1 && omp_get_max_threads() > 1 && dm.B * dm.S() * dm.Cz() * 4 * dm.C >= 65536;
}

// z = cat(x[b], h[b]) channel ch as a tensor row of S voxels.
template <class T>
const T* z_row(const Dims& dm, const T* x, const T* h, int64_t b, int64_t ch) {
  const int64_t S = dm.S();
  return ch < dm.Cx ? x + (b * dm.Cx + ch) * S : h + (b * dm.C + ch - dm.Cx) * S;
}

// Runs f.template operator()<NV>(v0) over the batches of a row in tiles of
// NV = 3 batches (then 2 or 1 for the rest).
template <class F>
void for_tiles(int64_t nv, F&& f) {
  int64_t v0 = 0;
  for (; v0 + 3 <= nv; v0 += 3) f.template operator()<3>(v0);
  if (nv - v0 == 2) f.template operator()<2>(v0);
  else if (nv - v0 == 1) f.template operator()<1>(v0);
}

// The depthwise stack for z channels [c0, c1) of item b, stage by stage (so
// a stage never reads, at an unaligned offset, a row it has just stored):
// z rows (copied from x and h) into zb, a1 into b1, a2 into b2, a3 into a3;
// row ch - c0 of each at stride Sp.
template <class T>
void depthwise_stages(const Dims& dm, const Plan<T>& pl, const Weights<T>& w, const T* x,
                      const T* h, int64_t b, int64_t c0, int64_t c1, T* zb, T* b1, T* b2, T* a3) {
  const int64_t Sp = pl.Sp;
  for (int64_t ch = c0; ch < c1; ++ch) pl.to_row(z_row(dm, x, h, b, ch), zb + (ch - c0) * Sp);
  const T* in[3] = {zb, b1, b2};
  T* out[3] = {b1, b2, a3};
  for (int a = 0; a < 3; ++a)
    for (int64_t ch = c0; ch < c1; ++ch) {
      const T* k = w.dw[a] + 3 * ch;
      conv_row(pl, a, in[a] + (ch - c0) * Sp, out[a] + (ch - c0) * Sp, k[0], k[1], k[2],
               w.db[a][ch]);
    }
}

// ---- forward ----

// Per batch item: the depthwise stack in blocks of 8 channels (L1-resident),
// writing a3 [Cz, Sp]; then per channel pair the 1x1x1 conv in register
// tiles (bias first) into P [8, Sp], and from P the gates, c' and h'. gates
// (saved for backward, [B, 4C, Sp]) may be null.
template <class T>
void cell_forward(const Dims& dm, const Plan<T>& pl, const Packed<T>& pk, const Weights<T>& w,
                  const T* x, const T* h, const T* c, T* gates, T* cn, T* hn) {
  using V = Vec<T>;
  constexpr int64_t L = Plan<T>::L;
  const int64_t C = dm.C, Cz = dm.Cz(), S = dm.S(), Sp = pl.Sp, halo = pl.halo;
  constexpr int64_t kBlock = 8;
  // z, a1, a2 of a block of kBlock channels, each with a halo; a3 [Cz, Sp];
  // the pre-activations P [8, Sp] of one channel pair. Zeroed, so every lane
  // a masked read may touch holds a finite value.
  const int64_t blk = halo + kBlock * Sp + halo;
  ThreadScratch<T> scratch("convlstm3d_cell", 3 * blk + Cz * Sp + 8 * Sp);
#pragma omp parallel if (batch_parallel(dm))
  {
    T* ws = scratch.slot();
    T* a3 = ws + 3 * blk;
    T* P = a3 + Cz * Sp;
#pragma omp for schedule(static) nowait
    for (int64_t b = 0; b < dm.B; ++b) {
      for (int64_t c0 = 0; c0 < Cz; c0 += kBlock)
        depthwise_stages(dm, pl, w, x, h, b, c0, std::min(Cz, c0 + kBlock), ws + halo,
                         ws + blk + halo, ws + 2 * blk + halo, a3 + c0 * Sp);
      for (int64_t u = 0; u < pk.npair; ++u) {
        const T* Ap = pk.fwd.data() + u * Cz * 8;
        const T* bias = pk.fwd_bias.data() + u * 8;
        for_tiles(pl.nv, [&]<int NV>(int64_t v0) {
          V acc[8][NV];
          for (int r = 0; r < 8; ++r)
            for (int j = 0; j < NV; ++j) acc[r][j] = V(bias[r]);
          tile_kernel<T, 8, NV>(Cz, Ap, a3 + v0 * L, Sp, acc);
          T* out = P + v0 * L;
          const int64_t ld = Sp;  // a local, not reloaded after each store
          for (int r = 0; r < 8; ++r)
            for (int j = 0; j < NV; ++j) acc[r][j].store_aligned(out + r * ld + j * L);
        });
        // The gates of the pair from the pre-activations P (rows i, f, o, g
        // of channel 2u, then of 2u + 1), then c' and h'. Two passes over
        // the voxels, so that no chain of transcendentals waits on another
        // (tanh(c') needs c', which needs three activations): the first
        // leaves c' and o in P's rows i and f.
        for (int e = 0; e < 2 && 2 * u + e < C; ++e) {
          const int64_t ch = 2 * u + e;
          const int64_t off = (b * C + ch) * S;
          T *p0 = P + 4 * e * Sp, *p1 = p0 + Sp, *p2 = p1 + Sp, *p3 = p2 + Sp;
          T* g = gates ? gates + (b * 4 * C + ch) * Sp : nullptr;
          const int64_t gs = C * Sp;  // from one gate's row to the next's
          const T* cb = c + off;
          T *cnb = cn + off, *hnb = hn + off;
          pl.for_batches([&]<bool kLast>(int64_t v) {
            const int64_t j = v * L;
            const V i = sigmoid_v<T>(V::load_aligned(p0 + j));
            const V f = sigmoid_v<T>(V::load_aligned(p1 + j));
            const V o = sigmoid_v<T>(V::load_aligned(p2 + j));
            const V gg = tanh_v<T>(V::load_aligned(p3 + j));
            const V c2 = f * pl.template rd<kLast>(cb, v) + i * gg;
            if (g) {
              stream_store(g + j, i);
              stream_store(g + gs + j, f);
              stream_store(g + 2 * gs + j, o);
              stream_store(g + 3 * gs + j, gg);
            }
            pl.template wr<kLast>(cnb, v, c2);
            c2.store_aligned(p0 + j);
            o.store_aligned(p1 + j);
          });
          pl.for_batches([&]<bool kLast>(int64_t v) {
            const int64_t j = v * L;
            const V hv = V::load_aligned(p1 + j) * tanh_v<T>(V::load_aligned(p0 + j));
            pl.template wr<kLast>(hnb, v, hv);
          });
        }
      }
    }
    // The gates went past the caches (read only by the backward, much later).
    stream_fence();
  }
}

// ---- backward ----

// Per-thread lane-wise partial sums of the weight gradients (in batches):
// pw [4C][Cz], pb [4C], dw [3][Cz][3], db [3][Cz]. Summed over lanes and then
// over threads in thread order after the loop, so the result does not depend
// on timing.
struct PartialLayout {
  int64_t pw, pb, dw, db, total;
  explicit PartialLayout(const Dims& dm) {
    const int64_t C4 = 4 * dm.C, Cz = dm.Cz();
    pw = 0;
    pb = C4 * Cz;
    dw = pb + C4;
    db = dw + 9 * Cz;
    total = db + 3 * Cz;
  }
};

// acc[r][c] += sum over batches of dP row r0+r times a3 row c0+c, lane-wise
// (acc rows of Cz batches).
template <class T, int RT, int CT>
void dpw_tile(int64_t nv, const T* dP, const T* a3, int64_t Sp, Vec<T>* acc, int64_t Cz) {
  using V = Vec<T>;
  constexpr int64_t L = Plan<T>::L;
  V s[RT][CT];
  for (int r = 0; r < RT; ++r)
    for (int c = 0; c < CT; ++c) s[r][c] = acc[r * Cz + c];
  for (int64_t v = 0; v < nv; ++v) {
    V p[RT], a[CT];
    for (int r = 0; r < RT; ++r) {
      p[r] = V::load_aligned(dP + r * Sp + v * L);
      keep_in_register(p[r]);
    }
    for (int c = 0; c < CT; ++c) {
      a[c] = V::load_aligned(a3 + c * Sp + v * L);
      keep_in_register(a[c]);
    }
    for (int r = 0; r < RT; ++r)
      for (int c = 0; c < CT; ++c) s[r][c] = xsimd::fma(p[r], a[c], s[r][c]);
  }
  for (int r = 0; r < RT; ++r)
    for (int c = 0; c < CT; ++c) acc[r * Cz + c] = s[r][c];
}

// Per batch item: (1) the gate gradients dP [4C, Sp] and dL/dc; (2) if a
// weight gradient needs them, the depthwise stages z, a1, a2, a3 again; (3)
// dpw += dP a3^T and da3 = pw^T dP in registers; (4) stage by stage down the
// depthwise stack (W, H, D): per channel row one pass for the tap and bias
// gradients and the transposed conv, ending in dL/dx or dL/dh.
template <class T>
void cell_backward(const Dims& dm, const Plan<T>& pl, const Packed<T>& pk, const Weights<T>& w,
                   const T* x, const T* h, const T* c, const T* cn, const T* gates, const T* ghn,
                   const T* gcn, const GradPtrs<T>& gr) {
  using V = Vec<T>;
  constexpr int64_t L = Plan<T>::L;
  const int64_t C = dm.C, Cz = dm.Cz(), C4 = 4 * C, S = dm.S(), Sp = pl.Sp, halo = pl.halo;
  const bool need_dz = gr.x || gr.h;
  const bool need_a1 = need_dz || gr.dw[0] || gr.db[0];
  const bool need_a2 = need_a1 || gr.dw[1] || gr.db[1];
  const bool need_a3 = need_a2 || gr.dw[2] || gr.db[2];
  const bool need_p = need_a3 || gr.pw || gr.pb;
  const bool recompute = gr.pw || gr.dw[0] || gr.dw[1] || gr.dw[2];
  const PartialLayout lay(dm);
  const bool par = batch_parallel(dm);
  const int nthr = par ? omp_get_max_threads() : 1;
  Scratch<V> partial("convlstm3d_cell backward", nthr * lay.total);
  // Scratch: blocks [Cz, Sp] with a halo in front and behind: z, a1, a2 (the
  // inputs of the D, H, W stages) and two for the gradient on its way down
  // the stack; a3 [Cz, Sp]; dP [4C, Sp].
  const int64_t blk = halo + Cz * Sp + halo;
  ThreadScratch<T> scratch("convlstm3d_cell backward", need_p ? 5 * blk + Cz * Sp + C4 * Sp : 0);
  int used_threads = 1;
#pragma omp parallel if (par)
  {
    if (omp_get_thread_num() == 0) used_threads = omp_get_num_threads();
    V* part = partial.data() + omp_get_thread_num() * lay.total;
    T* ws = need_p ? scratch.slot() : nullptr;
    T *stage[3] = {}, *grad_blk[2] = {}, *a3 = nullptr, *dP = nullptr;  // unused without ws
    if (ws) {
      stage[0] = ws + halo;  // z, a1, a2
      stage[1] = ws + blk + halo;
      stage[2] = ws + 2 * blk + halo;
      grad_blk[0] = ws + 3 * blk + halo;
      grad_blk[1] = ws + 4 * blk + halo;
      a3 = ws + 5 * blk;
      dP = a3 + Cz * Sp;
    }
#pragma omp for schedule(static)
    for (int64_t b = 0; b < dm.B; ++b) {
      // (1) dP rows (i, f, o, g) x C and dL/dc.
      for (int64_t ch = 0; ch < C; ++ch) {
        const int64_t off = (b * C + ch) * S;
        const T* gt = gates + (b * C4 + ch) * Sp;
        const int64_t gs = C * Sp;  // from one gate's row to the next's
        const T *cb = c + off, *cnb = cn + off, *ghb = ghn + off, *gcb = gcn + off;
        T* dcb = gr.c ? gr.c + off : nullptr;
        T* dp = need_p ? dP + ch * Sp : nullptr;
        V* pb = gr.pb ? part + lay.pb + ch : nullptr;  // pb rows ch, C + ch, 2C + ch, 3C + ch
        V sum[4];
        for (int k = 0; k < 4; ++k) sum[k] = pb ? pb[k * C] : V(T(0));
        pl.for_batches([&]<bool kLast>(int64_t v) {
          const int64_t j = v * L;
          const V i = V::load_aligned(gt + j), f = V::load_aligned(gt + gs + j);
          const V o = V::load_aligned(gt + 2 * gs + j), g = V::load_aligned(gt + 3 * gs + j);
          const V tc = tanh_v<T>(pl.template rd<kLast>(cnb, v));
          const V gh = pl.template rd<kLast>(ghb, v);
          const V dc2 = pl.template rd<kLast>(gcb, v) + gh * o * (V(1) - tc * tc);
          if (dcb) pl.template wr<kLast>(dcb, v, dc2 * f);
          if (!dp) return;
          const V di = dc2 * g * i * (V(1) - i);
          const V df = dc2 * pl.template rd<kLast>(cb, v) * f * (V(1) - f);
          const V dO = gh * tc * o * (V(1) - o);
          const V dg = dc2 * i * (V(1) - g * g);
          const V d[4] = {pl.template clip<kLast>(di), pl.template clip<kLast>(df),
                          pl.template clip<kLast>(dO), pl.template clip<kLast>(dg)};
          for (int k = 0; k < 4; ++k) {
            d[k].store_aligned(dp + k * gs + j);
            sum[k] += d[k];
          }
        });
        if (pb)
          for (int k = 0; k < 4; ++k) pb[k * C] = sum[k];
      }
      if (!need_p) continue;
      // (2) The depthwise stages, kept for the weight gradients.
      if (recompute) depthwise_stages(dm, pl, w, x, h, b, 0, Cz, stage[0], stage[1], stage[2], a3);
      // (3) dpw += dP a3^T (lane-wise), da3 = pw^T dP.
      if (gr.pw) {
        V* acc = part + lay.pw;
        for (int64_t r = 0; r < C4; r += 4) {
          int64_t c0 = 0;
          for (; c0 + 4 <= Cz; c0 += 4)
            dpw_tile<T, 4, 4>(pl.nv, dP + r * Sp, a3 + c0 * Sp, Sp, acc + r * Cz + c0, Cz);
          for (; c0 < Cz; ++c0)
            dpw_tile<T, 4, 1>(pl.nv, dP + r * Sp, a3 + c0 * Sp, Sp, acc + r * Cz + c0, Cz);
        }
      }
      if (!need_a3) continue;
      for (int64_t t = 0; t < pk.nt8; ++t) {
        const T* Ap = pk.bwd.data() + t * C4 * 8;
        const int64_t nrow = std::min<int64_t>(8, Cz - 8 * t);
        for_tiles(pl.nv, [&]<int NV>(int64_t v0) {
          V acc[8][NV];
          for (int r = 0; r < 8; ++r)
            for (int j = 0; j < NV; ++j) acc[r][j] = V(T(0));
          tile_kernel<T, 8, NV>(C4, Ap, dP + v0 * L, Sp, acc);
          T* out = grad_blk[0] + 8 * t * Sp + v0 * L;
          const int64_t ld = Sp, n = nrow;  // locals, not reloaded after each store
          for (int64_t r = 0; r < n; ++r)
            for (int j = 0; j < NV; ++j) acc[r][j].store_aligned(out + r * ld + j * L);
        });
      }
      // (4) Down the stack, stage by stage: W (input a2), H (a1), D (z); the
      // D stage writes dL/dz straight into dL/dx and dL/dh.
      const bool need_below[3] = {need_dz, need_a1, need_a2};
      int cur = 0;
      for (int ax = 2; ax >= 0; --ax) {
        const bool params = gr.dw[ax] || gr.db[ax];
        if (!params && !need_below[ax]) break;
        for (int64_t ch = 0; ch < Cz; ++ch) {
          T* out = nullptr;
          if (need_below[ax] && ax > 0) out = grad_blk[cur ^ 1] + ch * Sp;
          else if (need_below[ax] && ch < dm.Cx && gr.x) out = gr.x + (b * dm.Cx + ch) * S;
          else if (need_below[ax] && ch >= dm.Cx && gr.h) out = gr.h + (b * C + ch - dm.Cx) * S;
          if (!params && !out) continue;
          conv_back_row(pl, ax, stage[ax] + ch * Sp, grad_blk[cur] + ch * Sp, w.dw[ax] + 3 * ch,
                        gr.dw[ax] ? part + lay.dw + (ax * Cz + ch) * 3 : nullptr,
                        gr.db[ax] ? part + lay.db + ax * Cz + ch : nullptr, out, ax == 0);
        }
        cur ^= 1;
      }
    }
  }
  // Lanes, then threads in order.
  auto reduce = [&](T* dst, int64_t off, int64_t n) {
    if (!dst) return;
    for (int64_t k = 0; k < n; ++k) {
      T s = T(0);
      for (int t = 0; t < used_threads; ++t) s += xsimd::hadd(partial[t * lay.total + off + k]);
      dst[k] = s;
    }
  };
  reduce(gr.pw, lay.pw, C4 * Cz);
  reduce(gr.pb, lay.pb, C4);
  for (int ax = 0; ax < 3; ++ax) {
    reduce(gr.dw[ax], lay.dw + ax * Cz * 3, Cz * 3);
    reduce(gr.db[ax], lay.db + ax * Cz, Cz);
  }
}

}  // namespace

template <class Scalar>
int64_t Kernels<Scalar>::convlstm3d_cell_gates_row(int, const ConvLstmArgs& a) {
  return Plan<T>(a).Sp;
}

template <class Scalar>
void Kernels<Scalar>::convlstm3d_cell_forward(int, const ConvLstmArgs& a, const ConvLstmWeights<T>& w, const T* x,
                                              const T* h, const T* c, T* gates, T* cn, T* hn) {
  const Plan<T> pl(a);
  const Packed<T> pk(a, w.pw, w.pb, false);
  cell_forward<T>(a, pl, pk, w, x, h, c, gates, cn, hn);
}

template <class Scalar>
void Kernels<Scalar>::convlstm3d_cell_backward(int, const ConvLstmArgs& a, const ConvLstmWeights<T>& w, const T* x,
                                               const T* h, const T* c, const T* cn, const T* gates, const T* ghn,
                                               const T* gcn, const ConvLstmGrads<T>& g) {
  const Plan<T> pl(a);
  const Packed<T> pk(a, w.pw, nullptr, true);
  cell_backward<T>(a, pl, pk, w, x, h, c, cn, gates, ghn, gcn, g);
}

TMEM_CONVLSTM_KERNELS(TMEM_CPU_INSTANTIATE)

}  // namespace tmem::cpu
