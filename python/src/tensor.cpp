// tmem.Tensor: properties, autograd, operators, indexing, NumPy conversion
// (zero-copy both ways where the layout allows), the buffer protocol, DLPack
// export and import, the factories, and the grad-mode context managers.
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <unordered_map>

#include "common.h"
#include "tmem/core/device_backend.h"
#include "tmem/core/grad_hooks.h"

namespace tmem::py_bind {

py::handle tensor_object(const Tensor& t, const std::function<py::handle()>& make) {
  if (!t.defined()) return make();
  // TensorImpl -> a weak reference to its live Python object. A live object
  // holds its handle, so the impl (and its address) lives as long as the
  // entry can be found; the reference's callback drops the entry when the
  // object dies. Never freed: a callback may run during interpreter exit.
  static auto& objects = *new std::unordered_map<const TensorImpl*, PyObject*>;
  const TensorImpl* impl = t.impl_ptr().get();
  if (const auto it = objects.find(impl); it != objects.end()) {
    PyObject* obj = PyWeakref_GetObject(it->second);
    if (obj != Py_None) return py::handle(obj).inc_ref();
  }
  py::handle out = make();
  if (!out) return out;
  py::object weak = py::weakref(out, py::cpp_function([impl](py::handle ref) {
                                  const auto it = objects.find(impl);
                                  if (it != objects.end() && it->second == ref.ptr()) {
                                    objects.erase(it);
                                    Py_DECREF(ref.ptr());
                                  }
                                }));
  auto [it, fresh] = objects.try_emplace(impl, nullptr);
  if (!fresh) Py_DECREF(it->second);  // the reference of an object that died without its callback yet
  it->second = weak.release().ptr();
  return out;
}

std::optional<int64_t> exact_int(const py::object& v, const char* op, const char* arg) {
  if (!PyIndex_Check(v.ptr()) || py::isinstance<Tensor>(v)) return std::nullopt;
  const py::int_ i = py::reinterpret_steal<py::int_>(PyNumber_Index(v.ptr()));
  if (!i) throw py::error_already_set();
  int overflow = 0;
  const long long x = PyLong_AsLongLongAndOverflow(i.ptr(), &overflow);
  check<ValueError>(overflow == 0, op, ": ", arg, " ", py::repr(i).cast<std::string>(), " does not fit int64");
  return x;
}

namespace {

// ---- storage over memory owned by another library ----

/// Drops a reference taken by an external storage. Storage can die on a
/// thread that does not hold the GIL (inside a call that released it, or on
/// a worker); then the decref is handed to the interpreter as a pending call.
void release_pyobject(PyObject* obj) {
  if (!Py_IsInitialized()) return;
  if (PyGILState_Check()) {
    Py_DECREF(obj);
    return;
  }
  auto decref = [](void* o) -> int {
    Py_DECREF(static_cast<PyObject*>(o));
    return 0;
  };
  if (Py_AddPendingCall(decref, obj) == 0) return;
  py::gil_scoped_acquire gil;
  Py_DECREF(obj);
}

/// A CPU Storage over `nbytes` at `data`, owned elsewhere: `release` runs
/// when the last tensor using it dies. The Storage's own (empty) block is
/// put back before it is destroyed, so its destructor frees what it allocated.
std::shared_ptr<Storage> external_storage(void* data, size_t nbytes, std::function<void()> release,
                                          const char* op) {
  auto* s = new Storage(0, Device::cpu(), op);
  void* own = s->data;
  const size_t own_nbytes = s->nbytes;
  s->data = data;
  s->nbytes = nbytes;
  return std::shared_ptr<Storage>(s, [own, own_nbytes, release = std::move(release)](Storage* st) {
    st->data = own;
    st->nbytes = own_nbytes;
    delete st;
    release();
  });
}

/// A leaf tensor over a storage with the given layout (strides in elements).
Tensor wrap_storage(std::shared_ptr<Storage> storage, Shape shape, Shape strides, DType dtype) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::move(storage);
  impl->shape = std::move(shape);
  impl->strides = std::move(strides);
  impl->dtype = dtype;
  return Tensor(impl);
}

/// A NumPy array viewing t's memory (any strides), keeping its storage
/// alive. With `user` (the method a user called), read-only when t requires
/// grad: a write through it would change values autograd tracks behind the
/// tensor's version counter (torch refuses numpy() on such a tensor).
py::array numpy_view(const Tensor& t, const char* user = nullptr) {
  check<DeviceError>(t.device().is_cpu(), "numpy: the tensor is on ", t.device().str(),
                     "; copy it to the CPU first (t.cpu())");
  const auto item = static_cast<int64_t>(dtype_size(t.dtype()));
  std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end());
  std::vector<py::ssize_t> strides;
  for (int64_t s : t.strides()) strides.push_back(s * item);
  auto* keep = new std::shared_ptr<Storage>(t.impl().storage);
  py::capsule owner(keep, [](void* p) { delete static_cast<std::shared_ptr<Storage>*>(p); });
  py::array a(numpy_dtype(t.dtype()), shape, strides, t.raw_data(), owner);
  if (user && t.requires_grad()) a.attr("setflags")(py::arg("write") = false);
  return a;
}

// ---- DLPack (dlpack.h v0.8 ABI, written out from the DLPack specification) ----

struct DLDevice {
  int32_t device_type;  // kDLCPU = 1, kDLCUDA = 2
  int32_t device_id;
};
struct DLDataType {
  uint8_t code;  // kDLInt = 0, kDLUInt = 1, kDLFloat = 2
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;  // in elements; null means compact row-major
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};
constexpr int32_t kDLCPU = 1;
constexpr uint8_t kDLInt = 0, kDLFloat = 2;

/// What an exported DLManagedTensor owns: the tensor and its shape arrays.
struct DLPackExport {
  Tensor tensor;
  std::vector<int64_t> shape, strides;
  DLManagedTensor managed{};
};

/// t as a "dltensor" capsule sharing its memory (CPU tensors). Throws
/// ValueError for a tensor that requires grad, as torch does: the consumer
/// could write it behind autograd.
py::capsule to_dlpack(const Tensor& t) {
  check<DeviceError>(t.device().is_cpu(), "__dlpack__: the tensor is on ", t.device().str(),
                     "; only CPU tensors are exported (copy with t.cpu())");
  check<ValueError>(!t.requires_grad(), "__dlpack__: the tensor requires grad, so it is not exported; use "
                    "t.detach()");
  auto* ex = new DLPackExport{t.detach(), t.shape(), t.strides(), {}};
  DLTensor& d = ex->managed.dl_tensor;
  d.data = t.raw_data();
  d.device = {kDLCPU, 0};
  d.ndim = static_cast<int32_t>(t.dim());
  d.dtype = {t.dtype() == DType::Int64 ? kDLInt : kDLFloat, static_cast<uint8_t>(8 * dtype_size(t.dtype())), 1};
  d.shape = ex->shape.data();
  d.strides = ex->strides.data();
  d.byte_offset = 0;
  ex->managed.manager_ctx = ex;
  ex->managed.deleter = [](DLManagedTensor* self) { delete static_cast<DLPackExport*>(self->manager_ctx); };
  // A capsule still named "dltensor" when it dies was never consumed: it
  // still owns the tensor.
  return py::capsule(&ex->managed, "dltensor", [](PyObject* cap) {
    if (!PyCapsule_IsValid(cap, "dltensor")) return;
    auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(cap, "dltensor"));
    m->deleter(m);
  });
}

/// A tensor sharing the memory of a DLPack capsule or of an object with
/// __dlpack__ (CPU float32/float64/int64).
Tensor from_dlpack(const py::object& obj) {
  py::object cap = py::hasattr(obj, "__dlpack__") ? obj.attr("__dlpack__")() : obj;
  check<ValueError>(PyCapsule_IsValid(cap.ptr(), "dltensor"),
                    "from_dlpack: expected an object with __dlpack__ or an unused \"dltensor\" capsule");
  auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(cap.ptr(), "dltensor"));
  const DLTensor& d = m->dl_tensor;
  check<DeviceError>(d.device.device_type == kDLCPU,
                     "from_dlpack: only CPU tensors are imported, but got DLPack device type ", d.device.device_type);
  std::optional<DType> dtype;
  if (d.dtype.lanes == 1 && d.dtype.code == kDLFloat && d.dtype.bits == 32) dtype = DType::Float32;
  if (d.dtype.lanes == 1 && d.dtype.code == kDLFloat && d.dtype.bits == 64) dtype = DType::Float64;
  if (d.dtype.lanes == 1 && d.dtype.code == kDLInt && d.dtype.bits == 64) dtype = DType::Int64;
  check<DtypeError>(dtype.has_value(), "from_dlpack: tmem takes float32, float64 and int64, but got DLPack type code ",
                    int(d.dtype.code), " with ", int(d.dtype.bits), " bits and ", d.dtype.lanes, " lanes");
  Shape shape(d.shape, d.shape + d.ndim);
  Shape strides = d.strides ? Shape(d.strides, d.strides + d.ndim) : contiguous_strides(shape);
  int64_t extent = 1;
  for (int i = 0; i < d.ndim; ++i) {
    check<ValueError>(strides[i] >= 0, "from_dlpack: negative strides are not supported, got strides ",
                      shape_str(strides));
    if (shape[i] == 0) extent = 0;
    else if (extent > 0) extent += (shape[i] - 1) * strides[i];
  }
  PyCapsule_SetName(cap.ptr(), "used_dltensor");
  void* data = static_cast<char*>(d.data) + d.byte_offset;
  auto storage = external_storage(data, static_cast<size_t>(extent) * dtype_size(*dtype),
                                  [m] { if (m->deleter) m->deleter(m); }, "from_dlpack");
  return wrap_storage(std::move(storage), std::move(shape), std::move(strides), *dtype);
}

