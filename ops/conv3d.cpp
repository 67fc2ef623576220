// Depthwise 3-D convolution: shape checks, the one body over the kernel
// tables (ops/cpu/conv3d_kernel.cpp, cuda/conv3d.cu), op-table entry.
// Shapes: input[B,C,D,H,W], weight[C,1,kD,kH,kW], bias[C] ->
// out[B,C,Do,Ho,Wo]. Formula: see ops/conv3d.h.
#include "tmem/ops/conv3d.h"

#include <vector>

#include "tmem/core/autograd.h"
#include "tmem/core/profiler.h"
#include "tmem/ops/dispatch.h"
#include "tmem/ops/op_table.h"

namespace tmem {

namespace {

using Grads = std::vector<Tensor>;
constexpr const char* kOp = "conv3d_depthwise";

// The kernels' description of a call (shapes checked).
Conv3dArgs check_inputs(const Tensor& input, const Tensor& weight, const Tensor& bias,
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
  Conv3dArgs args;
  args.B = input.size(0);
  args.C = C;
  for (int a = 0; a < 3; ++a) {
    const int64_t n = input.size(2 + a), k = weight.size(2 + a);
    int64_t padded = 0;  // n + 2 padding, which a huge padding would overflow
    check<ShapeError>(!__builtin_mul_overflow(padding[a], int64_t{2}, &padded) &&
                          !__builtin_add_overflow(padded, n, &padded),
                      kOp, ": padding ", padding[a], " on axis ", a, " makes the padded size (", n,
                      " + 2 * padding) larger than an int64 holds (input", shape_str(input.shape()), ")");
    check<ShapeError>(padded >= k, kOp,
                      ": expected the padded input to be at least the kernel size on every "
                      "axis, but got input",
                      shape_str(input.shape()), " weight", shape_str(weight.shape()),
                      " padding (", padding[0], ",", padding[1], ",", padding[2], ")");
    args.size[a] = n;
    args.kernel[a] = k;
    args.stride[a] = stride[a];
    args.padding[a] = padding[a];
    args.out[a] = (padded - k) / stride[a] + 1;
  }
  return args;
}

}  // namespace

Tensor conv3d_depthwise(const Tensor& input, const Tensor& weight, const Tensor& bias,
                        std::array<int64_t, 3> stride, std::array<int64_t, 3> padding) {
  const OpRange range(OpId::Conv3dDepthwise);
  const Conv3dArgs args = check_inputs(input, weight, bias, stride, padding);
  const Shape out_shape{args.B, args.C, args.out[0], args.out[1], args.out[2]};
  const Device dev = input.device();
  Tensor xin = contiguous_data(input), wc = contiguous_data(weight);
  Tensor bc = bias.defined() ? contiguous_data(bias) : Tensor();
  Tensor out = empty(out_shape, input.dtype(), dev);
  dispatch_kernels(OpId::Conv3dDepthwise, input, [&]<class T>(const KernelTable<T>& k) {
    k.conv3d_depthwise_forward(dev.index, args, xin.data<T>(), wc.data<T>(),
                               bc.defined() ? bc.data<T>() : nullptr, out.data<T>());
  });
  const bool has_bias = bias.defined();
  record(OpId::Conv3dDepthwise, {input, weight, bias}, {out}, {xin, wc},
         [args, out_shape, has_bias](const Node& n, const Grads& g) {
           const Tensor &x = n.saved_tensor(0), &w = n.saved_tensor(1);
           check<ShapeError>(g[0].shape() == out_shape, kOp, ": expected grad_output of shape ",
                             shape_str(out_shape), ", but got ", shape_str(g[0].shape()));
           const Device dev = g[0].device();
           const DType dt = x.dtype();
           Tensor go = contiguous_data(g[0]);
           Tensor gx = n.needs_input_grad(0) ? empty(x.shape(), dt, dev) : Tensor();
           Tensor gw = n.needs_input_grad(1) ? empty(w.shape(), dt, dev) : Tensor();
           Tensor gb = has_bias && n.needs_input_grad(2) ? empty({args.C}, dt, dev) : Tensor();
           dispatch_kernels(OpId::Conv3dDepthwise, x, [&]<class T>(const KernelTable<T>& k) {
             if (gx.defined())
               k.conv3d_depthwise_backward_input(dev.index, args, go.data<T>(), w.data<T>(), gx.data<T>());
             if (gw.defined() || gb.defined())
               k.conv3d_depthwise_backward_params(dev.index, args, go.data<T>(), x.data<T>(),
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
