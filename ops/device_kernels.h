// The op kernels a device backend gives ops/ (docs/DESIGN.md §5): one struct of
// function pointers per device kind, found through the backend registered in
// core/device_backend.h (DeviceBackend::ops), filled by cuda/backend.cu.
// ops/ does everything but the arithmetic: it checks shapes, dtypes and
// devices, makes the outputs, builds the launch arguments and records the
// tape; a kernel only computes. Compute kernels take float32, the dtype every
// device has (ops/dispatch.h checks it). C++17, so nvcc includes it too.
#pragma once
#include <array>

#include "tmem/core/device_backend.h"
#include "tmem/core/op_id.h"

namespace tmem {

/// The scalars of a unary op: add_scalar and mul_scalar s = a, pow_scalar
/// p = a, clamp lo = a and hi = b; unused otherwise.
struct UnaryParams {
  double a = 0.0;
  double b = 0.0;
};

/// One float32 matrix product per batch item, c[i] = a[i] @ b[i] with a[i]
/// [m, k], b[i] [k, n] and c[i] [m, n] row-major contiguous (c[i] at
/// c + i m n). An operand is row-major (element (r, q) at r * ld + q) or,
/// with col_major, column-major (at r + q * ld); consecutive batch items are
/// `stride` elements apart (0: one matrix for every item).
struct GemmArgs {
  int device = 0;
  int64_t batch = 1, m = 0, n = 0, k = 0;
  const float* a = nullptr;
  bool a_col_major = false;
  int64_t lda = 0, stride_a = 0;
  const float* b = nullptr;
  bool b_col_major = false;
  int64_t ldb = 0, stride_b = 0;
  float* c = nullptr;
};

/// The scalars of one AdamW update (nn/optim.h, PyTorch's torch.optim.AdamW)
/// at step t: p = p * decay; m = beta1 m + (1 - beta1) g;
/// v = beta2 v + (1 - beta2) g^2; p -= step_size m / (sqrt(v) / bc2_sqrt + eps)
/// with decay = 1 - lr wd, step_size = lr / (1 - beta1^t) and
/// bc2_sqrt = sqrt(1 - beta2^t).
struct AdamWScalars {
  double beta1 = 0.9, beta2 = 0.999, decay = 1.0, step_size = 0.0, bc2_sqrt = 1.0, eps = 1e-8;
};

/// The scalars of one SGD update (PyTorch's torch.optim.SGD): d = g + wd p;
/// with momentum, b = d on the first step, else b = momentum b + d, and
/// d = b; then p -= lr d.
struct SgdScalars {
  double lr = 0.0, momentum = 0.0, weight_decay = 0.0;
  bool first = false;
};

/// A device's op kernels. Each takes the device index first; all run in order
/// on the device's work queue and throw DeviceError on a failed launch.
struct OpKernels {
  /// The ops whose forward and backward run on this device (indexed by OpId),
  /// shown by the op table (`tmem ops`).
  std::array<bool, kOpCount> implemented{};
  /// out = f(x) for a unary elementwise op (neg exp log sqrt rsqrt
  /// reciprocal abs relu gelu gelu_tanh silu sigmoid tanh softplus clamp
  /// add_scalar mul_scalar pow_scalar); args {out, x}, x broadcast to out.
  void (*unary_forward)(int device, OpId op, UnaryParams p, const StridedArgs<2>& args);
  /// The input gradient of a unary op; args {gx, s, g}. s is what the op
  /// saves for backward (ops/elementwise.cpp): the input for pow_scalar log
  /// abs gelu gelu_tanh silu softplus clamp, the output for exp sqrt rsqrt
  /// reciprocal relu sigmoid tanh, and g itself for add_scalar mul_scalar neg.
  void (*unary_backward)(int device, OpId op, UnaryParams p, const StridedArgs<3>& args);
  /// out = a (op) b for add sub mul div pow; args {out, a, b}, broadcast.
  void (*binary_forward)(int device, OpId op, const StridedArgs<3>& args);
  /// pow's gradient at the broadcast shape (ops/ sums it back): input 0:
  /// g p x^(p-1), 0 where p == 0; input 1: g y log(x), 0 where x == 0 and
  /// p >= 0. args {d, g, x, p, y}.
  void (*pow_backward)(int device, int input, const StridedArgs<5>& args);
  /// out = c != 0 ? a : b; args {out, c, a, b}, broadcast.
  void (*where_forward)(int device, const StridedArgs<4>& args);
  /// out[i] = scale * (x[i len] + ... + x[i len + len - 1]) for i < rows
  /// (x [rows, len] and out [rows] contiguous; len 0 gives 0).
  void (*sum_rows)(int device, const float* x, float* out, int64_t rows, int64_t len, double scale);
  /// The products GemmArgs describes (m, n, k > 0).
  void (*gemm)(const GemmArgs& args);

