// Matrix products (docs/DESIGN.md §4), PyTorch torch.matmul semantics. CPU: own
// xsimd GEMM; CUDA: cuBLAS (float32).
#pragma once
#include "tmem/core/tensor.h"

namespace tmem {

/// Matrix product with broadcasting batch dims: a[..., M, K] @ b[..., K, N] ->
/// [broadcast(...), M, N]. A 1-D a is treated as [1, K] and a 1-D b as [K, 1],
/// the added dim removed from the result (1-D @ 1-D gives a 0-d dot product).
/// Throws ShapeError "matmul: expected a.shape[-1] == b.shape[-2], got a[4,3]
/// b[5,2]" on a mismatch, and DtypeError/DeviceError for mixed operands.
Tensor matmul(const Tensor& a, const Tensor& b);
/// Batched product of 3-D tensors a[B, M, K] @ b[B, K, N] -> [B, M, N].
Tensor bmm(const Tensor& a, const Tensor& b);

}  // namespace tmem
