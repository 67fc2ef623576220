// A custom op written outside tmem: Swish with a learnable slope per channel
// (Ramachandran et al. 2017), y = x * sigmoid(beta * x), with its own CPU
// forward and backward kernels, recorded on tmem's tape with record() as
// OpId::Custom. The example checks the op's gradients with tmem's gradcheck
// (float64 central differences), compares values and gradients with the
// same function composed of built-in ops, and shows the error for a bad
// input. Exits with status 1 when a check fails.
#include <cmath>
#include <cstdio>
#include <vector>

#include <tmem/tmem.h>

using namespace tmem;

namespace {

/// The forward kernel: y = x * s, s = sigmoid(beta[c] * x), for x of C
/// channels (the last dim), all contiguous.
template <class T>
void swish_forward_kernel(const T* x, const T* beta, T* y, int64_t n, int64_t C) {
  for (int64_t i = 0; i < n; ++i) {
    T s = T(1) / (T(1) + std::exp(-beta[i % C] * x[i]));
    y[i] = x[i] * s;
  }
}

/// The backward kernel, from g = dL/dy:
///   dL/dx    = g * (s + beta x s (1 - s))
///   dL/dbeta = sum over every position of channel c of g * x^2 s (1 - s)
/// gx or gbeta may be null (that input needs no gradient).
template <class T>
void swish_backward_kernel(const T* x, const T* beta, const T* g, T* gx, T* gbeta, int64_t n, int64_t C) {
  for (int64_t c = 0; gbeta && c < C; ++c) gbeta[c] = 0;
  for (int64_t i = 0; i < n; ++i) {
    T b = beta[i % C];
    T s = T(1) / (T(1) + std::exp(-b * x[i]));
    T ds = s * (T(1) - s);
    if (gx) gx[i] = g[i] * (s + b * x[i] * ds);
    if (gbeta) gbeta[i % C] += g[i] * x[i] * x[i] * ds;
  }
}

/// Runs `kernel` with T = float or double, after the tensor's dtype.
template <class F>
void by_dtype(DType dtype, F&& kernel) {
  if (dtype == DType::Float64)
    kernel(double{});
  else
    kernel(float{});
}

/// swish(x[..., C], beta[C]) -> y[..., C] = x * sigmoid(beta * x), float32
/// or float64 CPU tensors of one dtype. Differentiable in x and beta.
/// Throws ShapeError unless beta is [C] with C = x's last dim, DtypeError for
/// int64 or mixed dtypes, DeviceError for a tensor off the CPU.
Tensor swish(const Tensor& x_in, const Tensor& beta_in) {
  const OpRange range(OpId::Custom);  // times the forward under tmem::profiler (row "custom")
  check_cpu(x_in, "swish");
  check_cpu(beta_in, "swish");
  check<DtypeError>(x_in.dtype() != DType::Int64 && x_in.dtype() == beta_in.dtype(),
                    "swish: expected x and beta of one floating dtype, got ", dtype_name(x_in.dtype()), " and ",
                    dtype_name(beta_in.dtype()));
  check<ShapeError>(x_in.dim() >= 1 && beta_in.dim() == 1 && beta_in.size(0) == x_in.size(-1),
                    "swish: expected beta [C] for x [..., C], got x", shape_str(x_in.shape()), " beta",
                    shape_str(beta_in.shape()));
  Tensor x = contiguous(x_in), beta = contiguous(beta_in);
  Tensor y = empty(x.shape(), x.dtype());
  const int64_t n = x.numel(), C = beta.numel();
  by_dtype(x.dtype(), [&](auto t) {
    using T = decltype(t);
    swish_forward_kernel(x.data<T>(), beta.data<T>(), y.data<T>(), n, C);
  });
  // The backward runs when a gradient reaches y; x and beta are saved for it
  // (the tape reports it if either is modified in place before then).
  record(OpId::Custom, {x_in, beta_in}, {y}, {x, beta},
         [n, C](const Node& node, const std::vector<Tensor>& grads) -> std::vector<Tensor> {
           const Tensor& xs = node.saved_tensor(0);
           const Tensor& bs = node.saved_tensor(1);
           Tensor g = contiguous(grads[0]);
           Tensor gx = node.needs_input_grad(0) ? empty(xs.shape(), xs.dtype()) : Tensor();
           Tensor gbeta = node.needs_input_grad(1) ? empty(bs.shape(), bs.dtype()) : Tensor();
           by_dtype(xs.dtype(), [&](auto t) {
             using T = decltype(t);
             swish_backward_kernel(xs.data<T>(), bs.data<T>(), g.data<T>(),
                                   gx.defined() ? gx.data<T>() : nullptr,
                                   gbeta.defined() ? gbeta.data<T>() : nullptr, n, C);
           });
           return {gx, gbeta};
         });
  return y;
}

/// The same function from built-in ops, as the reference.
Tensor swish_reference(const Tensor& x, const Tensor& beta) { return x * sigmoid(beta * x); }

double max_abs_diff(const Tensor& a, const Tensor& b) {
  std::vector<double> u = a.to_vector(), v = b.to_vector();
  double m = 0;
  for (size_t i = 0; i < u.size(); ++i) m = std::max(m, std::abs(u[i] - v[i]));
  return m;
}

}  // namespace

int main() {
  bool ok = true;
  Generator gen(0);

  // 1. gradcheck: analytic gradients of both inputs against float64 central
  // differences of L = sum(swish(x, beta) * w), w fixed random weights.
  Tensor x = randn({3, 4, 5}, 0, 1.5, DType::Float64, gen).requires_grad_();
  Tensor beta = randn({5}, 1.0, 0.5, DType::Float64, gen).requires_grad_();
  GradcheckResult r = gradcheck([](const std::vector<Tensor>& in) { return swish(in[0], in[1]); }, {x, beta});
  std::printf("gradcheck of swish(x[3,4,5], beta[5]): %s, max |analytic - numeric| = %.2e%s%s\n",
              r.ok ? "pass" : "FAIL", r.max_abs_err, r.ok ? "" : ": ", r.message.c_str());
  ok = ok && r.ok;

  // 2. Values and gradients of L = sum(y^2) against the built-in composition
  // (gradcheck left its own gradients in x and beta: cleared first).
  x.zero_grad();
  beta.zero_grad();
  Tensor y = swish(x, beta);
  sum(y * y).backward();
  Tensor gx = x.grad(), gbeta = beta.grad();
  x.zero_grad();
  beta.zero_grad();
  Tensor y_ref = swish_reference(x, beta);
  sum(y_ref * y_ref).backward();
  double dy = max_abs_diff(y, y_ref), dgx = max_abs_diff(gx, x.grad()), dgb = max_abs_diff(gbeta, beta.grad());
  std::printf("against x * sigmoid(beta * x) from built-in ops: |dy| %.1e, |dgrad x| %.1e, |dgrad beta| %.1e\n",
              dy, dgx, dgb);
  ok = ok && dy < 1e-12 && dgx < 1e-12 && dgb < 1e-12;

  // 3. Its node on the tape, and a bad input.
  Tensor z = swish(x, beta);
  std::printf("tape: y = swish(x, beta) has grad_fn %s\n", z.impl().grad_fn->name().c_str());
  try {
    swish(x, zeros({4}, DType::Float64));
    std::printf("FAIL: a beta of the wrong size was accepted\n");
    ok = false;
  } catch (const ShapeError& e) {
    std::printf("bad input: %s\n", e.what());
  }
  return ok ? 0 : 1;
}
