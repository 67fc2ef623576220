// The selective scan of Mamba: a diagonal state-space recurrence whose
// discretisation step, input and output projections vary per token, one
// fused op (one node on the tape) with a hand-written backward.
#pragma once
#include "tmem/core/tensor.h"

namespace tmem {

/// The scan's outputs.
struct SelectiveScanResult {
  Tensor y;  // [B,T,E]
  Tensor h;  // [B,E,N], the state after the last step
};

/// A diagonal selective state-space scan (Gu & Dao 2023, Mamba, Algorithm 2;
/// recurrence, memory and kernels: docs/OPS.md §4), per (b, e) with state N:
///   h[n] = exp(delta A[e,n]) h[n] + delta Bm[b,t,n] u,  y = sum_n Cm[b,t,n] h[n] + D[e] u
/// u and delta [B,T,E] (delta already softplus-ed), A [E,N], Bm and Cm
/// [B,T,N], D [E], h0 [B,E,N] or undefined (zeros); returns {y [B,T,E], h_out
/// [B,E,N]}, one fused tape node (gradients through h0 too). Throws
/// ShapeError (the shapes at fault) when u or Bm is not 3-D or an input does
/// not match the B, T, E of u and the N of Bm; DtypeError for mixed or
/// non-floating dtypes (float32 on a device); DeviceError for mixed devices
/// or a backend without the kernel.
SelectiveScanResult selective_scan(const Tensor& u, const Tensor& delta, const Tensor& A, const Tensor& Bm,
                                   const Tensor& Cm, const Tensor& D, const Tensor& h0);

}  // namespace tmem
