// The op kernels a device backend gives ops/ (DESIGN.md 3): one struct of
// function pointers per device kind, found through the backend registered in
// core/device_backend.h (DeviceBackend::ops), filled by cuda/backend.cu.
// ops/ does everything but the arithmetic: it checks shapes, dtypes and
// devices, makes the outputs, builds the launch arguments and records the
// tape; a kernel only computes. Compute kernels take float32, the dtype every
// device has (ops/dispatch.h checks it). C++17, so nvcc includes it too.
#pragma once
#include <array>

#include "core/device_backend.h"
#include "core/op_id.h"

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
};

}  // namespace tmem
