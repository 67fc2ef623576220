// CPU GEMM: a packed, register-blocked xsimd kernel (BLIS-style loops:
// NC column panels of B, KC-deep slices, MC row blocks of A, MR x NR
// micro-tiles held in registers). Operands are read through arbitrary
// strides during packing, so transposed views cost nothing extra.
//
// For the small products inside fused ops (the ConvLSTM cell's 1x1x1 conv:
// M = 4C, K = Cx + C, N = one batch item's voxels) packing B for every batch
// item would cost as much as the product itself, so this header also offers
// the register tile alone: A packed once per call, B read in place.
#pragma once
#include <cstdint>

#include <xsimd/xsimd.hpp>

namespace tmem::cpu {

/// C[M,N] (row stride ldc, unit column stride) = (accumulate ? C : 0) + A B,
/// where A(i,k) = A[i*a_rs + k*a_cs] and B(k,j) = B[k*b_rs + j*b_cs].
/// `parallel` splits the work across OpenMP threads. The result does not
/// depend on the thread count: every element is summed in one fixed order.
template <class T>
void gemm(int64_t M, int64_t N, int64_t K, const T* A, int64_t a_rs, int64_t a_cs, const T* B,
          int64_t b_rs, int64_t b_cs, T* C, int64_t ldc, bool accumulate, bool parallel);

/// Makes the compiler hold v in a register: without it GCC folds the load
/// that produced a shared operand into every FMA that uses it, doubling the
/// loads of a register tile.
template <class T>
inline void keep_in_register(xsimd::batch<T>& v) {
#if defined(__GNUC__)
  typename xsimd::batch<T>::register_type r = v;
  asm("" : "+v"(r));
  v = r;
#endif
}

/// One register tile of a product whose A is packed and whose B is read in
/// place: acc[r][j] += sum_k Ap[k*MR + r] * B[k*ldb + j*L .. + L) for r < MR,
/// j < NV, L = xsimd::batch<T>::size. Every B row start B + k*ldb must be
/// aligned to the batch (ldb and B multiples of L elements). acc stays in
/// registers for small MR * NV (MR * NV + NV <= 28 on AVX-512).
template <class T, int MR, int NV>
inline void tile_kernel(int64_t K, const T* Ap, const T* B, int64_t ldb,
                        xsimd::batch<T> (&acc)[MR][NV]) {
  using V = xsimd::batch<T>;
  constexpr int64_t L = static_cast<int64_t>(V::size);
  for (int64_t k = 0; k < K; ++k) {
    V b[NV];
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) b[j] = V::load_aligned(B + k * ldb + j * L);
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const V a(Ap[k * MR + r]);
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) acc[r][j] = xsimd::fma(a, b[j], acc[r][j]);
    }
  }
}

}  // namespace tmem::cpu
