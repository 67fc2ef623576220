// Elementwise ops (docs/DESIGN.md §4). Binary ops broadcast by NumPy rules and their
// backward sums each gradient back to its input's shape. Operands must share
// dtype and device (no implicit promotion): DtypeError / DeviceError name the
// op and both operands otherwise. Formulas follow PyTorch's definitions.
// Every op here also runs on CUDA (float32 kernels in cuda/elementwise.cu).
#pragma once
#include <optional>

#include "tmem/core/tensor.h"

namespace tmem {

/// a + b, broadcast. Gradients: g, g (summed to each input's shape).
Tensor add(const Tensor& a, const Tensor& b);
/// a - b, broadcast.
Tensor sub(const Tensor& a, const Tensor& b);
/// a * b, broadcast.
Tensor mul(const Tensor& a, const Tensor& b);
/// a / b, broadcast (IEEE division: x/0 is +-inf or NaN, as in PyTorch).
Tensor div(const Tensor& a, const Tensor& b);
/// a ** b, broadcast. d/db = a**b * log(a) (NaN for a < 0, as PyTorch).
Tensor pow(const Tensor& a, const Tensor& b);

/// a + s, a * s, a ** p (PyTorch's scalar forms; pow's gradient is 0 where p == 0).
Tensor add(const Tensor& a, double s);
Tensor mul(const Tensor& a, double s);
Tensor pow(const Tensor& a, double p);

Tensor neg(const Tensor& a);
// exp, log, sqrt, rsqrt, reciprocal, sigmoid, tanh, sin, cos, log1p and
// expm1 take an int64 tensor as float32 and return float32 (PyTorch's
// promotion).
Tensor exp(const Tensor& a);
/// Natural log; log(0) = -inf, log(x<0) = NaN.
Tensor log(const Tensor& a);
Tensor sqrt(const Tensor& a);
/// 1 / sqrt(a).
Tensor rsqrt(const Tensor& a);
/// 1 / a.
Tensor reciprocal(const Tensor& a);
/// |a|; the gradient at 0 is 0 (PyTorch).
Tensor abs(const Tensor& a);
/// max(a, 0); the gradient at 0 is 0.
Tensor relu(const Tensor& a);
/// GELU. approximate=false: x * Phi(x) with the erf; approximate=true: the
/// tanh form 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (Hendrycks &
/// Gimpel 2016; PyTorch gelu(approximate='tanh')).
Tensor gelu(const Tensor& a, bool approximate = false);
/// x * sigmoid(x).
Tensor silu(const Tensor& a);
Tensor sigmoid(const Tensor& a);
Tensor tanh(const Tensor& a);
/// log(1 + exp(x)), linear above threshold 20 (PyTorch softplus, beta 1).
Tensor softplus(const Tensor& a);
/// sin(a) (radians); the gradient is g cos(a).
Tensor sin(const Tensor& a);
/// cos(a) (radians); the gradient is -g sin(a).
Tensor cos(const Tensor& a);
/// log(1 + a), accurate for small a; the gradient is g / (1 + a).
Tensor log1p(const Tensor& a);
/// exp(a) - 1, accurate for small a; the gradient is g (y + 1).
Tensor expm1(const Tensor& a);
/// Rounding toward -inf, toward +inf, to the nearest (half to even, as
/// PyTorch) and toward 0; the gradient is 0. An int64 a gives a copy.
Tensor floor(const Tensor& a);
Tensor ceil(const Tensor& a);
Tensor round(const Tensor& a);
Tensor trunc(const Tensor& a);
/// floor(a / b), broadcast (Python's //, torch.floor_divide), computed as
/// PyTorch's div_floor_floating from fmod, so a large quotient is exact;
/// a / b where b is 0. The gradient is 0 (torch has none). Floating
/// operands of one dtype (int64 goes through NumPy in Python).
Tensor floor_divide(const Tensor& a, const Tensor& b);
/// a - b floor(a / b), broadcast, from fmod: exact, the sign of b, as
/// Python's % and torch.remainder (x % inf is x for x >= 0); gradients g
/// and -g floor_divide(a, b).
Tensor remainder(const Tensor& a, const Tensor& b);
/// -1, 0 or 1 by a's sign (0 for NaN, as PyTorch's CPU); the gradient is 0.
/// An int64 a gives int64.
Tensor sign(const Tensor& a);
/// min(max(a, lo), hi); the gradient passes where lo <= a <= hi (PyTorch).
/// Throws ValueError if lo > hi.
/// An int64 a takes whole-number bounds in int64's range or infinities (no
/// bound), ValueError otherwise, and runs on the CPU only.
Tensor clamp(const Tensor& a, double lo, double hi);
/// clamp of an int64 tensor with exact int64 bounds (nullopt: none), torch's
/// int64 result (doubles hold integers exactly only up to 2^53). Throws
/// DtypeError unless a is an int64 tensor on the CPU, ValueError if lo > hi.
Tensor clamp(const Tensor& a, std::optional<int64_t> lo, std::optional<int64_t> hi);
/// cond ? a : b, all broadcast; cond is a tensor whose non-zero elements
/// select a (any dtype). Gradients flow to a and b.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
/// a with `value` wherever mask is non-zero; a and mask broadcast together
/// (torch.masked_fill), so a larger mask gives a larger result. Throws
/// ShapeError when they do not broadcast.
/// An int64 a takes `value` rounded toward zero (ValueError for one int64
/// cannot hold) and runs on the CPU only.
Tensor masked_fill(const Tensor& a, const Tensor& mask, double value);
/// masked_fill with a 0-d tensor value of a's dtype and device (torch's
/// Tensor overload; an int64 value exactly). Gradients flow to a and value.
/// Throws ShapeError for a value that is not 0-d, DtypeError or DeviceError
/// for one of another dtype or device.
Tensor masked_fill(const Tensor& a, const Tensor& mask, const Tensor& value);
/// Casts a tensor to another dtype. Differentiable between floating dtypes;
/// int64 to floating and floating to int64 (rounded toward zero, torch's
/// .long()) record nothing. Throws ValueError naming to_dtype, having
/// written nothing, when a value is NaN, infinite or beyond int64's range.
Tensor to_dtype(const Tensor& a, DType dtype);

// ---- in-place forms (bump the version counter; see commit_inplace) ----
// Each throws ValueError naming the op when `a` has several elements at one
// memory location (an expand), as commit_inplace does.
Tensor& add_(Tensor& a, const Tensor& b);
Tensor& add_(Tensor& a, double s);
Tensor& mul_(Tensor& a, double s);
Tensor& mul_(Tensor& a, const Tensor& b);
/// Fills a with value. A non-leaf that needs grad keeps its place in the graph
/// (torch): its earlier history gets a zero gradient, through a node named
/// masked_fill.
Tensor& fill_(Tensor& a, double value);
/// fill_(a, 0).
Tensor& zero_(Tensor& a);
/// Copies src (broadcast to a's shape, cast to its dtype, moved to its
/// device) into a; the gradient goes back to src in its own dtype and device,
/// and a zero gradient to a's earlier history (a node named where), as torch.
/// An int64 a gets src's values exactly (floats truncated toward zero; a
/// ValueError for NaN, inf or a value outside int64) and no history. Throws
/// ShapeError naming copy_ and both shapes when src does not broadcast to a.
Tensor& copy_(Tensor& a, const Tensor& src);

// ---- operators ----
inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator-(const Tensor& a) { return neg(a); }
inline Tensor operator+(const Tensor& a, double s) { return add(a, s); }
inline Tensor operator+(double s, const Tensor& a) { return add(a, s); }
inline Tensor operator-(const Tensor& a, double s) { return add(a, -s); }
inline Tensor operator-(double s, const Tensor& a) { return add(neg(a), s); }
inline Tensor operator*(const Tensor& a, double s) { return mul(a, s); }
inline Tensor operator*(double s, const Tensor& a) { return mul(a, s); }
inline Tensor operator/(const Tensor& a, double s) { return mul(a, 1.0 / s); }
inline Tensor operator/(double s, const Tensor& a) { return mul(reciprocal(a), s); }

}  // namespace tmem
