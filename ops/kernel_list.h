// The one list of op kernels (docs/DESIGN.md §5), an X-macro like
// core/op_id.h: X(name, result, (parameters)) per kernel, grouped by op file,
// with T the element type. ops/device_kernels.h expands it into the table
// KernelTable<T>, ops/cpu/kernels.h into the CPU backend's declarations
// (float and double), cuda/kernels.h into the CUDA backend's (float), and
// cuda/backend.cu, ops/cpu/kernels.cpp and tests/host_kernels.cpp into the
// code that fills each table, so a new kernel is named here once.
// Every kernel takes the device index first (the CPU ignores it), runs in
// order on the device's work queue and throws DeviceError on a failed launch.
// A null gradient pointer marks a gradient nobody needs (not computed).
// Only macros: C++17, so nvcc includes it too.
#pragma once

// ---- elementwise (ops/elementwise.cpp) ----
#define TMEM_ELEMENTWISE_KERNELS(X)                                                              \
  /* out = f(x) for a unary elementwise op (neg exp log sqrt rsqrt reciprocal abs relu gelu   \
     gelu_tanh silu sigmoid tanh softplus clamp sin cos floor ceil round trunc sign log1p      \
     expm1 add_scalar mul_scalar pow_scalar); args {out, x}, x broadcast to out. */            \
  X(unary_forward, void, (int device, OpId op, UnaryParams p, const StridedArgs<2>& args))     \
  /* The input gradient of a unary op; args {gx, s, g}. s is what the op saves for backward   \
     (ops/elementwise.cpp): the input for pow_scalar log abs gelu gelu_tanh silu softplus     \
     clamp sin cos log1p, the output for exp sqrt rsqrt reciprocal relu sigmoid tanh expm1, and \
     g itself for add_scalar mul_scalar neg floor ceil round trunc sign (whose gradient is 0). */                                                             \
  X(unary_backward, void, (int device, OpId op, UnaryParams p, const StridedArgs<3>& args))    \
  /* out = a (op) b for add sub mul div pow remainder floor_divide; args {out, a, b},         \
     broadcast. */                                                                             \
  X(binary_forward, void, (int device, OpId op, const StridedArgs<3>& args))                   \
  /* pow's gradient at the broadcast shape (ops/ sums it back): input 0: g p x^(p-1), 0 where \
     p == 0; input 1: g y log(x), 0 where x == 0 and p >= 0. args {d, g, x, p, y}. */         \
  X(pow_backward, void, (int device, int input, const StridedArgs<5>& args))                   \
  /* out = c != 0 ? a : b; args {out, c, a, b}, broadcast. */                                  \
  X(where_forward, void, (int device, const StridedArgs<4>& args))

// ---- linalg (ops/linalg.cpp) ----
#define TMEM_LINALG_KERNELS(X)                                                                   \
  /* The products GemmArgs describes (m, n, k > 0). */                                         \
  X(gemm, void, (const GemmArgs<T>& args))

// ---- reductions (ops/reduction.cpp) ----
#define TMEM_REDUCTION_KERNELS(X)                                                                \
  /* out[i] = scale * (x[i len] + ... + x[i len + len - 1]) for i < rows (x [rows, len] and   \
     out [rows] contiguous; len 0 gives 0). */                                                 \
  X(sum_rows, void, (int device, const T* x, T* out, int64_t rows, int64_t len, double scale)) \
  /* out[j] = scale * (x[j] + x[cols + j] + ... + x[(rows - 1) cols + j]) for j < cols (x   \
     [rows, cols] and out [cols] contiguous; rows 0 gives 0): a reduction over leading dims, \
     read in place. */                                                                         \
  X(sum_columns, void, (int device, const T* x, T* out, int64_t rows, int64_t cols, double scale)) \
  /* max (is_max) or min of each row of x [O, R] (contiguous, R > 0): values[i] = the extreme \
     of row i, indices[i] its first index; a NaN counts as the extreme (the first NaN wins).  \
     values and indices [O]. */                                                                \
  X(extreme_rows, void,                                                                        \
    (int device, const T* x, T* values, int64_t* indices, int64_t O, int64_t R, bool is_max))  \
  /* The backward of max/min: rows[i R + indices[i]] = g[i] for i < O (g, indices [O]; rows   \
     [O, R] contiguous, already zero elsewhere). */                                            \
  X(extreme_rows_backward, void,                                                               \
    (int device, const T* g, const int64_t* indices, T* rows, int64_t O, int64_t R))           \
  /* Variance of each row of x [O, R] (contiguous), in two passes: mean[i] = sum_k x[i, k] /  \
     R, out[i] = sum_k (x[i, k] - mean[i])^2 / denom (denom = R - correction; out, mean [O]). \
   */                                                                                          \
  X(var_rows, void, (int device, const T* x, T* out, T* mean, int64_t O, int64_t R, double denom)) \
  /* var's input gradient gx = (x - mean) * g * scale (scale = 2 / denom); args {gx, x, mean, \
     g}, mean and g broadcast to x's shape. */                                                 \
  X(var_backward, void, (int device, const StridedArgs<4>& args, double scale))

