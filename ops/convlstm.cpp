// ConvLSTM3D cell: shape checks, the one body over the kernel tables (the
// CPU's fused kernels in ops/cpu/convlstm_kernel.cpp, a device's entry
// composing its kernels in cuda/convlstm.cu), op-table entry. Shapes:
// x[B,Cx,D,H,W], h and c [B,C,D,H,W], Cz = Cx + C, S = D*H*W voxels;
// weights and formula as in ops/convlstm.h.
#include "tmem/ops/convlstm.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "tmem/core/autograd.h"
#include "tmem/core/profiler.h"
#include "tmem/ops/dispatch.h"
#include "tmem/ops/op_table.h"

namespace tmem {

namespace {

using Grads = std::vector<Tensor>;
constexpr const char* kOp = "convlstm3d_cell";

// Inputs of the tape node, in this order.
enum Input { kX, kH, kC, kDwD, kDwH, kDwW, kDbD, kDbH, kDbW, kPw, kPb, kNumInputs };

using Dims = ConvLstmArgs;

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
  Dims dm;
  dm.B = x.size(0);
  dm.Cx = x.size(1);
  dm.C = h.size(1);
  dm.D = x.size(2);
  dm.H = x.size(3);
  dm.W = x.size(4);
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

// Throws ShapeError unless the output gradients g (of h' and c') have the
// state's shape [B, C, D, H, W].
void check_output_grads(const Dims& dm, const Grads& g) {
  const Shape state{dm.B, dm.C, dm.D, dm.H, dm.W};
  for (int k = 0; k < 2; ++k)
    check<ShapeError>(g[k].shape() == state, kOp, ": expected grad_output ", k == 0 ? "h'" : "c'",
                      " of shape ", shape_str(state), ", but got ", shape_str(g[k].shape()));
}

// The weights as the kernels take them, from the contiguous inputs t (pb:
// null when t ends before it, as the saved tensors do).
template <class T>
ConvLstmWeights<T> weights_of(const std::vector<Tensor>& t) {
  auto p = [&](int i) { return static_cast<int>(t.size()) > i ? t[i].template data<T>() : nullptr; };
  return {{p(kDwD), p(kDwH), p(kDwW)}, {p(kDbD), p(kDbH), p(kDbW)}, p(kPw), p(kPb)};
}

}  // namespace

ConvLSTM3DState convlstm3d_cell(const Tensor& x, const Tensor& h, const Tensor& c,
                                const ConvLSTM3DWeights& w) {
  const OpRange range(OpId::Convlstm3dCell);
  const Dims dm = check_inputs(x, h, c, w);
  const std::vector<Tensor> inputs{x, h, c, w.dw_d, w.dw_h, w.dw_w, w.db_d, w.db_h, w.db_w,
                                   w.pw, w.pb};
  std::vector<Tensor> cont;
  for (const Tensor& t : inputs) cont.push_back(contiguous_data(t));
  const Shape state{dm.B, dm.C, dm.D, dm.H, dm.W};
  Tensor hn = empty(state, x.dtype(), x.device()), cn = empty(state, x.dtype(), x.device());
  // The activated gates [B, 4C, gates_row], kept only when a backward will
  // need them.
  const bool keep_gates = needs_grad(inputs);
  Tensor gates;
  // An empty grid (D, H or W of 0) has no voxels to update: h' and c' are
  // empty, and the backward's weight gradients are 0.
  const bool no_voxels = dm.D * dm.H * dm.W == 0;
  if (!no_voxels) dispatch_kernels(OpId::Convlstm3dCell, x, [&]<class T>(const KernelTable<T>& k) {
    const int dev = x.device().index;
    if (keep_gates)
      gates = empty({dm.B, 4 * dm.C, k.convlstm3d_cell_gates_row(dev, dm)}, x.dtype(), x.device());
    k.convlstm3d_cell_forward(dev, dm, weights_of<T>(cont), cont[kX].template data<T>(),
                              cont[kH].template data<T>(), cont[kC].template data<T>(),
                              keep_gates ? gates.template data<T>() : nullptr, cn.template data<T>(),
                              hn.template data<T>());
  });
  // Saved: x, h, c, the depthwise weights and biases, pw, then c' and the gates.
  std::vector<Tensor> saved(cont.begin(), cont.begin() + kPb);
  saved.push_back(cn);
  saved.push_back(gates);
  record(OpId::Convlstm3dCell, inputs, {hn, cn}, saved, [dm, no_voxels](const Node& n, const Grads& g) {
    check_output_grads(dm, g);
    Tensor gh = contiguous_data(g[0]), gc = contiguous_data(g[1]);
    Grads out(kNumInputs);
    for (int i = 0; i < kNumInputs; ++i)
      if (n.needs_input_grad(i))
        out[i] = no_voxels ? zeros(n.input_shapes[i], n.input_dtypes[i], gh.device())
                           : empty(n.input_shapes[i], n.input_dtypes[i], gh.device());
    if (no_voxels) return out;
    std::vector<Tensor> sv;
    for (int i = 0; i < kPb; ++i) sv.push_back(n.saved_tensor(i));
    dispatch_kernels(OpId::Convlstm3dCell, gh, [&]<class T>(const KernelTable<T>& k) {
      auto gp = [&](int i) { return out[i].defined() ? out[i].template data<T>() : nullptr; };
      const ConvLstmGrads<T> gr{gp(kX), gp(kH), gp(kC), {gp(kDwD), gp(kDwH), gp(kDwW)},
                                {gp(kDbD), gp(kDbH), gp(kDbW)}, gp(kPw), gp(kPb)};
      k.convlstm3d_cell_backward(gh.device().index, dm, weights_of<T>(sv), sv[kX].template data<T>(),
                                 sv[kH].template data<T>(), sv[kC].template data<T>(),
                                 n.saved_tensor(kPb).template data<T>(), n.saved_tensor(kPb + 1).template data<T>(),
                                 gh.template data<T>(), gc.template data<T>(), gr);
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