  // ---- reductions and shape ops: max min var index_select gather cat pad ----
  // cat and pad have no kernel of their own: they are the backend's fill and
  // copy into slices of the output (any dtype), and their backward slices.
  /// max (is_max) or min of each row of x [O, R] (contiguous, R > 0):
  /// values[i] = the extreme of row i, indices[i] its first index; a NaN
  /// counts as the extreme (the first NaN wins). values and indices [O].
  void (*extreme_rows)(int device, const float* x, float* values, int64_t* indices, int64_t O, int64_t R,
                       bool is_max);
  /// The backward of max/min: rows[i R + indices[i]] = g[i] for i < O
  /// (g, indices [O]; rows [O, R] contiguous, already zero elsewhere).
  void (*extreme_rows_backward)(int device, const float* g, const int64_t* indices, float* rows, int64_t O,
                                int64_t R);
  /// Variance of each row of x [O, R] (contiguous), in two passes:
  /// mean[i] = sum_k x[i, k] / R, out[i] = sum_k (x[i, k] - mean[i])^2 / denom
  /// (denom = R - correction; out and mean [O]).
  void (*var_rows)(int device, const float* x, float* out, float* mean, int64_t O, int64_t R, double denom);
  /// var's input gradient gx = (x - mean) * g * scale (scale = 2 / denom);
  /// args {gx, x, mean, g}, mean and g broadcast to x's shape.
  void (*var_backward)(int device, const StridedArgs<4>& args, double scale);
  /// index_select along the middle dim: a [P, N, Q], index [K] with values
  /// in [0, N) (ops/ checks them), out [P, K, Q], all contiguous:
  /// out[p, k, q] = a[p, index[k], q].
  void (*index_select_forward)(int device, const float* a, const int64_t* index, float* out, int64_t P,
                               int64_t N, int64_t Q, int64_t K);
  /// Its backward: ga [P, N, Q] (contiguous, zeroed by ops/) +=
  /// g [P, K, Q] scattered by index: ga[p, index[k], q] += g[p, k, q].
  void (*index_select_backward)(int device, const float* g, const int64_t* index, float* ga, int64_t P,
                                int64_t N, int64_t Q, int64_t K);
  /// gather over index's shape; args {out, index (int64), a} with a's stride
  /// along the gathered dim 0 and `step` that dim's real stride:
  /// out[o0] = a[o2 + index[o1] * step] (index values in range, checked by ops/).
  void (*gather_forward)(int device, const StridedArgs<3>& args, int64_t step);
  /// Its backward; args {ga (zeroed by ops/), index, g} with ga's stride along
  /// the gathered dim 0 and `step` its real stride: ga[o0 + index[o1] * step] += g[o2].
  void (*gather_backward)(int device, const StridedArgs<3>& args, int64_t step);