// ---- shape ops (ops/shape.cpp); cat and pad are the backend's fill and copy ----
#define TMEM_SHAPE_KERNELS(X)                                                                    \
  /* index_select along the middle dim: a [P, N, Q], index [K], out [P, K, Q], all           \
     contiguous: out[p, k, q] = a[p, index[k], q]. Returns false when an index is outside     \
     [0, N) (a is never read out of bounds; out is then unspecified): the CPU checks while    \
     it copies; device entries return true, as ops/ checks their indices on the host first.  \
   */                                                                                          \
  X(index_select_forward, bool,                                                                \
    (int device, const T* a, const int64_t* index, T* out, int64_t P, int64_t N, int64_t Q,    \
     int64_t K))                                                                               \
  /* Its backward: ga [P, N, Q] (contiguous, zeroed by ops/) += g [P, K, Q] scattered by      \
     index: ga[p, index[k], q] += g[p, k, q]. */                                               \
  X(index_select_backward, void,                                                               \
    (int device, const T* g, const int64_t* index, T* ga, int64_t P, int64_t N, int64_t Q,     \
     int64_t K))                                                                               \
  /* gather over index's shape; args {out, index (int64), a} with a's stride along the        \
     gathered dim 0, `step` that dim's real stride and `n` its size: out[o0] = a[o2 +         \
     index[o1] * step]. Returns false when an index is outside [0, n), as                     \
     index_select_forward. */                                                                  \
  X(gather_forward, bool, (int device, const StridedArgs<3>& args, int64_t step, int64_t n))   \
  /* Its backward; args {ga (zeroed by ops/), index, g} with ga's stride along the gathered   \
     dim 0 and `step` its real stride: ga[o0 + index[o1] * step] += g[o2]. */                  \
  X(gather_backward, void, (int device, const StridedArgs<3>& args, int64_t step))

// ---- softmax and log_softmax (ops/softmax.cpp); rows contiguous [rows, len] ----
#define TMEM_SOFTMAX_KERNELS(X)                                                                  \
  /* y = softmax(x) per row (log: log_softmax): with m the row max, exp(x - m) / sum exp(x -  \
     m), or (x - m) - log sum exp(x - m). A row that is all -inf gives 0 (log: -inf). */       \
  X(softmax_forward, void, (int device, bool log, const T* x, T* y, int64_t rows, int64_t len)) \
  /* The input gradient gx [rows, len] from the output y and its gradient g: softmax gx = y   \
     (g - sum(g y)); log_softmax gx = g - exp(y) sum(g), 0 on a row whose y is all -inf. */    \
  X(softmax_backward, void,                                                                    \
    (int device, bool log, const T* y, const T* g, T* gx, int64_t rows, int64_t len))

// ---- layer_norm (ops/layer_norm.cpp); x, y, g, gx [N, C], weight, bias [C] ----
#define TMEM_LAYER_NORM_KERNELS(X)                                                               \
  /* mean[N], rstd[N] = 1/sqrt(biased var + eps) (two passes), y = (x - mean) rstd weight +   \
     bias; weight, bias null: 1 and 0. */                                                      \
  X(layer_norm_forward, void,                                                                  \
    (int device, const T* x, const T* weight, const T* bias, T* y, T* mean, T* rstd,           \
     int64_t rows, int64_t cols, double eps))                                                  \
  /* The input gradient: dxhat = g weight, gx = rstd (dxhat - mean(dxhat) - xhat              \
     mean(dxhat xhat)). */                                                                     \
  X(layer_norm_backward_input, void,                                                           \
    (int device, const T* x, const T* g, const T* weight, const T* mean, const T* rstd,        \
     T* gx, int64_t rows, int64_t cols))                                                       \
  /* gweight = sum over the rows of g xhat, gbias = sum of g (either null: not computed). */  \
  X(layer_norm_backward_params, void,                                                          \
    (int device, const T* x, const T* g, const T* mean, const T* rstd, T* gweight, T* gbias,   \
     int64_t rows, int64_t cols))

