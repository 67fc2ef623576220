// matmul / bmm: shapes a[..., M, K], b[..., K, N] -> c[..., M, N]; the CPU
// kernel is ops/cpu/gemm (transposed operands are read through strides), the
// device kernel the backend's batched GEMM (cuBLAS on CUDA).
#include "tmem/ops/linalg.h"

#include <omp.h>

#include "tmem/core/autograd.h"
#include "tmem/core/profiler.h"
#include "tmem/core/strided.h"
#include "tmem/ops/cpu/gemm.h"
#include "tmem/ops/cpu/simd.h"
#include "tmem/ops/dispatch.h"
#include "tmem/ops/op_table.h"
#include "tmem/ops/reduction.h"
#include "tmem/ops/shape.h"

namespace tmem {

namespace {

using Grads = std::vector<Tensor>;

// One GEMM operand as GemmArgs takes it: t[..., rows, cols] broadcast to the
// batch shape. A matrix with neither a unit column stride (row-major) nor a
// unit row stride (column-major), or batch items that are not one stride
// apart, is copied to a contiguous tensor first (`data` keeps it alive).
struct GemmOperand {
  Tensor data;
  bool col_major = false;
  int64_t ld = 0, stride = 0;
};

GemmOperand gemm_operand(const Tensor& t, const Shape& batch, int64_t rows, int64_t cols) {
  Shape full = batch;
  full.push_back(rows);
  full.push_back(cols);
  GemmOperand o;
  o.data = make_view(t, full, cpu::broadcast_strides(t, full), t.offset());
  auto fits = [&] {
    const Shape& st = o.data.strides();
    const size_t r = st.size();
    const int64_t rs = st[r - 2], cs = st[r - 1];
    if ((cols == 1 || cs == 1) && (rows == 1 || rs >= std::max<int64_t>(cols, 1))) {
      o.col_major = false;
      o.ld = rows == 1 ? std::max<int64_t>(cols, 1) : rs;
    } else if ((rows == 1 || rs == 1) && (cols == 1 || cs >= std::max<int64_t>(rows, 1))) {
      o.col_major = true;
      o.ld = cols == 1 ? std::max<int64_t>(rows, 1) : cs;
    } else {
      return false;
    }
    const detail::Coalesced<1> b(batch, {Shape(st.begin(), st.end() - 2)});
    if (b.shape.size() > 1) return false;
    o.stride = b.shape.empty() ? 0 : b.strides[0][0];
    return true;
  };
  if (!fits()) {
    o.data = contiguous_data(o.data);
    fits();
  }
  return o;
}

// The shapes of a @ b for a, b of rank >= 2: M, K, N, the batch dims of a
// and b, their broadcast, and the output shape batch + [M, N].
struct ProductShape {
  int64_t M, K, N;
  Shape a_batch, b_batch, batch, out;
};

ProductShape product_shape(const Tensor& a, const Tensor& b) {
  const int64_t ra = a.dim(), rb = b.dim();
  ProductShape p{a.shape()[ra - 2], a.shape()[ra - 1], b.shape()[rb - 1],
                 Shape(a.shape().begin(), a.shape().end() - 2), Shape(b.shape().begin(), b.shape().end() - 2), {}, {}};
  p.batch = broadcast_shapes(p.a_batch, p.b_batch, "matmul");
  p.out = p.batch;
  p.out.push_back(p.M);
  p.out.push_back(p.N);
  return p;
}

// c = a @ b on a device, for a, b of rank >= 2 with broadcast batch dims; no
// autograd.
Tensor mm_device(const Tensor& a, const Tensor& b) {
  const OpKernels& kern = device_kernels(OpId::Matmul, a);
  const auto [M, K, N, ba, bb, batch, out_shape] = product_shape(a, b);
  Tensor out = empty(out_shape, a.dtype(), a.device());
  if (out.numel() == 0) return out;
  if (K == 0) {
    fill_data(out, 0.0);
    return out;
  }
  const GemmOperand ga = gemm_operand(a, batch, M, K), gb = gemm_operand(b, batch, K, N);
  GemmArgs g;
  g.device = a.device().index;
  g.batch = numel_of(batch);
  g.m = M;
  g.n = N;
  g.k = K;
  g.a = ga.data.data<float>();
  g.a_col_major = ga.col_major;
  g.lda = ga.ld;
  g.stride_a = ga.stride;
  g.b = gb.data.data<float>();
  g.b_col_major = gb.col_major;
  g.ldb = gb.ld;
  g.stride_b = gb.stride;
  g.c = out.data<float>();
  kern.gemm(g);
  return out;
}

// c = a @ b for a, b of rank >= 2 with broadcast batch dims; no autograd.
Tensor mm_data(const Tensor& a, const Tensor& b) {
  if (!a.device().is_cpu()) return mm_device(a, b);
  const int64_t ra = a.dim(), rb = b.dim();
  // Plain names, not a structured binding: the lambdas below capture them
  // (clang before 16 cannot capture bindings).
  const ProductShape ps = product_shape(a, b);
  const int64_t M = ps.M, K = ps.K, N = ps.N;
  const Shape &ba = ps.a_batch, &bb = ps.b_batch, &batch = ps.batch;
  Tensor out = empty(ps.out, a.dtype());
  // Per-batch offsets of a and b (broadcast strides are 0).
  Tensor a_b = make_view(a, ba, Shape(a.strides().begin(), a.strides().end() - 2), a.offset());
  Tensor b_b = make_view(b, bb, Shape(b.strides().begin(), b.strides().end() - 2), b.offset());
  std::vector<std::array<int64_t, 2>> offs;
  for_each_element<2>(batch, {cpu::broadcast_strides(a_b, batch), cpu::broadcast_strides(b_b, batch)},
                      [&](std::array<int64_t, 2> o) { offs.push_back(o); });
  const int64_t a_rs = a.strides()[ra - 2], a_cs = a.strides()[ra - 1];
  const int64_t b_rs = b.strides()[rb - 2], b_cs = b.strides()[rb - 1];
  const int64_t nb = static_cast<int64_t>(offs.size());
  dispatch_floating(a.dtype(), "matmul", [&]<class T>() {
    const T* ap = a.data<T>();
    const T* bp = b.data<T>();
    T* cp = out.data<T>();
    const bool outer = nb >= omp_get_max_threads() && nb > 1 && nb * M * N * K > 65536;
    auto product = [&](int64_t i) {
      cpu::gemm<T>(M, N, K, ap + offs[i][0], a_rs, a_cs, bp + offs[i][1], b_rs, b_cs, cp + i * M * N, N,
                   false, !outer);
    };
    if (outer) {
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < nb; ++i) product(i);
    } else {
      for (int64_t i = 0; i < nb; ++i) product(i);
    }
  });
  return out;
}

Tensor mT(const Tensor& t) {
  Shape s = t.shape(), st = t.strides();
  std::swap(s[s.size() - 1], s[s.size() - 2]);
  std::swap(st[st.size() - 1], st[st.size() - 2]);
  return make_view(t, s, st, t.offset());
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  check<DtypeError>(a.dtype() == b.dtype(), "matmul: expected operands of one dtype, but got ",
                    dtype_name(a.dtype()), " and ", dtype_name(b.dtype()));
  check<DeviceError>(a.device() == b.device(), "matmul: expected operands on one device, but got ",
                     a.device().str(), " and ", b.device().str());
  check<ShapeError>(a.dim() >= 1 && b.dim() >= 1, "matmul: both operands need at least 1 dim, got a",
                    shape_str(a.shape()), " b", shape_str(b.shape()));
  const int64_t ka = a.shape().back();
  const int64_t kb = b.dim() == 1 ? b.shape()[0] : b.shape()[b.dim() - 2];
  check<ShapeError>(ka == kb, "matmul: expected a.shape[-1] == b.shape[-2], got a",
                    shape_str(a.shape()), " b", shape_str(b.shape()));
  if (a.dim() > 2 && b.dim() == 2) {
    // [..., M, K] @ [K, N]: one GEMM over all rows (and one for each gradient)
    // instead of one per batch item and a [batch, K, N] weight gradient.
    Shape out_shape(a.shape().begin(), a.shape().end() - 1);
    out_shape.push_back(b.shape()[1]);
    return reshape(matmul(reshape(a, {-1, ka}), b), out_shape);
  }
  // The range opens here, so the folded 3-D @ 2-D form counts one call.
  const OpRange range(OpId::Matmul);
  Tensor a2 = a.dim() == 1 ? unsqueeze(a, 0) : a;
  Tensor b2 = b.dim() == 1 ? unsqueeze(b, 1) : b;
  Tensor out = mm_data(a2, b2);
  record(OpId::Matmul, {a2, b2}, {out}, {a2, b2}, [](const Node& n, const Grads& g) {
    const Tensor &x = n.saved_tensor(0), &y = n.saved_tensor(1);
    return Grads{n.needs_input_grad(0) ? sum_to(mm_data(g[0], mT(y)), x.shape()) : Tensor(),
                 n.needs_input_grad(1) ? sum_to(mm_data(mT(x), g[0]), y.shape()) : Tensor()};
  });
  if (a.dim() == 1) out = squeeze(out, -2);
  if (b.dim() == 1) out = squeeze(out, -1);
  return out;
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  check<ShapeError>(a.dim() == 3 && b.dim() == 3 && a.shape()[0] == b.shape()[0] &&
                        a.shape()[2] == b.shape()[1],
                    "bmm: expected a[B,M,K] and b[B,K,N], but got a", shape_str(a.shape()), " b",
                    shape_str(b.shape()));
  return matmul(a, b);
}

void register_linalg_ops(std::vector<OpInfo>& t) {
  using V = std::vector<Tensor>;
  t.push_back({OpId::Matmul, {"cpu"}, {"a", "b"},
               {{"2-D [5,7]@[7,3]", [] { return V{gc_input({5, 7}, -1, 1, 1), gc_input({7, 3}, -1, 1, 2)}; },
                 [](const V& v) { return matmul(v[0], v[1]); }},
                {"batch broadcast [2,1,3,4]@[3,4,2]", [] { return V{gc_input({2, 1, 3, 4}, -1, 1, 1), gc_input({3, 4, 2}, -1, 1, 2)}; },
                 [](const V& v) { return matmul(v[0], v[1]); }},
                {"3-D @ 2-D (rows folded into one GEMM), transposed b", [] { return V{gc_input({2, 3, 4}, -1, 1, 1), gc_input({5, 4}, -1, 1, 2)}; },
                 [](const V& v) { return matmul(v[0], transpose(v[1], 0, 1)); }},
                {"1-D @ 2-D and transposed b", [] { return V{gc_input({4}, -1, 1, 1), gc_input({3, 4}, -1, 1, 2)}; },
                 [](const V& v) { return matmul(v[0], transpose(v[1], 0, 1)); }},
                {"1-D @ 1-D", [] { return V{gc_input({4}, -1, 1, 1), gc_input({4}, -1, 1, 2)}; },
                 [](const V& v) { return matmul(v[0], v[1]); }}}});
}

}  // namespace tmem
