// matmul / bmm: shapes a[..., M, K], b[..., K, N] -> c[..., M, N]; one body
// over the gemm kernel of the operands' device (ops/dispatch.h): the CPU's is
// ops/cpu/gemm (transposed operands are read through strides), CUDA's
// cuBLAS's batched GEMM.
#include "tmem/ops/linalg.h"

#include "tmem/core/autograd.h"
#include "tmem/core/profiler.h"
#include "tmem/core/strided.h"
#include "tmem/ops/cpu/simd.h"
#include "tmem/ops/dispatch.h"
#include "tmem/ops/op_table.h"
#include "tmem/ops/reduction.h"
#include "tmem/ops/shape.h"

namespace tmem {

namespace {

using Grads = std::vector<Tensor>;

// One GEMM operand's matrices as GemmArgs takes them: t[..., rows, cols]
// broadcast to the batch shape. A matrix with neither a unit column stride
// (row-major) nor a unit row stride (column-major), or any matrix when
// `copy`, is copied to a contiguous tensor first (`data` keeps it alive).
struct GemmOperand {
  Tensor data;
  bool col_major = false;
  int64_t ld = 0;
  Shape batch_strides() const { return Shape(data.strides().begin(), data.strides().end() - 2); }
};

GemmOperand gemm_operand(const Tensor& t, const Shape& batch, int64_t rows, int64_t cols, bool copy) {
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
    return true;
  };
  if (copy || !fits()) {
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

// c = a @ b for a, b of rank >= 2 with broadcast batch dims, by the gemm
// kernel of their device; no autograd. The batch dims are merged over a, b
// and c; when more than two remain (GemmArgs' outer and batch), both
// operands are copied, so that they merge into one.
Tensor mm_data(const Tensor& a, const Tensor& b) {
  const ProductShape ps = product_shape(a, b);
  Tensor out = empty(ps.out, a.dtype(), a.device());
  if (a.dtype() == DType::Int64) {
    // int64 data (no gradient): a host loop, each output element the sum
    // over k, wrapping on overflow as torch's integer products do.
    check_int64_on_cpu(a, "matmul");
    Shape ea = ps.batch, eb = ps.batch;
    ea.insert(ea.end(), {ps.M, ps.K});
    eb.insert(eb.end(), {ps.K, ps.N});
    const Tensor x = expand(a, ea), y = expand(b, eb);
    Shape sx = x.strides(), sy = y.strides();
    const int64_t r = static_cast<int64_t>(sx.size());
    const int64_t kx = sx[r - 1], ky = sy[r - 2];
    sx[r - 1] = 0;  // out[..., m, n] starts at x[..., m, 0] and y[..., 0, n]
    sy[r - 2] = 0;
    const auto* px = x.data<int64_t>();
    const auto* py = y.data<int64_t>();
    int64_t* po = out.data<int64_t>();
    for_each_element<3>(ps.out, {out.strides(), sx, sy}, [&](std::array<int64_t, 3> i) {
      uint64_t acc = 0;
      for (int64_t k = 0; k < ps.K; ++k)
        acc += static_cast<uint64_t>(px[i[1] + k * kx]) * static_cast<uint64_t>(py[i[2] + k * ky]);
      po[i[0]] = static_cast<int64_t>(acc);
    });
    return out;
  }
  dispatch_kernels(OpId::Matmul, a, [&]<class T>(const KernelTable<T>& k) {
    if (out.numel() == 0) return;
    if (ps.K == 0) {
      fill_data(out, 0.0);
      return;
    }
    const Shape c_strides(out.strides().begin(), out.strides().end() - 2);
    GemmOperand ga = gemm_operand(a, ps.batch, ps.M, ps.K, false), gb = gemm_operand(b, ps.batch, ps.K, ps.N, false);
    auto merged = [&] {
      return detail::Coalesced<3>(ps.batch, {ga.batch_strides(), gb.batch_strides(), c_strides});
    };
    detail::Coalesced<3> m = merged();
    if (m.shape.size() > 2) {
      ga = gemm_operand(a, ps.batch, ps.M, ps.K, true);
      gb = gemm_operand(b, ps.batch, ps.K, ps.N, true);
      m = merged();
    }
    const size_t dims = m.shape.size();
    GemmArgs<T> g;
    g.device = a.device().index;
    g.outer = dims == 2 ? m.shape[0] : 1;
    g.batch = dims ? m.shape[dims - 1] : 1;
    g.m = ps.M;
    g.n = ps.N;
    g.k = ps.K;
    g.a = ga.data.template data<T>();
    g.a_col_major = ga.col_major;
    g.lda = ga.ld;
    g.stride_a = dims ? m.strides[0][dims - 1] : 0;
    g.outer_a = dims == 2 ? m.strides[0][0] : 0;
    g.b = gb.data.template data<T>();
    g.b_col_major = gb.col_major;
    g.ldb = gb.ld;
    g.stride_b = dims ? m.strides[1][dims - 1] : 0;
    g.outer_b = dims == 2 ? m.strides[1][0] : 0;
    g.c = out.template data<T>();
    k.gemm(g);
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