// ---- embedding (ops/embedding.cpp) ----
#define TMEM_EMBEDDING_KERNELS(X)                                                                \
  /* out[k, :] = weight[indices[k], :] for k < count: weight [V, D], indices [count] int64 in \
     [0, V) (ops/ checks the range), out [count, D]. */                                        \
  X(embedding_forward, void,                                                                   \
    (int device, const T* weight, const int64_t* indices, T* out, int64_t count, int64_t dim)) \
  /* gweight[indices[k], :] += g[k, :] for k < count (gweight [V, D], zeroed by ops/;         \
     repeated indices add up, in no fixed order). */                                           \
  X(embedding_backward, void,                                                                  \
    (int device, const int64_t* indices, const T* g, T* gweight, int64_t count, int64_t dim))

// ---- cross_entropy (ops/loss.cpp) ----
#define TMEM_LOSS_KERNELS(X)                                                                     \
  /* Per-sample loss[N] from lsm = log_softmax(logits) [N, C] and target [N] int64 (in [0, C) \
     or ignore_index; ops/ checks it): loss[n] = -(1 - eps) lsm[n, t] - eps mean_c lsm[n, c], \
     0 where t == ignore_index (eps: label smoothing); and, when total is not null, total[0] = \
     the sum of loss / divisor (reduction "sum": divisor 1, "mean": the samples not ignored). */ \
  X(cross_entropy_forward, void,                                                               \
    (int device, const T* lsm, const int64_t* target, T* loss, int64_t samples,                \
     int64_t classes, int64_t ignore_index, double label_smoothing, T* total, double divisor)) \
  /* The logits gradient gx [N, C]: s (exp(lsm) - eps / C), minus s (1 - eps) at the target,  \
     0 on ignored samples; s = g[n] / divisor when per_sample (g [N], reduction "none"), else \
     g[0] / divisor (g [], "sum": divisor 1, "mean": the number of samples not ignored). */    \
  X(cross_entropy_backward, void,                                                              \
    (int device, const T* lsm, const int64_t* target, const T* g, bool per_sample,             \
     double divisor, T* gx, int64_t samples, int64_t classes, int64_t ignore_index,            \
     double label_smoothing))

// ---- dropout (ops/dropout.cpp) ----
#define TMEM_DROPOUT_KERNELS(X)                                                                  \
  /* out = x * mask over n contiguous elements: the forward (x the input) and the backward (x \
     the output gradient); the mask holds 0 or 1/(1-p), drawn by ops/ on the host. */          \
  X(dropout_apply, void, (int device, const T* x, const T* mask, T* out, int64_t n))

// ---- grid_sample (ops/grid_sample.cpp) ----
#define TMEM_GRID_SAMPLE_KERNELS(X)                                                              \
  /* out[n, c, p] = channel c of sample n read at grid point (n, p), with the coordinate      \
     mapping, padding and non-finite handling of ops/grid_sample.h. */                         \
  X(grid_sample_forward, void,                                                                 \
    (int device, const GridSampleArgs& a, const T* input, const T* grid, T* out))              \
  /* The gradients from gout [N, C, P]: ginput [N, C, size...] = the scatter of each output's \
     sampling weights times gout (added to ginput with a.accumulate, else written in full);   \
     ggrid [N, P, K] = d out / d grid summed over channels (bilinear only: it reads input,     \
     which may be null otherwise). */                                                          \
  X(grid_sample_backward, void,                                                                \
    (int device, const GridSampleArgs& a, const T* input, const T* grid, const T* gout,        \
     T* ginput, T* ggrid))

