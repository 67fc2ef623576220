#include "ops/cpu/gemm.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include <omp.h>
#include <xsimd/xsimd.hpp>

namespace tmem::cpu {

namespace {

template <class T>
struct Blocking {
  using B = xsimd::batch<T>;
  static constexpr int64_t W = B::size;
  static constexpr int64_t MR = 6;
  static constexpr int64_t NR = 2 * W;
  static constexpr int64_t KC = 256;
  static constexpr int64_t MC = MR * 16;
  static constexpr int64_t NC = NR * 64;
};

// Packs B[pc:pc+kc, jc:jc+nc] into NR-wide strips, zero-padded: out[strip][k][NR].
template <class T>
void pack_b(const T* B, int64_t b_rs, int64_t b_cs, int64_t kc, int64_t nc, T* out) {
  constexpr int64_t NR = Blocking<T>::NR;
  for (int64_t j0 = 0; j0 < nc; j0 += NR) {
    int64_t nr = std::min(NR, nc - j0);
    for (int64_t k = 0; k < kc; ++k) {
      const T* src = B + k * b_rs + j0 * b_cs;
      T* dst = out + (j0 / NR) * kc * NR + k * NR;
      if (b_cs == 1) {
        std::memcpy(dst, src, nr * sizeof(T));
      } else {
        for (int64_t j = 0; j < nr; ++j) dst[j] = src[j * b_cs];
      }
      for (int64_t j = nr; j < NR; ++j) dst[j] = T(0);
    }
  }
}

// Packs A[ic:ic+mc, pc:pc+kc] into MR-tall strips, zero-padded: out[strip][k][MR].
template <class T>
void pack_a(const T* A, int64_t a_rs, int64_t a_cs, int64_t mc, int64_t kc, T* out) {
  constexpr int64_t MR = Blocking<T>::MR;
  for (int64_t i0 = 0; i0 < mc; i0 += MR) {
    int64_t mr = std::min(MR, mc - i0);
    T* dst = out + (i0 / MR) * kc * MR;
    for (int64_t k = 0; k < kc; ++k) {
      for (int64_t i = 0; i < mr; ++i) dst[k * MR + i] = A[(i0 + i) * a_rs + k * a_cs];
      for (int64_t i = mr; i < MR; ++i) dst[k * MR + i] = T(0);
    }
  }
}

// tile[MR][NR] = sum_k a[k][:] x b[k][:]
template <class T>
void micro_kernel(int64_t kc, const T* a, const T* b, T* tile) {
  using Bt = typename Blocking<T>::B;
  constexpr int64_t MR = Blocking<T>::MR, W = Blocking<T>::W;
  Bt c[MR][2];
  for (int64_t i = 0; i < MR; ++i) c[i][0] = c[i][1] = Bt(T(0));
  for (int64_t k = 0; k < kc; ++k) {
    Bt b0 = Bt::load_aligned(b + k * 2 * W);
    Bt b1 = Bt::load_aligned(b + k * 2 * W + W);
    for (int64_t i = 0; i < MR; ++i) {
      Bt ai(a[k * MR + i]);
      c[i][0] = xsimd::fma(ai, b0, c[i][0]);
      c[i][1] = xsimd::fma(ai, b1, c[i][1]);
    }
  }
  for (int64_t i = 0; i < MR; ++i) {
    c[i][0].store_aligned(tile + i * 2 * W);
    c[i][1].store_aligned(tile + i * 2 * W + W);
  }
}

template <class T>
T* aligned_buffer(std::vector<T>& v, size_t n) {
  v.resize(n + 64 / sizeof(T));
  auto p = reinterpret_cast<uintptr_t>(v.data());
  return reinterpret_cast<T*>((p + 63) & ~uintptr_t(63));
}

}  // namespace

template <class T>
void gemm(int64_t M, int64_t N, int64_t K, const T* A, int64_t a_rs, int64_t a_cs, const T* B,
          int64_t b_rs, int64_t b_cs, T* C, int64_t ldc, bool accumulate, bool parallel) {
  using Bk = Blocking<T>;
  constexpr int64_t MR = Bk::MR, NR = Bk::NR, KC = Bk::KC, MC = Bk::MC, NC = Bk::NC;
  if (M == 0 || N == 0) return;
  if (K == 0) {
    if (!accumulate)
      for (int64_t i = 0; i < M; ++i) std::fill(C + i * ldc, C + i * ldc + N, T(0));
    return;
  }
  std::vector<T> bbuf;
  T* bp = aligned_buffer(bbuf, static_cast<size_t>(KC * ((std::min(NC, N) + NR - 1) / NR) * NR));
  for (int64_t jc = 0; jc < N; jc += NC) {
    int64_t nc = std::min(NC, N - jc);
    for (int64_t pc = 0; pc < K; pc += KC) {
      int64_t kc = std::min(KC, K - pc);
      bool acc = accumulate || pc > 0;
      pack_b(B + pc * b_rs + jc * b_cs, b_rs, b_cs, kc, nc, bp);
      int64_t blocks = (M + MC - 1) / MC;
#pragma omp parallel if (parallel && blocks * nc * kc > 32768 && omp_get_max_threads() > 1)
      {
        std::vector<T> abuf_v, tile_v;
        T* ap = aligned_buffer(abuf_v, static_cast<size_t>(MC * kc));
        T* tile = aligned_buffer(tile_v, static_cast<size_t>(MR * NR));
#pragma omp for schedule(dynamic)
        for (int64_t blk = 0; blk < blocks; ++blk) {
          int64_t ic = blk * MC;
          int64_t mc = std::min(MC, M - ic);
          pack_a(A + ic * a_rs + pc * a_cs, a_rs, a_cs, mc, kc, ap);
          for (int64_t j0 = 0; j0 < nc; j0 += NR) {
            int64_t nr = std::min(NR, nc - j0);
            for (int64_t i0 = 0; i0 < mc; i0 += MR) {
              int64_t mr = std::min(MR, mc - i0);
              micro_kernel(kc, ap + (i0 / MR) * kc * MR, bp + (j0 / NR) * kc * NR, tile);
              for (int64_t i = 0; i < mr; ++i) {
                T* crow = C + (ic + i0 + i) * ldc + jc + j0;
                const T* trow = tile + i * NR;
                if (acc) {
                  for (int64_t j = 0; j < nr; ++j) crow[j] += trow[j];
                } else {
                  for (int64_t j = 0; j < nr; ++j) crow[j] = trow[j];
                }
              }
            }
          }
        }
      }
    }
  }
}

template void gemm<float>(int64_t, int64_t, int64_t, const float*, int64_t, int64_t, const float*,
                          int64_t, int64_t, float*, int64_t, bool, bool);
template void gemm<double>(int64_t, int64_t, int64_t, const double*, int64_t, int64_t,
                           const double*, int64_t, int64_t, double*, int64_t, bool, bool);

}  // namespace tmem::cpu
