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

/// A diagonal selective state-space scan over T steps, independent for every
/// batch item b and channel e, with an N-dimensional state per (b, e):
///
///   h = h0[b,e,:]
///   for t = 0 .. T-1:
///     h[n] = exp(delta[b,t,e] A[e,n]) h[n] + delta[b,t,e] Bm[b,t,n] u[b,t,e]
///     y[b,t,e] = sum_n Cm[b,t,n] h[n] + D[e] u[b,t,e]
///   h_out[b,e,:] = h
///
/// u and delta [B,T,E], A [E,N], Bm and Cm [B,T,N], D [E], h0 [B,E,N] or an
/// undefined tensor (zeros); returns {y [B,T,E], h_out [B,E,N]}. delta is
/// used as given (callers apply softplus). Source: Gu & Dao 2023, "Mamba:
/// Linear-Time Sequence Modeling with Selective State Spaces", Algorithm 2
/// (the selective scan), with the zero-order-hold discretisation of A,
/// exp(delta A), and the simplified discretisation delta B of B. A model
/// that runs a long sequence in segments feeds h_out of one call as h0 of
/// the next; gradients flow through it. Empty sizes are valid: T = 0 gives
/// an empty y and h_out = h0 (zeros without h0).
///
/// One tape node with gradients w.r.t. u, delta, A, Bm, Cm, D and h0 (those
/// that need them), from the gradients of both outputs. It saves only the
/// inputs; the backward recomputes the states. On the CPU the (b, e) chains
/// run on OpenMP threads, each thread holding the T+1 states and T decay
/// factors exp(delta A) of one chain at a time, 2 (T+1) N values; the
/// gradients of A, D, Bm and Cm are sums over b or e, kept in per-item parts
/// ([B,E,N] for A; for Bm and Cm, when B < 64, about 64 [T,N] blocks
/// instead of B) and summed in a fixed order, so results do not depend on
/// the thread count. On CUDA one thread runs
/// each (b, e) (cuda/selective_scan.cu); the backward holds every state,
/// [B,E,T,N] float32, for the length of the backward.
///
/// Throws ShapeError (naming the op and the shapes at fault) when u or Bm is
/// not 3-D or an input does not have the shape listed above for the B, T, E
/// of u and the N of Bm; DtypeError for mixed or non-floating dtypes
/// (float32 on a device); DeviceError when the inputs are on different
/// devices or the device's backend has no kernel for this op.
SelectiveScanResult selective_scan(const Tensor& u, const Tensor& delta, const Tensor& A, const Tensor& Bm,
                                   const Tensor& Cm, const Tensor& D, const Tensor& h0);

}  // namespace tmem
