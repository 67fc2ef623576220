// The CUDA backend's functions behind DeviceBackend (core/device_backend.h)
// and OpKernels (ops/device_kernels.h); cuda/backend.cu puts them in those
// tables. Internal to cuda/: the rest of the library reaches them only
// through the tables. Each throws DeviceError (file:line) on a CUDA failure.
#pragma once
#include <cstddef>
#include <cstdint>

#include "tmem/core/allocator.h"
#include "tmem/core/device_backend.h"
#include "tmem/ops/device_kernels.h"

namespace tmem::cuda {

// ---- cuda/allocator.cu: the caching device allocator ----
/// A block of at least n bytes on `device`: a cached block of n's size class
/// (core/allocator.h allocator_size_class) when one is free, else cudaMalloc;
/// when that fails, the device's cache is emptied and cudaMalloc retried.
/// Throws DeviceError "cuda:<d>: out of memory ..." with the stats.
void* allocate(int device, size_t n);
/// Puts a block from allocate(device, n) back in its size class's free list.
void release(int device, void* p, size_t n) noexcept;
/// Bytes handed out (by size class), their peak, and bytes cached.
AllocatorStats allocator_stats(int device);
/// Sets the peak to the bytes in use.
void allocator_reset_peak(int device);
/// cudaFree of every cached block of `device`.
void empty_cache(int device);

// ---- cuda/memory.cu: copies and fills, as DeviceBackend documents them ----
void copy_from_host(int device, void* dst, const void* src, size_t n);
void copy_to_host(int device, void* dst, const void* src, size_t n);
void copy_between(int dst_device, void* dst, int src_device, const void* src, size_t n);
void copy(int device, const StridedArgs<2>& args, DType dst_type, DType src_type);
void fill(int device, const StridedArgs<1>& args, DType type, double value);
void accumulate(int device, const StridedArgs<2>& args, DType type);
void synchronize(int device);

// ---- cuda/elementwise.cu, cuda/reduction.cu, cuda/linalg.cu: the op kernels
// OpKernels documents ----
void unary_forward(int device, OpId op, UnaryParams p, const StridedArgs<2>& args);
void unary_backward(int device, OpId op, UnaryParams p, const StridedArgs<3>& args);
void binary_forward(int device, OpId op, const StridedArgs<3>& args);
void pow_backward(int device, int input, const StridedArgs<5>& args);
void where_forward(int device, const StridedArgs<4>& args);
void sum_rows(int device, const float* x, float* out, int64_t rows, int64_t len, double scale);
void gemm(const GemmArgs& args);

// ---- reductions and shape ops (cuda/reduction.cu, cuda/shape.cu) ----
void extreme_rows(int device, const float* x, float* values, int64_t* indices, int64_t O, int64_t R,
                  bool is_max);
void extreme_rows_backward(int device, const float* g, const int64_t* indices, float* rows, int64_t O,
                           int64_t R);
void var_rows(int device, const float* x, float* out, float* mean, int64_t O, int64_t R, double denom);
void var_backward(int device, const StridedArgs<4>& args, double scale);
void index_select_forward(int device, const float* a, const int64_t* index, float* out, int64_t P, int64_t N,
                          int64_t Q, int64_t K);
void index_select_backward(int device, const float* g, const int64_t* index, float* ga, int64_t P, int64_t N,
                           int64_t Q, int64_t K);
void gather_forward(int device, const StridedArgs<3>& args, int64_t step);
void gather_backward(int device, const StridedArgs<3>& args, int64_t step);

// ---- nn ops (cuda/softmax.cu, layer_norm.cu, embedding.cu, loss.cu, dropout.cu) ----
void softmax_forward(int device, bool log, const float* x, float* y, int64_t rows, int64_t len);
void softmax_backward(int device, bool log, const float* y, const float* g, float* gx, int64_t rows,
                      int64_t len);
void layer_norm_forward(int device, const float* x, const float* weight, const float* bias, float* y,
                        float* mean, float* rstd, int64_t rows, int64_t cols, double eps);
void layer_norm_backward_input(int device, const float* x, const float* g, const float* weight,
                               const float* mean, const float* rstd, float* gx, int64_t rows,
                               int64_t cols);
void layer_norm_backward_params(int device, const float* x, const float* g, const float* mean,
                                const float* rstd, float* gweight, float* gbias, int64_t rows,
                                int64_t cols);
void embedding_forward(int device, const float* weight, const int64_t* indices, float* out,
                       int64_t count, int64_t dim);
void embedding_backward(int device, const int64_t* indices, const float* g, float* gweight,
                        int64_t count, int64_t dim);
void cross_entropy_forward(int device, const float* lsm, const int64_t* target, float* loss,
                           int64_t samples, int64_t classes, int64_t ignore_index,
                           double label_smoothing);
void cross_entropy_backward(int device, const float* lsm, const int64_t* target, const float* g,
                            bool per_sample, double divisor, float* gx, int64_t samples,
                            int64_t classes, int64_t ignore_index, double label_smoothing);
void dropout_apply(int device, const float* x, const float* mask, float* out, int64_t n);

// ---- spatial ops (cuda/grid_sample.cu, gaussian_splat.cu, conv3d.cu, convlstm.cu) ----
void grid_sample_forward(int device, const OpKernels::GridSampleArgs& a, const float* input, const float* grid,
                         float* out);
void grid_sample_backward(int device, const OpKernels::GridSampleArgs& a, const float* input, const float* grid,
                          const float* gout, float* ginput, float* ggrid);
void gaussian_splat_forward(int device, const OpKernels::SplatArgs& a, const float* content, const float* mu,
                            const float* sigma, float* vol);
void gaussian_splat_backward(int device, const OpKernels::SplatArgs& a, const float* content, const float* mu,
                             const float* sigma, const float* gvol, float* gcontent, float* gmu, float* gsigma);
void conv3d_depthwise_forward(int device, const OpKernels::Conv3dArgs& a, const float* input, const float* weight,
                              const float* bias, float* out);
void conv3d_depthwise_backward_input(int device, const OpKernels::Conv3dArgs& a, const float* gout,
                                     const float* weight, float* ginput);
void conv3d_depthwise_backward_params(int device, const OpKernels::Conv3dArgs& a, const float* gout,
                                      const float* input, float* wpart, float* bpart);
void convlstm3d_gates_forward(int device, int64_t B, int64_t C, int64_t S, const float* P, const float* pb,
                              const float* c, float* gates, float* cn, float* hn);
void convlstm3d_gates_backward(int device, int64_t B, int64_t C, int64_t S, const float* gates, const float* c,
                               const float* cn, const float* ghn, const float* gcn, float* dP, float* dc);

// ---- selective_scan (cuda/selective_scan.cu) ----
void selective_scan_forward(int device, const OpKernels::ScanArgs& a, const float* u, const float* delta,
                            const float* A, const float* Bm, const float* Cm, const float* D, const float* h0,
                            float* y, float* h, float* states);
void selective_scan_backward(int device, const OpKernels::ScanArgs& a, const float* u, const float* delta,
                             const float* A, const float* Bm, const float* Cm, const float* D, const float* h0,
                             const float* gy, const float* gh, float* states, float* gu, float* gdelta, float* gApart,
                             float* gDpart, float* gh0);
void selective_scan_reduce(int device, const OpKernels::ScanArgs& a, const float* c1, const float* c2,
                           const float* x, float* out);

// ---- scaled_dot_product_attention, fused (cuda/attention.cu) ----
void attention_forward(int device, const OpKernels::AttentionArgs& a, const float* q, const float* k,
                       const float* v, const float* mask, float* out, float* lse);
void attention_backward_q(int device, const OpKernels::AttentionArgs& a, const float* q, const float* k,
                          const float* v, const float* mask, const float* out, const float* lse, const float* gout,
                          float* delta, float* gq);
void attention_backward_kv(int device, const OpKernels::AttentionArgs& a, const float* q, const float* k,
                           const float* v, const float* mask, const float* lse, const float* gout,
                           const float* delta, float* gk, float* gv);

// ---- optimizers (cuda/optim.cu) ----
void adamw_step(int device, float* p, const float* g, float* m, float* v, int64_t n, const AdamWScalars& s);
void sgd_step(int device, float* p, const float* g, float* buf, int64_t n, const SgdScalars& s);
double sum_squares(int device, const float* x, int64_t n);

}  // namespace tmem::cuda
