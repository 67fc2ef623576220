// Shape ops: views (reshape, permute, slice, expand) and copying ops (gather,
// index_select, cat, pad, repeat_interleave), each with its backward.
// Views need no kernel; index_select and gather have one body over the
// kernel tables (ops/dispatch.h; CPU kernels in ops/cpu/shape_kernel.cpp),
// but index_select of int64 data is slice copies; cat and pad are the
// device's copy and fill into slices of the output (so any dtype), and their
// backward slices. The CPU's kernels check the indices in their own pass; a
// device's are checked on the host before the launch (a device index is
// copied to the host first). Either way a bad index raises the same
// IndexError, naming the first bad value in row-major order; the index may
// be on the CPU or on the input's device.
#include "tmem/ops/shape.h"

#include <algorithm>
#include <array>
#include <optional>

#include "tmem/core/autograd.h"
#include "tmem/core/profiler.h"
#include "tmem/core/device_backend.h"
#include "tmem/core/strided.h"
#include "tmem/ops/dispatch.h"
#include "tmem/ops/elementwise.h"
#include "tmem/ops/op_table.h"
#include "tmem/ops/reduction.h"

namespace tmem {

namespace {

using Grads = std::vector<Tensor>;

Shape infer_shape(const Tensor& a, Shape shape, const char* op) {
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      check<ShapeError>(infer < 0, op, ": only one dim can be -1, got ", shape_str(shape));
      infer = static_cast<int64_t>(i);
    } else {
      check<ShapeError>(shape[i] >= 0, op, ": invalid size in shape ", shape_str(shape));
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    check<ShapeError>(known > 0 && a.numel() % known == 0, op, ": shape ", shape_str(shape),
                      " is invalid for input of shape ", shape_str(a.shape()));
    shape[infer] = a.numel() / known;
  }
  check<ShapeError>(numel_of(shape) == a.numel(), op, ": shape ", shape_str(shape),
                    " is invalid for input of shape ", shape_str(a.shape()), " (",
                    a.numel(), " elements)");
  return shape;
}

// The strides that let a tensor of shape `from` and strides `strides` be seen
// with shape `to` (same numel) without a copy, or nullopt when a new dim would
// span parts of the storage that are not one stride apart. PyTorch's
// computeStride (ATen/TensorUtils.cpp): the old dims are cut into chunks that
// are contiguous with each other, and each new dim must lie inside one chunk.
std::optional<Shape> view_strides(const Shape& from, const Shape& strides, const Shape& to) {
  if (from.empty() || numel_of(from) == 0) return contiguous_strides(to);
  Shape out(to.size());
  auto view_d = static_cast<int64_t>(to.size()) - 1;
  int64_t chunk_base = strides.back(), tensor_numel = 1, view_numel = 1;
  for (auto d = static_cast<int64_t>(from.size()) - 1; d >= 0; --d) {
    tensor_numel *= from[d];
    if (d == 0 || (from[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_base)) {
      while (view_d >= 0 && (view_numel < tensor_numel || to[view_d] == 1)) {
        out[view_d] = view_numel * chunk_base;
        view_numel *= to[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_base = strides[d - 1];
        tensor_numel = view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

Tensor reshape_impl(const Tensor& a, Shape shape, bool allow_copy, const char* op) {
  const OpRange range(OpId::Reshape);
  shape = infer_shape(a, std::move(shape), op);
  const std::optional<Shape> strides =
      a.is_contiguous() ? contiguous_strides(shape) : view_strides(a.shape(), a.strides(), shape);
  check<ShapeError>(allow_copy || strides.has_value(), op, ": input of shape ", shape_str(a.shape()),
                    " and strides ", shape_str(a.strides()), " cannot be seen as shape ", shape_str(shape),
                    " without a copy (a new dim would span dims that are not contiguous); use reshape");
  Tensor out = strides ? make_view(a, shape, *strides, a.offset()) : reshape_data(a, shape);
  record(OpId::Reshape, {a}, {out}, {}, [in = a.shape()](const Node&, const Grads& g) {
    return Grads{reshape_data(g[0], in)};
  });
  return out;
}

// Throws unless index is int64 (DtypeError) and on the CPU or on a's device
// (DeviceError): a device input takes a CPU index too, as the models'
// tensor_int indices are.
void check_index(const Tensor& index, const Tensor& a, const char* op) {
  check<DtypeError>(index.dtype() == DType::Int64, op, ": expected an int64 index, but got ",
                    dtype_name(index.dtype()));
  check<DeviceError>(index.device().is_cpu() || index.device() == a.device(), op,
                     ": expected the index on the CPU or on the input's device ", a.device().str(),
                     ", but got ", index.device().str());
}

// Throws the not-implemented DeviceError unless t is on the CPU or its
// device's backend runs op: the gate of cat and pad, which need no kernels
// of their own (the backend's copy and fill make them, for any dtype).
void check_device_runs(OpId op, const Tensor& t) {
  if (!t.device().is_cpu() && !device_implements(t.device().kind, op))
    throw_not_implemented(op_name(op).data(), t.device());
}

// Sizes before, at and after dim d: shape viewed as [P, N, Q].
std::array<int64_t, 3> split_at(const Shape& shape, int64_t d) {
  std::array<int64_t, 3> pnq = {1, shape[d], 1};
  for (int64_t i = 0; i < static_cast<int64_t>(shape.size()); ++i)
    if (i != d) pnq[i < d ? 0 : 2] *= shape[i];
  return pnq;
}

void check_in_range(int64_t v, int64_t size, const char* op) {
  check<IndexError>(v >= 0 && v < size, op, ": index ", v, " is out of range for a dim of size ", size);
}

// Throws IndexError naming op at the first value of the int64 index (on any
// device; checked on the host, in row-major order) outside [0, size).
void check_indices(const Tensor& index, int64_t size, const char* op) {
  const Tensor ix = index.cpu();
  const int64_t* p = ix.data<int64_t>();
  bool ok = true;
  for_each_row<1>(ix.shape(), {ix.strides()}, [&](std::array<int64_t, 1> off, int64_t len, std::array<int64_t, 1> st) {
    for (int64_t i = 0; i < len; ++i) {
      const int64_t v = p[off[0] + i * st[0]];
      ok &= (v >= 0) & (v < size);
    }
  }, false);
  if (ok) return;
  for_each_element<1>(ix.shape(), {ix.strides()},
                      [&](std::array<int64_t, 1> o) { check_in_range(p[o[0]], size, op); });
}

}  // namespace

Tensor reshape(const Tensor& a, Shape shape) { return reshape_impl(a, std::move(shape), true, "reshape"); }
Tensor view(const Tensor& a, Shape shape) { return reshape_impl(a, std::move(shape), false, "view"); }

Tensor permute(const Tensor& a, const std::vector<int64_t>& dims) {
  const OpRange range(OpId::Permute);
  const int64_t r = a.dim();
  check<ValueError>(static_cast<int64_t>(dims.size()) == r, "permute: expected ", r,
                    " dims for a tensor of shape ", shape_str(a.shape()), ", but got ", dims.size());
  Shape shape(r), strides(r);
  std::vector<bool> used(r, false);
  std::vector<int64_t> inv(r);
  for (int64_t i = 0; i < r; ++i) {
    int64_t d = normalize_dim(dims[i], r, "permute");
    check<ValueError>(!used[d], "permute: dim ", d, " repeated");
    used[d] = true;
    shape[i] = a.shape()[d];
    strides[i] = a.strides()[d];
    inv[d] = i;
  }
  Tensor out = make_view(a, shape, strides, a.offset());
  record(OpId::Permute, {a}, {out}, {}, [inv](const Node&, const Grads& g) {
    return Grads{contiguous_data(permute(g[0], inv))};
  });
  return out;
}

Tensor transpose(const Tensor& a, int64_t d0, int64_t d1) {
  std::vector<int64_t> dims(a.dim());
  for (int64_t i = 0; i < a.dim(); ++i) dims[i] = i;
  const int64_t i0 = normalize_dim(d0, a.dim(), "transpose"), i1 = normalize_dim(d1, a.dim(), "transpose");
  if (a.dim() > 0) std::swap(dims[i0], dims[i1]);  // a 0-d tensor: dims 0 and -1 name its one element
  return permute(a, dims);
}

Tensor narrow(const Tensor& a, int64_t dim, int64_t start, int64_t length) {
  check<ShapeError>(a.dim() > 0, "narrow: cannot narrow a 0-d tensor");
  const int64_t d = normalize_dim(dim, a.dim(), "narrow"), n = a.shape()[d];
  check<IndexError>(start >= -n && start <= n, "narrow: start ", start, " is out of range [", -n, ", ", n,
                    "] for dim ", d, " of size ", n);
  if (start < 0) start += n;
  check<ValueError>(length >= 0, "narrow: expected length >= 0, but got ", length);
  check<IndexError>(length <= n - start, "narrow: start (", start, ") + length (", length,
                    ") exceeds dim ", d, " of size ", n);
  return slice(a, d, start, start + length);
}

Tensor slice(const Tensor& a, int64_t dim, int64_t start, int64_t end, int64_t step) {
  const OpRange range(OpId::Slice);
  check<ShapeError>(a.dim() > 0, "slice: cannot slice a 0-d tensor");
  int64_t d = normalize_dim(dim, a.dim(), "slice");
  check<ValueError>(step >= 1, "slice: expected step >= 1, but got ", step);
  int64_t n = a.shape()[d];
  auto clampi = [n](int64_t v) { return std::clamp(v < 0 ? v + n : v, int64_t{0}, n); };
  start = clampi(start);
  end = std::max(clampi(end), start);
  Shape shape = a.shape(), strides = a.strides();
  // Neither the count nor the stride may overflow for a step near 2^63: one
  // element (or none) keeps the dim's stride.
  shape[d] = end == start ? 0 : (end - start - 1) / step + 1;
  if (shape[d] > 1) strides[d] *= step;
  Tensor out = make_view(a, shape, strides, a.offset() + start * a.strides()[d]);
  record(OpId::Slice, {a}, {out}, {}, [in = a.shape(), d, start, step](const Node&, const Grads& g) {
    Tensor gin = zeros(in, g[0].dtype(), g[0].device());
    Shape st = gin.strides();
    int64_t off = start * st[d];
    if (g[0].shape()[d] > 1) st[d] *= step;
    copy_data(make_view(gin, g[0].shape(), st, off), g[0]);
    return Grads{gin};
  });
  return out;
}

Tensor expand(const Tensor& a, const Shape& shape) {
  const OpRange range(OpId::Expand);
  check<ShapeError>(shape.size() >= a.shape().size(), "expand: cannot expand ",
                    shape_str(a.shape()), " to fewer dims ", shape_str(shape));
  size_t lead = shape.size() - a.shape().size();
  Shape out_shape(shape.size()), strides(shape.size(), 0);
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i < lead) {
      check<ShapeError>(shape[i] >= 0, "expand: -1 is not allowed for a new leading dim in ",
                        shape_str(shape));
      out_shape[i] = shape[i];
      continue;
    }
    int64_t have = a.shape()[i - lead];
    int64_t want = shape[i] == -1 ? have : shape[i];
    check<ShapeError>(want >= 0, "expand: size ", shape[i], " at dim ", i, " of ", shape_str(shape),
                      " is negative (only -1, keep the input's size, is allowed)");
    check<ShapeError>(have == want || have == 1, "expand: the input of shape ", shape_str(a.shape()),
                      " cannot be expanded to ", shape_str(shape));
    out_shape[i] = want;
    strides[i] = have == want ? a.strides()[i - lead] : 0;
  }
  Tensor out = make_view(a, out_shape, strides, a.offset());
  record(OpId::Expand, {a}, {out}, {}, [in = a.shape()](const Node&, const Grads& g) {
    return Grads{sum_to(g[0], in)};
  });
  return out;
}

Tensor squeeze(const Tensor& a, int64_t dim) {
  const int64_t d = normalize_dim(dim, a.dim(), "squeeze");
  Shape s = a.shape();
  if (a.dim() > 0 && s[d] == 1) s.erase(s.begin() + d);
  return reshape(a, s);
}

Tensor unsqueeze(const Tensor& a, int64_t dim) {
  int64_t d = normalize_dim(dim, a.dim() + 1, "unsqueeze", a.dim());
  Shape s = a.shape();
  s.insert(s.begin() + d, 1);
  return reshape(a, s);
}

Tensor contiguous(const Tensor& a) {
  if (a.is_contiguous()) return a;
  const OpRange range(OpId::Contiguous);
  Tensor out = contiguous_data(a);
  record(OpId::Contiguous, {a}, {out}, {}, [](const Node&, const Grads& g) { return Grads{g[0]}; });
  return out;
}

Tensor index_select(const Tensor& a, int64_t dim, const Tensor& index) {
  const OpRange range(OpId::IndexSelect);
  check_device_runs(OpId::IndexSelect, a);
  check_index(index, a, "index_select");
  check<ShapeError>(index.dim() == 1, "index_select: expected a 1-D index, but got shape ",
                    shape_str(index.shape()));
  check<ShapeError>(a.dim() > 0, "index_select: expected an input of at least 1 dim, but got a 0-d tensor");
  const int64_t d = normalize_dim(dim, a.dim(), "index_select");
  Shape shape = a.shape();
  shape[d] = index.numel();
  Tensor out = empty(shape, a.dtype(), a.device());
  if (!is_floating(a.dtype())) {
    // int64 data (no gradient, e.g. a data loader's labels): slice copies,
    // which every device's copy makes for any dtype.
    Shape sub = a.shape();
    sub[d] = 1;
    const std::vector<int64_t> idx = index.to_int_vector();
    for (int64_t v : idx) check_in_range(v, a.shape()[d], "index_select");
    for (size_t k = 0; k < idx.size(); ++k)
      copy_data(make_view(out, sub, out.strides(), static_cast<int64_t>(k) * out.strides()[d]),
                make_view(a, sub, a.strides(), a.offset() + idx[k] * a.strides()[d]));
    return out;
  }
  if (!a.device().is_cpu()) check_indices(index, a.shape()[d], "index_select");
  Tensor x = contiguous_data(a);
  Tensor ix = contiguous_data(index.to(a.device()));
  const auto pnq = split_at(a.shape(), d);
  const int64_t P = pnq[0], N = pnq[1], Q = pnq[2], K = ix.numel();  // named: lambdas capture them
  bool in_range = true;
  dispatch_kernels(OpId::IndexSelect, a, [&]<class T>(const KernelTable<T>& k) {
    in_range = k.index_select_forward(a.device().index, x.template data<T>(), ix.data<int64_t>(),
                                      out.template data<T>(), P, N, Q, K);
  });
  if (!in_range) check_indices(index, N, "index_select");
  record(OpId::IndexSelect, {a}, {out}, {ix}, [in = a.shape(), P, N, Q, K](const Node& n, const Grads& g) {
    const Tensor& ixs = n.saved_tensor(0);
    Tensor gc = contiguous_data(g[0]);
    Tensor gin = zeros(in, gc.dtype(), gc.device());
    dispatch_kernels(OpId::IndexSelect, gc, [&]<class T>(const KernelTable<T>& k) {
      k.index_select_backward(gc.device().index, gc.template data<T>(), ixs.data<int64_t>(),
                              gin.template data<T>(), P, N, Q, K);
    });
    return Grads{gin};
  });
  return out;
}

Tensor gather(const Tensor& a, int64_t dim, const Tensor& index) {
  const OpRange range(OpId::Gather);
  check_device_runs(OpId::Gather, a);
  check_index(index, a, "gather");
  check<ShapeError>(a.dim() > 0, "gather: expected an input of at least 1 dim, but got a 0-d tensor");
  const int64_t d = normalize_dim(dim, a.dim(), "gather");
  check<ShapeError>(index.dim() == a.dim(), "gather: expected index of rank ", a.dim(),
                    ", but got index ", shape_str(index.shape()), " for input ", shape_str(a.shape()));
  for (int64_t i = 0; i < a.dim(); ++i)
    check<ShapeError>(i == d || index.shape()[i] <= a.shape()[i], "gather: index ",
                      shape_str(index.shape()), " is larger than input ", shape_str(a.shape()),
                      " in dim ", i);
  if (!a.device().is_cpu()) check_indices(index, a.shape()[d], "gather");
  Tensor ix = index.to(a.device());
  Tensor out = empty(ix.shape(), a.dtype(), a.device());
  Shape a_st = a.strides();
  a_st[d] = 0;  // the indexed dim is added from the index value
  const StridedArgs<3> args = strided_args<3>(ix.shape(), {out.strides(), ix.strides(), a_st},
                                               {out.raw_data(), ix.raw_data(), a.raw_data()}, "gather");
  bool in_range = true;
  if (is_floating(a.dtype())) {
    dispatch_kernels(OpId::Gather, a, [&]<class T>(const KernelTable<T>& k) {
      in_range = k.gather_forward(a.device().index, args, a.strides()[d], a.shape()[d]);
    });
  } else {
    // int64 data (no gradient): the CPU kernel's loop on the host.
    check_int64_on_cpu(a, "gather");
    auto* o = static_cast<int64_t*>(args.data[0]);
    const auto* index_data = static_cast<const int64_t*>(args.data[1]);
    const auto* x = static_cast<const int64_t*>(args.data[2]);
    const int64_t n = a.shape()[d], step = a.strides()[d];
    for_each_element(args, [&](std::array<int64_t, 3> i) {
      const int64_t v = index_data[i[1]];
      in_range &= v >= 0 && v < n;
      o[i[0]] = v >= 0 && v < n ? x[i[2] + v * step] : 0;
    });
  }
  if (!in_range) check_indices(index, a.shape()[d], "gather");
  record(OpId::Gather, {a}, {out}, {ix}, [in = a.shape(), d](const Node& n, const Grads& g) {
    const Tensor& ixs = n.saved_tensor(0);
    Tensor gin = zeros(in, g[0].dtype(), g[0].device());
    Shape st = gin.strides();
    const int64_t step = st[d];
    st[d] = 0;
    dispatch_kernels(OpId::Gather, g[0], [&]<class T>(const KernelTable<T>& k) {
      k.gather_backward(g[0].device().index,
                        strided_args<3>(ixs.shape(), {st, ixs.strides(), g[0].strides()},
                                        {gin.raw_data(), ixs.raw_data(), g[0].raw_data()}, "gather"),
                        step);
    });
    return Grads{gin};
  });
  return out;
}

Tensor cat(const std::vector<Tensor>& ts, int64_t dim) {
  const OpRange range(OpId::Cat);
  check<ValueError>(!ts.empty(), "cat: expected a non-empty list of tensors");
  const Tensor& first = ts[0];
  check_device_runs(OpId::Cat, first);
  for (size_t k = 0; k < ts.size(); ++k)
    check<ShapeError>(ts[k].dim() > 0, "cat: zero-dimensional tensor (at position ", k, ") cannot be concatenated");
  int64_t d = normalize_dim(dim, first.dim(), "cat");
  Shape shape = first.shape();
  shape[d] = 0;
  std::vector<int64_t> sizes;
  for (size_t k = 0; k < ts.size(); ++k) {
    const Tensor& t = ts[k];
    check<DeviceError>(t.device() == first.device(), "cat: expected every tensor on one device, but got ",
                       first.device().str(), " and ", t.device().str(), " (tensor ", k, ")");
    check<DtypeError>(t.dtype() == first.dtype(), "cat: expected one dtype, but got ",
                      dtype_name(first.dtype()), " and ", dtype_name(t.dtype()), " (tensor ", k, ")");
    bool ok = t.dim() == first.dim();
    for (int64_t i = 0; ok && i < t.dim(); ++i) ok = i == d || t.shape()[i] == first.shape()[i];
    check<ShapeError>(ok, "cat: expected tensor ", k, " to match ", shape_str(first.shape()),
                      " except in dim ", d, ", but got ", shape_str(t.shape()));
    sizes.push_back(t.shape()[d]);
    check<ShapeError>(!__builtin_add_overflow(shape[d], t.shape()[d], &shape[d]), "cat: the sizes along dim ", d,
                      " add up past int64 (tensor ", k, ")");
  }
  Tensor out = empty(shape, first.dtype(), first.device());
  int64_t at = 0;
  for (const Tensor& t : ts) {
    copy_data(make_view(out, t.shape(), out.strides(), at * out.strides()[d]), t);
    at += t.shape()[d];
  }
  record(OpId::Cat, ts, {out}, {}, [d, sizes](const Node& n, const Grads& g) {
    Grads gs;
    int64_t pos = 0;
    for (size_t k = 0; k < sizes.size(); ++k) {
      gs.push_back(n.needs_input_grad(k) ? contiguous_data(slice(g[0], d, pos, pos + sizes[k]))
                                         : Tensor());
      pos += sizes[k];
    }
    return gs;
  });
  return out;
}

Tensor stack(const std::vector<Tensor>& ts, int64_t dim) {
  check<ValueError>(!ts.empty(), "stack: expected a non-empty list of tensors");
  int64_t d = normalize_dim(dim, ts[0].dim() + 1, "stack", ts[0].dim());
  std::vector<Tensor> parts;
  for (size_t k = 0; k < ts.size(); ++k) {
    check<ShapeError>(ts[k].shape() == ts[0].shape(), "stack: expected every tensor to have shape ",
                      shape_str(ts[0].shape()), ", but tensor ", k, " has ", shape_str(ts[k].shape()));
    parts.push_back(unsqueeze(ts[k], d));
  }
  return cat(parts, d);
}

std::vector<Tensor> split(const Tensor& a, int64_t split_size, int64_t dim) {
  const OpRange range(OpId::Split);
  check<ShapeError>(a.dim() > 0, "split: cannot split a 0-d tensor");
  check<ValueError>(split_size > 0, "split: expected a positive split_size, but got ", split_size);
  const int64_t d = normalize_dim(dim, a.dim(), "split"), n = a.shape()[d];
  std::vector<Tensor> out;
  for (int64_t s = 0; s < n || out.empty(); s += split_size) {
    Shape shape = a.shape();
    shape[d] = std::min(split_size, n - s);
    out.push_back(make_view(a, shape, a.strides(), a.offset() + s * a.strides()[d]));
  }
  record(OpId::Split, {a}, out, {}, [d](const Node&, const Grads& g) { return Grads{cat(g, d)}; });
  return out;
}

std::vector<Tensor> unbind(const Tensor& a, int64_t dim) {
  check<ShapeError>(a.dim() > 0, "unbind: cannot unbind a 0-d tensor");
  const int64_t d = normalize_dim(dim, a.dim(), "unbind");
  std::vector<Tensor> parts = split(a, 1, d);
  for (Tensor& p : parts) p = squeeze(p, d);
  return parts;
}

Tensor pad(const Tensor& a, const std::vector<int64_t>& pads, double value) {
  const OpRange range(OpId::Pad);
  check_device_runs(OpId::Pad, a);
  check<ValueError>(pads.size() % 2 == 0 && static_cast<int64_t>(pads.size()) <= 2 * a.dim(),
                    "pad: expected an even number of pads, at most 2 per dim, but got ", pads.size(),
                    " for shape ", shape_str(a.shape()));
  if (std::any_of(pads.begin(), pads.end(), [](int64_t p) { return p < 0; })) {
    // Negative padding crops (torch.nn.functional.pad): slice, then pad the rest.
    Tensor cropped = a;
    std::vector<int64_t> rest(pads);
    for (size_t k = 0; k < pads.size() / 2; ++k) {
      const int64_t d = a.dim() - 1 - static_cast<int64_t>(k), n = a.shape()[d];
      const int64_t lo = pads[2 * k], hi = pads[2 * k + 1];
      const bool fits = lo >= -n && hi >= -n && (lo < 0 ? -lo : 0) <= (hi < 0 ? n + hi : n);
      check<ShapeError>(fits, "pad: dim ", d, " of size ", n, " with padding ", lo, " and ", hi,
                        " would have a negative size");
      cropped = slice(cropped, d, lo < 0 ? -lo : 0, hi < 0 ? n + hi : n);
      rest[2 * k] = std::max<int64_t>(lo, 0);
      rest[2 * k + 1] = std::max<int64_t>(hi, 0);
    }
    return pad(cropped, rest, value);
  }
  Shape shape = a.shape();
  int64_t off = 0;
  std::vector<int64_t> lefts(a.dim(), 0);
  for (size_t k = 0; k < pads.size() / 2; ++k) {
    int64_t d = a.dim() - 1 - static_cast<int64_t>(k);
    lefts[d] = pads[2 * k];
    check<ValueError>(!__builtin_add_overflow(shape[d], pads[2 * k], &shape[d]) &&
                          !__builtin_add_overflow(shape[d], pads[2 * k + 1], &shape[d]),
                      "pad: pads ", pads[2 * k], " and ", pads[2 * k + 1], " make dim ", d, " of shape ",
                      shape_str(a.shape()), " larger than an int64 holds");
  }
  Tensor out = full(shape, value, a.dtype(), a.device());
  for (int64_t d = 0; d < a.dim(); ++d) off += lefts[d] * out.strides()[d];
  copy_data(make_view(out, a.shape(), out.strides(), off), a);
  record(OpId::Pad, {a}, {out}, {}, [in = a.shape(), lefts](const Node&, const Grads& g) {
    Tensor v = g[0];
    for (size_t d = 0; d < in.size(); ++d) v = slice(v, static_cast<int64_t>(d), lefts[d], lefts[d] + in[d]);
    return Grads{contiguous_data(v)};
  });
  return out;
}

Tensor repeat_interleave(const Tensor& a, int64_t repeats, int64_t dim) {
  const OpRange range(OpId::RepeatInterleave);
  check<ValueError>(repeats >= 0, "repeat_interleave: repeats can not be negative, but got ", repeats);
  check<ShapeError>(a.dim() > 0, "repeat_interleave: dim ", dim, " given, but the tensor has no dims (0-d)");
  int64_t d = normalize_dim(dim, a.dim(), "repeat_interleave");
  // [.., n, ..] -> [.., n, r, ..] (expanded) -> [.., n*r, ..]
  Shape exp_shape = a.shape();
  exp_shape.insert(exp_shape.begin() + d + 1, repeats);
  Shape strides = a.strides();
  strides.insert(strides.begin() + d + 1, 0);
  Shape out_shape = a.shape();
  check<ShapeError>(!__builtin_mul_overflow(out_shape[d], repeats, &out_shape[d]), "repeat_interleave: ",
                    a.shape()[d], " x ", repeats, " repeats along dim ", d, " is past int64");
  Tensor out = reshape_data(make_view(a, exp_shape, strides, a.offset()), out_shape);
  if (out.impl().storage == a.impl().storage) out = contiguous_data(out);
  record(OpId::RepeatInterleave, {a}, {out}, {}, [in = a.shape(), exp_shape, d](const Node&, const Grads& g) {
    return Grads{reshape_data(sum(reshape_data(g[0], exp_shape), {d + 1}), in)};
  });
  return out;
}

void register_shape_ops(std::vector<OpInfo>& t) {
  using V = std::vector<Tensor>;
  auto in = [] { return V{gc_input({2, 3, 4})}; };
  t.push_back({OpId::Reshape, {"cpu"}, {"input"},
               {{"to [4,-1]", in, [](const V& v) { return reshape(v[0], {4, -1}); }},
                {"of a transposed view", in, [](const V& v) { return reshape(transpose(v[0], 0, 2), {-1}); }}}});
  t.push_back({OpId::Permute, {"cpu"}, {"input"},
               {{"(2,0,1)", in, [](const V& v) { return permute(v[0], {2, 0, 1}); }}}});
  t.push_back({OpId::Slice, {"cpu"}, {"input"},
               {{"dim 2, 1:4:2", in, [](const V& v) { return slice(v[0], 2, 1, 4, 2); }},
                {"negative start", in, [](const V& v) { return slice(v[0], 1, -2, 3); }}}});
  t.push_back({OpId::Expand, {"cpu"}, {"input"},
               {{"[3,1] -> [2,3,4]", [] { return V{gc_input({3, 1})}; },
                 [](const V& v) { return expand(v[0], {2, 3, 4}); }}}});
  t.push_back({OpId::Contiguous, {"cpu"}, {"input"},
               {{"of a permuted view", in, [](const V& v) { return contiguous(permute(v[0], {1, 2, 0})); }}}});
  t.push_back({OpId::IndexSelect, {"cpu"}, {"input"},
               {{"repeated rows", in, [](const V& v) { return index_select(v[0], 1, tensor_int({2, 0, 2}, {3})); }},
                {"dim 0, the index an input (on the input's device)",
                 [] { return V{gc_input({3, 2, 4}), tensor_int({1, 1, 0, 2}, {4})}; },
                 [](const V& v) { return index_select(v[0], 0, v[1]); }}}});
  t.push_back({OpId::Gather, {"cpu"}, {"input"},
               {{"dim 2", in, [](const V& v) {
                   return gather(v[0], 2, tensor_int({0, 3, 3, 1, 2, 2, 0, 0, 1, 3, 2, 1}, {2, 3, 2}));
                 }},
                {"dim 0 of a transposed view, the index an input",
                 [] { return V{gc_input({3, 4}), tensor_int({2, 0, 2, 1, 1, 1}, {2, 3})}; },
                 [](const V& v) { return gather(transpose(v[0], 0, 1), 0, v[1]); }}}});
  t.push_back({OpId::Cat, {"cpu"}, {"a", "b"},
               {{"dim 1", [] { return V{gc_input({2, 3}, -1, 1, 1), gc_input({2, 2}, -1, 1, 2)}; },
                 [](const V& v) { return cat({v[0], v[1]}, 1); }},
                {"stack dim 0", [] { return V{gc_input({2, 3}, -1, 1, 1), gc_input({2, 3}, -1, 1, 2)}; },
                 [](const V& v) { return stack({v[0], v[1]}, 0); }}}});
  t.push_back({OpId::Split, {"cpu"}, {"input"},
               {{"dim 2 by 3, the last part unused", in, [](const V& v) { return split(v[0], 3, 2)[0]; }},
                {"unbind dim 1", in, [](const V& v) {
                   std::vector<Tensor> p = unbind(v[0], 1);
                   return add(mul(p[0], p[2]), p[1]);
                 }}}});
  t.push_back({OpId::Pad, {"cpu"}, {"input"},
               {{"(1,2,0,1)", in, [](const V& v) { return pad(v[0], {1, 2, 0, 1}, 0.5); }}}});
  t.push_back({OpId::RepeatInterleave, {"cpu"}, {"input"},
               {{"x3 along dim 1", in, [](const V& v) { return repeat_interleave(v[0], 3, 1); }}}});
}

}  // namespace tmem