// ---- gaussian_splat (ops/gaussian_splat.cpp) ----
#define TMEM_GAUSSIAN_SPLAT_KERNELS(X)                                                           \
  /* vol[b, c, z, y, x] = content[b, c] exp(-|p(z, y, x) - mu[b]|^2 / (2 sigma[b]^2 + 1e-6)), \
     0 outside the truncation ball. */                                                         \
  X(gaussian_splat_forward, void,                                                              \
    (int device, const SplatArgs& a, const T* content, const T* mu, const T* sigma, T* vol))   \
  /* The gradients from gvol [B, C, D, H, W] (formulas in ops/gaussian_splat.h): gcontent     \
     [B, C], gmu [B, 3], gsigma [B], written. */                                               \
  X(gaussian_splat_backward, void,                                                             \
    (int device, const SplatArgs& a, const T* content, const T* mu, const T* sigma,            \
     const T* gvol, T* gcontent, T* gmu, T* gsigma))

// ---- conv3d_depthwise (ops/conv3d.cpp) ----
#define TMEM_CONV3D_KERNELS(X)                                                                   \
  /* out = bias[c] (0 when null) + the depthwise cross-correlation of input with weight (zero \
     padding), as ops/conv3d.h. */                                                             \
  X(conv3d_depthwise_forward, void,                                                            \
    (int device, const Conv3dArgs& a, const T* input, const T* weight, const T* bias, T* out)) \
  /* ginput [B, C, size...] = the transposed convolution of gout [B, C, out...] with weight   \
     (written). */                                                                             \
  X(conv3d_depthwise_backward_input, void,                                                     \
    (int device, const Conv3dArgs& a, const T* gout, const T* weight, T* ginput))              \
  /* The parameter gradients gweight [C, taps] (taps = kD kH kW) = sum over the outputs of    \
     gout times the input the tap reads, gbias [C] = sum of gout over channel c; each where   \
     not null, written. */                                                                     \
  X(conv3d_depthwise_backward_params, void,                                                    \
    (int device, const Conv3dArgs& a, const T* gout, const T* input, T* gweight, T* gbias))

// ---- convlstm3d_cell (ops/convlstm.cpp); sizes in ConvLstmArgs, S = D H W ----
#define TMEM_CONVLSTM_KERNELS(X)                                                                 \
  /* The row length of the gates buffer [B, 4C, row] the forward keeps for the backward      \
     (row >= S: the CPU pads S to whole SIMD batches). */                                      \
  X(convlstm3d_cell_gates_row, int64_t, (int device, const ConvLstmArgs& a))                   \
  /* The cell of ops/convlstm.h: h', c' [B, C, D, H, W] and, where gates is not null, the     \
     activated gates (i, f, o, g) [B, 4C, gates_row] that the backward reads. */               \
  X(convlstm3d_cell_forward, void,                                                             \
    (int device, const ConvLstmArgs& a, const ConvLstmWeights<T>& w, const T* x, const T* h,   \
     const T* c, T* gates, T* cn, T* hn))                                                      \
  /* The gradients g (each where not null, written) from ghn and gcn, the gradients of h' and \
     c', with the inputs, c' and the forward's gates (w.pb unused); the depthwise stages are   \
     recomputed, not saved. */                                                                 \
  X(convlstm3d_cell_backward, void,                                                            \
    (int device, const ConvLstmArgs& a, const ConvLstmWeights<T>& w, const T* x, const T* h,   \
     const T* c, const T* cn, const T* gates, const T* ghn, const T* gcn,                      \
     const ConvLstmGrads<T>& g))

// ---- selective_scan (ops/selective_scan.cpp) ----
#define TMEM_SELECTIVE_SCAN_KERNELS(X)                                                           \
  /* The recurrence of ops/selective_scan.h from h0 (null: zeros): y [B, T, E] and the final  \
     state h [B, E, N]. */                                                                     \
  X(selective_scan_forward, void,                                                              \
    (int device, const ScanArgs& a, const T* u, const T* delta, const T* A, const T* Bm,       \
     const T* Cm, const T* D, const T* h0, T* y, T* h))                                        \
  /* The input gradients from gy [B, T, E] and gh [B, E, N] (either null: zero), each where   \
     not null, written: gu, gdelta [B, T, E], gA [E, N], gBm, gCm [B, T, N], gD [E], gh0      \
     [B, E, N]. */                                                                             \
  X(selective_scan_backward, void,                                                             \
    (int device, const ScanArgs& a, const T* u, const T* delta, const T* A, const T* Bm,       \
     const T* Cm, const T* D, const T* h0, const T* gy, const T* gh, T* gu, T* gdelta, T* gA,  \
     T* gBm, T* gCm, T* gD, T* gh0))