// ---- indexing ----

/// t[index] for ints, slices (step >= 1), None and Ellipsis, as views.
/// Throws TypeError for a bool index, IndexError for a second Ellipsis, a
/// tensor index that is not 0-d (PyTorch's advanced indexing, which tmem
/// does not have) or an index of another type (a list, a float, a string).
Tensor get_item(const Tensor& t, const py::object& index) {
  py::tuple items = py::isinstance<py::tuple>(index) ? index.cast<py::tuple>() : py::make_tuple(index);
  int64_t consumed = 0, ellipses = 0;
  for (auto it : items) {
    if (it.is(py::ellipsis())) ++ellipses;
    else if (!it.is_none()) ++consumed;
  }
  check<IndexError>(ellipses <= 1, "index: an index can only have a single ellipsis ('...'), but got ", ellipses);
  check<IndexError>(consumed <= t.dim(), "index: too many indices (", consumed, ") for a tensor of rank ", t.dim());
  Tensor out = t;
  int64_t dim = 0, in_dim = 0;  // the dim of out indexed next, and of t (for messages)
  for (auto it : items) {
    if (it.is(py::ellipsis())) {
      dim += t.dim() - consumed;
      in_dim += t.dim() - consumed;
    } else if (it.is_none()) {
      out = unsqueeze(out, dim++);
    } else if (py::isinstance<py::slice>(it)) {
      py::ssize_t start, stop, step, length;
      if (!it.cast<py::slice>().compute(static_cast<py::ssize_t>(out.size(dim)), &start, &stop, &step, &length))
        throw py::error_already_set();
      // The step as written: compute() clamps one past ssize_t (-2**64 to -(2**63 - 1)).
      check<ValueError>(step >= 1, "index: slice steps must be >= 1, but got ",
                        py::str(it.attr("step")).cast<std::string>());
      // One past the last element taken: start + length * step can overflow.
      out = slice(out, dim++, start, length == 0 ? start : start + (length - 1) * step + 1, step);
      ++in_dim;
    } else {
      // bool is an int to Python (x[True] would read row 1); PyTorch's
      // x[True] means x[None], a mask, which tmem does not have.
      if (PyBool_Check(it.ptr()) || py::isinstance(it, py::module_::import("numpy").attr("bool_")))
        throw py::type_error("index: bool indices are not supported, but got " + py::repr(it).cast<std::string>() +
                             "; use an int, a slice, None or ...");
      if (py::isinstance<Tensor>(it)) {
        const Tensor& ti = it.cast<const Tensor&>();
        check<IndexError>(ti.dim() == 0, "index: tensor indices (advanced indexing) are not supported, but got ",
                          "a tensor of shape ", shape_str(ti.shape()), "; use index_select for indices, masked_select "
                          "(reading) or masked_fill / where (writing) for a mask, or a 0-d tensor as an int");
      }
      if (py::isinstance<py::array>(it)) {
        const py::array ai = it.cast<py::array>();
        check<IndexError>(ai.ndim() == 0, "index: array indices (advanced indexing) are not supported, but got ",
                          "an array of shape ", py::str(it.attr("shape")).cast<std::string>(),
                          "; use index_select, or a 0-d array as an int");
      }
      check<IndexError>(PyIndex_Check(it.ptr()),
                        "index: only integers, slices (`:`), ellipsis (`...`) and None are valid indices (got ",
                        py::str(py::type::of(it).attr("__name__")).cast<std::string>(), ")");
      // Clamped to the Py_ssize_t range on overflow; the check below reports the value as given.
      int64_t i = PyNumber_AsSsize_t(it.ptr(), nullptr);
      if (i == -1 && PyErr_Occurred()) throw py::error_already_set();
      const int64_t n = out.size(dim);
      check<IndexError>(i >= -n && i < n, "index: ", py::repr(it).cast<std::string>(), " is out of range for dim ",
                        in_dim, " of size ", n);
      ++in_dim;
      if (i < 0) i += n;
      out = squeeze(slice(out, dim, i, i + 1), dim);
    }
  }
  return out;
}

/// What a buffer view exported by get_buffer owns.
struct BufferView {
  // The memory itself, not the tensor: `t.data = src` and Module.to give the
  // tensor another storage while the view still points into this one.
  std::shared_ptr<Storage> storage;
  std::vector<py::ssize_t> shape, strides;
};

/// bf_getbuffer of Tensor: CPU tensors, any strides when the consumer takes
/// strides, else contiguous ones only.
int get_buffer(PyObject* obj, Py_buffer* view, int flags) {
  view->obj = nullptr;
  try {
    const Tensor t = py::handle(obj).cast<Tensor>();
    if (!t.device().is_cpu()) {
      PyErr_SetString(PyExc_BufferError, ("buffer: the tensor is on " + t.device().str() + "; use t.cpu()").c_str());
      return -1;
    }
    if ((flags & PyBUF_STRIDES) != PyBUF_STRIDES && !t.is_contiguous()) {
      PyErr_SetString(PyExc_BufferError, "buffer: the tensor is not contiguous; use t.contiguous()");
      return -1;
    }
    // Read-only when the tensor requires grad, as numpy() (numpy_view).
    if (t.requires_grad() && (flags & PyBUF_WRITABLE) == PyBUF_WRITABLE) {
      PyErr_SetString(PyExc_BufferError, "buffer: the tensor requires grad, so its buffer is read-only; use "
                                         "t.detach() for a writable one");
      return -1;
    }
    const auto item = static_cast<py::ssize_t>(dtype_size(t.dtype()));
    auto* b = new BufferView{t.impl().storage, {t.shape().begin(), t.shape().end()}, {}};
    for (int64_t s : t.strides()) b->strides.push_back(s * item);
    static const char* formats[] = {"f", "d", "q"};
    view->buf = t.raw_data();
    view->obj = obj;
    Py_INCREF(obj);
    view->len = static_cast<py::ssize_t>(t.numel()) * item;
    view->itemsize = item;
    view->readonly = t.requires_grad() ? 1 : 0;
    view->ndim = static_cast<int>(t.dim());
    view->format = (flags & PyBUF_FORMAT) ? const_cast<char*>(formats[static_cast<int>(t.dtype())]) : nullptr;
    view->shape = (flags & PyBUF_ND) == PyBUF_ND ? b->shape.data() : nullptr;
    view->strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES ? b->strides.data() : nullptr;
    view->suboffsets = nullptr;
    view->internal = b;
    return 0;
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_BufferError, e.what());
    return -1;
  }
}

void release_buffer(PyObject*, Py_buffer* view) { delete static_cast<BufferView*>(view->internal); }

/// Throws ValueError naming `op` (float, int) unless t has one element, as
/// PyTorch's "only one element tensors can be converted to Python scalars".
void check_one_element(const Tensor& t, const char* op) {
  check<ValueError>(t.numel() == 1, op, ": only one element tensors can be converted to Python scalars, but got shape ",
                    shape_str(t.shape()));
}

/// Fills t with the Python number v, an integer into an int64 tensor exactly
/// (a double holds integers only up to 2^53), or with a 0-d tensor v, whose
/// gradient it sends back (torch's fill_(Tensor)). Throws ValueError naming
/// fill_ for a tensor v of more than one dimension.
Tensor& fill_value_(Tensor& t, const py::object& v) {
  if (py::isinstance<Tensor>(v)) {
    const Tensor value = v.cast<Tensor>();
    check<ValueError>(value.dim() == 0, "fill_: only a 0-dimensional value tensor can fill a tensor, but got one of "
                      "shape ", shape_str(value.shape()));
    return copy_(t, value);
  }
  if (t.dtype() == DType::Int64)
    if (const std::optional<int64_t> x = exact_int(v, "fill_", "value")) return copy_(t, full_int({}, *x, t.device()));
  return fill_(t, number_from_py(v, "fill_", "value"));
}

