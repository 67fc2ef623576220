// Cross-entropy over a stable log-softmax: the checks and the one body over
// the kernel tables (ops/cpu/loss_kernel.cpp, cuda/loss.cu). Shapes:
// logits[N, C], target[N] int64 -> loss [] or [N]; saved for backward: lsm =
// log_softmax(logits)[N, C] and the target. The targets are range-checked
// and the non-ignored samples counted on the host first (a device's targets
// are copied over for that), so every device throws the same IndexError.
#include "tmem/ops/loss.h"

#include "tmem/core/autograd.h"
#include "tmem/core/profiler.h"
#include "tmem/ops/dispatch.h"
#include "tmem/ops/op_table.h"
#include "tmem/ops/softmax.h"

namespace tmem {

namespace {

using Grads = std::vector<Tensor>;

enum class Reduction { None, Sum, Mean };

Reduction parse_reduction(const std::string& r) {
  if (r == "none") return Reduction::None;
  if (r == "sum") return Reduction::Sum;
  check<ValueError>(r == "mean", "cross_entropy: expected reduction \"mean\", \"sum\" or ",
                    "\"none\", but got \"", r, "\"");
  return Reduction::Mean;
}

}  // namespace

Tensor cross_entropy(const Tensor& logits, const Tensor& target, int64_t ignore_index,
                     double label_smoothing, const std::string& reduction) {
  const OpRange range(OpId::CrossEntropy);
  check<DeviceError>(logits.device() == target.device(),
                     "cross_entropy: expected operands on one device, but got ",
                     logits.device().str(), " and ", target.device().str());
  check<ShapeError>(logits.dim() == 2 && target.dim() == 1 &&
                        target.shape()[0] == logits.shape()[0],
                    "cross_entropy: expected logits [N, C] and target [N], but got logits",
                    shape_str(logits.shape()), " target", shape_str(target.shape()));
  check<DtypeError>(target.dtype() == DType::Int64,
                    "cross_entropy: expected an int64 target (class indices), but got ",
                    dtype_name(target.dtype()));
  check<ValueError>(label_smoothing >= 0.0 && label_smoothing <= 1.0,
                    "cross_entropy: expected label_smoothing in [0, 1], but got ", label_smoothing);
  const Reduction red = parse_reduction(reduction);
  const int64_t N = logits.shape()[0], C = logits.shape()[1];
  const bool on_cpu = logits.device().is_cpu();
  Tensor tgt = contiguous_data(target);
  const std::vector<int64_t> host_tgt = on_cpu ? std::vector<int64_t>() : tgt.to_int_vector();
  const int64_t* tp = on_cpu ? tgt.data<int64_t>() : host_tgt.data();
  int64_t count = 0;
  for (int64_t n = 0; n < N; ++n) {
    if (tp[n] == ignore_index) continue;
    check<IndexError>(tp[n] >= 0 && tp[n] < C, "cross_entropy: target ", tp[n], " (sample ", n,
                      ") is out of range for ", C, " classes (logits", shape_str(logits.shape()),
                      ") and is not ignore_index ", ignore_index);
    ++count;
  }
  Tensor lsm;
  {
    NoGradGuard no_grad;
    lsm = log_softmax(logits, 1);
  }
  const double eps = label_smoothing;
  // Reduction "none" keeps the per-sample losses; "sum" and "mean" divide
  // their sum by 1 or by the samples not ignored.
  const double divisor = red == Reduction::Mean ? static_cast<double>(count) : 1.0;
  const Device dev = logits.device();
  Tensor per = empty({N}, logits.dtype(), dev);
  Tensor out = red == Reduction::None ? per : empty({}, logits.dtype(), dev);
  dispatch_kernels(OpId::CrossEntropy, logits, [&]<class T>(const KernelTable<T>& k) {
    k.cross_entropy_forward(dev.index, lsm.data<T>(), tgt.data<int64_t>(), per.data<T>(), N, C,
                            ignore_index, eps, red == Reduction::None ? nullptr : out.data<T>(),
                            divisor);
  });
  record(OpId::CrossEntropy, {logits, target}, {out}, {lsm, tgt},
         [N, C, ignore_index, eps, red, divisor](const Node& nd, const Grads& g) {
           const Tensor& ls = nd.saved_tensor(0);
           const Tensor& tg = nd.saved_tensor(1);
           Tensor go = contiguous_data(g[0]);
           Tensor gx = empty({N, C}, ls.dtype(), ls.device());
           dispatch_kernels(OpId::CrossEntropy, ls, [&]<class T>(const KernelTable<T>& k) {
             k.cross_entropy_backward(ls.device().index, ls.data<T>(), tg.data<int64_t>(), go.data<T>(),
                                      red == Reduction::None, divisor, gx.data<T>(), N, C,
                                      ignore_index, eps);
           });
           return Grads{gx, Tensor()};
         });
  return out;
}

void register_loss_ops(std::vector<OpInfo>& t) {
  using V = std::vector<Tensor>;
  auto in = [] { return V{gc_input({4, 5}, -2, 2), tensor_int({1, 4, 0, 4}, {4})}; };
  auto ignored_default = [] {
    return V{gc_input({5, 3}, -2, 2, 2), tensor_int({2, -100, 0, -100, 1}, {5})};
  };
  auto ignored_7 = [] { return V{gc_input({5, 3}, -2, 2, 2), tensor_int({2, 7, 0, 7, 1}, {5})}; };
  t.push_back({OpId::CrossEntropy, {"cpu"}, {"logits"},
               {{"mean", in, [](const V& v) { return cross_entropy(v[0], v[1]); }},
                {"sum", in, [](const V& v) { return cross_entropy(v[0], v[1], -100, 0.0, "sum"); }},
                {"none", in,
                 [](const V& v) { return cross_entropy(v[0], v[1], -100, 0.0, "none"); }},
                {"ignore_index -100 (default), mean", ignored_default,
                 [](const V& v) { return cross_entropy(v[0], v[1]); }},
                {"ignore_index 7, sum", ignored_7,
                 [](const V& v) { return cross_entropy(v[0], v[1], 7, 0.0, "sum"); }},
                {"label smoothing 0.1 with ignore_index 7, mean", ignored_7,
                 [](const V& v) { return cross_entropy(v[0], v[1], 7, 0.1, "mean"); }},
                {"label smoothing 0.25, none", in,
                 [](const V& v) { return cross_entropy(v[0], v[1], -100, 0.25, "none"); }},
                {"[3,19] (vector body + tail), label smoothing 0.1",
                 [] { return V{gc_input({3, 19}, -2, 2, 4), tensor_int({0, 18, 7}, {3})}; },
                 [](const V& v) { return cross_entropy(v[0], v[1], -100, 0.1); }},
                {"logits offset by 1000",
                 [] { return V{gc_input({3, 4}, 999, 1001, 3), tensor_int({0, 3, 1}, {3})}; },
                 [](const V& v) { return cross_entropy(v[0], v[1]); }}}});
}

}  // namespace tmem