  // ---- nn ops: softmax log_softmax layer_norm embedding cross_entropy dropout ----
  // Rows are contiguous float32 [rows, len] (ops/ moves the reduced dim last).
  /// y = softmax(x) per row (log: log_softmax), x and y [rows, len]: with m
  /// the row max, exp(x - m) / sum exp(x - m), or (x - m) - log sum exp(x - m).
  /// A row that is all -inf gives 0 (log: -inf).
  void (*softmax_forward)(int device, bool log, const float* x, float* y, int64_t rows, int64_t len);
  /// The input gradient gx [rows, len] of softmax_forward from its output y
  /// and the output gradient g [rows, len]: softmax gx = y (g - sum(g y));
  /// log_softmax gx = g - exp(y) sum(g), 0 on a row whose y is all -inf.
  void (*softmax_backward)(int device, bool log, const float* y, const float* g, float* gx,
                           int64_t rows, int64_t len);
  /// layer_norm of x [N, C] over C: mean[N], rstd[N] = 1/sqrt(biased var +
  /// eps) (two passes), y [N, C] = (x - mean) rstd weight + bias; weight,
  /// bias [C] or null (1 and 0).
  void (*layer_norm_forward)(int device, const float* x, const float* weight, const float* bias,
                             float* y, float* mean, float* rstd, int64_t rows, int64_t cols,
                             double eps);
  /// layer_norm's input gradient gx [N, C] from x, g [N, C], weight [C] (or
  /// null) and the forward's mean, rstd [N]: dxhat = g weight,
  /// gx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)).
  void (*layer_norm_backward_input)(int device, const float* x, const float* g, const float* weight,
                                    const float* mean, const float* rstd, float* gx, int64_t rows,
                                    int64_t cols);
  /// layer_norm's weight and bias gradients [C] (either null: not computed):
  /// gweight = sum over the N rows of g xhat, gbias = sum of g.
  void (*layer_norm_backward_params)(int device, const float* x, const float* g, const float* mean,
                                     const float* rstd, float* gweight, float* gbias, int64_t rows,
                                     int64_t cols);
  /// out[k, :] = weight[indices[k], :] for k < count: weight [V, D], indices
  /// [count] int64 in [0, V) (ops/ checks the range), out [count, D].
  void (*embedding_forward)(int device, const float* weight, const int64_t* indices, float* out,
                            int64_t count, int64_t dim);
  /// gweight[indices[k], :] += g[k, :] for k < count (gweight [V, D], zeroed
  /// by ops/; repeated indices add up, in no fixed order).
  void (*embedding_backward)(int device, const int64_t* indices, const float* g, float* gweight,
                             int64_t count, int64_t dim);
  /// Per-sample cross-entropy loss[N] from lsm = log_softmax(logits) [N, C]
  /// and target [N] int64 (in [0, C) or ignore_index; ops/ checks it):
  /// loss[n] = -(1 - eps) lsm[n, t] - eps mean_c lsm[n, c], 0 where
  /// t == ignore_index (eps: label smoothing).
  void (*cross_entropy_forward)(int device, const float* lsm, const int64_t* target, float* loss,
                                int64_t samples, int64_t classes, int64_t ignore_index,
                                double label_smoothing);
  /// The logits gradient gx [N, C]: s (exp(lsm) - eps / C), minus s (1 - eps)
  /// at the target, 0 on ignored samples; s = g[n] / divisor when per_sample
  /// (g [N], reduction "none"), else g[0] / divisor (g [], "sum": divisor 1,
  /// "mean": the number of samples not ignored).
  void (*cross_entropy_backward)(int device, const float* lsm, const int64_t* target, const float* g,
                                 bool per_sample, double divisor, float* gx, int64_t samples,
                                 int64_t classes, int64_t ignore_index, double label_smoothing);
  /// out = x * mask elementwise over n contiguous elements: dropout's forward
  /// (x the input) and backward (x the output gradient); the mask holds 0
  /// or 1/(1-p) and is drawn by ops/ on the host.
  void (*dropout_apply)(int device, const float* x, const float* mask, float* out, int64_t n);

  // ---- spatial ops: grid_sample gaussian_splat conv3d_depthwise convlstm3d_cell ----
  // Every tensor argument is contiguous float32; a null gradient pointer
  // marks a gradient nobody needs, which is then not computed.

  /// The sizes and options of one grid_sample call (ops/grid_sample.h):
  /// input [N, C, size[0..K-1]] with K = 2 (H, W) or 3 (D, H, W) spatial
  /// sizes, grid [N, P, K] (the P output points of a sample, Ho Wo or
  /// Do Ho Wo, each with coordinates ordered x, y(, z)), output [N, C, P].
  struct GridSampleArgs {
    int64_t N = 0, C = 0, P = 0;
    int K = 2;
    int64_t size[3] = {1, 1, 1};
    bool nearest = false;  // nearest neighbour, else bilinear (trilinear for K = 3)
    int padding = 0;       // GridSamplePadding's order: 0 zeros, 1 border, 2 reflection
    bool align_corners = false;
  };
  /// out[n, c, p] = channel c of sample n read at grid point (n, p), with
  /// ops/grid_sample.h's coordinate mapping, padding and handling of
  /// non-finite coordinates.
  void (*grid_sample_forward)(int device, const GridSampleArgs& a, const float* input, const float* grid,
                              float* out);
  /// grid_sample's gradients from gout [N, C, P]: ginput [N, C, size...] +=
  /// each output's sampling weights times gout (a scatter; ops/ zeroes
  /// ginput first); ggrid [N, P, K] = d out / d grid summed over channels
  /// (bilinear only: it reads input, which may be null otherwise).
  void (*grid_sample_backward)(int device, const GridSampleArgs& a, const float* input, const float* grid,
                               const float* gout, float* ginput, float* ggrid);

