// The op kernel tables (docs/DESIGN.md §5): KernelTable<T> holds one function
// pointer per kernel of ops/kernel_list.h, for element type T. The CPU fills
// one for float and one for double (ops/cpu/kernels.h); a device backend
// fills an OpKernels (float32, the dtype every device has), found through the
// backend registered in core/device_backend.h (DeviceBackend::ops) and filled
// by cuda/backend.cu. ops/ does everything but the arithmetic: it checks
// shapes, dtypes and devices, makes the outputs, builds the launch arguments
// and records the tape; a kernel only computes. C++17, so nvcc includes it.
#pragma once
#include <array>

#include "tmem/core/device_backend.h"
#include "tmem/core/op_id.h"
#include "tmem/ops/kernel_list.h"

namespace tmem {

/// The scalars of a unary op: add_scalar and mul_scalar s = a, pow_scalar
/// p = a, clamp lo = a and hi = b; unused otherwise.
struct UnaryParams {
  double a = 0.0;
  double b = 0.0;
};

/// One matrix product per batch item, c[i] = a[i] @ b[i] with a[i] [m, k],
/// b[i] [k, n] and c[i] [m, n] row-major contiguous (c[i] at c + i m n), in
/// element type T, for the outer * batch items i = o batch + j (o < outer,
/// j < batch). An operand is row-major (element (r, q) at r * ld + q) or,
/// with col_major, column-major (at r + q * ld); item i's matrix is at
/// o outer_a + j stride_a from a (likewise b; a stride 0 repeats a matrix).
template <class T>
struct GemmArgs {
  int device = 0;
  int64_t outer = 1, batch = 1, m = 0, n = 0, k = 0;
  const T* a = nullptr;
  bool a_col_major = false;
  int64_t lda = 0, stride_a = 0, outer_a = 0;
  const T* b = nullptr;
  bool b_col_major = false;
  int64_t ldb = 0, stride_b = 0, outer_b = 0;
  T* c = nullptr;
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
  bool accumulate = false;  // backward: ginput holds a gradient to add to, else it is written in full
};

/// The sizes of one gaussian_splat call (ops/gaussian_splat.h): content
/// [B, C], mu [B, 3] (x, y, z), sigma [B] (finite, > 0), volume
/// [B, C, D, H, W]; truncate: the ball's radius in sigmas (0: none).
struct SplatArgs {
  int64_t B = 0, C = 0, D = 1, H = 1, W = 1;
  double truncate = 0.0;
};

/// The sizes of one conv3d_depthwise call (ops/conv3d.h), per axis D, H,
/// W: input size, kernel size, stride, padding and output size. input
/// [B, C, size...], weight [C, kD kH kW] (PyTorch's [C, 1, kD, kH, kW]),
/// output [B, C, out...].
struct Conv3dArgs {
  int64_t B = 0, C = 0;
  int64_t size[3] = {1, 1, 1}, kernel[3] = {1, 1, 1}, stride[3] = {1, 1, 1}, padding[3] = {0, 0, 0},
          out[3] = {1, 1, 1};
};

/// The sizes of one convlstm3d_cell call (ops/convlstm.h): x
/// [B, Cx, D, H, W], h and c [B, C, D, H, W]; z = cat(x, h) has Cz = Cx + C
/// channels, the grid S = D H W voxels.
struct ConvLstmArgs {
  int64_t B = 0, Cx = 0, C = 0, D = 1, H = 1, W = 1;
  int64_t Cz() const { return Cx + C; }
  int64_t S() const { return D * H * W; }
};

/// The cell's weights: per axis (D, H, W) the depthwise taps dw[a] [Cz, 3]
/// and biases db[a] [Cz]; the pointwise pw [4C, Cz] and pb [4C].
template <class T>
struct ConvLstmWeights {
  const T *dw[3], *db[3], *pw, *pb;
};

/// The cell's input gradients, in the inputs' order (null: not needed).
template <class T>
struct ConvLstmGrads {
  T *x, *h, *c, *dw[3], *db[3], *pw, *pb;
};

/// The sizes of one selective_scan call (ops/selective_scan.h): u, delta
/// and y [B, T, E], A [E, N], Bm and Cm [B, T, N], D [E], h0 and h
/// [B, E, N].
struct ScanArgs {
  int64_t B = 0, T = 0, E = 0, N = 0;
};

/// The sizes and options of one fused attention call: q [B, H, T, Dh],
/// k [B, H, S, Dh], v [B, H, S, Dv], out [B, H, T, Dv], lse [B, H, T]; an
/// additive mask (or null) read at b mb + h mh + t mt + s ms (stride 0
/// along a broadcast dim); query t sees key s unless (causal or window > 0)
/// and s > t, or window > 0 and s <= t - window.
struct AttentionArgs {
  int64_t B = 0, H = 0, T = 0, S = 0, Dh = 0, Dv = 0;
  double scale = 1.0;  // a device computes in float32 with its float32 rounding
  bool causal = false;
  int64_t window = 0;
  int64_t mb = 0, mh = 0, mt = 0, ms = 0;
};

/// The op kernels of one backend for element type T: one pointer per entry of
/// ops/kernel_list.h, documented there (null: the backend lacks it).
template <class Scalar>
struct KernelTable {
  using T = Scalar;
#define TMEM_KERNEL_POINTER(name, result, params) result(*name) params = nullptr;
  TMEM_OP_KERNELS(TMEM_KERNEL_POINTER)
#undef TMEM_KERNEL_POINTER
};

/// A device's op kernels (float32), with the ops that run on the device.
struct OpKernels : KernelTable<float> {
  /// The ops whose forward and backward run on this device (indexed by OpId),
  /// shown by the op table (`tmem ops`).
  std::array<bool, kOpCount> implemented{};
};

/// The ops a device table with every kernel of ops/kernel_list.h runs
/// (cuda/backend.cu and the host-built stand-in of the tests). The view ops
/// need no kernel of their own (their backward copies and sums through the
/// kernels), and to_dtype and to_device are copies.
inline constexpr OpId kDeviceOps[] = {
    // elementwise, linalg and the view ops
    OpId::Add, OpId::Sub, OpId::Mul, OpId::Div, OpId::Neg, OpId::Exp, OpId::Log, OpId::Sqrt,
    OpId::Rsqrt, OpId::Pow, OpId::Abs, OpId::Relu, OpId::GeluTanh, OpId::GeluErf, OpId::Silu,
    OpId::Sigmoid, OpId::Tanh, OpId::Softplus, OpId::Clamp, OpId::Sin, OpId::Cos, OpId::Floor, OpId::Ceil, OpId::Round, OpId::Trunc,
    OpId::Sign, OpId::Log1p, OpId::Expm1, OpId::Remainder, OpId::FloorDivide, OpId::Where, OpId::MaskedFill,
    OpId::AddScalar, OpId::MulScalar, OpId::PowScalar, OpId::Reciprocal, OpId::Cast,
    OpId::ToDevice, OpId::Sum, OpId::Mean, OpId::Matmul, OpId::Reshape, OpId::Permute,
    OpId::Slice, OpId::Expand, OpId::Contiguous, OpId::RepeatInterleave, OpId::CopySlices,
    // reductions and shape ops
    OpId::Max, OpId::Min, OpId::Var, OpId::IndexSelect, OpId::Gather, OpId::Cat, OpId::Split,
    OpId::Pad,
    // nn ops
    OpId::Softmax, OpId::LogSoftmax, OpId::LayerNorm, OpId::Embedding, OpId::CrossEntropy,
    OpId::Dropout,
    // spatial ops, selective_scan, fused attention
    OpId::GridSample, OpId::GaussianSplat, OpId::Conv3dDepthwise, OpId::Convlstm3dCell,
    OpId::SelectiveScan, OpId::ScaledDotProductAttention,
};

}  // namespace tmem
