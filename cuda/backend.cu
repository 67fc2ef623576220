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
#define TMEM_SET_KERNEL(name, result, params) k.name = &name;
  TMEM_OP_KERNELS(TMEM_SET_KERNEL)
#undef TMEM_SET_KERNEL
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