/// v rounded to float32's range as IEEE rounding does, so that ones(3) * 1e39
/// is inf as in torch (full itself refuses such a fill value, as torch.full
/// does): from half an ulp past the largest float on, inf; below it, the
/// largest.
double as_float32(double v) {
  constexpr double largest = std::numeric_limits<float>::max();
  if (!std::isfinite(v) || std::abs(v) <= largest) return v;
  return std::copysign(std::abs(v) >= largest + 0x1p103 ? HUGE_VAL : largest, v);
}

/// other as the tensor operand of a Python operator on t: a Tensor, a
/// Python or NumPy number (a 0-d tensor of t's dtype and device) or a NumPy
/// array (its values, as torch takes them; dtypes must still match); none
/// for any other object.
std::optional<Tensor> operator_operand(const Tensor& t, const py::object& other) {
  if (py::isinstance<Tensor>(other)) return other.cast<Tensor>();
  if (py::isinstance<py::array>(other)) return from_numpy(other.cast<py::array>()).to(t.device());
  py::detail::make_caster<double> number;
  if (!number.load(other, true)) return std::nullopt;
  const double v = py::detail::cast_op<double>(number);
  return full({}, t.dtype() == DType::Float32 ? as_float32(v) : v, t.dtype(), t.device());
}

/// A NumPy result as torch types it: floats float32 unless an operand was a
/// float64 tensor or array (int64 / int64 and int64 + 0.5 are float32 in
/// torch), integers and bools int64.
Tensor torch_typed(const py::array& r, bool float64) {
  const char kind = r.dtype().kind();
  const DType d = kind == 'f' ? (float64 ? DType::Float64 : DType::Float32) : DType::Int64;
  return from_numpy(r.attr("astype")(numpy_dtype(d)));
}

/// lhs <ufunc> rhs by NumPy when an operand is an int64 tensor and none
/// requires grad (tmem's kernels are floating only; labels and indices are
/// int64), as comparisons are computed; none otherwise, and for an operand
/// NumPy should not see (a string, None: Python then raises its TypeError).
std::optional<Tensor> int64_arithmetic(const Tensor& t, const py::object& other, const char* ufunc, bool reflected) {
  if (!ufunc) return std::nullopt;
  const bool other_tensor = py::isinstance<Tensor>(other);
  const Tensor o = other_tensor ? other.cast<Tensor>() : Tensor();
  const bool ints = t.dtype() == DType::Int64 || (other_tensor && o.dtype() == DType::Int64);
  if (!ints || t.requires_grad() || (other_tensor && o.requires_grad()) || !t.device().is_cpu() ||
      (other_tensor && !o.device().is_cpu()))
    return std::nullopt;
  py::module_ np = py::module_::import("numpy");
  const bool number = PyLong_Check(other.ptr()) || PyFloat_Check(other.ptr()) || py::isinstance(other, np.attr("number"));
  if (!other_tensor && !number && !py::isinstance<py::array>(other)) return std::nullopt;
  const py::object rhs = other_tensor ? py::object(numpy_view(o)) : other;
  const py::object lhs_arr = numpy_view(t);
  // NumPy's integer // and % by 0 warn and give 0; torch raises.
  const std::string name = ufunc;
  if (name == "floor_divide" || name == "remainder") {
    const py::object divisor = np.attr("asarray")(reflected ? lhs_arr : rhs);
    if (divisor.attr("dtype").attr("kind").cast<std::string>() != "f" &&
        np.attr("any")(np.attr("equal")(divisor, 0)).cast<bool>())
      throw py::value_error(name + ": integer division by zero");
  }
  py::array r;
  try {
    r = reflected ? np.attr(ufunc)(rhs, lhs_arr) : np.attr(ufunc)(lhs_arr, rhs);
  } catch (py::error_already_set& e) {  // 2 ** tensor([-1]): "Integers to negative integer powers ..."
    if (!e.matches(PyExc_ValueError)) throw;
    throw ValueError(name + ": " + py::str(e.value()).cast<std::string>());
  }
  const bool float64 = t.dtype() == DType::Float64 || (other_tensor && o.dtype() == DType::Float64) ||
                       (py::isinstance<py::array>(other) && other.cast<py::array>().dtype().is(py::dtype::of<double>()));
  return torch_typed(r, float64);
}

/// t <op> other (reflected: other <op> t) for a Python operator; `ufunc`,
/// NumPy's name of the op, computes it for int64 tensors (int64_arithmetic).
/// NotImplemented for an operand operator_operand does not take, so Python
/// raises its TypeError ("unsupported operand type(s)") as for torch.Tensor.
/// a and b cast to torch's promoted type when both are floating of two
/// dtypes: float64, except that a 0-d operand takes the dtype of one with
/// dims (torch's rule: a float64 scalar does not widen a float32 tensor).
/// The casts are differentiable; other pairs are returned as they are.
std::pair<Tensor, Tensor> promoted(const Tensor& a, const Tensor& b) {
  if (a.dtype() == b.dtype() || !is_floating(a.dtype()) || !is_floating(b.dtype())) return {a, b};
  const bool a0 = a.dim() == 0, b0 = b.dim() == 0;
  const DType d = a0 != b0 ? (a0 ? b.dtype() : a.dtype()) : DType::Float64;
  return {a.dtype() == d ? a : to_dtype(a, d), b.dtype() == d ? b : to_dtype(b, d)};
}

py::object operator_result(const Tensor& t, const py::object& other, Tensor (*f)(const Tensor&, const Tensor&),
                           bool reflected = false, const char* ufunc = nullptr) {
  if (const std::optional<Tensor> r = int64_arithmetic(t, other, ufunc, reflected)) return py::cast(*r);
  const std::optional<Tensor> o = operator_operand(t, other);
  if (!o) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
  const auto [x, y] = promoted(t, *o);
  return py::cast(reflected ? f(y, x) : f(x, y));
}

/// a <op> b elementwise with broadcasting, `ufunc` naming the NumPy
/// comparison: an int64 tensor of 0 and 1 (tmem has no bool dtype) without
/// gradient, computed by NumPy over views of CPU tensors. NotImplemented for
/// an operand that is neither a tensor, a NumPy array nor a Python or NumPy
/// number (so t == None is False).
py::object compare(const Tensor& a, const py::object& b, const char* ufunc, const char* op) {
  const bool tensor = py::isinstance<Tensor>(b);
  py::module_ np = py::module_::import("numpy");
  // NumPy scalars too (np.int64 from np.unique): refused, Python compared
  // them by identity, so t == np.int64(1) was False.
  const bool number = py::isinstance<py::int_>(b) || py::isinstance<py::float_>(b) ||
                      py::isinstance(b, np.attr("number")) || py::isinstance(b, np.attr("bool_"));
  if (!tensor && !number && !py::isinstance<py::array>(b)) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
  py::object rhs = b;
  // A float compared with a float32 tensor as the operators round it
  // (tensor([inf]) == 1e39 is true in torch).
  if (!tensor && a.dtype() == DType::Float32 && PyFloat_Check(b.ptr())) rhs = py::float_(as_float32(b.cast<double>()));
  if (tensor) {
    const Tensor t = b.cast<Tensor>();
    check<DeviceError>(t.device() == a.device(), op, ": tensors on ", a.device().str(), " and ", t.device().str());
    broadcast_shapes(a.shape(), t.shape(), op);
    rhs = numpy_view(t);
  }
  return py::cast(from_numpy(np.attr(ufunc)(numpy_view(a), rhs).attr("astype")(np.attr("int64"))));
}

/// What Tensor.register_hook and register_post_accumulate_grad_hook return
/// (torch.utils.hooks.RemovableHandle): remove() takes the hook out (again:
/// nothing); `with handle:` removes it at the block's end.
struct GradHookHandle : Bound {
  GradHookHandle(uint64_t hook_id, void (*remover)(uint64_t)) : id(hook_id), remove(remover) {}
  uint64_t id;
  void (*remove)(uint64_t);
};

/// Python callable `hook` for the engine, which copies it and drops the
/// copies on the thread that runs backward: the last reference is released
/// with the GIL taken. Throws TypeError naming `who` for a non-callable.
std::shared_ptr<py::function> engine_held(const py::object& hook, const char* who) {
  if (!PyCallable_Check(hook.ptr()))
    throw py::type_error(std::string(who) + ": expected a callable hook, but got " +
                         py::str(py::type::of(hook).attr("__name__")).cast<std::string>());
  return std::shared_ptr<py::function>(new py::function(hook.cast<py::function>()), [](py::function* f) {
    if (!Py_IsInitialized()) return;  // at exit: leave the reference
    py::gil_scoped_acquire gil;
    delete f;
  });
}

