// Softmax and log-softmax: forward and backward row kernels side by side.
// Shapes: x[..., R, ...] is viewed as O rows of R elements (R = x.size(dim),
// O = numel / R). When dim is last and x is contiguous the rows are x's own
// memory (the fast path: each row vectorised with xsimd); otherwise dim is
// permuted last into a contiguous copy and the result permuted back. On a
// device the same contiguous rows go to the backend's softmax kernels
// (ops/dispatch.h), forward and backward.
#include "tmem/ops/softmax.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <tuple>
#include <utility>

#include "tmem/core/autograd.h"
#include "tmem/core/profiler.h"
#include "tmem/core/strided.h"
#include "tmem/ops/cpu/simd.h"
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
    normalize_dim(dim, 1, op);
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

// out = f applied row by row: f(T* out_row, int64_t R, const T* in_row...).
// The output is a fresh contiguous tensor of L.shape.
template <class F, class... In>
Tensor map_rows(const RowLayout& L, const char* op, F f, const In&... ins) {
  constexpr size_t N = sizeof...(In);
  const DType dtype = std::get<0>(std::tie(ins...)).dtype();
  Tensor out = empty(L.shape, dtype);
  Tensor buf = L.last ? out : empty(L.perm_shape, dtype);
  std::array<Tensor, N> rows{to_rows(ins, L)...};
  dispatch_floating(dtype, op, [&]<class T>() {
    T* o = buf.data<T>();
    std::array<const T*, N> p;
    for (size_t j = 0; j < N; ++j) p[j] = rows[j].template data<T>();
    const int64_t O = L.O, R = L.R;
    // Made outside the parallel loop: clang cannot outline a lambda that
    // refers to f from inside an OpenMP region of this template lambda.
    auto row = [&](int64_t i) {
      [&]<size_t... J>(std::index_sequence<J...>) { f(o + i * R, R, (p[J] + i * R)...); }(std::make_index_sequence<N>{});
    };
#pragma omp parallel for if (O * R >= kParallelGrain && O > 1)
    for (int64_t i = 0; i < O; ++i) row(i);
  });
  if (!L.last) unpermute_rows(out, buf, L);
  return out;
}

// map_rows on a device (float32): launch(float* out_rows, const float* in_rows...)
// runs the device kernel over all O rows of R at once.
template <class F, class... In>
Tensor map_rows_device(const RowLayout& L, F launch, const In&... ins) {
  const Tensor& first = std::get<0>(std::tie(ins...));
  Tensor out = empty(L.shape, DType::Float32, first.device());
  Tensor buf = L.last ? out : empty(L.perm_shape, DType::Float32, first.device());
  launch(buf.data<float>(), to_rows(ins, L).template data<float>()...);
  if (!L.last) unpermute_rows(out, buf, L);
  return out;
}

using cpu::row_dot;
using cpu::row_max;
using cpu::sum_exp;

template <class T>
constexpr T kNegInf = -std::numeric_limits<T>::infinity();

// True when every element is -inf: a fully masked row. (A row holding NaN can
// also have max -inf under max's NaN rules; it is not masked and gives NaN.)
template <class T>
bool all_neg_inf(const T* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (x[i] != kNegInf<T>) return false;
  return true;
}

template <class T>
void softmax_row(T* y, int64_t n, const T* x) {
  using B = cpu::Batch<T>;
  constexpr int64_t W = B::size;
  const T m = row_max(x, n);
  if (m == kNegInf<T> && all_neg_inf(x, n)) {
    std::fill(y, y + n, T(0));
    return;
  }
  const T inv = T(1) / sum_exp(x, m, n, y);
  int64_t i = 0;
  for (; i + W <= n; i += W) (B::load_unaligned(y + i) * B(inv)).store_unaligned(y + i);
  for (; i < n; ++i) y[i] *= inv;
}

// dx = y * (g - sum(g * y)); zero on a masked row, where y = 0.
template <class T>
void softmax_backward_row(T* gx, int64_t n, const T* y, const T* g) {
  using B = cpu::Batch<T>;
  constexpr int64_t W = B::size;
  const T dot = row_dot(g, y, n);
  int64_t i = 0;
  for (; i + W <= n; i += W) {
    B yv = B::load_unaligned(y + i);
    (yv * (B::load_unaligned(g + i) - B(dot))).store_unaligned(gx + i);
  }
  for (; i < n; ++i) gx[i] = y[i] * (g[i] - dot);
}

