// CPU GEMM, BLIS-style. C[M,N] += A[M,K] B[K,N], C row-major.
//
// Loops, outermost first:
//   ic: M in chunks of MA rows             (a packed A chunk, MA x KC, in L3)
//   pc: K in slices of KC                  (A chunk packed once, by all threads)
//   jc: N in blocks of NC columns          (a packed B block, KC x NC, in L2)
//   ir: MR-row micro-panels of the A chunk (split across threads; the A
//                                           micro-panel stays in L1)
//   jr: NR-column micro-panels of B        (streamed from L2)
// The micro-kernel keeps an MR x NR tile of C in registers (MR = 12 rows,
// NR = 2 batches: 24 accumulators) and adds it to C once per KC slice. The
// sum for every element runs over k in one fixed order, whatever the thread
// count, so results are reproducible.
//
// B is read in place (no packing) when its rows are contiguous and the
// problem is small, where packing would cost as much as the product. So is A
// when its columns are contiguous (a transposed operand, as in the backward
// products and attention's) and the product is small or narrow: its layout is
// then the packed one, [k][MR], with a column stride of a_cs instead of MR.
#include "tmem/ops/cpu/gemm.h"

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include <omp.h>

#include "tmem/ops/cpu/simd.h"

namespace tmem::cpu {

namespace {

template <class T>
struct Blocking {
  using V = xsimd::batch<T>;
  static constexpr int64_t L = static_cast<int64_t>(V::size);
  static constexpr int64_t MR = 12;
  static constexpr int64_t NR = 2 * L;
  static constexpr int64_t KC = 256;
  static constexpr int64_t NC = NR * 16;  // 512 float columns: a 512 KiB B block
  static constexpr int64_t MA = MR * 342;  // 4104 rows: a 4 MiB packed A chunk
};

// A 64-byte aligned buffer of n elements, one per thread, type and slot,
// kept for the next call (contents undefined).
template <class T>
T* scratch(size_t n, int slot) {
  thread_local std::vector<T> bufs[4];
  std::vector<T>& buf = bufs[slot];
  const size_t pad = 64 / sizeof(T);
  if (buf.size() < n + pad) buf.resize(n + pad);
  auto p = reinterpret_cast<uintptr_t>(buf.data());
  return reinterpret_cast<T*>((p + 63) & ~uintptr_t(63));
}

#if defined(__AVX512F__)
// Transposes the 16 x 16 floats in r (row i becomes column i).
inline void transpose16(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {
    r[4 * i] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    r[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    r[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    r[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j) {
      t[8 * i + j] = _mm512_shuffle_f32x4(r[8 * i + j], r[8 * i + 4 + j], 0x88);
      t[8 * i + 4 + j] = _mm512_shuffle_f32x4(r[8 * i + j], r[8 * i + 4 + j], 0xdd);
    }
  for (int j = 0; j < 8; ++j) {
    r[j] = _mm512_shuffle_f32x4(t[j], t[8 + j], 0x88);
    r[8 + j] = _mm512_shuffle_f32x4(t[j], t[8 + j], 0xdd);
  }
}
#endif

// Packs B[0:kc, j0:j0+NR) (zero past nc) as one micro-panel out[k][NR].
template <class T>
void pack_b_panel(const T* B, int64_t b_rs, int64_t b_cs, int64_t kc, int64_t nr, T* out) {
  constexpr int64_t NR = Blocking<T>::NR;
  if (b_cs == 1) {
    for (int64_t k = 0; k < kc; ++k) {
      const T* src = B + k * b_rs;
      T* dst = out + k * NR;
      int64_t j = 0;
      for (; j < nr; ++j) dst[j] = src[j];
      for (; j < NR; ++j) dst[j] = T(0);
    }
    return;
  }
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float> && NR % 16 == 0) {
    if (b_rs == 1) {
      // Columns contiguous along k (a transposed view, e.g. a weight used as
      // W^T): 16 columns x 16 k at a time, transposed in registers.
      int64_t k0 = 0;
      for (; k0 + 16 <= kc; k0 += 16)
        for (int64_t j0 = 0; j0 < NR; j0 += 16) {
          __m512 r[16];
          for (int64_t j = 0; j < 16; ++j)
            r[j] = j0 + j < nr ? _mm512_loadu_ps(B + (j0 + j) * b_cs + k0) : _mm512_setzero_ps();
          transpose16(r);
          for (int64_t k = 0; k < 16; ++k) _mm512_store_ps(out + (k0 + k) * NR + j0, r[k]);
        }
      for (; k0 < kc; ++k0)
        for (int64_t j = 0; j < NR; ++j) out[k0 * NR + j] = j < nr ? B[j * b_cs + k0] : 0.0f;
      return;
    }
  }
#endif
  // Columns contiguous along k (a transposed view): read down each column.
  for (int64_t j = 0; j < NR; ++j) {
    if (j < nr) {
      const T* src = B + j * b_cs;
      for (int64_t k = 0; k < kc; ++k) out[k * NR + j] = src[k * b_rs];
    } else {
      for (int64_t k = 0; k < kc; ++k) out[k * NR + j] = T(0);
    }
  }
}


// Packs A[i0:i0+mr, 0:kc] (zero rows past mr) as one micro-panel out[k][MR].
template <class T>
void pack_a_panel(const T* A, int64_t a_rs, int64_t a_cs, int64_t mr, int64_t kc, T* out) {
  constexpr int64_t MR = Blocking<T>::MR;
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float> && MR <= 16) {
    if (a_cs == 1) {
      // Row-major A: 16 k at a time, the rows transposed in registers.
      int64_t k0 = 0;
      for (; k0 + 16 <= kc; k0 += 16) {
        __m512 r[16];
        for (int64_t i = 0; i < 16; ++i)
          r[i] = i < mr ? _mm512_loadu_ps(A + i * a_rs + k0) : _mm512_setzero_ps();
        transpose16(r);
        for (int64_t k = 0; k < 16; ++k)
          _mm512_mask_storeu_ps(out + (k0 + k) * MR, static_cast<__mmask16>((1u << MR) - 1), r[k]);
      }
      for (; k0 < kc; ++k0)
        for (int64_t i = 0; i < MR; ++i) out[k0 * MR + i] = i < mr ? A[i * a_rs + k0] : 0.0f;
      return;
    }
  }
#endif
  if (a_cs == 1) {
    for (int64_t i = 0; i < MR; ++i) {
      if (i < mr) {
        const T* src = A + i * a_rs;
        for (int64_t k = 0; k < kc; ++k) out[k * MR + i] = src[k];
      } else {
        for (int64_t k = 0; k < kc; ++k) out[k * MR + i] = T(0);
      }
    }
    return;
  }
  for (int64_t k = 0; k < kc; ++k) {
    const T* src = A + k * a_cs;
    T* dst = out + k * MR;
    int64_t i = 0;
    for (; i < mr; ++i) dst[i] = src[i * a_rs];
    for (; i < MR; ++i) dst[i] = T(0);
  }
}

// C[0:mr, 0:nr] (row stride ldc) = (add ? C : 0) + the product over kc of an
// A micro-panel of MR rows whose columns lie at stride lda (packed: lda = MR;
// A itself: a_cs) and NR columns of B whose rows lie at stride ldb: a packed
// panel (ldb = NR, kAligned) or B itself (unaligned).
template <class T, bool kAligned>
void micro_kernel(int64_t kc, const T* Ap, int64_t lda, const T* Bp, int64_t ldb, T* C, int64_t ldc,
                  int64_t mr, int64_t nr, bool add) {
  using Bk = Blocking<T>;
  using V = typename Bk::V;
  constexpr int64_t MR = Bk::MR, L = Bk::L;
  V c0[MR], c1[MR];
  for (int64_t i = 0; i < MR; ++i) c0[i] = c1[i] = V(T(0));
  for (int64_t k = 0; k < kc; ++k) {
    const T* b = Bp + k * ldb;
    V b0 = kAligned ? V::load_aligned(b) : V::load_unaligned(b);
    V b1 = kAligned ? V::load_aligned(b + L) : V::load_unaligned(b + L);
    keep_in_register(b0);
    keep_in_register(b1);
    const T* a = Ap + k * lda;
#pragma GCC unroll 12
    for (int64_t i = 0; i < MR; ++i) {
      const V ai(a[i]);
      c0[i] = xsimd::fma(ai, b0, c0[i]);
      c1[i] = xsimd::fma(ai, b1, c1[i]);
    }
  }
  if (nr == 2 * L) {
    for (int64_t i = 0; i < mr; ++i) {
      T* row = C + i * ldc;
      if (add) {
        c0[i] += V::load_unaligned(row);
        c1[i] += V::load_unaligned(row + L);
      }
      c0[i].store_unaligned(row);
      c1[i].store_unaligned(row + L);
    }
    return;
  }
  const int64_t n0 = std::min(nr, L), n1 = nr - n0;
  for (int64_t i = 0; i < mr; ++i) {
    T* row = C + i * ldc;
    if (add) {
      c0[i] += load_head(row, n0);
      if (n1 > 0) c1[i] += load_head(row + L, n1);
    }
    store_head(row, c0[i], n0);
    if (n1 > 0) store_head(row + L, c1[i], n1);
  }
}

template <class T>
void zero_rows(int64_t M, int64_t N, T* C, int64_t ldc) {
  for (int64_t i = 0; i < M; ++i) std::fill(C + i * ldc, C + i * ldc + N, T(0));
}

}  // namespace

template <class T>
void gemm(int64_t M, int64_t N, int64_t K, const T* A, int64_t a_rs, int64_t a_cs, const T* B,
          int64_t b_rs, int64_t b_cs, T* C, int64_t ldc, bool accumulate, bool parallel) {
  using Bk = Blocking<T>;
  constexpr int64_t MR = Bk::MR, NR = Bk::NR, KC = Bk::KC, NC = Bk::NC;
  if (M == 0 || N == 0) return;
  if (K == 0) {
    if (!accumulate) zero_rows(M, N, C, ldc);
    return;
  }
  const double work = static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K);
  // Small products with contiguous B rows read B in place.
  const bool direct_b = b_cs == 1 && (M <= 4 * MR || work <= 262144.0);
  // Small or narrow products with contiguous A columns read A in place (a
  // column stride of at most 1024 elements keeps a panel's kc columns within
  // a few pages).
  const bool direct_a = a_rs == 1 && a_cs <= 1024 && (N <= 4 * NR || work <= 262144.0);
  const int nthr = parallel && work > 1048576.0 ? omp_get_max_threads() : 1;
  const int64_t kc_max = std::min(KC, K);
  // A is packed in chunks of up to MA rows (4 MiB of floats at KC = 256),
  // each chunk once per KC slice; B in blocks of KC x NC, each once per chunk.
  const int64_t MA = std::min((M + MR - 1) / MR * MR, Bk::MA);
  const int64_t nc_max = std::min(NC, (N + NR - 1) / NR * NR);
  T* ap = direct_a ? nullptr : scratch<T>(static_cast<size_t>(MA * kc_max), 0);
  T* bp = direct_b ? nullptr : scratch<T>(static_cast<size_t>(kc_max * nc_max), 1);
  // Thread `tid` of `team` takes a contiguous share of each loop (as
  // schedule(static)); `sync` is the barrier between the packing and the
  // tiles. A serial call (team 1) enters no `omp parallel` at all: libgomp
  // builds a team even for one thread, a cost that the thousands of small
  // products of a training step would pay, and it must not bind to an
  // enclosing parallel region (bmm runs serial GEMMs on several threads).
  auto body = [&](int tid, int team) {
    auto share = [&](int64_t n) {
      const int64_t per = (n + team - 1) / team;
      return std::pair<int64_t, int64_t>{std::min(n, tid * per), std::min(n, (tid + 1) * per)};
    };
    auto sync = [team] {
      if (team > 1) {
#pragma omp barrier
      }
    };
    T* eb = direct_b ? scratch<T>(static_cast<size_t>(kc_max * NR), 2) : nullptr;
    T* ea = direct_a ? scratch<T>(static_cast<size_t>(kc_max * MR), 3) : nullptr;
    for (int64_t ic = 0; ic < M; ic += MA) {
      const int64_t ma = std::min(MA, M - ic);
      const int64_t mpanels = (ma + MR - 1) / MR;
      for (int64_t pc = 0; pc < K; pc += KC) {
        const int64_t kc = std::min(KC, K - pc);
        const bool add = accumulate || pc > 0;
        // Read in place, a last panel of fewer than MR rows would load past
        // the end of A's columns: every thread packs its own copy of it.
        const bool edge_a = direct_a && ma % MR != 0;
        if (edge_a)
          pack_a_panel(A + (ic + (mpanels - 1) * MR) + pc * a_cs, a_rs, a_cs, ma % MR, kc, ea);
        if (!direct_a) {
          for (auto [q, qe] = share(mpanels); q < qe; ++q)
            pack_a_panel(A + (ic + q * MR) * a_rs + pc * a_cs, a_rs, a_cs, std::min(MR, ma - q * MR),
                         kc, ap + q * kc * MR);
          sync();
        }
        for (int64_t jc = 0; jc < N; jc += NC) {
          const int64_t nc = std::min(NC, N - jc);
          const int64_t npanels = (nc + NR - 1) / NR;
          if (!direct_b) {
            for (auto [p, pe] = share(npanels); p < pe; ++p)
              pack_b_panel(B + pc * b_rs + (jc + p * NR) * b_cs, b_rs, b_cs, kc,
                           std::min(NR, nc - p * NR), bp + p * kc * NR);
            sync();
          }
          // Read in place, a last panel narrower than NR would load past the
          // end of B's rows: that one panel is packed.
          const bool edge = direct_b && nc % NR != 0;
          if (edge)
            pack_b_panel(B + pc * b_rs + jc + (npanels - 1) * NR, b_rs, b_cs, kc, nc % NR, eb);
          auto tile = [&](int64_t q, int64_t p) {
            const int64_t i0 = q * MR, j0 = p * NR;
            const int64_t mr = std::min(MR, ma - i0), nr = std::min(NR, nc - j0);
            const bool packed_a = !direct_a || (edge_a && q == mpanels - 1);
            const T* a = !direct_a ? ap + q * kc * MR : packed_a ? ea : A + ic + i0 + pc * a_cs;
            const int64_t lda = packed_a ? MR : a_cs;
            T* c = C + (ic + i0) * ldc + jc + j0;
            if (edge && p == npanels - 1)
              micro_kernel<T, true>(kc, a, lda, eb, NR, c, ldc, mr, nr, add);
            else if (direct_b)
              micro_kernel<T, false>(kc, a, lda, B + pc * b_rs + jc + j0, b_rs, c, ldc, mr, nr, add);
            else
              micro_kernel<T, true>(kc, a, lda, bp + p * kc * NR, NR, c, ldc, mr, nr, add);
          };
          if (mpanels >= 2 * team) {
            // Threads split the A micro-panels; each keeps its panel in L1
            // while the B block streams past.
            for (auto [q, qe] = share(mpanels); q < qe; ++q)
              for (int64_t p = 0; p < npanels; ++p) tile(q, p);
          } else {
            // Few rows: threads split the B panels instead.
            for (auto [p, pe] = share(npanels); p < pe; ++p)
              for (int64_t q = 0; q < mpanels; ++q) tile(q, p);
          }
          sync();
        }
      }
    }
  };
  if (nthr > 1) {
#pragma omp parallel num_threads(nthr)
    body(omp_get_thread_num(), omp_get_num_threads());
  } else {
    body(0, 1);
  }
}

template void gemm<float>(int64_t, int64_t, int64_t, const float*, int64_t, int64_t, const float*,
                          int64_t, int64_t, float*, int64_t, bool, bool);
template void gemm<double>(int64_t, int64_t, int64_t, const double*, int64_t, int64_t,
                           const double*, int64_t, int64_t, double*, int64_t, bool, bool);

}  // namespace tmem::cpu
