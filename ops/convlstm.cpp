// ConvLSTM3D cell: shape checks, the CPU body over the fused kernels of
// ops/cpu/convlstm_kernel.cpp, the device body composed from the device's
// kernels ("device path" below), op-table entry. Shapes: x[B,Cx,D,H,W], h
// and c [B,C,D,H,W], Cz = Cx + C, S = D*H*W voxels; weights and formula as
// in ops/convlstm.h.
#include "tmem/ops/convlstm.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "tmem/core/autograd.h"
#include "tmem/core/profiler.h"
#include "tmem/ops/cpu/convlstm_kernel.h"
#include "tmem/ops/dispatch.h"
#include "tmem/ops/op_table.h"

namespace tmem {

namespace {

using Grads = std::vector<Tensor>;
constexpr const char* kOp = "convlstm3d_cell";

// Inputs of the tape node, in this order.
enum Input { kX, kH, kC, kDwD, kDwH, kDwW, kDbD, kDbH, kDbW, kPw, kPb, kNumInputs };

using Dims = cpu::ConvLstmDims;

std::string shape_or_none(const Tensor& t) {
  return t.defined() ? shape_str(t.shape()) : std::string("(undefined)");
}

Dims check_inputs(const Tensor& x, const Tensor& h, const Tensor& c, const ConvLSTM3DWeights& w) {
  check<ShapeError>(x.defined() && h.defined() && c.defined() && x.dim() == 5 && h.dim() == 5 &&
                        c.dim() == 5,
                    kOp, ": expected 5-D x[B,Cx,D,H,W], h[B,C,D,H,W] and c[B,C,D,H,W], but got x",
                    shape_or_none(x), " h", shape_or_none(h), " c", shape_or_none(c));
  check<ShapeError>(x.size(0) == h.size(0) && x.size(2) == h.size(2) && x.size(3) == h.size(3) &&
                        x.size(4) == h.size(4),
                    kOp, ": expected x and h with one batch size and grid, but got x",
                    shape_str(x.shape()), " h", shape_str(h.shape()));
  check<ShapeError>(h.shape() == c.shape(), kOp, ": expected h and c of one shape, but got h",
                    shape_str(h.shape()), " c", shape_str(c.shape()));
  Dims dm{x.size(0), x.size(1), h.size(1), x.size(2), x.size(3), x.size(4)};
  const int64_t Cz = dm.Cz();
  auto check_w = [&](const Tensor& t, const char* name, const Shape& want) {
    check<ShapeError>(t.defined() && t.shape() == want, kOp, ": expected ", name, " of shape ",
                      shape_str(want), " (Cz = Cx + C = ", dm.Cx, " + ", dm.C,
                      "), but got ", name, shape_or_none(t), " for x", shape_str(x.shape()),
                      " h", shape_str(h.shape()));
  };
  check_w(w.dw_d, "dw_d", {Cz, 3});
  check_w(w.dw_h, "dw_h", {Cz, 3});
  check_w(w.dw_w, "dw_w", {Cz, 3});
  check_w(w.db_d, "db_d", {Cz});
  check_w(w.db_h, "db_h", {Cz});
  check_w(w.db_w, "db_w", {Cz});
  check_w(w.pw, "pw", {4 * dm.C, Cz});
  check_w(w.pb, "pb", {4 * dm.C});
  const Tensor* all[] = {&x, &h, &c, &w.dw_d, &w.dw_h, &w.dw_w, &w.db_d, &w.db_h, &w.db_w, &w.pw, &w.pb};
  const char* names[] = {"x", "h", "c", "dw_d", "dw_h", "dw_w", "db_d", "db_h", "db_w", "pw", "pb"};
  for (size_t i = 0; i < std::size(all); ++i) {
    check<DeviceError>(all[i]->device() == x.device(), kOp, ": expected every input on x's device ",
                       x.device().str(), ", but ", names[i], " is on ", all[i]->device().str());
    check<DtypeError>(all[i]->dtype() == x.dtype(), kOp, ": expected every input of x's dtype ",
                      dtype_name(x.dtype()), ", but ", names[i], " is ",
                      dtype_name(all[i]->dtype()));
  }
  return dm;
}

// ---- device path ----
//
// The cell on a device, composed from the backend's kernels: z = cat(x, h)
// by two copies, the depthwise stages a1, a2, a3 by the conv3d_depthwise
// kernels, the 1x1x1 conv as a batched GEMM P[b] = pw a3[b], then the gate
// kernel (bias, activations, c', h'). The backward runs the pieces
// transposed: the gate kernel's dP and dL/dc; dpb and dpw = sum_b dP[b]
// a3[b]^T by row sums and GEMMs; da3[b] = pw^T dP[b]; then down the stack
// (W, H, D) with the depthwise kernels' input and parameter gradients. Like
// the CPU backward it recomputes a1, a2, a3 instead of saving them.

// One GEMM operand as GemmArgs takes it.
struct Operand {
  const float* p;
  bool col_major;
  int64_t ld, stride;
};

// c[i] = a[i] b[i] for i < batch, a[i] [m, kk], b[i] [kk, n], c[i] [m, n]
// (m, n, kk > 0).
void gemm_device(const OpKernels& k, int device, int64_t batch, int64_t m, int64_t n, int64_t kk, Operand a,
                 Operand b, float* c) {
  GemmArgs g;
  g.device = device;
  g.batch = batch;
  g.m = m;
  g.n = n;
  g.k = kk;
  g.a = a.p;
  g.a_col_major = a.col_major;
  g.lda = a.ld;
  g.stride_a = a.stride;
  g.b = b.p;
  g.b_col_major = b.col_major;
  g.ldb = b.ld;
  g.stride_b = b.stride;
  g.c = c;
  k.gemm(g);
}

// out[j] = sum over i < rows of m[i, j] for m [rows, cols] contiguous on
// `dev` (rows, cols > 0): ones[1, rows] @ m.
void column_sums(const OpKernels& k, Device dev, const Tensor& m, float* out, int64_t rows, int64_t cols) {
  Tensor ones = full({1, rows}, 1.0, DType::Float32, dev);
  gemm_device(k, dev.index, 1, 1, cols, rows, {ones.data<float>(), false, rows, 0},
              {m.data<float>(), false, cols, 0}, out);
}

// The depthwise stage along axis ax (0: D, 1: H, 2: W) as the
// conv3d_depthwise kernels take it: Cz channels, kernel 3 and zero padding
// 1 along ax, an output the size of the input. dw_* [Cz, 3] is the kernels'
// weight layout [Cz, taps].
Conv3dArgs stage_args(const Dims& dm, int ax) {
  Conv3dArgs a;
  a.B = dm.B;
  a.C = dm.Cz();
  const int64_t n[3] = {dm.D, dm.H, dm.W};
  for (int k = 0; k < 3; ++k) {
    a.size[k] = a.out[k] = n[k];
    a.kernel[k] = k == ax ? 3 : 1;
    a.padding[k] = k == ax ? 1 : 0;
  }
  return a;
}

// z = cat(x, h) and the depthwise stages a1, a2, a3, each [B, Cz, D, H, W].
struct DeviceStages {
  Tensor z, a1, a2, a3;
};

// The stages from the contiguous device tensors t[kX .. kPw] (inputs order).
DeviceStages device_stages(const OpKernels& k, const Dims& dm, const std::vector<Tensor>& t) {
  const Device dev = t[kX].device();
  const Shape zs{dm.B, dm.Cz(), dm.D, dm.H, dm.W};
  DeviceStages st;
  st.z = empty(zs, DType::Float32, dev);
  copy_data(make_view(st.z, t[kX].shape(), st.z.strides(), st.z.offset()), t[kX]);
  copy_data(make_view(st.z, t[kH].shape(), st.z.strides(), st.z.offset() + dm.Cx * dm.S()), t[kH]);
  Tensor* out[3] = {&st.a1, &st.a2, &st.a3};
  const Tensor* in = &st.z;
  for (int ax = 0; ax < 3; ++ax) {
    *out[ax] = empty(zs, DType::Float32, dev);
    k.conv3d_depthwise_forward(dev.index, stage_args(dm, ax), in->data<float>(), t[kDwD + ax].data<float>(),
                               t[kDbD + ax].data<float>(), out[ax]->data<float>());
    in = out[ax];
  }
  return st;
}

// Throws ShapeError unless the output gradients g (of h' and c') have the
// state's shape [B, C, D, H, W].
void check_output_grads(const Dims& dm, const Grads& g) {
  const Shape state{dm.B, dm.C, dm.D, dm.H, dm.W};
  for (int k = 0; k < 2; ++k)
    check<ShapeError>(g[k].shape() == state, kOp, ": expected grad_output ", k == 0 ? "h'" : "c'",
                      " of shape ", shape_str(state), ", but got ", shape_str(g[k].shape()));
}

// The backward of the device cell (saved: the contiguous x, h, c, depthwise
// weights and biases and pw, then c' and the gates [B, 4C, S]).
Grads cell_device_backward(const Dims& dm, const Node& n, const Grads& g) {
  const OpKernels& k = device_kernels(OpId::Convlstm3dCell, g[0]);
  const Device dev = g[0].device();
  const int64_t B = dm.B, C = dm.C, C4 = 4 * dm.C, Cz = dm.Cz(), S = dm.S();
  Tensor gh = contiguous_data(g[0]), gc = contiguous_data(g[1]);
  Grads out(kNumInputs);
  for (int i = 0; i < kNumInputs; ++i)
    if (n.needs_input_grad(i)) out[i] = empty(n.input_shapes[i], n.input_dtypes[i], dev);
  auto gp = [&](int i) { return out[i].defined() ? out[i].data<float>() : nullptr; };
  if (B * C * S == 0) {
    for (const Tensor& t : out)
      if (t.defined()) fill_data(t, 0.0);
    return out;
  }
  std::vector<Tensor> sv;
  for (int i = 0; i < kPb; ++i) sv.push_back(n.saved_tensor(i));
  const Tensor& s_cn = n.saved_tensor(kPb);
  const Tensor& s_gates = n.saved_tensor(kPb + 1);
  const bool need_dz = gp(kX) || gp(kH);
  const bool need_a1 = need_dz || gp(kDwD) || gp(kDbD);
  const bool need_a2 = need_a1 || gp(kDwH) || gp(kDbH);
  const bool need_a3 = need_a2 || gp(kDwW) || gp(kDbW);
  const bool need_p = need_a3 || gp(kPw) || gp(kPb);
  const bool recompute = gp(kPw) || gp(kDwD) || gp(kDwH) || gp(kDwW);
  Tensor dP = need_p ? empty({B, C4, S}, DType::Float32, dev) : Tensor();
  k.convlstm3d_gates_backward(dev.index, B, C, S, s_gates.data<float>(), sv[kC].data<float>(),
                              s_cn.data<float>(), gh.data<float>(), gc.data<float>(),
                              need_p ? dP.data<float>() : nullptr, gp(kC));
  if (!need_p) return out;
  if (gp(kPb)) {
    Tensor rows = empty({B, C4}, DType::Float32, dev);
    k.sum_rows(dev.index, dP.data<float>(), rows.data<float>(), B * C4, S, 1.0);
    column_sums(k, dev, rows, gp(kPb), B, C4);
  }
  const DeviceStages st = recompute ? device_stages(k, dm, sv) : DeviceStages{};
  if (gp(kPw)) {
    // dpw = sum_b dP[b] [4C, S] @ a3[b]^T [S, Cz] (a column-major view of a3[b]).
    Tensor per_item = empty({B, C4 * Cz}, DType::Float32, dev);
    gemm_device(k, dev.index, B, C4, Cz, S, {dP.data<float>(), false, S, C4 * S},
                {st.a3.data<float>(), true, S, Cz * S}, per_item.data<float>());
    column_sums(k, dev, per_item, gp(kPw), B, C4 * Cz);
  }
  if (!need_a3) return out;
  // da3[b] = pw^T [Cz, 4C] (a column-major view of pw) @ dP[b] [4C, S].
  const Shape zs{B, Cz, dm.D, dm.H, dm.W};
  Tensor grad = empty(zs, DType::Float32, dev);
  gemm_device(k, dev.index, B, Cz, S, C4, {sv[kPw].data<float>(), true, Cz, 0},
              {dP.data<float>(), false, S, C4 * S}, grad.data<float>());
  const bool need_below[3] = {need_dz, need_a1, need_a2};
  const Tensor* stage_in[3] = {&st.z, &st.a1, &st.a2};
  for (int ax = 2; ax >= 0; --ax) {
    float* gw = gp(kDwD + ax);
    float* gb = gp(kDbD + ax);
    const Conv3dArgs a = stage_args(dm, ax);
    if (gw || gb)
      k.conv3d_depthwise_backward_params(dev.index, a, grad.data<float>(),
                                         gw ? stage_in[ax]->data<float>() : nullptr, gw, gb);
    if (!need_below[ax]) break;
    Tensor below = empty(zs, DType::Float32, dev);
    k.conv3d_depthwise_backward_input(dev.index, a, grad.data<float>(), sv[kDwD + ax].data<float>(),
                                      below.data<float>());
    grad = below;
  }
  // grad is now dL/dz: its first Cx channels are dL/dx, the rest dL/dh.
  if (out[kX].defined())
    copy_data(out[kX], make_view(grad, out[kX].shape(), grad.strides(), grad.offset()));
  if (out[kH].defined())
    copy_data(out[kH], make_view(grad, out[kH].shape(), grad.strides(), grad.offset() + dm.Cx * S));
  return out;
}

// convlstm3d_cell on the device of its inputs (checked by check_inputs).
ConvLSTM3DState cell_device(const Dims& dm, const std::vector<Tensor>& inputs) {
  const OpKernels& k = device_kernels(OpId::Convlstm3dCell, inputs[kX]);
  const Device dev = inputs[kX].device();
  const int64_t C4 = 4 * dm.C, S = dm.S();
  std::vector<Tensor> cont;
  for (const Tensor& t : inputs) cont.push_back(contiguous_data(t));
  const Shape state{dm.B, dm.C, dm.D, dm.H, dm.W};
  Tensor hn = empty(state, DType::Float32, dev), cn = empty(state, DType::Float32, dev);
  // The activated gates [B, 4C, S], kept only when a backward will need them.
  const bool keep_gates = needs_grad(inputs);
  Tensor gates = keep_gates ? empty({dm.B, C4, S}, DType::Float32, dev) : Tensor();
  if (hn.numel() > 0) {
    const DeviceStages st = device_stages(k, dm, cont);
    // P[b] = pw [4C, Cz] @ a3[b] [Cz, S].
    Tensor P = empty({dm.B, C4, S}, DType::Float32, dev);
    gemm_device(k, dev.index, dm.B, C4, S, dm.Cz(), {cont[kPw].data<float>(), false, dm.Cz(), 0},
                {st.a3.data<float>(), false, S, dm.Cz() * S}, P.data<float>());
    k.convlstm3d_gates_forward(dev.index, dm.B, dm.C, S, P.data<float>(), cont[kPb].data<float>(),
                               cont[kC].data<float>(), keep_gates ? gates.data<float>() : nullptr,
                               cn.data<float>(), hn.data<float>());
  }
  std::vector<Tensor> saved(cont.begin(), cont.begin() + kPb);
  saved.push_back(cn);
  saved.push_back(gates);
  record(OpId::Convlstm3dCell, inputs, {hn, cn}, saved, [dm](const Node& n, const Grads& g) {
    check_output_grads(dm, g);
    return cell_device_backward(dm, n, g);
  });
  return {hn, cn};
}

}  // namespace

ConvLSTM3DState convlstm3d_cell(const Tensor& x, const Tensor& h, const Tensor& c,
                                const ConvLSTM3DWeights& w) {
  const OpRange range(OpId::Convlstm3dCell);
  const Dims dm = check_inputs(x, h, c, w);
  const std::vector<Tensor> inputs{x, h, c, w.dw_d, w.dw_h, w.dw_w, w.db_d, w.db_h, w.db_w,
                                   w.pw, w.pb};
  if (!x.device().is_cpu()) return cell_device(dm, inputs);
  std::vector<Tensor> cont;
  for (const Tensor& t : inputs) cont.push_back(contiguous_data(t));
  const Shape state{dm.B, dm.C, dm.D, dm.H, dm.W};
  Tensor hn = empty(state, x.dtype()), cn = empty(state, x.dtype());
  // The activated gates, kept only when a backward will need them: [B, 4C,
  // Sp], each channel's voxels padded to whole batches (see Plan).
  const bool keep_gates = needs_grad(inputs);
  Tensor gates;
  dispatch_floating(x.dtype(), kOp, [&]<class T>() {
    if (keep_gates) gates = empty({dm.B, 4 * dm.C, cpu::convlstm_gates_row<T>(dm)}, x.dtype());
    const cpu::ConvLstmWeights<T> wp{{cont[kDwD].data<T>(), cont[kDwH].data<T>(), cont[kDwW].data<T>()},
                                     {cont[kDbD].data<T>(), cont[kDbH].data<T>(), cont[kDbW].data<T>()},
                                     cont[kPw].data<T>(), cont[kPb].data<T>()};
    cpu::convlstm_forward<T>(dm, wp, cont[kX].data<T>(), cont[kH].data<T>(), cont[kC].data<T>(),
                             keep_gates ? gates.data<T>() : nullptr, cn.data<T>(), hn.data<T>());
  });
  // Saved: x, h, c, the depthwise weights and biases, pw, then c' and the gates.
  std::vector<Tensor> saved(cont.begin(), cont.begin() + kPb);
  saved.push_back(cn);
  saved.push_back(gates);
  record(OpId::Convlstm3dCell, inputs, {hn, cn}, saved, [dm](const Node& n, const Grads& g) {
    check_output_grads(dm, g);
    Tensor gh = contiguous_data(g[0]), gc = contiguous_data(g[1]);
    Grads out(kNumInputs);
    for (int i = 0; i < kNumInputs; ++i)
      if (n.needs_input_grad(i)) out[i] = empty(n.input_shapes[i], n.input_dtypes[i]);
    const Tensor& s_cn = n.saved_tensor(kPb);
    const Tensor& s_gates = n.saved_tensor(kPb + 1);
    dispatch_floating(gh.dtype(), kOp, [&]<class T>() {
      auto sp = [&](int i) { return n.saved_tensor(i).template data<T>(); };
      auto gp = [&](int i) { return out[i].defined() ? out[i].template data<T>() : nullptr; };
      const cpu::ConvLstmWeights<T> wp{{sp(kDwD), sp(kDwH), sp(kDwW)}, {sp(kDbD), sp(kDbH), sp(kDbW)},
                                       sp(kPw), nullptr};
      const cpu::ConvLstmGrads<T> gr{gp(kX), gp(kH), gp(kC), {gp(kDwD), gp(kDwH), gp(kDwW)},
                                     {gp(kDbD), gp(kDbH), gp(kDbW)}, gp(kPw), gp(kPb)};
      cpu::convlstm_backward<T>(dm, wp, sp(kX), sp(kH), sp(kC), s_cn.template data<T>(),
                                s_gates.template data<T>(), gh.template data<T>(),
                                gc.template data<T>(), gr);
    });
    return out;
  });
  return {hn, cn};
}

void register_convlstm_ops(std::vector<OpInfo>& t) {
  using V = std::vector<Tensor>;
  // B=2, Cx=2, C=3 (Cz=5), grid 3x4x5; every input differentiable.
  auto inputs = [] {
    return V{gc_input({2, 2, 3, 4, 5}, -1, 1, 31), gc_input({2, 3, 3, 4, 5}, -1, 1, 32),
             gc_input({2, 3, 3, 4, 5}, -1, 1, 33), gc_input({5, 3}, -1, 1, 34),
             gc_input({5, 3}, -1, 1, 35), gc_input({5, 3}, -1, 1, 36),
             gc_input({5}, -0.5, 0.5, 37), gc_input({5}, -0.5, 0.5, 38),
             gc_input({5}, -0.5, 0.5, 39), gc_input({12, 5}, -0.6, 0.6, 40),
             gc_input({12}, -0.5, 0.5, 41)};
  };
  auto cell = [](const V& v) {
    return convlstm3d_cell(v[0], v[1], v[2], {v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10]});
  };
  t.push_back({OpId::Convlstm3dCell, {"cpu"},
               {"x", "h", "c", "dw_d", "dw_h", "dw_w", "db_d", "db_h", "db_w", "pw", "pb"},
               {{"h' of B=2 Cx=2 C=3 grid 3x4x5", inputs, [cell](const V& v) { return cell(v).h; }},
                {"c' of B=2 Cx=2 C=3 grid 3x4x5", inputs, [cell](const V& v) { return cell(v).c; }}}});
}

}  // namespace tmem
