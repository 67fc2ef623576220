#include "host_kernels.h"

#include "fake_device.h"

namespace tmem::test {

void host::sum_rows(int device, const float* x, float* out, int64_t rows, int64_t len, double scale) {
  fake_sum_rows(device, x, out, rows, len, scale);
}

void host::gemm(const GemmArgs& args) { fake_gemm(args); }

const OpKernels& host_op_kernels() {
  static const OpKernels table = [] {
    OpKernels k;
#define TMEM_SET_KERNEL(name, result, params) k.name = &host::name;
    TMEM_OP_KERNELS(TMEM_SET_KERNEL)
#undef TMEM_SET_KERNEL
    for (OpId op :
         {// elementwise, linalg and the view ops
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
          // spatial ops, selective_scan, fused attention
          OpId::GridSample, OpId::GaussianSplat, OpId::Conv3dDepthwise, OpId::Convlstm3dCell,
          OpId::SelectiveScan, OpId::ScaledDotProductAttention})
      k.implemented[static_cast<size_t>(op)] = true;
    return k;
  }();
  return table;
}

}  // namespace tmem::test
