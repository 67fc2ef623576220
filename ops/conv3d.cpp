// Depthwise 3-D convolution: shape checks, CPU forward and backward kernels,
// op-table entry. Shapes: input[B,C,D,H,W], weight[C,1,kD,kH,kW], bias[C] ->
// out[B,C,Do,Ho,Wo]. Formula: see ops/conv3d.h.
//
// Every kernel walks one (b, c) plane tap by tap: for a tap (i, j, k) it
// computes the range of output rows/columns whose input position is inside
// the volume, so no bounds test runs in the inner loop, which is a contiguous
// (stride-1 along W) multiply-add over an output row. Tensors on another
// device run that backend's kernels (cuda/conv3d.cu) behind the same checks.
#include "tmem/ops/conv3d.h"

#include <algorithm>
#include <vector>

#include "tmem/core/autograd.h"
#include "tmem/core/profiler.h"
#include "tmem/core/strided.h"
#include "tmem/ops/dispatch.h"
#include "tmem/ops/op_table.h"

namespace tmem {

namespace {

using Grads = std::vector<Tensor>;
constexpr const char* kOp = "conv3d_depthwise";

// floor(a / b) and ceil(a / b) for b > 0 and any sign of a.
int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
int64_t ceil_div(int64_t a, int64_t b) { return -floor_div(-a, b); }

// One axis: input length n, kernel k, stride s, padding p, output length out.
struct Axis {
  int64_t n, k, s, p, out;
  // Outputs o in [lo, hi) read input o*s - p + tap inside [0, n).
  int64_t lo(int64_t tap) const { return std::max<int64_t>(0, ceil_div(p - tap, s)); }
  int64_t hi(int64_t tap) const {
    return std::min<int64_t>(out, floor_div(n - 1 + p - tap, s) + 1);
  }
  int64_t in(int64_t o, int64_t tap) const { return o * s - p + tap; }
};

struct Geometry {
  int64_t B, C;
  Axis d, h, w;
  int64_t in_plane() const { return d.n * h.n * w.n; }
  int64_t out_plane() const { return d.out * h.out * w.out; }
  int64_t taps() const { return d.k * h.k * w.k; }
};

// Calls f(in_row, out_row, tap_index, ow_lo, ow_hi) for every pair of an input
// row and an output row that one tap (i, j) connects; f covers the W taps.
template <class F>
void for_each_row_pair(const Geometry& g, F&& f) {
  for (int64_t i = 0; i < g.d.k; ++i)
    for (int64_t od = g.d.lo(i); od < g.d.hi(i); ++od) {
      const int64_t id = g.d.in(od, i);
      for (int64_t j = 0; j < g.h.k; ++j)
        for (int64_t oh = g.h.lo(j); oh < g.h.hi(j); ++oh) {
          const int64_t ih = g.h.in(oh, j);
          f((id * g.h.n + ih) * g.w.n, (od * g.h.out + oh) * g.w.out, (i * g.h.k + j) * g.w.k);
        }
    }
}

// out[ow] += wv * in[ow*s - p + k] for ow in [lo, hi).
template <class T>
void row_fma(T* __restrict out, const T* __restrict in, T wv, const Axis& a, int64_t k) {
  const int64_t lo = a.lo(k), hi = a.hi(k);
  if (a.s == 1) {
    const T* src = in - a.p + k;
#pragma omp simd
    for (int64_t o = lo; o < hi; ++o) out[o] += wv * src[o];
  } else {
    for (int64_t o = lo; o < hi; ++o) out[o] += wv * in[o * a.s - a.p + k];
  }
}

// in[ow*s - p + k] += wv * out[ow] for ow in [lo, hi): the transposed tap.
template <class T>
void row_fma_t(T* __restrict in, const T* __restrict out, T wv, const Axis& a, int64_t k) {
  const int64_t lo = a.lo(k), hi = a.hi(k);
  if (a.s == 1) {
    T* dst = in - a.p + k;
#pragma omp simd
    for (int64_t o = lo; o < hi; ++o) dst[o] += wv * out[o];
  } else {
    for (int64_t o = lo; o < hi; ++o) in[o * a.s - a.p + k] += wv * out[o];
  }
}

// sum over ow in [lo, hi) of out[ow] * in[ow*s - p + k].
template <class T>
T row_dot(const T* __restrict out, const T* __restrict in, const Axis& a, int64_t k) {
  const int64_t lo = a.lo(k), hi = a.hi(k);
  T acc = T(0);
  if (a.s == 1) {
    const T* src = in - a.p + k;
#pragma omp simd reduction(+ : acc)
    for (int64_t o = lo; o < hi; ++o) acc += out[o] * src[o];
  } else {
    for (int64_t o = lo; o < hi; ++o) acc += out[o] * in[o * a.s - a.p + k];
  }
  return acc;
}

template <class T>
void conv_forward(const Geometry& g, const T* in, const T* w, const T* bias, T* out) {
  const int64_t IP = g.in_plane(), OP = g.out_plane(), nt = g.taps();
#pragma omp parallel for schedule(static) if (g.B * g.C * OP * nt >= kParallelGrain && g.B * g.C > 1)
  for (int64_t bc = 0; bc < g.B * g.C; ++bc) {
    const int64_t c = bc % g.C;
    const T* ip = in + bc * IP;
    const T* wc = w + c * nt;
    T* op = out + bc * OP;
    std::fill(op, op + OP, bias ? bias[c] : T(0));
    for_each_row_pair(g, [&](int64_t irow, int64_t orow, int64_t tap) {
      for (int64_t k = 0; k < g.w.k; ++k) row_fma(op + orow, ip + irow, wc[tap + k], g.w, k);
    });
  }
}

// gout[B,C,Do,Ho,Wo] -> gin[B,C,D,H,W] (the transposed convolution).
template <class T>
void conv_backward_input(const Geometry& g, const T* gout, const T* w, T* gin) {
  const int64_t IP = g.in_plane(), OP = g.out_plane(), nt = g.taps();
#pragma omp parallel for schedule(static) if (g.B * g.C * OP * nt >= kParallelGrain && g.B * g.C > 1)
  for (int64_t bc = 0; bc < g.B * g.C; ++bc) {
    const T* gp = gout + bc * OP;
    const T* wc = w + (bc % g.C) * nt;
    T* ip = gin + bc * IP;
    std::fill(ip, ip + IP, T(0));
    for_each_row_pair(g, [&](int64_t irow, int64_t orow, int64_t tap) {
      for (int64_t k = 0; k < g.w.k; ++k) row_fma_t(ip + irow, gp + orow, wc[tap + k], g.w, k);
    });
  }
}

// gout, input -> gw[C,taps] and gb[C] (either may be null); channels in parallel.
template <class T>
void conv_backward_params(const Geometry& g, const T* gout, const T* in, T* gw, T* gb) {
  const int64_t IP = g.in_plane(), OP = g.out_plane(), nt = g.taps();
#pragma omp parallel for schedule(static) if (g.B * g.C * OP * nt >= kParallelGrain && g.C > 1)
  for (int64_t c = 0; c < g.C; ++c) {
    if (gw) {
      T* wc = gw + c * nt;
      std::fill(wc, wc + nt, T(0));
      for (int64_t b = 0; b < g.B; ++b) {
        const T* gp = gout + (b * g.C + c) * OP;
        const T* ip = in + (b * g.C + c) * IP;
        for_each_row_pair(g, [&](int64_t irow, int64_t orow, int64_t tap) {
          for (int64_t k = 0; k < g.w.k; ++k) wc[tap + k] += row_dot(gp + orow, ip + irow, g.w, k);
        });
      }
    }
    if (gb) {
      T acc = T(0);
      for (int64_t b = 0; b < g.B; ++b) {
        const T* gp = gout + (b * g.C + c) * OP;
#pragma omp simd reduction(+ : acc)
        for (int64_t v = 0; v < OP; ++v) acc += gp[v];
      }
      gb[c] = acc;
    }
  }
}

Geometry check_inputs(const Tensor& input, const Tensor& weight, const Tensor& bias,
                      std::array<int64_t, 3> stride, std::array<int64_t, 3> padding) {
  check<DeviceError>(input.device() == weight.device() &&
                         (!bias.defined() || bias.device() == input.device()),
                     kOp, ": expected input, weight and bias on one device, but got ",
                     input.device().str(), ", ", weight.device().str(),
                     bias.defined() ? " and " + bias.device().str() : std::string());
  const std::string bias_str = bias.defined() ? shape_str(bias.shape()) : "(none)";
  check<ShapeError>(input.dim() == 5, kOp, ": expected a 5-D input [B,C,D,H,W], but got input",
                    shape_str(input.shape()), " (weight", shape_str(weight.shape()), ")");
  const int64_t C = input.size(1);
  check<ShapeError>(weight.dim() == 5 && weight.size(0) == C && weight.size(1) == 1 &&
                        weight.size(2) >= 1 && weight.size(3) >= 1 && weight.size(4) >= 1,
                    kOp, ": expected weight [C,1,kD,kH,kW] with C = ", C,
                    " (depthwise, groups = C), but got weight", shape_str(weight.shape()),
                    " for input", shape_str(input.shape()));
  check<ShapeError>(!bias.defined() || (bias.dim() == 1 && bias.size(0) == C), kOp,
                    ": expected bias [C] with C = ", C, ", but got bias", bias_str, " for input",
                    shape_str(input.shape()));
  check<DtypeError>(input.dtype() == weight.dtype() &&
                        (!bias.defined() || bias.dtype() == input.dtype()),
                    kOp, ": expected input, weight and bias of one dtype, but got ",
                    dtype_name(input.dtype()), ", ", dtype_name(weight.dtype()),
                    bias.defined() ? std::string(" and ") + dtype_name(bias.dtype()) : "");
  for (int a = 0; a < 3; ++a)
    check<ValueError>(stride[a] >= 1 && padding[a] >= 0, kOp,
                      ": expected stride >= 1 and padding >= 0 on every axis, but got stride (",
                      stride[0], ",", stride[1], ",", stride[2], ") padding (", padding[0], ",",
                      padding[1], ",", padding[2], ")");
  Axis ax[3];
  for (int a = 0; a < 3; ++a) {
    const int64_t n = input.size(2 + a), k = weight.size(2 + a);
    check<ShapeError>(n + 2 * padding[a] >= k, kOp,
                      ": expected the padded input to be at least the kernel size on every "
                      "axis, but got input",
                      shape_str(input.shape()), " weight", shape_str(weight.shape()),
                      " padding (", padding[0], ",", padding[1], ",", padding[2], ")");
    ax[a] = {n, k, stride[a], padding[a], (n + 2 * padding[a] - k) / stride[a] + 1};
  }
  return {input.size(0), C, ax[0], ax[1], ax[2]};
}

// ---- device path ----

// The device kernels' description of a call.
OpKernels::Conv3dArgs device_args(const Geometry& g) {
  OpKernels::Conv3dArgs a;
  a.B = g.B;
  a.C = g.C;
  const Axis* ax[3] = {&g.d, &g.h, &g.w};
  for (int k = 0; k < 3; ++k) {
    a.size[k] = ax[k]->n;
    a.kernel[k] = ax[k]->k;
    a.stride[k] = ax[k]->s;
    a.padding[k] = ax[k]->p;
    a.out[k] = ax[k]->out;
  }
  return a;
}

// conv3d_depthwise on the device of its inputs (checked by check_inputs):
// the backend's kernels; the parameter gradients sum the kernels'
// per-sample parts with sum_rows.
Tensor conv_device(const Geometry& geo, const Tensor& input, const Tensor& weight, const Tensor& bias) {
  const OpKernels& kern = device_kernels(OpId::Conv3dDepthwise, input);
  const Device dev = input.device();
  const OpKernels::Conv3dArgs args = device_args(geo);
  Tensor xin = contiguous_data(input), wc = contiguous_data(weight);
  Tensor bc = bias.defined() ? contiguous_data(bias) : Tensor();
  Tensor out = empty({geo.B, geo.C, geo.d.out, geo.h.out, geo.w.out}, input.dtype(), dev);
  kern.conv3d_depthwise_forward(dev.index, args, xin.data<float>(), wc.data<float>(),
                                bc.defined() ? bc.data<float>() : nullptr, out.data<float>());
  const bool has_bias = bias.defined();
  record(OpId::Conv3dDepthwise, {input, weight, bias}, {out}, {xin, wc},
         [geo, args, has_bias](const Node& n, const Grads& g) {
           const Tensor &x = n.saved_tensor(0), &w = n.saved_tensor(1);
           const Shape out_shape{geo.B, geo.C, geo.d.out, geo.h.out, geo.w.out};
           check<ShapeError>(g[0].shape() == out_shape, kOp, ": expected grad_output of shape ",
                             shape_str(out_shape), ", but got ", shape_str(g[0].shape()));
           const OpKernels& kern = device_kernels(OpId::Conv3dDepthwise, g[0]);
           const Device dev = g[0].device();
           const DType dt = x.dtype();
           Tensor go = contiguous_data(g[0]);
           Tensor gx = n.needs_input_grad(0) ? empty(x.shape(), dt, dev) : Tensor();
           Tensor gw = n.needs_input_grad(1) ? empty(w.shape(), dt, dev) : Tensor();
           Tensor gb = has_bias && n.needs_input_grad(2) ? empty({geo.C}, dt, dev) : Tensor();
           if (gx.defined())
             kern.conv3d_depthwise_backward_input(dev.index, args, go.data<float>(), w.data<float>(),
                                                  gx.data<float>());
           if (gw.defined() || gb.defined()) {
             const int64_t taps = geo.taps();
             Tensor wpart = gw.defined() ? empty({geo.C * taps, geo.B}, dt, dev) : Tensor();
             Tensor bpart = gb.defined() ? empty({geo.C, geo.B}, dt, dev) : Tensor();
             kern.conv3d_depthwise_backward_params(dev.index, args, go.data<float>(), x.data<float>(),
                                                   wpart.defined() ? wpart.data<float>() : nullptr,
                                                   bpart.defined() ? bpart.data<float>() : nullptr);
             if (gw.defined())
               kern.sum_rows(dev.index, wpart.data<float>(), gw.data<float>(), geo.C * taps, geo.B, 1.0);
             if (gb.defined())
               kern.sum_rows(dev.index, bpart.data<float>(), gb.data<float>(), geo.C, geo.B, 1.0);
           }
           return Grads{gx, gw, gb};
         });
  return out;
}

}  // namespace

Tensor conv3d_depthwise(const Tensor& input, const Tensor& weight, const Tensor& bias,
                        std::array<int64_t, 3> stride, std::array<int64_t, 3> padding) {
  const OpRange range(OpId::Conv3dDepthwise);
  const Geometry geo = check_inputs(input, weight, bias, stride, padding);
  if (!input.device().is_cpu()) return conv_device(geo, input, weight, bias);
  Tensor xin = contiguous_data(input), wc = contiguous_data(weight);
  Tensor bc = bias.defined() ? contiguous_data(bias) : Tensor();
  Tensor out = empty({geo.B, geo.C, geo.d.out, geo.h.out, geo.w.out}, input.dtype());
  dispatch_floating(input.dtype(), kOp, [&]<class T>() {
    conv_forward<T>(geo, xin.data<T>(), wc.data<T>(), bc.defined() ? bc.data<T>() : nullptr,
                    out.data<T>());
  });
  const bool has_bias = bias.defined();
  record(OpId::Conv3dDepthwise, {input, weight, bias}, {out}, {xin, wc},
         [geo, has_bias](const Node& n, const Grads& g) {
           const Tensor &x = n.saved_tensor(0), &w = n.saved_tensor(1);
           const Shape out_shape{geo.B, geo.C, geo.d.out, geo.h.out, geo.w.out};
           check<ShapeError>(g[0].shape() == out_shape, kOp, ": expected grad_output of shape ",
                             shape_str(out_shape), ", but got ", shape_str(g[0].shape()));
           Tensor go = contiguous_data(g[0]);
           Tensor gx = n.needs_input_grad(0) ? empty(x.shape(), x.dtype()) : Tensor();
           Tensor gw = n.needs_input_grad(1) ? empty(w.shape(), w.dtype()) : Tensor();
           Tensor gb = has_bias && n.needs_input_grad(2) ? empty({geo.C}, x.dtype()) : Tensor();
           dispatch_floating(x.dtype(), kOp, [&]<class T>() {
             if (gx.defined()) conv_backward_input<T>(geo, go.data<T>(), w.data<T>(), gx.data<T>());
             if (gw.defined() || gb.defined())
               conv_backward_params<T>(geo, go.data<T>(), x.data<T>(),
                                       gw.defined() ? gw.data<T>() : nullptr,
                                       gb.defined() ? gb.data<T>() : nullptr);
           });
           return Grads{gx, gw, gb};
         });
  return out;
}

void register_conv3d_ops(std::vector<OpInfo>& t) {
  using V = std::vector<Tensor>;
  using A3 = std::array<int64_t, 3>;
  auto kernel_case = [](std::string label, A3 k, A3 stride, A3 padding, bool with_bias) {
    return OpCase{std::move(label),
                  [k, with_bias] {
                    return V{gc_input({2, 3, 4, 5, 6}, -1, 1, 21),
                             gc_input({3, 1, k[0], k[1], k[2]}, -1, 1, 22),
                             with_bias ? gc_input({3}, -1, 1, 23) : Tensor()};
                  },
                  [stride, padding](const V& v) {
                    return conv3d_depthwise(v[0], v[1], v[2], stride, padding);
                  }};
  };
  t.push_back({OpId::Conv3dDepthwise, {"cpu"}, {"input", "weight", "bias"},
               {kernel_case("kernel (3,1,1) padding (1,0,0)", {3, 1, 1}, {1, 1, 1}, {1, 0, 0}, true),
                kernel_case("kernel (1,3,1) padding (0,1,0)", {1, 3, 1}, {1, 1, 1}, {0, 1, 0}, true),
                kernel_case("kernel (1,1,3) padding (0,0,1)", {1, 1, 3}, {1, 1, 1}, {0, 0, 1}, true),
                kernel_case("kernel (3,3,3) padding 1", {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, true),
                kernel_case("kernel (3,3,3) stride 2 padding 1", {3, 3, 3}, {2, 2, 2}, {1, 1, 1}, true),
                kernel_case("kernel (3,1,3) stride (1,2,3) no bias", {3, 1, 3}, {1, 2, 3}, {0, 1, 2},
                            false)}});
}

}  // namespace tmem
