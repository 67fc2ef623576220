// The CUDA backend's registration: the DeviceBackend (memory, copies, the
// caching allocator) and OpKernels tables of this backend, installed for
// Device::Kind::CUDA while the program starts. Nothing in tmem names a
// symbol of this file, so every program linking tmem_ops is linked with
// -u tmem_cuda_backend_anchor (CMakeLists.txt): that keeps this object, and
// through its tables every kernel, where the linker's archive-member
// selection would drop them; the test "device: the CUDA backend is registered
// exactly when the build has one" checks that the registration ran.
#include "tmem/core/device_backend.h"
#include "tmem/cuda/kernels.h"
#include "tmem/cuda/runtime.h"
#include "tmem/ops/device_kernels.h"

namespace tmem::cuda {

namespace {

// Ops whose forward and backward run on CUDA. The view ops need no kernel of
// their own (their backward copies and sums through the kernels here), and
// to_dtype and to_device are copies.
constexpr OpId kImplemented[] = {
    OpId::Add, OpId::Sub, OpId::Mul, OpId::Div, OpId::Neg, OpId::Exp, OpId::Log, OpId::Sqrt,
    OpId::Rsqrt, OpId::Pow, OpId::Abs, OpId::Relu, OpId::GeluTanh, OpId::GeluErf, OpId::Silu,
    OpId::Sigmoid, OpId::Tanh, OpId::Softplus, OpId::Clamp, OpId::Where, OpId::MaskedFill,
    OpId::AddScalar, OpId::MulScalar, OpId::PowScalar, OpId::Reciprocal, OpId::Cast,
    OpId::ToDevice, OpId::Sum, OpId::Mean, OpId::Matmul, OpId::Reshape, OpId::Permute,
    OpId::Slice, OpId::Expand, OpId::Contiguous, OpId::RepeatInterleave,
    // reductions and shape ops
    OpId::Max, OpId::Min, OpId::Var, OpId::IndexSelect, OpId::Gather, OpId::Cat, OpId::Pad,
    // nn ops
    OpId::Softmax, OpId::LogSoftmax, OpId::LayerNorm, OpId::Embedding, OpId::CrossEntropy,
    OpId::Dropout,
    // spatial ops
    OpId::GridSample, OpId::GaussianSplat, OpId::Conv3dDepthwise, OpId::Convlstm3dCell,
    OpId::SelectiveScan, OpId::ScaledDotProductAttention,
};

OpKernels make_op_kernels() {
  OpKernels k;
  for (OpId op : kImplemented) k.implemented[static_cast<size_t>(op)] = true;
  k.unary_forward = &unary_forward;
  k.unary_backward = &unary_backward;
  k.binary_forward = &binary_forward;
  k.pow_backward = &pow_backward;
  k.where_forward = &where_forward;
  k.sum_rows = &sum_rows;
  k.gemm = &gemm;
  // reductions and shape ops
  k.extreme_rows = &extreme_rows;
  k.extreme_rows_backward = &extreme_rows_backward;
  k.var_rows = &var_rows;
  k.var_backward = &var_backward;
  k.index_select_forward = &index_select_forward;
  k.index_select_backward = &index_select_backward;
  k.gather_forward = &gather_forward;
  k.gather_backward = &gather_backward;
  // nn ops
  k.softmax_forward = &softmax_forward;
  k.softmax_backward = &softmax_backward;
  k.layer_norm_forward = &layer_norm_forward;
  k.layer_norm_backward_input = &layer_norm_backward_input;
  k.layer_norm_backward_params = &layer_norm_backward_params;
  k.embedding_forward = &embedding_forward;
  k.embedding_backward = &embedding_backward;
  k.cross_entropy_forward = &cross_entropy_forward;
  k.cross_entropy_backward = &cross_entropy_backward;
  k.dropout_apply = &dropout_apply;
  // spatial ops
  k.grid_sample_forward = &grid_sample_forward;
  k.grid_sample_backward = &grid_sample_backward;
  k.gaussian_splat_forward = &gaussian_splat_forward;
  k.gaussian_splat_backward = &gaussian_splat_backward;
  k.conv3d_depthwise_forward = &conv3d_depthwise_forward;
  k.conv3d_depthwise_backward_input = &conv3d_depthwise_backward_input;
  k.conv3d_depthwise_backward_params = &conv3d_depthwise_backward_params;
  k.convlstm3d_gates_forward = &convlstm3d_gates_forward;
  k.convlstm3d_gates_backward = &convlstm3d_gates_backward;
  // selective_scan
  k.selective_scan_forward = &selective_scan_forward;
  k.selective_scan_backward = &selective_scan_backward;
  k.selective_scan_reduce = &selective_scan_reduce;
  // fused attention
  k.attention_forward = &attention_forward;
  k.attention_backward_q = &attention_backward_q;
  k.attention_backward_kv = &attention_backward_kv;
  // optimizers
  k.adamw_step = &adamw_step;
  k.sgd_step = &sgd_step;
  k.sum_squares = &sum_squares;
  return k;
}

const OpKernels kOpKernels = make_op_kernels();

const DeviceBackend kBackend{"cuda",          &device_count,   &allocate,
                             &release,        &copy_from_host, &copy_to_host,
                             &copy_between,   &copy,           &fill,
                             &accumulate,     &synchronize,    &allocator_stats,
                             &allocator_reset_peak, &empty_cache, &kOpKernels};

// Defined after the tables, so it runs after them (one translation unit).
struct Registrar {
  Registrar() { register_device_backend(Device::Kind::CUDA, &kBackend); }
} registrar;

}  // namespace

}  // namespace tmem::cuda

/// The symbol the link option `-u tmem_cuda_backend_anchor` names, so that the
/// linker keeps this object (and the registration above) in every program.
extern "C" void tmem_cuda_backend_anchor() {}
