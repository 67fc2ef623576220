// Selective scan: shape checks, the one body over the kernel tables
// (ops/cpu/selective_scan_kernel.cpp, cuda/selective_scan.cu), op-table
// entry. Shapes: u, delta, y [B,T,E]; A [E,N]; Bm, Cm [B,T,N]; D [E]; h0, h
// [B,E,N]. Formula: see ops/selective_scan.h.
#include "tmem/ops/selective_scan.h"

#include <string>
#include <vector>

#include "tmem/core/autograd.h"
#include "tmem/core/profiler.h"
#include "tmem/ops/dispatch.h"
#include "tmem/ops/op_table.h"
#include "tmem/ops/shape.h"

namespace tmem {

namespace {

using Grads = std::vector<Tensor>;
constexpr const char* kOp = "selective_scan";

// Inputs of the tape node, in this order.
enum Input { kU, kDelta, kA, kBm, kCm, kD, kH0, kNumInputs };
constexpr const char* kNames[kNumInputs] = {"u", "delta", "A", "Bm", "Cm", "D", "h0"};

// t's data, or null for an undefined t.
template <class S>
S* ptr(const Tensor& t) {
  return t.defined() ? t.data<S>() : nullptr;
}

// Contiguous data of the inputs (an undefined h0 stays undefined).
std::vector<Tensor> contiguous_inputs(const std::vector<Tensor>& inputs) {
  std::vector<Tensor> cont;
  for (const Tensor& t : inputs) cont.push_back(t.defined() ? contiguous_data(t) : Tensor());
  return cont;
}

// The inputs the node saved (their contiguous data; h0 undefined when it was).
std::vector<Tensor> saved_inputs(const Node& n) {
  std::vector<Tensor> saved;
  for (int i = 0; i < kNumInputs; ++i) saved.push_back(n.saved_tensor(i));
  return saved;
}

// Uninitialised gradient tensors on `dev` for the inputs that need one.
Grads grad_tensors(const Node& n, Device dev) {
  Grads out(kNumInputs);
  for (int i = 0; i < kNumInputs; ++i)
    if (n.needs_input_grad(i)) out[i] = empty(n.input_shapes[i], n.input_dtypes[i], dev);
  return out;
}

// ---- checks ----

std::string shape_or_none(const Tensor& t) {
  return t.defined() ? shape_str(t.shape()) : std::string("(undefined)");
}

ScanArgs check_inputs(const std::vector<Tensor>& in) {
  const Tensor &u = in[kU], &Bm = in[kBm];
  check<ShapeError>(u.defined() && u.dim() == 3, kOp, ": expected u [B,T,E], but got ", shape_or_none(u));
  check<ShapeError>(Bm.defined() && Bm.dim() == 3, kOp, ": expected Bm [B,T,N], but got ", shape_or_none(Bm));
  ScanArgs d;
  d.B = u.size(0);
  d.T = u.size(1);
  d.E = u.size(2);
  d.N = Bm.size(2);
  const Shape want[kNumInputs] = {{d.B, d.T, d.E}, {d.B, d.T, d.E}, {d.E, d.N}, {d.B, d.T, d.N},
                                  {d.B, d.T, d.N}, {d.E},           {d.B, d.E, d.N}};
  const char* pattern[kNumInputs] = {"[B,T,E]", "[B,T,E]", "[E,N]", "[B,T,N]", "[B,T,N]", "[E]", "[B,E,N]"};
  for (int i = 0; i < kNumInputs; ++i) {
    if (i == kH0 && !in[i].defined()) continue;
    check<ShapeError>(in[i].defined() && in[i].shape() == want[i], kOp, ": expected ", kNames[i], " ",
                      pattern[i], " = ", shape_str(want[i]), ", but got ", shape_or_none(in[i]),
                      " (B,T,E from u", shape_str(u.shape()), ", N from Bm", shape_str(Bm.shape()), ")");
  }
  for (int i = 0; i < kNumInputs; ++i) {
    if (!in[i].defined()) continue;
    check<DeviceError>(in[i].device() == u.device(), kOp, ": expected every input on u's device ",
                       u.device().str(), ", but ", kNames[i], " is on ", in[i].device().str());
    check<DtypeError>(in[i].dtype() == u.dtype(), kOp, ": expected every input of u's dtype ",
                      dtype_name(u.dtype()), ", but ", kNames[i], " is ", dtype_name(in[i].dtype()));
  }
  check<DtypeError>(is_floating(u.dtype()), kOp, ": expected a floating dtype (float32 or float64), but got ",
                    dtype_name(u.dtype()));
  return d;
}

// Throws ShapeError unless the output gradients (y's and h's, where
// defined) have the outputs' shapes.
void check_output_grads(const ScanArgs& d, const Grads& g) {
  const Shape want[2] = {{d.B, d.T, d.E}, {d.B, d.E, d.N}};
  for (int k = 0; k < 2; ++k)
    if (g[k].defined())
      check<ShapeError>(g[k].shape() == want[k], kOp, ": expected grad_output ", k == 0 ? "y" : "h",
                        " of shape ", shape_str(want[k]), ", but got ", shape_str(g[k].shape()));
}

// The output gradients, contiguous (undefined where none came).
Grads output_grads(const Grads& g) {
  return {g[0].defined() ? contiguous_data(g[0]) : Tensor(), g[1].defined() ? contiguous_data(g[1]) : Tensor()};
}

}  // namespace

SelectiveScanResult selective_scan(const Tensor& u, const Tensor& delta, const Tensor& A, const Tensor& Bm,
                                   const Tensor& Cm, const Tensor& D, const Tensor& h0) {
  const OpRange range(OpId::SelectiveScan);
  const std::vector<Tensor> inputs{u, delta, A, Bm, Cm, D, h0};
  const ScanArgs d = check_inputs(inputs);
  const Device dev = u.device();
  const std::vector<Tensor> cont = contiguous_inputs(inputs);
  Tensor y = empty({d.B, d.T, d.E}, u.dtype(), dev), h = empty({d.B, d.E, d.N}, u.dtype(), dev);
  dispatch_kernels(OpId::SelectiveScan, u, [&]<class S>(const KernelTable<S>& k) {
    k.selective_scan_forward(dev.index, d, ptr<S>(cont[kU]), ptr<S>(cont[kDelta]), ptr<S>(cont[kA]),
                             ptr<S>(cont[kBm]), ptr<S>(cont[kCm]), ptr<S>(cont[kD]), ptr<S>(cont[kH0]),
                             y.data<S>(), h.data<S>());
  });
  record(OpId::SelectiveScan, inputs, {y, h}, cont, [d](const Node& n, const Grads& g) {
    check_output_grads(d, g);
    const Grads go = output_grads(g);
    const std::vector<Tensor> in = saved_inputs(n);
    const Device dev = in[kU].device();
    Grads out = grad_tensors(n, dev);
    dispatch_kernels(OpId::SelectiveScan, in[kU], [&]<class S>(const KernelTable<S>& k) {
      k.selective_scan_backward(dev.index, d, ptr<S>(in[kU]), ptr<S>(in[kDelta]), ptr<S>(in[kA]),
                                ptr<S>(in[kBm]), ptr<S>(in[kCm]), ptr<S>(in[kD]), ptr<S>(in[kH0]),
                                ptr<S>(go[0]), ptr<S>(go[1]), ptr<S>(out[kU]), ptr<S>(out[kDelta]),
                                ptr<S>(out[kA]), ptr<S>(out[kBm]), ptr<S>(out[kCm]), ptr<S>(out[kD]),
                                ptr<S>(out[kH0]));
    });
    return out;
  });
  return {y, h};
}

void register_selective_scan_ops(std::vector<OpInfo>& t) {
  using V = std::vector<Tensor>;
  // B=2, T=5, E=3, N=4; delta > 0 (as after softplus) and A < 0 (Mamba's
  // A = -exp(A_log)); every input differentiable.
  auto inputs = [] {
    return V{gc_input({2, 5, 3}, -1, 1, 51), gc_input({2, 5, 3}, 0.1, 0.9, 52), gc_input({3, 4}, -1.5, -0.2, 53),
             gc_input({2, 5, 4}, -1, 1, 54), gc_input({2, 5, 4}, -1, 1, 55),  gc_input({3}, -1, 1, 56),
             gc_input({2, 3, 4}, -1, 1, 57)};
  };
  auto no_h0 = [inputs] {
    V v = inputs();
    v.pop_back();
    return v;
  };
  // y and h side by side in one output, so the checked loss weighs both.
  auto both = [](const SelectiveScanResult& r) { return cat({reshape(r.y, {-1}), reshape(r.h, {-1})}, 0); };
  t.push_back({OpId::SelectiveScan, {"cpu"}, {"u", "delta", "A", "Bm", "Cm", "D", "h0"},
               {{"y and h of B=2 T=5 E=3 N=4", inputs,
                 [both](const V& v) { return both(selective_scan(v[0], v[1], v[2], v[3], v[4], v[5], v[6])); }},
                {"y and h from zeros (h0 undefined)", no_h0,
                 [both](const V& v) { return both(selective_scan(v[0], v[1], v[2], v[3], v[4], v[5], Tensor())); }}}});
}

}  // namespace tmem
