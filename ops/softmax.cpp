// Softmax and log-softmax: the row layout and the one body over the kernel
// tables (ops/cpu/softmax_kernel.cpp, cuda/softmax.cu). Shapes: x[..., R, ...]
// is viewed as O rows of R elements (R = x.size(dim), O = numel / R). When
// dim is last and x is contiguous the rows are x's own memory; otherwise dim
// is permuted last into a contiguous copy and the result permuted back.
#include "tmem/ops/softmax.h"

#include <array>
#include <limits>
#include <tuple>
#include <utility>

#include "tmem/core/autograd.h"
#include "tmem/core/profiler.h"
#include "tmem/ops/dispatch.h"
#include "tmem/ops/op_table.h"

namespace tmem {

namespace {

using Grads = std::vector<Tensor>;

// x viewed as rows along `dim`.
struct RowLayout {
  Shape shape;       // the tensor's shape
  Shape perm_shape;  // shape with dim moved last
  std::vector<int64_t> perm;
  bool last = true;  // dim is already the last dim
  int64_t O = 1, R = 1;
};

RowLayout row_layout(const Tensor& x, int64_t dim, const char* op) {
  RowLayout L;
  L.shape = x.shape();
  const int64_t r = x.dim();
  if (r == 0) {
    normalize_dim(dim, 0, op);  // dims -1 and 0, as torch; the error says rank 0
    return L;
  }
  const int64_t d = normalize_dim(dim, r, op);
  for (int64_t i = 0; i < r; ++i)
    if (i != d) L.perm.push_back(i);
  L.perm.push_back(d);
  for (int64_t i : L.perm) L.perm_shape.push_back(L.shape[i]);
  L.last = d == r - 1;
  L.R = L.shape[d];
  L.O = L.R ? x.numel() / L.R : 0;
  return L;
}

// t's data as contiguous rows [O, R] (t itself when dim is last and t is contiguous).
Tensor to_rows(const Tensor& t, const RowLayout& L) {
  if (L.last) return contiguous_data(t);
  Shape strides;
  for (int64_t i : L.perm) strides.push_back(t.strides()[i]);
  return contiguous_data(make_view(t, L.perm_shape, strides, t.offset()));
}

// Copies buf (L.perm_shape, contiguous) into out (L.shape, contiguous), moving
// the last dim back to its place.
void unpermute_rows(const Tensor& out, const Tensor& buf, const RowLayout& L) {
  Shape strides;
  for (int64_t i : L.perm) strides.push_back(out.strides()[i]);
  copy_data(make_view(out, L.perm_shape, strides, 0), buf);
}

// out = launch(k, out_rows, in_rows...) with k the kernel table of the
// inputs' device: the rows of every input as contiguous [O, R] (ins[0] names
// the device and dtype), the output a fresh contiguous tensor of L.shape.
template <class F, class... In>
Tensor map_rows(OpId id, const RowLayout& L, F launch, const In&... ins) {
  constexpr size_t N = sizeof...(In);
  const Tensor& first = std::get<0>(std::tie(ins...));
  Tensor out = empty(L.shape, first.dtype(), first.device());
  Tensor buf = L.last ? out : empty(L.perm_shape, first.dtype(), first.device());
  std::array<Tensor, N> rows{to_rows(ins, L)...};
  dispatch_kernels(id, first, [&]<class T>(const KernelTable<T>& k) {
    [&]<size_t... J>(std::index_sequence<J...>) {
      launch(k, buf.data<T>(), rows[J].template data<T>()...);
    }(std::make_index_sequence<N>{});
  });
  if (!L.last) unpermute_rows(out, buf, L);
  return out;
}

// softmax (log_softmax for id LogSoftmax) of x, with its backward.
Tensor softmax_rows(OpId id, const Tensor& x, const RowLayout& L) {
  const bool log = id == OpId::LogSoftmax;
  const int device = x.device().index;
  Tensor y = map_rows(
      id, L,
      [&]<class T>(const KernelTable<T>& k, T* yr, const T* xr) {
        k.softmax_forward(device, log, xr, yr, L.O, L.R);
      },
      x);
  record(id, {x}, {y}, {y}, [L, id, log, device](const Node& n, const Grads& g) {
    return Grads{map_rows(
        id, L,
        [&]<class T>(const KernelTable<T>& k, T* gx, const T* yr, const T* gr) {
          k.softmax_backward(device, log, yr, gr, gx, L.O, L.R);
        },
        n.saved_tensor(0), g[0])};
  });
  return y;
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) {
  const OpRange range(OpId::Softmax);
  return softmax_rows(OpId::Softmax, x, row_layout(x, dim, "softmax"));
}

Tensor log_softmax(const Tensor& x, int64_t dim) {
  const OpRange range(OpId::LogSoftmax);
  return softmax_rows(OpId::LogSoftmax, x, row_layout(x, dim, "log_softmax"));
}

void register_softmax_ops(std::vector<OpInfo>& t) {
  using V = std::vector<Tensor>;
  constexpr double inf = std::numeric_limits<double>::infinity();
  // Row 1 fully masked (-inf: zeros out, zero gradient), row 2 partly masked.
  auto masked = [] {
    Tensor x = gc_input({3, 5}, -2, 2, 5);
    double* p = x.data<double>();
    for (int64_t j = 0; j < 5; ++j) p[5 + j] = -inf;
    p[10] = p[13] = -inf;
    return V{x};
  };
  t.push_back({OpId::Softmax, {"cpu"}, {"input"},
               {{"dim -1 [3,19] (vector body + tail)", [] { return V{gc_input({3, 19}, -3, 3)}; },
                 [](const V& v) { return softmax(v[0], -1); }},
                {"dim 1 of [2,3,4] (permuted path)",
                 [] { return V{gc_input({2, 3, 4}, -3, 3, 2)}; },
                 [](const V& v) { return softmax(v[0], 1); }},
                {"fully and partly -inf masked rows", masked,
                 [](const V& v) { return softmax(v[0], -1); }},
                {"rows offset by 1000", [] { return V{gc_input({2, 6}, 999, 1001, 3)}; },
                 [](const V& v) { return softmax(v[0], 1); }}}});
  t.push_back({OpId::LogSoftmax, {"cpu"}, {"input"},
               {{"dim -1 [3,19] (vector body + tail)", [] { return V{gc_input({3, 19}, -3, 3)}; },
                 [](const V& v) { return log_softmax(v[0], -1); }},
                {"dim 0 of [3,4,2] (permuted path)",
                 [] { return V{gc_input({3, 4, 2}, -3, 3, 4)}; },
                 [](const V& v) { return log_softmax(v[0], 0); }},
                {"rows offset by 1000", [] { return V{gc_input({2, 6}, 999, 1001, 3)}; },
                 [](const V& v) { return log_softmax(v[0], -1); }}}});
}

}  // namespace tmem