  /// The sizes of one gaussian_splat call (ops/gaussian_splat.h): content
  /// [B, C], mu [B, 3] (x, y, z), sigma [B] (finite, > 0), volume
  /// [B, C, D, H, W]; truncate: the ball's radius in sigmas (0: none).
  struct SplatArgs {
    int64_t B = 0, C = 0, D = 1, H = 1, W = 1;
    double truncate = 0.0;
  };
  /// vol[b, c, z, y, x] = content[b, c] exp(-|p(z, y, x) - mu[b]|^2 /
  /// (2 sigma[b]^2 + 1e-6)), 0 outside the truncation ball.
  void (*gaussian_splat_forward)(int device, const SplatArgs& a, const float* content, const float* mu,
                                 const float* sigma, float* vol);
  /// gaussian_splat's gradients from gvol [B, C, D, H, W] (formulas in
  /// ops/gaussian_splat.h): gcontent [B, C], gmu [B, 3], gsigma [B], written.
  void (*gaussian_splat_backward)(int device, const SplatArgs& a, const float* content, const float* mu,
                                  const float* sigma, const float* gvol, float* gcontent, float* gmu,
                                  float* gsigma);

  /// The sizes of one conv3d_depthwise call (ops/conv3d.h), per axis D, H,
  /// W: input size, kernel size, stride, padding and output size. input
  /// [B, C, size...], weight [C, kD kH kW] (PyTorch's [C, 1, kD, kH, kW]),
  /// output [B, C, out...].
  struct Conv3dArgs {
    int64_t B = 0, C = 0;
    int64_t size[3] = {1, 1, 1}, kernel[3] = {1, 1, 1}, stride[3] = {1, 1, 1}, padding[3] = {0, 0, 0},
            out[3] = {1, 1, 1};
  };
  /// out = bias[c] (0 when bias is null) + the depthwise cross-correlation of
  /// input with weight (zero padding), as ops/conv3d.h.
  void (*conv3d_depthwise_forward)(int device, const Conv3dArgs& a, const float* input, const float* weight,
                                   const float* bias, float* out);
  /// ginput [B, C, size...] = the transposed convolution of gout [B, C,
  /// out...] with weight (written).
  void (*conv3d_depthwise_backward_input)(int device, const Conv3dArgs& a, const float* gout,
                                          const float* weight, float* ginput);
  /// Per-sample parts of the parameter gradients: wpart [C, taps, B] (taps =
  /// kD kH kW) = sum over sample b's outputs of gout times the input the tap
  /// reads; bpart [C, B] = sum of sample b's gout in channel c. ops/ sums
  /// them over B (sum_rows).
  void (*conv3d_depthwise_backward_params)(int device, const Conv3dArgs& a, const float* gout,
                                           const float* input, float* wpart, float* bpart);

  /// The gates of convlstm3d_cell (ops/convlstm.h) from the 1x1x1 conv's
  /// products P [B, 4C, S] (S = D H W voxels; rows i, f, o, g) plus its bias
  /// pb [4C], and the state c [B, C, S]: gates [B, 4C, S] = (sigmoid(i),
  /// sigmoid(f), sigmoid(o), tanh(g)) (null: not kept), c' = f c + i g and
  /// h' = o tanh(c'), each [B, C, S].
  void (*convlstm3d_gates_forward)(int device, int64_t B, int64_t C, int64_t S, const float* P,
                                   const float* pb, const float* c, float* gates, float* cn, float* hn);
  /// Their backward from the saved gates, c and c' and the gradients ghn,
  /// gcn of h' and c' [B, C, S]: dP [B, 4C, S] (the pre-activation
  /// gradients) and dc [B, C, S].
  void (*convlstm3d_gates_backward)(int device, int64_t B, int64_t C, int64_t S, const float* gates,
                                    const float* c, const float* cn, const float* ghn, const float* gcn,
                                    float* dP, float* dc);

  // ---- selective_scan ----
  // Every tensor argument is contiguous float32; a null gradient pointer
  // marks a gradient nobody needs, which is then not computed.