/// Tensor.register_hook's C++ hook around a Python callable: called with the
/// GIL taken; None keeps the gradient, a Tensor replaces it, anything else
/// is a TypeError.
GradHook python_grad_hook(const py::object& hook) {
  return [fn = engine_held(hook, "register_hook")](const Tensor& grad) -> Tensor {
    py::gil_scoped_acquire gil;
    const py::object r = (*fn)(grad);
    if (r.is_none()) return Tensor();
    if (!py::isinstance<Tensor>(r))
      throw py::type_error("register_hook: a hook must return a Tensor or None, but returned " +
                           py::str(py::type::of(r).attr("__name__")).cast<std::string>());
    return r.cast<Tensor>();
  };
}

/// Tensor.register_post_accumulate_grad_hook's C++ hook around a Python
/// callable: called with the leaf, the GIL taken; a result other than None
/// is a TypeError (torch's hooks of this kind return nothing).
PostAccumulateGradHook python_post_accumulate_grad_hook(const py::object& hook) {
  return [fn = engine_held(hook, "register_post_accumulate_grad_hook")](const Tensor& leaf) {
    py::gil_scoped_acquire gil;
    const py::object r = (*fn)(leaf);
    if (!r.is_none())
      throw py::type_error("register_post_accumulate_grad_hook: a hook must return None, but returned " +
                           py::str(py::type::of(r).attr("__name__")).cast<std::string>());
  };
}

/// A Python context manager holding an RAII guard while it is entered: a
/// stack of them, so that one object entered in nested blocks (a module's
/// NO_GRAD = tmem.no_grad() in a recursive helper) keeps the mode on in the
/// inner one, each exit restoring what its enter found.
template <class Guard>
struct GuardContext : Bound {
  std::vector<std::unique_ptr<Guard>> guards;
};

template <class Guard>
void bind_guard(py::module_& m, const char* name, const char* doc) {
  py::class_<GuardContext<Guard>>(m, name, doc)
      .def(py::init<>())
      .def("__enter__", [](GuardContext<Guard>& g) { g.guards.push_back(std::make_unique<Guard>()); })
      .def("__exit__", [name](GuardContext<Guard>& g, py::args) {
        check<ValueError>(!g.guards.empty(), name, ": __exit__ without a matching __enter__");
        g.guards.pop_back();
        return false;
      });
}

/// Whether data is a NumPy float64 scalar or nested lists or tuples holding
/// one, which torch.tensor keeps as float64 (NumPy's array of them would
/// not say so: it promotes np.float32 and Python floats to float64 too).
bool holds_numpy_float64(const py::handle& data, const py::handle& float64) {
  if (py::isinstance(data, float64)) return true;
  if (!py::isinstance<py::list>(data) && !py::isinstance<py::tuple>(data)) return false;
  for (const py::handle item : data)
    if (holds_numpy_float64(item, float64)) return true;
  return false;
}

/// In place a = a <op> b through the out-of-place operator `method` of
/// Python (its broadcasting, types and int64 rules), written into a by
/// commit_inplace: the body of /=, **=, //=, %=, div_ and pow_ (torch's
/// in-place forms). Autograd differentiates the operator as torch's
/// in-place op; where it needs grad, the operand is a copy of a with a's
/// history (a * 1), so the write does not overwrite values its backward
/// reads. Throws DtypeError for a result of another dtype than a's (int64
/// /= 2 is float, as torch refuses), TypeError for an operand the operator
/// does not take, and what commit_inplace throws (a leaf that requires grad).
Tensor& assign_op_(Tensor& a, const py::object& b, const char* method, const char* who) {
  const bool tracked = grad_enabled() && is_floating(a.dtype()) &&
                       (a.requires_grad() || (py::isinstance<Tensor>(b) && b.cast<Tensor>().requires_grad()));
  const py::object r = py::cast(tracked ? mul(a, 1.0) : a).attr(method)(b);
  if (r.is(py::reinterpret_borrow<py::object>(Py_NotImplemented)))
    throw py::type_error(std::string(who) + ": unsupported operand type " +
                         py::str(py::type::of(b).attr("__name__")).cast<std::string>());
  Tensor result = r.cast<Tensor>();
  // A floating result goes into a floating tensor of the other precision as torch's in-place ops cast it
  // (x_f32 += y_f64 stays float32); a float into int64 is refused, as torch refuses it.
  if (result.dtype() != a.dtype() && is_floating(result.dtype()) && is_floating(a.dtype()))
    result = to_dtype(result, a.dtype());
  check<DtypeError>(result.dtype() == a.dtype(), who, ": the result is ", dtype_name(result.dtype()),
                    ", which cannot be written into a tensor of ", dtype_name(a.dtype()));
  commit_inplace(a, result, who);
  return a;
}

/// In place a += alpha * b, b a tensor (broadcast) or a number: the body of
/// add_, sub_ (alpha negated), += and -=. `who` names the method in errors.
Tensor& add_scaled_(Tensor& a, const py::object& b, double alpha, const std::string& who) {
  check<ValueError>(std::isfinite(alpha), who, ": expected a finite alpha, but got ", alpha);
  if (a.dtype() == DType::Int64) {  // int64 arithmetic runs in NumPy, as the operators' (x += 1 as x + 1)
    check<ValueError>(alpha == std::trunc(alpha), who, ": an int64 tensor takes an integral alpha, but got ", alpha);
    if (alpha == 1.0) return assign_op_(a, b, "__add__", who.c_str());
    if (alpha == -1.0) return assign_op_(a, b, "__sub__", who.c_str());
    return assign_op_(a, b.attr("__mul__")(static_cast<int64_t>(alpha)), "__add__", who.c_str());
  }
  if (!py::isinstance<Tensor>(b)) return add_(a, alpha * number_from_py(b, who, "the operand"));
  const Tensor t = b.cast<Tensor>();
  if (t.dtype() != a.dtype()) {  // through the operators' promotion, cast back into a (torch's in-place rule)
    if (alpha == 1.0) return assign_op_(a, b, "__add__", who.c_str());
    if (alpha == -1.0) return assign_op_(a, b, "__sub__", who.c_str());
    return assign_op_(a, b.attr("__mul__")(alpha), "__add__", who.c_str());
  }
  if (alpha == 1.0) return add_(a, t);
  const Tensor scaled = alpha == -1.0 ? neg(t) : mul(t, alpha);
  return add_(a, scaled);
}

/// The alpha of add_ and sub_: a number, not a bool (torch refuses True).
double alpha_from_py(const py::object& alpha, const std::string& who) {
  if (PyBool_Check(alpha.ptr())) throw py::type_error(who + ": expected alpha to be a number, but got a bool");
  return number_from_py(alpha, who, "alpha");
}

/// In place a *= b, b a tensor (broadcast) or a number: the body of mul_ and *=.
Tensor& mul_any_(Tensor& a, const py::object& b, const std::string& who) {
  if (a.dtype() == DType::Int64 || (py::isinstance<Tensor>(b) && b.cast<Tensor>().dtype() != a.dtype()))
    return assign_op_(a, b, "__mul__", who.c_str());
  if (py::isinstance<Tensor>(b)) return mul_(a, b.cast<Tensor>());
  return mul_(a, number_from_py(b, who, "the operand"));
}

}  // namespace

Tensor from_numpy(const py::array& array) {
  const py::dtype dt = array.dtype();
  const char kind = dt.kind();
  const bool native = dt.attr("isnative").cast<bool>();
  // As torch.from_numpy: uint64 values above 2^63 - 1 would wrap to negative int64.
  if (kind == 'u' && dt.itemsize() == 8)
    throw DtypeError("from_numpy: uint64 arrays are not supported (values above 2**63 - 1 do not fit int64); "
                     "convert with astype(numpy.int64) if the values fit");
  std::optional<DType> dtype;
  if (native && kind == 'f' && dt.itemsize() == 4) dtype = DType::Float32;
  if (native && kind == 'f' && dt.itemsize() == 8) dtype = DType::Float64;
  if (native && kind == 'i' && dt.itemsize() == 8) dtype = DType::Int64;
  bool shareable = dtype.has_value() && array.writeable() &&
                   (array.flags() & py::detail::npy_api::NPY_ARRAY_ALIGNED_) != 0;
  for (py::ssize_t i = 0; shareable && i < array.ndim(); ++i)
    shareable = array.strides(i) >= 0 && array.strides(i) % dt.itemsize() == 0;
  if (!shareable) {
    DType target;
    // longdouble would lose its precision silently (torch.from_numpy refuses it too).
    check<DtypeError>(kind != 'f' || dt.itemsize() <= 8, "from_numpy: ", py::str(py::handle(dt)).cast<std::string>(),
                      " (long double) arrays are not supported; convert with astype(numpy.float64)");
    if (kind == 'f' && dt.itemsize() == 8) target = DType::Float64;
    else if (kind == 'f') target = DType::Float32;
    else if (kind == 'i' || kind == 'u' || kind == 'b') target = DType::Int64;
    else
      throw DtypeError("from_numpy: tmem takes float and integer arrays, but got dtype " +
                       py::str(py::handle(dt)).cast<std::string>());
    // A fresh, writeable, aligned, contiguous array: shareable, so this recurses once.
    py::array copy = py::module_::import("numpy").attr("array")(array, numpy_dtype(target), py::arg("copy") = true,
                                                                py::arg("order") = "C");
    return from_numpy(copy);
  }
  Shape shape(array.shape(), array.shape() + array.ndim());
  Shape strides;
  int64_t extent = 1;
  for (py::ssize_t i = 0; i < array.ndim(); ++i) {
    strides.push_back(array.strides(i) / dt.itemsize());
    if (shape[i] == 0) extent = 0;
    else if (extent > 0) extent += (shape[i] - 1) * strides.back();
  }
  PyObject* owner = array.ptr();
  Py_INCREF(owner);
  auto storage = external_storage(const_cast<void*>(array.data()), static_cast<size_t>(extent) * dt.itemsize(),
                                  [owner] { release_pyobject(owner); }, "from_numpy");
  return wrap_storage(std::move(storage), std::move(shape), std::move(strides), *dtype);
}

