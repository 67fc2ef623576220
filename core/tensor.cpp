#include "tmem/core/tensor.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "tmem/core/allocator.h"
#include "tmem/core/autograd.h"
#include "tmem/core/device_backend.h"
#include "tmem/core/profiler.h"
#include "tmem/core/strided.h"

namespace tmem {

namespace {
std::atomic<int64_t> g_live_tensors{0};

// t's data on `device` with no autograd: t itself when already there, else a
// contiguous copy made through the device backends' copies.
Tensor transfer(const Tensor& t, Device device) {
  if (t.device() == device) return t;
  if (!device.is_cpu()) device_backend(device, "to");
  Tensor src = contiguous_data(t);
  Tensor out = empty(src.shape(), src.dtype(), device);
  const size_t n = static_cast<size_t>(src.numel()) * dtype_size(src.dtype());
  if (n == 0) return out;
  const Device from = src.device();
  if (from.is_cpu()) {
    device_backend(device, "to").copy_from_host(device.index, out.raw_data(), src.raw_data(), n);
  } else if (device.is_cpu()) {
    device_backend(from, "to").copy_to_host(from.index, out.raw_data(), src.raw_data(), n);
  } else {  // one device kind to another device of that kind (CUDA is the only one)
    device_backend(device, "to").copy_between(device.index, out.raw_data(), from.index,
                                              src.raw_data(), n);
  }
  return out;
}
}  // namespace

Storage::Storage(size_t n, Device dev, const char* op) : nbytes(n), device(dev) {
  if (detail::g_profiling.load(std::memory_order_relaxed)) detail::profiler_note_alloc(n);
  if (dev.is_cpu()) {
    data = cpu_allocate(n);
    return;
  }
  backend = &device_backend(dev, op);
  data = backend->allocate(dev.index, n);
}

Storage::Storage(void* d, size_t n) : data(d), nbytes(n), owned(false) {}

Storage::~Storage() {
  if (!owned) return;
  if (backend) backend->release(device.index, data, nbytes);
  else cpu_release(data, nbytes);
}

TensorImpl::TensorImpl() { g_live_tensors.fetch_add(1, std::memory_order_relaxed); }
TensorImpl::~TensorImpl() { g_live_tensors.fetch_sub(1, std::memory_order_relaxed); }

int64_t live_tensor_count() { return g_live_tensors.load(); }

int64_t Tensor::size(int64_t d) const {
  check<IndexError>(dim() > 0, "size: dim ", d, " given, but the tensor has no dims (0-d)");
  return shape()[normalize_dim(d, dim(), "size")];
}

bool Tensor::is_contiguous() const {
  const auto& s = shape();
  const auto& st = strides();
  int64_t expect = 1;
  for (size_t i = s.size(); i-- > 0;) {
    if (s[i] != 1 && st[i] != expect) return false;
    expect *= s[i];
  }
  return true;
}

double Tensor::item() const {
  check<ValueError>(numel() == 1, "item: expected a tensor with one element, but got shape ",
                    shape_str(shape()));
  return to_vector()[0];
}

int64_t Tensor::item_int() const {
  check<ValueError>(numel() == 1, "item: expected a tensor with one element, but got shape ",
                    shape_str(shape()));
  return to_int_vector()[0];
}

std::vector<double> Tensor::to_vector() const {
  if (!device().is_cpu()) return transfer(*this, Device::cpu()).to_vector();
  std::vector<double> out;
  out.reserve(numel());
  dispatch_all(dtype(), [&]<class T>() {
    const T* p = data<T>();
    for_each_element<1>(shape(), {strides()}, [&](std::array<int64_t, 1> o) {
      out.push_back(static_cast<double>(p[o[0]]));
    });
  });
  return out;
}

std::vector<int64_t> Tensor::to_int_vector() const {
  check<DtypeError>(dtype() == DType::Int64, "to_int_vector: expected int64, but got ",
                    dtype_name(dtype()));
  if (!device().is_cpu()) return transfer(*this, Device::cpu()).to_int_vector();
  std::vector<int64_t> out;
  out.reserve(numel());
  const int64_t* p = data<int64_t>();
  for_each_element<1>(shape(), {strides()},
                      [&](std::array<int64_t, 1> o) { out.push_back(p[o[0]]); });
  return out;
}

Tensor& Tensor::requires_grad_(bool on) {
  check<ValueError>(is_leaf(), "requires_grad_: only leaf tensors can change requires_grad; "
                               "use detach() first");
  check<ValueError>(!on || is_floating(dtype()),
                    "requires_grad_: only floating tensors can require grad, got ",
                    dtype_name(dtype()));
  impl().requires_grad = on;
  return *this;
}

Tensor Tensor::detach() const {
  auto d = std::make_shared<TensorImpl>();
  d->storage = impl().storage;
  d->shape = shape();
  d->strides = strides();
  d->offset = offset();
  d->dtype = dtype();
  return Tensor(d);
}

Tensor Tensor::to(Device device) const {
  if (this->device() == device) return *this;
  const OpRange range(OpId::ToDevice);
  Tensor out = transfer(*this, device);
  record(OpId::ToDevice, {*this}, {out}, {},
         [from = this->device()](const Node&, const std::vector<Tensor>& g) {
           return std::vector<Tensor>{transfer(g[0], from)};
         });
  return out;
}

void Tensor::set_data(const Tensor& src) const {
  check<ValueError>(is_leaf(), "set_data: only a leaf tensor's data can be replaced");
  check<ShapeError>(src.shape() == shape(), "set_data: expected shape ", shape_str(shape()),
                    ", but got ", shape_str(src.shape()));
  check<DtypeError>(!requires_grad() || is_floating(src.dtype()), "set_data: a tensor that requires grad ",
                    "needs floating data, but got ", dtype_name(src.dtype()));
  TensorImpl& i = impl();
  i.dtype = src.dtype();
  i.storage = src.impl().storage;
  i.strides = src.strides();
  i.offset = src.offset();
  // This tensor takes src's memory, not its autograd relations: it is no
  // view (torch's x._is_view() stays false after x.data = big[2]), so an
  // in-place op on it is a leaf's, and a base it was a view of before
  // rebuilds nothing into it.
  i.is_view = false;
  i.view_base.reset();
  i.view_history = 0;
}

std::string Tensor::str() const {
  if (!defined()) return "Tensor(undefined)";
  return "Tensor" + shape_str(shape()) + " " + dtype_name(dtype()) + " " + device().str();
}

namespace {

// empty's body; `op` (the factory called) names the errors.
Tensor allocate(const Shape& shape, DType dtype, Device device, const char* op) {
  for (int64_t d : shape)
    check<ShapeError>(d >= 0, op, ": negative dimension in shape ", shape_str(shape));
  int64_t n = 0;
  try {
    n = numel_of(shape);
  } catch (const ShapeError& e) {
    throw ShapeError(std::string(op) + ": " + e.what());
  }
  const int64_t item = static_cast<int64_t>(dtype_size(dtype));
  check<ShapeError>(n <= std::numeric_limits<int64_t>::max() / item, op, ": shape ", shape_str(shape), " of ",
                    dtype_name(dtype), " needs more bytes than an int64 can count");
  auto impl = std::make_shared<TensorImpl>();
  try {
    impl->storage = std::make_shared<Storage>(static_cast<size_t>(n * item), device, op);
  } catch (const OutOfMemoryError& e) {
    throw OutOfMemoryError(std::string(op) + ": no memory for a " + std::string(dtype_name(dtype)) + " tensor of shape " +
                           shape_str(shape) + " on " + device.str() + ": " + e.what());
  }
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  return Tensor(impl);
}

// full's body, named `op` in errors.
Tensor allocate_filled(const Shape& shape, double value, DType dtype, Device device, const char* op) {
  Tensor t = allocate(shape, dtype, device, op);
  fill_data(t, value);
  return t;
}

}  // namespace

Tensor empty(const Shape& shape, DType dtype, Device device, const char* op) { return allocate(shape, dtype, device, op); }

void check_cpu(const Tensor& t, const char* op) {
  if (!t.device().is_cpu()) throw_not_implemented(op, t.device());
}

void check_int64_value(double value, const char* op) {
  check<ValueError>(std::isfinite(value) && value >= -0x1p63 && value < 0x1p63, op, ": value ", value,
                    " cannot be converted to int64 without overflow");
}

void fill_data(const Tensor& t, double value) {
  if (t.dtype() == DType::Int64) check_int64_value(value, "fill");
  // As torch.full and fill_: a finite value beyond float32's range is an
  // error, not inf (inf itself is a value).
  if (t.dtype() == DType::Float32)
    check<ValueError>(!std::isfinite(value) || std::abs(value) <= std::numeric_limits<float>::max(), "fill: value ",
                      value, " cannot be converted to float32 without overflow");
  if (!t.device().is_cpu()) {
    const Device d = t.device();
    device_backend(d, "fill").fill(
        d.index, strided_args<1>(t.shape(), {t.strides()}, {t.raw_data()}, "fill"), t.dtype(), value);
    t.bump_version();
    return;
  }
  dispatch_all(t.dtype(), [&]<class T>() {
    T* p = t.data<T>();
    T v = static_cast<T>(value);
    for_each_row<1>(t.shape(), {t.strides()},
                    [&](std::array<int64_t, 1> o, int64_t len, std::array<int64_t, 1> s) {
                      for (int64_t i = 0; i < len; ++i) p[o[0] + i * s[0]] = v;
                    });
  });
  t.bump_version();
}

Tensor zeros(const Shape& shape, DType dtype, Device device) {
  return allocate_filled(shape, 0.0, dtype, device, "zeros");
}
Tensor ones(const Shape& shape, DType dtype, Device device) {
  return allocate_filled(shape, 1.0, dtype, device, "ones");
}
Tensor full(const Shape& shape, double value, DType dtype, Device device) {
  return allocate_filled(shape, value, dtype, device, "full");
}

Tensor full_int(const Shape& shape, int64_t value, Device device) {
  Tensor t = allocate(shape, DType::Int64, Device::cpu(), "full_int");
  std::fill_n(t.data<int64_t>(), t.numel(), value);
  return transfer(t, device);
}

Tensor tensor(const std::vector<double>& values, const Shape& shape, DType dtype) {
  check<ShapeError>(static_cast<int64_t>(values.size()) == numel_of(shape), "tensor: got ",
                    values.size(), " values for shape ", shape_str(shape));
  if (dtype == DType::Int64)
    for (double v : values) check_int64_value(v, "tensor");
  Tensor t = empty(shape, dtype);
  dispatch_all(dtype, [&]<class T>() {
    T* p = t.data<T>();
    for (size_t i = 0; i < values.size(); ++i) p[i] = static_cast<T>(values[i]);
  });
  return t;
}

Tensor tensor_int(const std::vector<int64_t>& values, const Shape& shape) {
  check<ShapeError>(static_cast<int64_t>(values.size()) == numel_of(shape), "tensor_int: got ",
                    values.size(), " values for shape ", shape_str(shape));
  Tensor t = empty(shape, DType::Int64);
  if (!values.empty()) std::memcpy(t.data<int64_t>(), values.data(), values.size() * sizeof(int64_t));
  return t;
}

template <class T>
  requires std::same_as<T, float> || std::same_as<T, int64_t>
Tensor tensor(const std::vector<T>& values, const Shape& shape) {
  check<ShapeError>(static_cast<int64_t>(values.size()) == numel_of(shape), "tensor: got ",
                    values.size(), " values for shape ", shape_str(shape));
  Tensor t = empty(shape, dtype_of<T>());
  if (!values.empty()) std::memcpy(t.data<T>(), values.data(), values.size() * sizeof(T));
  return t;
}
template Tensor tensor(const std::vector<float>&, const Shape&);
template Tensor tensor(const std::vector<int64_t>&, const Shape&);

Tensor from_blob(void* data, const Shape& shape, DType dtype) {
  for (int64_t d : shape)
    check<ShapeError>(d >= 0, "from_blob: negative dimension in shape ", shape_str(shape));
  const int64_t n = numel_of(shape);
  check<ValueError>(data != nullptr || n == 0, "from_blob: null data for shape ", shape_str(shape));
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(data, static_cast<size_t>(n) * dtype_size(dtype));
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  return Tensor(impl);
}

Tensor arange(double end, DType dtype) { return arange(0.0, end, 1.0, dtype); }

Tensor linspace(double start, double end, int64_t steps, DType dtype) {
  check<ValueError>(steps >= 0, "linspace: expected steps >= 0, but got ", steps);
  std::vector<double> v(static_cast<size_t>(steps));
  if (steps == 1) v[0] = start;
  if (steps > 1) {
    const double step = (end - start) / static_cast<double>(steps - 1);
    for (int64_t i = 0; i < steps; ++i)
      v[i] = i < steps / 2 ? start + step * static_cast<double>(i) : end - step * static_cast<double>(steps - 1 - i);
  }
  return tensor(v, {steps}, dtype);
}

Tensor arange(double start, double end, double step, DType dtype) {
  check<ValueError>(std::isfinite(start) && std::isfinite(end) && std::isfinite(step),
                    "arange: expected finite start, end and step, but got start ", start, ", end ", end, ", step ",
                    step);
  check<ValueError>(step != 0.0, "arange: step must be non-zero");
  // The count in double first: (end - start) / step can be far beyond int64
  // (or inf when end - start overflows), and casting that is undefined.
  const double span = std::ceil((end - start) / step);
  const double max_count =
      static_cast<double>(std::numeric_limits<int64_t>::max() / static_cast<int64_t>(dtype_size(dtype)));
  check<ValueError>(span < max_count, "arange: start ", start, ", end ", end, ", step ", step, " give ", span,
                    " values of ", dtype_name(dtype), ", more bytes than an int64 can count");
  const int64_t n = span > 0 ? static_cast<int64_t>(span) : 0;
  if (dtype == DType::Int64 && n > 0) {
    const double last = start + static_cast<double>(n - 1) * step, lim = 0x1p63;
    check<ValueError>(start >= -lim && start < lim && last >= -lim && last < lim, "arange: values from ", start,
                      " to ", last, " do not fit int64");
  }
  Tensor t = empty({n}, dtype);
  dispatch_all(dtype, [&]<class T>() {
    T* p = t.data<T>();
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(start + static_cast<double>(i) * step);
  });
  return t;
}

Tensor arange_int(int64_t start, int64_t end, int64_t step) {
  check<ValueError>(step != 0, "arange: step must be non-zero");
  // In 128 bits: end - start can overflow int64.
  const __int128 span = static_cast<__int128>(end) - start;
  const __int128 n = (span > 0) == (step > 0) && span != 0 ? (span + step - (step > 0 ? 1 : -1)) / step : 0;
  check<ValueError>(n < std::numeric_limits<int64_t>::max() / 8, "arange: start ", start, ", end ", end, ", step ",
                    step, " give ", static_cast<double>(n), " values of int64, more bytes than an int64 can count");
  Tensor t = empty({static_cast<int64_t>(n)}, DType::Int64);
  int64_t* p = t.data<int64_t>();
  for (int64_t i = 0; i < static_cast<int64_t>(n); ++i) p[i] = static_cast<int64_t>(start + static_cast<__int128>(i) * step);
  return t;
}

Tensor zeros_like(const Tensor& t) { return zeros(t.shape(), t.dtype(), t.device()); }
Tensor ones_like(const Tensor& t) { return ones(t.shape(), t.dtype(), t.device()); }
Tensor empty_like(const Tensor& t) { return empty(t.shape(), t.dtype(), t.device()); }

Tensor make_view(const Tensor& t, Shape shape, Shape strides, int64_t offset) {
  auto v = std::make_shared<TensorImpl>();
  v->storage = t.impl().storage;
  v->shape = std::move(shape);
  v->strides = std::move(strides);
  v->offset = offset;
  v->dtype = t.dtype();
  v->is_view = true;
  return Tensor(v);
}

void copy_data(const Tensor& dst, const Tensor& src) {
  check<ShapeError>(dst.shape() == src.shape(), "copy: expected equal shapes, but got dst ",
                    shape_str(dst.shape()), " src ", shape_str(src.shape()));
  if (dst.dtype() == DType::Int64 && is_floating(src.dtype())) {
    // Every value is checked before any is written (a cast of NaN, inf or
    // one beyond int64's range is undefined), on the host.
    if (!dst.device().is_cpu() || !src.device().is_cpu()) {
      Tensor host = empty(dst.shape(), DType::Int64);
      copy_data(host, transfer(src, Device::cpu()));
      return copy_data(dst, host);
    }
    dispatch_all(src.dtype(), [&]<class S>() {
      const S* p = src.data<S>();
      for_each_row<1>(src.shape(), {src.strides()}, [&](std::array<int64_t, 1> o, int64_t len, std::array<int64_t, 1> st) {
        for (int64_t i = 0; i < len; ++i) check_int64_value(static_cast<double>(p[o[0] + i * st[0]]), "copy");
      });
    });
  }
  if (dst.device() != src.device()) return copy_data(dst, transfer(src, dst.device()));
  if (!dst.device().is_cpu()) {
    const Device d = dst.device();
    device_backend(d, "copy").copy(
        d.index,
        strided_args<2>(dst.shape(), {dst.strides(), src.strides()}, {dst.raw_data(), src.raw_data()}, "copy"),
        dst.dtype(), src.dtype());
    dst.bump_version();
    return;
  }
  dispatch_all(dst.dtype(), [&]<class D>() {
    D* d = dst.data<D>();
    dispatch_all(src.dtype(), [&]<class S>() {
      const S* s = src.data<S>();
      for_each_row<2>(dst.shape(), {dst.strides(), src.strides()},
                      [&](std::array<int64_t, 2> o, int64_t len, std::array<int64_t, 2> st) {
                        if (st[0] == 1 && st[1] == 1) {
                          for (int64_t i = 0; i < len; ++i) d[o[0] + i] = static_cast<D>(s[o[1] + i]);
                        } else {
                          for (int64_t i = 0; i < len; ++i)
                            d[o[0] + i * st[0]] = static_cast<D>(s[o[1] + i * st[1]]);
                        }
                      });
    });
  });
  dst.bump_version();
}

Tensor contiguous_data(const Tensor& t) {
  if (t.is_contiguous()) return t.detach();
  Tensor out = empty(t.shape(), t.dtype(), t.device());
  copy_data(out, t);
  return out;
}

}  // namespace tmem

namespace tmem {
Tensor reshape_data(const Tensor& t, const Shape& shape) {
  check<ShapeError>(numel_of(shape) == t.numel(), "reshape: cannot view a tensor of shape ",
                    shape_str(t.shape()), " as ", shape_str(shape));
  Tensor c = contiguous_data(t);
  Tensor out = make_view(c, shape, contiguous_strides(shape), c.offset());
  out.impl().is_view = c.impl().storage == t.impl().storage;  // a copy is nobody's view
  return out;
}
}  // namespace tmem
