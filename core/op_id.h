// The op enum with its name table (ggml habit): every node on the tape carries
// an OpId, so a tape can be printed and errors can name the op.
#pragma once
#include <array>
#include <cstddef>
#include <string_view>

namespace tmem {

#define TMEM_OP_LIST(X)                                                                         \
  X(Add, "add") X(Sub, "sub") X(Mul, "mul") X(Div, "div") X(Neg, "neg") X(Exp, "exp")          \
  X(Log, "log") X(Sqrt, "sqrt") X(Rsqrt, "rsqrt") X(Pow, "pow") X(Abs, "abs") X(Relu, "relu")  \
  X(GeluTanh, "gelu_tanh") X(GeluErf, "gelu") X(Silu, "silu") X(Sigmoid, "sigmoid")           \
  X(Tanh, "tanh") X(Softplus, "softplus") X(Clamp, "clamp") X(Sin, "sin") X(Cos, "cos")       \
  X(Floor, "floor") X(Ceil, "ceil") X(Round, "round") X(Trunc, "trunc") X(Sign, "sign")      \
  X(Log1p, "log1p") X(Expm1, "expm1") X(Remainder, "remainder") X(FloorDivide, "floor_divide")   \
  X(Where, "where")                                                                           \
  X(MaskedFill, "masked_fill") X(AddScalar, "add_scalar") X(MulScalar, "mul_scalar")           \
  X(PowScalar, "pow_scalar") X(Reciprocal, "reciprocal") X(Cast, "to_dtype")                   \
  X(ToDevice, "to_device")                                                                     \
  X(Sum, "sum") X(Mean, "mean") X(Max, "max") X(Min, "min") X(Var, "var")                      \
  X(Matmul, "matmul")                                                                          \
  X(Reshape, "reshape") X(Permute, "permute") X(Slice, "slice") X(Expand, "expand")            \
  X(Contiguous, "contiguous") X(IndexSelect, "index_select") X(Gather, "gather")               \
  X(Cat, "cat") X(Split, "split") X(Pad, "pad") X(RepeatInterleave, "repeat_interleave")       \
  X(Softmax, "softmax") X(LogSoftmax, "log_softmax") X(LayerNorm, "layer_norm")                \
  X(Embedding, "embedding") X(CrossEntropy, "cross_entropy") X(Dropout, "dropout")             \
  X(GridSample, "grid_sample") X(GaussianSplat, "gaussian_splat")                              \
  X(Conv3dDepthwise, "conv3d_depthwise") X(Convlstm3dCell, "convlstm3d_cell")                  \
  X(SelectiveScan, "selective_scan")                                                           \
  X(ScaledDotProductAttention, "scaled_dot_product_attention") X(CopySlices, "copy_slices")        \
  X(Custom, "custom")

/// OpId::Custom marks the nodes of ops written outside tmem (a program's own
/// forward and backward recorded with record(), core/autograd.h;
/// examples/custom_op.cpp): it has no entry in the op table and no device
/// kernels.
enum class OpId : int {
#define TMEM_X(id, name) id,
  TMEM_OP_LIST(TMEM_X)
#undef TMEM_X
  Count
};

inline constexpr std::array<std::string_view, static_cast<size_t>(OpId::Count)> kOpNames = {
#define TMEM_X(id, name) name,
    TMEM_OP_LIST(TMEM_X)
#undef TMEM_X
};
static_assert(kOpNames.size() == 69, "update the op count when adding an op");
/// Number of ops (the size of per-op tables).
inline constexpr size_t kOpCount = static_cast<size_t>(OpId::Count);

inline std::string_view op_name(OpId op) { return kOpNames[static_cast<size_t>(op)]; }

}  // namespace tmem