void bind_tensor(py::module_& m) {
  py::class_<Tensor> cls(m, "Tensor", py::buffer_protocol(),
                         "An n-dimensional array with tape autograd (a shared handle: copies share data).");
  // The buffer protocol through our own slot: pybind11's def_buffer cannot
  // fail cleanly (a device tensor, a non-contiguous one for a consumer that
  // wants no strides), this one raises BufferError.
  auto* heap = reinterpret_cast<PyHeapTypeObject*>(cls.ptr());
  heap->as_buffer.bf_getbuffer = &get_buffer;
  heap->as_buffer.bf_releasebuffer = &release_buffer;
  // Above ndarray's 0, so `array <op> tensor` calls the tensor's reflected
  // operator instead of making an ndarray of it (torch.Tensor does the same).
  cls.attr("__array_priority__") = 1000;
  cls.def_property_readonly("shape", [](const Tensor& t) { return py::tuple(py::cast(t.shape())); },
                             "The shape as a tuple.")
      .def("size", [](const Tensor& t, std::optional<int64_t> dim) -> py::object {
             if (dim) return py::int_(t.size(*dim));
             return py::tuple(py::cast(t.shape()));
           }, py::arg("dim") = py::none(), "The shape as a tuple, or the size of one dim.")
      .def("stride", [](const Tensor& t) { return py::tuple(py::cast(t.strides())); }, "Strides in elements.")
      .def_property_readonly("ndim", &Tensor::dim, "The number of dims.")
      .def("dim", &Tensor::dim, "The number of dims.")
      .def("numel", &Tensor::numel, "The number of elements.")
      .def("__len__", [](const Tensor& t) {
             if (t.dim() == 0) throw py::type_error("len() of a 0-d tensor");  // as torch
             return t.size(0);
           })
      // Without it Python iterated through __getitem__ until an IndexError,
      // so list(tensor(3.0)) was [] instead of torch's TypeError.
      .def("__iter__", [](const Tensor& t) {
             if (t.dim() == 0) throw py::type_error("iteration over a 0-d tensor");  // as torch
             py::list rows;
             for (int64_t i = 0; i < t.size(0); ++i) rows.append(get_item(t, py::int_(i)));
             return rows.attr("__iter__")();
           }, "The views t[0], t[1], ... along the first dim.")
      .def("clone", [](const Tensor& t) {
             Tensor out = empty(t.shape(), t.dtype(), t.device());
             return copy_(out, t);
           }, "A contiguous copy with its own memory; gradients flow back to the tensor (torch.clone).")
      .def_property_readonly("dtype", &Tensor::dtype, "float32, float64 or int64.")
      .def_property_readonly("device", [](const Tensor& t) { return t.device().str(); },
                             "\"cpu\" or \"cuda:<index>\".")
      .def("is_contiguous", &Tensor::is_contiguous, "Whether the layout is row-major without gaps.")
      .def_property_readonly("is_leaf", &Tensor::is_leaf, "True for tensors not made by a recorded op.")
      .def_property(
          "requires_grad", &Tensor::requires_grad,
          [](Tensor& t, const py::object& on) {
            // pybind11's message for another type named no property.
            if (!PyBool_Check(on.ptr()))
              throw py::type_error("requires_grad: expected a bool, but got " +
                                   py::str(py::type::of(on).attr("__name__")).cast<std::string>());
            t.requires_grad_(on.cast<bool>());
          },
          "Whether backward computes a gradient for it.")
      .def("requires_grad_", [](Tensor& t, bool on) { return t.requires_grad_(on); }, py::arg("requires_grad").noconvert() = true,
           "Marks a leaf as needing a gradient; returns the tensor.")
      .def_property(
          "grad", [](const Tensor& t) { return tensor_or_none(t.grad()); },
          [](Tensor& t, const py::object& g) {
            if (g.is_none()) return t.zero_grad();
            if (!py::isinstance<Tensor>(g))
              throw py::type_error("grad: expected a Tensor or None, but got " +
                                   py::str(py::type::of(g).attr("__name__")).cast<std::string>());
            // As torch's checks of an assigned grad, before the old one goes.
            const Tensor v = g.cast<Tensor>();
            check<ShapeError>(v.shape() == t.shape(), "grad: assigned grad has shape ", shape_str(v.shape()),
                              ", but the tensor has shape ", shape_str(t.shape()));
            check<DtypeError>(v.dtype() == t.dtype(), "grad: assigned grad has dtype ", dtype_name(v.dtype()),
                              ", but the tensor has dtype ", dtype_name(t.dtype()));
            check<DeviceError>(v.device() == t.device(), "grad: assigned grad is on ", v.device().str(),
                               ", but the tensor is on ", t.device().str());
            t.zero_grad();
            accumulate_grad(t.impl(), v.detach(), "grad");
          },
          "The accumulated gradient of a leaf, or of a non-leaf after retain_grad() (None before any backward). Assign None to clear it, or a tensor "
          "of the same shape, dtype and device to set it (to a copy of it).")
      .def_property_readonly("grad_fn", [](const Tensor& t) -> py::object {
             if (t.is_leaf()) return py::none();  // re-bases a stale view first
             return py::str(std::string(op_name(t.impl().grad_fn->op)));
           }, "The name of the op that made the tensor (None for leaves).")
      .def("zero_grad", &Tensor::zero_grad, "Clears the gradient.")
      .def("detach", &Tensor::detach, "The same data without autograd history.")
      .def_property("data", &Tensor::detach, [](const Tensor& t, const py::object& src) {
             if (!py::isinstance<Tensor>(src))
               throw py::type_error("Tensor.data: expected a tmem Tensor, but got " +
                                    py::str(py::type::of(src).attr("__name__")).cast<std::string>() +
                                    " (convert it with tmem.tensor)");
             t.set_data(src.cast<Tensor>());
           },
                    "The same data without autograd history; assigning a tensor of this shape replaces a leaf's "
                    "data, its device and dtype included, keeping the tensor (torch's `p.data = src`; ShapeError "
                    "for another shape, ValueError for a non-leaf).")
      .def("backward", [](const Tensor& t, const py::object& gradient, bool retain_graph) {
             const Tensor g = optional_tensor(gradient, "backward: expected gradient");
             py::gil_scoped_release release;
             t.backward(g, retain_graph);
           }, py::arg("gradient") = py::none(), py::arg("retain_graph").noconvert() = false,
           "Backpropagates from this tensor into the leaves' .grad (frees the graph unless retain_graph).")
      .def("register_hook", [](const Tensor& t, const py::object& hook) {
             return GradHookHandle(register_hook(t, python_grad_hook(hook)), &remove_hook);
           }, py::arg("hook"),
           "Registers hook(grad) -> Tensor or None, called by each backward that reaches the tensor with its "
           "gradient summed over all its uses; a returned tensor (same shape, dtype and device) replaces the "
           "gradient, in .grad for a leaf and in the rest of backward for a non-leaf (torch.Tensor.register_hook). "
           "Returns a handle whose remove() takes the hook out. The hook is held until then, until the tensor "
           "dies or until backward frees its graph: a hook that refers to its own tensor keeps both alive until "
           "remove() (torch's collector would free them). ValueError for a tensor that does not require grad.")
      .def("register_post_accumulate_grad_hook", [](const Tensor& t, const py::object& hook) {
             return GradHookHandle(register_post_accumulate_grad_hook(t, python_post_accumulate_grad_hook(hook)),
                                   &remove_post_accumulate_grad_hook);
           }, py::arg("hook"),
           "Registers hook(tensor) -> None on a leaf, called once per backward as soon as the leaf's .grad is "
           "complete, while the rest of the graph is still differentiated (torch's; an optimizer step per "
           "parameter inside backward uses it). Returns a handle whose remove() takes it out. ValueError for a "
           "tensor that is not a leaf requiring grad.")
      .def("retain_grad", [](const Tensor& t) { retain_grad(t); },
           "Keeps a non-leaf's gradient in .grad, accumulated over backward calls, after its own hooks (a leaf "
           "keeps its own already). ValueError for a tensor that does not require grad.")
      .def_property_readonly("retains_grad", [](const Tensor& t) { return retains_grad(t); },
                             "Whether retain_grad() was called on this non-leaf (False for a leaf).")
      .def_property_readonly("_version", &Tensor::version, "The storage's in-place write counter.")
      .def("item", [](const Tensor& t) -> py::object {
             if (t.dtype() == DType::Int64) return py::int_(t.item_int());
             return py::float_(t.item());
           }, "The value of a one-element tensor as a Python number (an int64 one as an exact int).")
      .def("__float__", [](const Tensor& t) {
             check_one_element(t, "float");
             return t.item();
           }, "float(t) of a one-element tensor.")
      .def("__int__", [](const Tensor& t) -> py::int_ {
             check_one_element(t, "int");
             if (t.dtype() == DType::Int64) return py::int_(t.item_int());
             return py::int_(py::float_(t.item()));  // truncates; NaN and inf raise as int(float) does
           }, "int(t) of a one-element tensor (floats truncated toward zero).")
      .def("__index__", [](const Tensor& t) {
             if (t.dtype() != DType::Int64 || t.numel() != 1)
               throw py::type_error("only integer tensors of a single element can be converted to an index, but got " +
                                    std::string(dtype_name(t.dtype())) + " of shape " + shape_str(t.shape()));
             return t.item_int();
           }, "operator.index(t) of a one-element int64 tensor (lst[t], range(t)).")
      .def("numpy", [](const Tensor& t) { return numpy_view(t, "numpy"); },
           "A NumPy array sharing this CPU tensor's memory (no autograd); read-only when the tensor requires "
           "grad.")
      .def("tolist", [](const Tensor& t) { return numpy_view(t.cpu()).attr("tolist")(); },
           "The elements as nested Python lists.")
      .def("__array__", [](const Tensor& t, const py::object& dtype) {
             py::array a = numpy_view(t.cpu(), "numpy");
             return dtype.is_none() ? a : py::array(a.attr("astype")(dtype));
           }, py::arg("dtype") = py::none())
      .def("__dlpack__", [](const Tensor& t, const py::object& stream) { return to_dlpack(t); },
           py::arg("stream") = py::none(), "A DLPack capsule sharing this CPU tensor's memory.")
      .def("__dlpack_device__", [](const Tensor& t) {
             check<DeviceError>(t.device().is_cpu(), "__dlpack_device__: only CPU tensors are exported");
             return py::make_tuple(kDLCPU, 0);
           })
      .def("to", [](const Tensor& t, const py::object& target) {
             if (target.is_none()) return t;  // as torch: numpy.dtype(None) would be float64
             if (py::isinstance<py::str>(target)) return t.to(device_from_py(target));
             return to_dtype(t, dtype_from_py(target));
           }, py::arg("target"), "This tensor on a device (\"cpu\", \"cuda\") or cast to a dtype.")
      .def("cpu", &Tensor::cpu, "This tensor on the CPU.")
      .def("cuda", [](const Tensor& t, int index) { return t.to(Device::cuda(index)); }, py::arg("index") = 0,
           "This tensor on CUDA device `index`.")
      .def("float", [](const Tensor& t) { return t.dtype() == DType::Float32 ? t : to_dtype(t, DType::Float32); },
           "Cast to float32.")
      .def("double", [](const Tensor& t) { return t.dtype() == DType::Float64 ? t : to_dtype(t, DType::Float64); },
           "Cast to float64.")
      .def_property_readonly("_impl_id", [](const Tensor& t) { return reinterpret_cast<uintptr_t>(t.impl_ptr().get()); },
                             "The identity of the tensor behind this handle (copy.deepcopy's memo).")
      .def("long", [](const Tensor& t) { return t.dtype() == DType::Int64 ? t : to_dtype(t, DType::Int64); },
           "Cast to int64 (floats rounded toward zero, as torch).")
      .def("__getitem__", &get_item, "Views for ints, slices (step >= 1), None and Ellipsis.")
      .def("__setitem__", [](const Tensor& t, const py::object& index, const py::object& value) {
             Tensor view = get_item(t, index);
             if (!py::isinstance<Tensor>(value)) {
               fill_value_(view, value);
               return;
             }
             // As PyTorch's indexing assignment, leading size-1 dims of the value
             // beyond the view's rank are dropped (x[0] = tensor([5.0])).
             Tensor v = value.cast<Tensor>();
             const Shape& s = v.shape();
             auto first = s.begin();
             while (s.end() - first > view.dim() && *first == 1) ++first;
             copy_(view, first == s.begin() ? v : reshape(v, Shape(first, s.end())));
           }, "Writes a tensor (broadcast, leading size-1 dims dropped; copy_) or a number (fill_) into the view "
              "__getitem__ gives. Raises ValueError for a leaf that requires grad outside no_grad (as PyTorch does).")
      .def("__repr__", [](const Tensor& t) {
             std::ostringstream s;
             s << t;
             return s.str();
           }, "PyTorch's repr, written by the C++ printer (operator<<, core/tensor.h): the same text as C++.");
  // Python operators: tensors, numbers and NumPy arrays on either side.
  struct BinaryOperator {
    const char* name;
    Tensor (*f)(const Tensor&, const Tensor&);
    bool reflected;
    const char* ufunc;  // NumPy's, for int64 tensors
  };
  for (const BinaryOperator& o :
       {BinaryOperator{"__add__", &add, false, "add"}, BinaryOperator{"__radd__", &add, true, "add"},
        BinaryOperator{"__sub__", &sub, false, "subtract"}, BinaryOperator{"__rsub__", &sub, true, "subtract"},
        BinaryOperator{"__mul__", &mul, false, "multiply"}, BinaryOperator{"__rmul__", &mul, true, "multiply"},
        BinaryOperator{"__truediv__", &div, false, "true_divide"},
        BinaryOperator{"__rtruediv__", &div, true, "true_divide"},
        BinaryOperator{"__floordiv__", &floor_divide, false, "floor_divide"},
        BinaryOperator{"__rfloordiv__", &floor_divide, true, "floor_divide"},
        BinaryOperator{"__mod__", &remainder, false, "remainder"},
        BinaryOperator{"__rmod__", &remainder, true, "remainder"}})
    cls.def(o.name, [o](const Tensor& a, const py::object& b) {
              return operator_result(a, b, o.f, o.reflected, o.ufunc);
            }, py::is_operator());
  // An int64 operand goes through NumPy, as + - * / do: 2.5 ** t is float32, t ** 2 int64 (torch's types).
  cls.def("__pow__", [](const Tensor& a, const py::object& b) -> py::object {
             if (const std::optional<Tensor> r = int64_arithmetic(a, b, "power", false)) return py::cast(*r);
             if (py::isinstance<Tensor>(b) || py::isinstance<py::array>(b))  // an array is a tensor of its dtype
               return operator_result(a, b, static_cast<Tensor (*)(const Tensor&, const Tensor&)>(&pow));
             py::detail::make_caster<double> number;
             if (!number.load(b, true)) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
             return py::cast(pow(a, py::detail::cast_op<double>(number)));
           }, py::is_operator())
      .def("__rpow__", [](const Tensor& a, const py::object& b) {
             return operator_result(a, b, static_cast<Tensor (*)(const Tensor&, const Tensor&)>(&pow), true, "power");
           }, py::is_operator())
      // A NumPy array operand becomes a tensor as for + - * /: array's own
      // __rmatmul__ turned t @ array into an array, dropping the gradient.
      .def("__matmul__", [](const Tensor& a, const py::object& b) { return operator_result(a, b, &matmul); },
           py::is_operator())
      .def("__rmatmul__", [](const Tensor& a, const py::object& b) { return operator_result(a, b, &matmul, true); },
           py::is_operator())
      .def("__eq__", [](const Tensor& a, const py::object& b) { return compare(a, b, "equal", "=="); })
      .def("__ne__", [](const Tensor& a, const py::object& b) { return compare(a, b, "not_equal", "!="); })
      .def("__lt__", [](const Tensor& a, const py::object& b) { return compare(a, b, "less", "<"); })
      .def("__le__", [](const Tensor& a, const py::object& b) { return compare(a, b, "less_equal", "<="); })
      .def("__gt__", [](const Tensor& a, const py::object& b) { return compare(a, b, "greater", ">"); })
      .def("__ge__", [](const Tensor& a, const py::object& b) { return compare(a, b, "greater_equal", ">="); })
      // Hashed by identity, as torch.Tensor (== compares elements).
      .def("__hash__", [](const py::object& self) { return reinterpret_cast<intptr_t>(self.ptr()); })
      .def("__bool__", [](const Tensor& t) {
             check<ValueError>(t.numel() == 1, "bool() of a tensor with ", t.numel(),
                               " elements is ambiguous; use tmem.sum, .max() or .item()");
             return t.item() != 0;
           })
      // int64 (labels, indices) through NumPy, as the binary operators.
      .def("__neg__", [](const Tensor& a) {
             if (a.dtype() != DType::Int64 || !a.device().is_cpu()) return neg(a);
             return from_numpy(py::module_::import("numpy").attr("negative")(numpy_view(a)));
           })
      .def("__abs__", [](const Tensor& a) {
             if (a.dtype() != DType::Int64 || !a.device().is_cpu()) return abs(a);
             return from_numpy(py::module_::import("numpy").attr("absolute")(numpy_view(a)));
           })
      .def("__iadd__", [](Tensor& a, const py::object& b) -> Tensor& { return add_scaled_(a, b, 1.0, "+="); },
           py::is_operator())
      .def("__isub__", [](Tensor& a, const py::object& b) -> Tensor& { return add_scaled_(a, b, -1.0, "-="); },
           py::is_operator())
      .def("__imul__", [](Tensor& a, const py::object& b) -> Tensor& { return mul_any_(a, b, "*="); },
           py::is_operator())
      .def("__itruediv__", [](Tensor& a, const py::object& b) -> Tensor& { return assign_op_(a, b, "__truediv__", "/="); },
           py::is_operator())
      .def("__ipow__", [](Tensor& a, const py::object& b) -> Tensor& { return assign_op_(a, b, "__pow__", "**="); },
           py::is_operator())
      .def("__ifloordiv__", [](Tensor& a, const py::object& b) -> Tensor& {
             return assign_op_(a, b, "__floordiv__", "//=");
           }, py::is_operator())
      .def("__imod__", [](Tensor& a, const py::object& b) -> Tensor& { return assign_op_(a, b, "__mod__", "%="); },
           py::is_operator())
      .def("div_", [](Tensor& a, const py::object& b) -> Tensor& { return assign_op_(a, b, "__truediv__", "div_"); },
           py::arg("other"), "In place a /= other, other a tensor (broadcast) or a number (torch.Tensor.div_).")
      .def("pow_", [](Tensor& a, const py::object& b) -> Tensor& { return assign_op_(a, b, "__pow__", "pow_"); },
           py::arg("exponent"), "In place a **= exponent, a tensor (broadcast) or a number (torch.Tensor.pow_).")
      .def("add_", [](Tensor& a, const py::object& b, const py::object& alpha) -> Tensor& {
             return add_scaled_(a, b, alpha_from_py(alpha, "add_"), "add_");
           }, py::arg("other"), py::kw_only(), py::arg("alpha") = 1.0,
           "In place a += alpha * other, other a tensor (broadcast) or a number (torch.Tensor.add_).")
      .def("sub_", [](Tensor& a, const py::object& b, const py::object& alpha) -> Tensor& {
             return add_scaled_(a, b, -alpha_from_py(alpha, "sub_"), "sub_");
           }, py::arg("other"), py::kw_only(), py::arg("alpha") = 1.0,
           "In place a -= alpha * other, other a tensor (broadcast) or a number (torch.Tensor.sub_).")
      .def("mul_", [](Tensor& a, const py::object& b) -> Tensor& { return mul_any_(a, b, "mul_"); },
           py::arg("other"), "In place a *= other, other a tensor (broadcast) or a number (torch.Tensor.mul_).")
      .def("fill_", &fill_value_, "In-place fill with a number (an int into an int64 tensor exactly) or a 0-d tensor, whose gradient flows back.")
      .def("zero_", [](Tensor& a) -> Tensor& { return zero_(a); }, "In-place fill with zeros.")
      .def("copy_", [](Tensor& a, const Tensor& src) -> Tensor& { return copy_(a, src); },
           "Copies src (broadcast) into this tensor in place.");

  m.def("from_numpy", &from_numpy, py::arg("array"),
        "A tensor sharing a NumPy array's memory when it is a writeable, aligned float32/float64/int64 "
        "array with non-negative strides; otherwise a copy (integer and bool arrays as int64, "
        "float16 as float32). uint64 arrays raise DtypeError, as in torch.");
  m.def("from_dlpack", &from_dlpack, py::arg("obj"),
        "A tensor sharing the memory of a DLPack-capable object (numpy, torch; CPU) or capsule.");
  m.def("tensor", [](const py::object& data, const py::object& dtype, bool requires_grad) {
          py::module_ np = py::module_::import("numpy");
          py::array a;
          try {
            a = np.attr("array")(data, py::arg("copy") = true);
          } catch (py::error_already_set& e) {
            if (!e.matches(PyExc_ValueError)) throw;
            throw ValueError("tensor: expected a rectangular nesting of numbers (the lists of each level of one "
                             "length), but NumPy could not make an array of it: " + py::str(e.value()).cast<std::string>());
          }
          const char kind = a.dtype().kind();
          DType target;
          if (!dtype.is_none()) target = dtype_from_py(dtype);
          else if (kind == 'f') {
            check<DtypeError>(a.dtype().itemsize() <= 8, "tensor: ", py::str(py::handle(a.dtype())).cast<std::string>(),
                              " (long double) values are not supported; convert with astype(numpy.float64)");
            target = (py::isinstance<py::array>(data) && a.dtype().itemsize() == 8) || holds_numpy_float64(data, np.attr("float64"))
                         ? DType::Float64 : DType::Float32;
          }
          else if (kind == 'i' || kind == 'u' || kind == 'b') target = DType::Int64;
          else {
            // NumPy keeps ints beyond 64 bits, None and other objects as dtype
            // object: name the first element at fault.
            if (kind == 'O')
              for (const py::handle item : a.attr("flat")) {
                if (PyIndex_Check(item.ptr())) exact_int(py::reinterpret_borrow<py::object>(item), "tensor", "value");
                else if (!PyFloat_Check(item.ptr()))
                  throw DtypeError("tensor: expected numbers, but got " + py::repr(item).cast<std::string>());
              }
            throw DtypeError("tensor: expected numbers, but got NumPy dtype " +
                             py::str(py::handle(a.dtype())).cast<std::string>());
          }
          // uint64 (NumPy's type for ints above 2^63 - 1) would wrap to negative int64.
          if (target == DType::Int64 && kind == 'u' && a.dtype().itemsize() == 8) {
            py::array big = a.attr("__getitem__")(a.attr("__gt__")(np.attr("uint64")(np.attr("iinfo")(np.attr("int64")).attr("max"))));
            if (big.size() > 0)
              throw ValueError("tensor: value " + py::str(big.attr("item")(0)).cast<std::string>() +
                               " does not fit int64");
          }
          // asarray keeps a 0-d shape (ascontiguousarray makes it [1]), as torch.tensor(3.0).
          // Floats to int64 through tensor(), which refuses NaN, inf and values
          // beyond int64 (NumPy's cast gives INT64_MIN for them).
          const bool float_to_int = target == DType::Int64 && kind == 'f';
          Tensor t = from_numpy(np.attr("asarray")(a, numpy_dtype(float_to_int ? DType::Float64 : target),
                                                   py::arg("order") = "C"));
          if (float_to_int) t = tensor(t.to_vector(), t.shape(), DType::Int64);
          if (requires_grad) t.requires_grad_();
          return t;
        }, py::arg("data"), py::arg("dtype") = py::none(), py::arg("requires_grad").noconvert() = false,
        "A new tensor holding a copy of data (nested lists, numbers or an array). Python floats give "
        "float32, ints and bools int64, NumPy float64 arrays and scalars float64 (as torch.tensor). Raises ValueError for a float an int64 "
        "cannot hold.");

  auto factory = [&m](const char* name, auto make, const char* doc) {
    m.def(name, [make, name](const py::args& args, const py::object& dtype, const py::object& device,
                             bool requires_grad) {
            Tensor t = make(shape_from_args(args, name), dtype.is_none() ? DType::Float32 : dtype_from_py(dtype),
                            device_from_py(device));
            if (requires_grad) t.requires_grad_();
            return t;
          }, py::kw_only(), py::arg("dtype") = py::none(), py::arg("device") = py::none(),
          py::arg("requires_grad").noconvert() = false, doc);
  };
  factory("zeros", [](const Shape& s, DType d, Device dev) { return zeros(s, d, dev); }, "A tensor of zeros.");
  factory("ones", [](const Shape& s, DType d, Device dev) { return ones(s, d, dev); }, "A tensor of ones.");
  factory("empty", [](const Shape& s, DType d, Device dev) { return empty(s, d, dev); }, "An uninitialised tensor.");
  m.def("full", [](const py::object& size, const py::object& value, const py::object& dtype, const py::object& device,
                   bool requires_grad) {
          const Shape shape = shape_from_py(size, "full");
          // As torch.full: an int (or bool: tmem has no bool dtype) fill_value makes int64, a float float32.
          const py::module_ np = py::module_::import("numpy");
          const bool integral = PyLong_Check(value.ptr()) || py::isinstance(value, np.attr("integer")) ||
                                py::isinstance(value, np.attr("bool_"));
          const DType d = !dtype.is_none() ? dtype_from_py(dtype) : integral ? DType::Int64 : DType::Float32;
          Tensor t;
          const std::optional<int64_t> x = d == DType::Int64 ? exact_int(value, "full", "fill_value") : std::nullopt;
          t = x ? full_int(shape, *x, device_from_py(device)) : full(shape, number_from_py(value, "full", "fill_value"), d, device_from_py(device));
          if (requires_grad) t.requires_grad_();
          return t;
        }, py::arg("size"), py::arg("fill_value"), py::kw_only(), py::arg("dtype") = py::none(),
        py::arg("device") = py::none(), py::arg("requires_grad").noconvert() = false,
        "A tensor filled with one value; dtype None: int64 for an int or bool fill_value (filled exactly), else "
        "float32 (torch.full's inference; tmem has no bool dtype).");
  m.def("zeros_like", &zeros_like, py::arg("input"), "Zeros of input's shape, dtype and device.");
  m.def("ones_like", &ones_like, py::arg("input"), "Ones of input's shape, dtype and device.");
  m.def("arange", [](const py::object& start, const py::object& end, const py::object& step, const py::object& dtype) {
          const py::object lo = end.is_none() ? py::int_(0) : start, hi = end.is_none() ? start : end;
          const std::optional<int64_t> a = exact_int(lo, "arange", "start"), b = exact_int(hi, "arange", "end"),
                                       s = exact_int(step, "arange", "step");
          const bool ints = a && b && s;
          const DType d = dtype.is_none() ? (ints ? DType::Int64 : DType::Float32) : dtype_from_py(dtype);
          if (ints && d == DType::Int64) return arange_int(*a, *b, *s);
          return arange(number_from_py(lo, "arange", "start"), number_from_py(hi, "arange", "end"),
                        number_from_py(step, "arange", "step"), d);
        }, py::arg("start"), py::arg("end") = py::none(), py::arg("step") = 1, py::kw_only(),
        py::arg("dtype") = py::none(),
        "start, start+step, ... < end (arange(n): 0 .. n-1); int64 when start, end and step are all ints "
        "(exactly), else float32, as torch.arange.");

  // A seed as PyTorch takes one: an int in [-2^63, 2^64), a negative one as
  // its two's complement (torch.manual_seed(-1) is seed 2^64 - 1).
  // A Python or NumPy int (anything with __index__), not a bool.
  auto seed_from_py = [](const py::object& given, const std::string& who) -> uint64_t {
    const bool is_bool = PyBool_Check(given.ptr()) || py::isinstance(given, py::module_::import("numpy").attr("bool_"));
    PyObject* index = is_bool ? nullptr : PyNumber_Index(given.ptr());
    if (!index) {
      PyErr_Clear();
      throw py::type_error(who + ": expected seed to be an int, but got " +
                           py::str(py::type::of(given).attr("__name__")).cast<std::string>());
    }
    const auto seed = py::reinterpret_steal<py::int_>(index);
    const py::int_ lo(std::numeric_limits<int64_t>::min()), hi(std::numeric_limits<uint64_t>::max());
    if (seed < lo || seed > hi)
      throw py::value_error(who + ": seed " + py::str(py::handle(seed)).cast<std::string>() +
                            " is outside [-2^63, 2^64 - 1] (a negative seed is taken as its two's complement)");
    return seed < py::int_(0) ? static_cast<uint64_t>(seed.cast<int64_t>()) : seed.cast<uint64_t>();
  };
  py::class_<GradHookHandle>(m, "GradHookHandle",
                             "What Tensor.register_hook and register_post_accumulate_grad_hook return.")
      .def("remove", [](const GradHookHandle& h) { h.remove(h.id); },
           "Takes the hook out (removing it again does nothing).")
      .def("__enter__", [](const py::object& self) { return self; })
      .def("__exit__", [](const GradHookHandle& h, const py::args&) { h.remove(h.id); });
  py::class_<Generator>(m, "Generator", "A seeded random number generator (mt19937_64).")
      .def(py::init([seed_from_py](const py::object& seed) { return Generator(seed_from_py(seed, "Generator")); }),
           py::arg("seed") = 0, "seed: an int in [-2^63, 2^64), a negative one as its two's complement.")
      .def("manual_seed", [seed_from_py](Generator& g, const py::object& seed) -> Generator& {
             g.manual_seed(seed_from_py(seed, "Generator.manual_seed"));
             return g;
           }, py::arg("seed"), "Reseeds the generator (a negative seed as its two's complement); returns it.")
      .def("get_state", &Generator::state, "The full state as text.")
      .def("set_state", &Generator::set_state, py::arg("state"), "Restores a get_state() text.");
  m.def("default_generator", &default_generator, py::return_value_policy::reference,
        "The process-wide generator used when none is given.");
  m.def("manual_seed", [seed_from_py](const py::object& seed) { manual_seed(seed_from_py(seed, "manual_seed")); },
        py::arg("seed"), "Reseeds the default generator (a negative seed as its two's complement).");
  auto gen_or_default = [](Generator* g) -> Generator& { return g ? *g : default_generator(); };
  // rand and randn take *args, and pybind11 2.10 loads the last keyword-only
  // argument after *args without conversion (its flags shift by one), so a
  // Generator* there refuses None: rand(2) was a TypeError. They take the
  // generator as an object.
  auto generator_arg = [](const py::object& g, const char* op) -> Generator& {
    if (g.is_none()) return default_generator();
    if (!py::isinstance<Generator>(g))
      throw py::type_error(std::string(op) + ": expected generator to be a tmem.Generator or None, but got " +
                           py::str(py::type::of(g).attr("__name__")).cast<std::string>());
    return g.cast<Generator&>();
  };
  m.def("rand", [generator_arg](const py::args& args, const py::object& dtype, const py::object& generator) {
          return rand(shape_from_args(args, "rand"), 0.0, 1.0, dtype.is_none() ? DType::Float32 : dtype_from_py(dtype),
                      generator_arg(generator, "rand"));
        }, py::kw_only(), py::arg("dtype") = py::none(), py::arg("generator") = py::none(), "U[0, 1) samples.");
  m.def("randn", [generator_arg](const py::args& args, const py::object& dtype, const py::object& generator,
                                 bool requires_grad) {
          Tensor t = randn(shape_from_args(args, "randn"), 0.0, 1.0,
                           dtype.is_none() ? DType::Float32 : dtype_from_py(dtype), generator_arg(generator, "randn"));
          if (requires_grad) t.requires_grad_();
          return t;
        }, py::kw_only(), py::arg("dtype") = py::none(), py::arg("generator") = py::none(),
        py::arg("requires_grad").noconvert() = false, "Standard normal samples.");
  m.def("randint", [gen_or_default](int64_t high, const py::object& size, Generator* generator) {
          return randint(shape_from_py(size, "randint"), high, gen_or_default(generator));
        }, py::arg("high"), py::arg("size"), py::kw_only(), py::arg("generator") = nullptr,
        "int64 samples uniform in [0, high).");

  bind_guard<NoGradGuard>(m, "no_grad", "Context manager: ops inside record nothing on the tape.");
  bind_guard<AnomalyModeGuard>(m, "detect_anomaly",
                               "Context manager: NaN in an op's output or NaN/Inf in a gradient "
                               "raises, naming the op.");
  m.def("_cuda_device_count", [] { return device_count(Device::Kind::CUDA); },
        "The number of CUDA devices this build can use (0 without the CUDA backend or a GPU).");
  m.def("is_grad_enabled", &grad_enabled, "Whether ops record on the tape (this thread).");
  m.def("_grad", [](const Tensor& root, const std::vector<Tensor>& inputs, const py::object& gradient,
                    bool retain_graph, bool allow_unused) {
          const Tensor g = optional_tensor(gradient, "grad: expected grad_outputs");
          std::vector<Tensor> out;
          {
            py::gil_scoped_release release;
            out = grad(root, inputs, g, retain_graph, allow_unused);
          }
          py::list result;
          for (const Tensor& t : out) result.append(tensor_or_none(t));
          return result;
        }, py::arg("root"), py::arg("inputs"), py::arg("grad_output") = py::none(),
        py::arg("retain_graph").noconvert() = false, py::arg("allow_unused").noconvert() = false,
        "The gradients of root with respect to inputs, no .grad changed (core/autograd.h grad; tmem.autograd.grad "
        "takes torch's arguments).");
  m.def("_set_grad_enabled", &set_grad_enabled, py::arg("mode").noconvert(),
        "Sets whether ops record on the tape (this thread); tmem.set_grad_enabled and enable_grad use it.");
  m.def("live_node_count", &live_node_count, "Tape nodes alive in the process.");
}

}  // namespace tmem::py_bind