  /// The sizes of one selective_scan call (ops/selective_scan.h): u, delta
  /// and y [B, T, E], A [E, N], Bm and Cm [B, T, N], D [E], h0 and h
  /// [B, E, N].
  struct ScanArgs {
    int64_t B = 0, T = 0, E = 0, N = 0;
  };
  /// One thread per (b, e): the recurrence of ops/selective_scan.h from h0
  /// (null: zeros). Writes, each where not null, y [B, T, E], the final
  /// state h [B, E, N] and states [B, E, T, N], the state after each step.
  void (*selective_scan_forward)(int device, const ScanArgs& a, const float* u, const float* delta,
                                 const float* A, const float* Bm, const float* Cm, const float* D,
                                 const float* h0, float* y, float* h, float* states);
  /// One thread per (b, e), t from T-1 down to 0: the reverse sweep from the
  /// output gradients gy [B, T, E] and gh [B, E, N] (either null: zero) and
  /// the states of selective_scan_forward, which it overwrites with the
  /// adjoints: states[b, e, t, :] = dL/d(the state after step t). Writes gu
  /// and gdelta [B, T, E], gh0 [B, E, N], and the per-item parts of A's and
  /// D's gradients, gApart [E, N, B] and gDpart [E, B] (ops/ sums them over
  /// B); any of these may be null.
  void (*selective_scan_backward)(int device, const ScanArgs& a, const float* u, const float* delta,
                                  const float* A, const float* Bm, const float* Cm, const float* D,
                                  const float* h0, const float* gy, const float* gh, float* states, float* gu,
                                  float* gdelta, float* gApart, float* gDpart, float* gh0);
  /// One thread per (b, t, n): out[b, t, n] = sum over e of c1[b, t, e]
  /// c2[b, t, e] x[b, e, t, n] (c1 null: 0, c2 null: 1), with c1, c2
  /// [B, T, E] and x [B, E, T, N]: Cm's gradient from gy and the states,
  /// Bm's from delta, u and the adjoints.
  void (*selective_scan_reduce)(int device, const ScanArgs& a, const float* c1, const float* c2,
                                const float* x, float* out);

  // ---- scaled_dot_product_attention (fused; ops/attention.h) ----
  // Every tensor argument is contiguous float32; a null gradient pointer
  // marks a gradient nobody needs, which is then not computed.

  /// The sizes and options of one fused attention call: q [B, H, T, Dh],
  /// k [B, H, S, Dh], v [B, H, S, Dv], out [B, H, T, Dv], lse [B, H, T]; an
  /// additive mask (or null) read at b mb + h mh + t mt + s ms (stride 0
  /// along a broadcast dim); query t sees key s unless (causal or window > 0)
  /// and s > t, or window > 0 and s <= t - window.
  struct AttentionArgs {
    int64_t B = 0, H = 0, T = 0, S = 0, Dh = 0, Dv = 0;
    float scale = 1.0f;
    bool causal = false;
    int64_t window = 0;
    int64_t mb = 0, mh = 0, mt = 0, ms = 0;
  };
  /// One thread per query row (b, h, t): out = softmax(q k^T scale + mask)
  /// v over the keys it sees, by an online softmax (no [T, S] buffer), and
  /// lse = the log of the softmax's normaliser (+inf and a zero row when the
  /// query sees no key).
  void (*attention_forward)(int device, const AttentionArgs& a, const float* q, const float* k, const float* v,
                            const float* mask, float* out, float* lse);
  /// One thread per query row: delta[b, h, t] = gout . out, and gq (when not
  /// null) = scale sum_s p (gout . v_s - delta) k_s, p recomputed from lse.
  void (*attention_backward_q)(int device, const AttentionArgs& a, const float* q, const float* k,
                               const float* v, const float* mask, const float* out, const float* lse,
                               const float* gout, float* delta, float* gq);
  /// One thread per key row (b, h, s), after attention_backward_q wrote delta:
  /// gv = sum_t p gout_t and gk = scale sum_t p (gout_t . v_s - delta_t) q_t
  /// (either may be null).
  void (*attention_backward_kv)(int device, const AttentionArgs& a, const float* q, const float* k,
                                const float* v, const float* mask, const float* lse, const float* gout,
                                const float* delta, float* gk, float* gv);

  // ---- optimizers: AdamW, SGD, clip_grad_norm_ ----
  /// One AdamW update of n contiguous float32 parameters p with gradient g
  /// and moments m, v (nn/optim.h AdamW::step), in place.
  void (*adamw_step)(int device, float* p, const float* g, float* m, float* v, int64_t n,
                     const AdamWScalars& s);
  /// One SGD update of n contiguous float32 parameters p with gradient g and
  /// momentum buffer buf (null without momentum; nn/optim.h SGD::step).
  void (*sgd_step)(int device, float* p, const float* g, float* buf, int64_t n, const SgdScalars& s);
  /// Sum of x[i]^2 over n contiguous float32 values, accumulated in float64
  /// (no float32 value's square overflows it; a NaN or Inf makes it
  /// non-finite). Returns when the sum is on the host.
  double (*sum_squares)(int device, const float* x, int64_t n);
};

}  // namespace tmem