// ---- scaled_dot_product_attention, fused (ops/attention.cpp) ----
#define TMEM_ATTENTION_KERNELS(X)                                                                \
  /* Per query row (b, h, t): out = softmax(q k^T scale + mask) v over the keys it sees, by   \
     an online softmax, and lse = the log of the softmax's normaliser (+inf and a zero row    \
     when the query sees no key). */                                                           \
  X(attention_forward, void,                                                                   \
    (int device, const AttentionArgs& a, const T* q, const T* k, const T* v, const T* mask,    \
     T* out, T* lse))                                                                          \
  /* The gradients gq, gk, gv (each where not null, written) from gout, p recomputed from    \
     lse: with delta = gout . out per query, gv = sum_t p gout_t, gq = scale sum_s p (gout .  \
     v_s - delta) k_s and gk = scale sum_t p (gout_t . v_s - delta_t) q_t. */                  \
  X(attention_backward, void,                                                                  \
    (int device, const AttentionArgs& a, const T* q, const T* k, const T* v, const T* mask,    \
     const T* out, const T* lse, const T* gout, T* gq, T* gk, T* gv))

// ---- optimizers (nn/optim.cpp): AdamW, SGD ----
#define TMEM_OPTIM_KERNELS(X)                                                                    \
  /* One AdamW update of n contiguous parameters p with gradient g and moments m, v           \
     (nn/optim.h AdamW::step), in place. */                                                    \
  X(adamw_step, void, (int device, T* p, const T* g, T* m, T* v, int64_t n,                    \
                       const AdamWScalars& s))                                                 \
  /* One SGD update of n contiguous parameters p with gradient g and momentum buffer buf      \
     (null without momentum; nn/optim.h SGD::step). */                                         \
  X(sgd_step, void, (int device, T* p, const T* g, T* buf, int64_t n, const SgdScalars& s))

// ---- clip_grad_norm_ (nn/optim.cpp), one gradient at a time ----
#define TMEM_CLIP_KERNELS(X)                                                                     \
  /* The largest |x[i]| over n contiguous values (0 for n = 0), NaN when some x[i] is NaN.    \
     Returns when the value is on the host. */                                                 \
  X(abs_max, double, (int device, const T* x, int64_t n))                                      \
  /* acc + the sum of (x[i] / scale)^2 over n contiguous values, in float64 (scale > 0: the   \
     largest magnitude of all the gradients, so no square overflows). The CPU adds in index   \
     order to acc, so gradients summed one after another give one sum. Returns when the sum \
     is on the host. */                                                                        \
  X(sum_squares, double, (int device, const T* x, int64_t n, double scale, double acc))        \
  /* x[i] *= T(coef) for n contiguous values. */                                               \
  X(scale_inplace, void, (int device, T* x, int64_t n, double coef))

/// Every op kernel, in table order.
#define TMEM_OP_KERNELS(X)                                                                       \
  TMEM_ELEMENTWISE_KERNELS(X) TMEM_LINALG_KERNELS(X) TMEM_REDUCTION_KERNELS(X)                   \
  TMEM_SHAPE_KERNELS(X) TMEM_SOFTMAX_KERNELS(X) TMEM_LAYER_NORM_KERNELS(X)                       \
  TMEM_EMBEDDING_KERNELS(X) TMEM_LOSS_KERNELS(X) TMEM_DROPOUT_KERNELS(X)                         \
  TMEM_GRID_SAMPLE_KERNELS(X) TMEM_GAUSSIAN_SPLAT_KERNELS(X) TMEM_CONV3D_KERNELS(X)              \
  TMEM_CONVLSTM_KERNELS(X) TMEM_SELECTIVE_SCAN_KERNELS(X) TMEM_ATTENTION_KERNELS(X)              \
  TMEM_OPTIM_KERNELS(X) TMEM_CLIP_KERNELS(X)
