// CPU GEMM: a packed, register-blocked xsimd kernel (BLIS-style loops:
// NC column panels of B, KC-deep slices, MC row blocks of A, MR x NR
// micro-tiles held in registers). Operands are read through arbitrary
// strides during packing, so transposed views cost nothing extra.
#pragma once
#include <cstdint>

namespace tmem::cpu {

/// C[M,N] (row stride ldc, unit column stride) = (accumulate ? C : 0) + A B,
/// where A(i,k) = A[i*a_rs + k*a_cs] and B(k,j) = B[k*b_rs + j*b_cs].
/// `parallel` splits row blocks across OpenMP threads.
template <class T>
void gemm(int64_t M, int64_t N, int64_t K, const T* A, int64_t a_rs, int64_t a_cs, const T* B,
          int64_t b_rs, int64_t b_cs, T* C, int64_t ldc, bool accumulate, bool parallel);

}  // namespace tmem::cpu