// y = (x - m) - log(sum exp(x - m)): x - m first, so a huge common offset
// (logits 1e8) cancels exactly before the small log-sum is subtracted.
template <class T>
void log_softmax_row(T* y, int64_t n, const T* x) {
  using B = cpu::Batch<T>;
  constexpr int64_t W = B::size;
  const T m = row_max(x, n);
  if (m == kNegInf<T> && all_neg_inf(x, n)) {
    std::fill(y, y + n, kNegInf<T>);
    return;
  }
  const T lse = std::log(sum_exp(x, m, n, static_cast<T*>(nullptr)));
  int64_t i = 0;
  for (; i + W <= n; i += W)
    ((B::load_unaligned(x + i) - B(m)) - B(lse)).store_unaligned(y + i);
  for (; i < n; ++i) y[i] = (x[i] - m) - lse;
}

// dx = g - exp(y) * sum(g); zero on a masked row (y all -inf).
template <class T>
void log_softmax_backward_row(T* gx, int64_t n, const T* y, const T* g) {
  using B = cpu::Batch<T>;
  constexpr int64_t W = B::size;
  if (row_max(y, n) == kNegInf<T> && all_neg_inf(y, n)) {
    std::fill(gx, gx + n, T(0));
    return;
  }
  const T sg = row_dot(g, static_cast<const T*>(nullptr), n);
  int64_t i = 0;
  for (; i + W <= n; i += W) {
    B e = cpu::vexp(B::load_unaligned(y + i));
    (B::load_unaligned(g + i) - e * B(sg)).store_unaligned(gx + i);
  }
  for (; i < n; ++i) gx[i] = g[i] - std::exp(y[i]) * sg;
}

// softmax (log_softmax for id LogSoftmax) of x on a device, with its backward.
Tensor softmax_device(OpId id, const Tensor& x, const RowLayout& L) {
  const bool log = id == OpId::LogSoftmax;
  const OpKernels& k = device_kernels(id, x);
  const int device = x.device().index;
  Tensor y = map_rows_device(
      L, [&](float* yr, const float* xr) { k.softmax_forward(device, log, xr, yr, L.O, L.R); }, x);
  record(id, {x}, {y}, {y}, [L, id, log](const Node& n, const Grads& g) {
    const Tensor& ys = n.saved_tensor(0);
    const OpKernels& kb = device_kernels(id, ys);
    const int dev = ys.device().index;
    return Grads{map_rows_device(
        L,
        [&](float* gx, const float* yr, const float* gr) {
          kb.softmax_backward(dev, log, yr, gr, gx, L.O, L.R);
        },
        ys, g[0])};
  });
  return y;
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) {
  const OpRange range(OpId::Softmax);
  RowLayout L = row_layout(x, dim, "softmax");
  if (!x.device().is_cpu()) return softmax_device(OpId::Softmax, x, L);
  Tensor y = map_rows(L, "softmax",
                      [](auto* yr, int64_t n, const auto* xr) { softmax_row(yr, n, xr); }, x);
  record(OpId::Softmax, {x}, {y}, {y}, [L](const Node& n, const Grads& g) {
    return Grads{map_rows(L, "softmax_backward",
                          [](auto* gx, int64_t r, const auto* yr, const auto* gr) {
                            softmax_backward_row(gx, r, yr, gr);
                          },
                          n.saved_tensor(0), g[0])};
  });
  return y;
}

Tensor log_softmax(const Tensor& x, int64_t dim) {
  const OpRange range(OpId::LogSoftmax);
  RowLayout L = row_layout(x, dim, "log_softmax");
  if (!x.device().is_cpu()) return softmax_device(OpId::LogSoftmax, x, L);
  Tensor y = map_rows(L, "log_softmax",
                      [](auto* yr, int64_t n, const auto* xr) { log_softmax_row(yr, n, xr); }, x);
  record(OpId::LogSoftmax, {x}, {y}, {y}, [L](const Node& n, const Grads& g) {
    return Grads{map_rows(L, "log_softmax_backward",
                          [](auto* gx, int64_t r, const auto* yr, const auto* gr) {
                            log_softmax_backward_row(gx, r, yr, gr);
                          },
                          n.saved_tensor(0), g[0])};
  });
  return y;
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
