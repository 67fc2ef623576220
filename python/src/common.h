// Shared pieces of the Python module: argument conversions between Python
// objects and tmem's dtypes, devices and shapes, and the registration
// functions of each part of the module (one per source file).
#pragma once
#include <functional>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <nlohmann/json.hpp>

#include "tmem/ops/ops.h"

namespace tmem {
class Generator;
class GradDumpWriter;
struct GradSeries;
struct DumpDifference;
struct GradcheckResult;
struct ConvLSTM3DState;
namespace nn {
class Module;
class SGD;
class AdamW;
struct TensorMemoryOptions;
}  // namespace nn
namespace models {
struct BackboneConfig;
struct TaskBatch;
struct TaskConfig;
class Task;
struct TrainConfig;
}  // namespace models
}  // namespace tmem

namespace tmem::py_bind {

namespace py = pybind11;

/// The base of the helper classes the binding files define and bind (a
/// parameter group's view, a guard's context): it gives them the built-object
/// check of the caster below.
struct Bound {};

/// Whether pybind11 loads T through the caster below, which refuses an
/// object whose C++ part was never built: every class the module binds.
template <typename T>
inline constexpr bool checks_built =
    std::is_base_of_v<Bound, T> || std::is_base_of_v<nn::Module, T> ||
    std::disjunction_v<std::is_same<T, Tensor>, std::is_same<T, Generator>, std::is_same<T, GradDumpWriter>,
                       std::is_same<T, GradSeries>, std::is_same<T, DumpDifference>,
                       std::is_same<T, GradcheckResult>, std::is_same<T, ConvLSTM3DState>,
                       std::is_same<T, nn::SGD>, std::is_same<T, nn::AdamW>,
                       std::is_same<T, nn::TensorMemoryOptions>, std::is_same<T, models::BackboneConfig>,
                       std::is_same<T, models::TaskBatch>, std::is_same<T, models::TaskConfig>,
                       std::is_same<T, models::Task>, std::is_same<T, models::TrainConfig>>;

/// Throws AttributeError "<Sub>: cannot use it before <Bound>.__init__() has
/// run (call super().__init__() first)" for the instance `inst` of a Python
/// subclass Sub whose C++ part (of its bound base class Bound) was never built.
[[noreturn]] void throw_unbuilt(PyObject* inst);

/// Whether obj, an instance of a bound class, has its C++ part: a Python
/// subclass's instance made by Sub.__new__(Sub) alone, or seen inside its
/// __init__ before super().__init__(), has none.
bool is_built(py::handle obj);

/// v as an int64 when it is a Python or NumPy integer (bool included), none
/// for other objects. Throws ValueError naming `op` and its argument `arg`
/// for an integer outside int64's range.
std::optional<int64_t> exact_int(const py::object& v, const char* op, const char* arg);

/// A DType from tmem.float32 / float64 / int64, a NumPy dtype (or anything
/// numpy.dtype accepts, e.g. "float32", numpy.float64). Throws DtypeError for
/// a dtype tmem does not have.
DType dtype_from_py(py::handle obj);
/// The NumPy dtype of a tmem dtype.
py::dtype numpy_dtype(DType dtype);
/// A Device from "cpu", "cuda", "cuda:<index>" (or None: the CPU), as
/// parse_device. Throws ValueError for any other text, an index too large
/// for an int included.
Device device_from_py(py::handle obj);
/// The ints of obj: an int gives one, a sequence of ints (not a str) its
/// items. Throws TypeError "<who>: expected <what>, but got <repr>" for
/// anything else, a bool or an int outside int64 included.
std::vector<int64_t> ints_from_py(py::handle obj, const std::string& who, const std::string& what);
/// obj as a double when it is a real number (a Python or NumPy number, a
/// bool, anything with __float__). Throws TypeError "<who>: expected
/// <what> to be a number, but got <repr>" otherwise, where pybind11 would
/// say only "Unable to cast Python instance to C++ type".
double number_from_py(py::handle obj, const std::string& who, const std::string& what);
/// A file path from a str, bytes or os.PathLike (pathlib.Path), as open()
/// takes it: the str's UTF-8 bytes, or the bytes as they are. Throws
/// TypeError "<who>: expected path to be a str or os.PathLike, but got
/// <type>" for anything else; a NUL byte is left for the file functions'
/// check_path to refuse.
std::string path_from_py(py::handle obj, const std::string& who);
/// A shape (or dims, or pads: `noun`) given as one argument: an int or a
/// sequence of ints, as torch takes size= and shape=. Throws TypeError
/// "<who>: expected <noun> of ints (an int, a tuple or a list), but got
/// <repr>" for anything else.
Shape shape_from_py(py::handle obj, const std::string& who, const std::string& noun = "a shape");
/// A shape (or the dims of permute: noun "dims") from the positional
/// arguments of a factory or method `who`: zeros(2, 3), zeros((2, 3)) or
/// zeros([2, 3]). Throws TypeError naming `who` when they are not ints.
Shape shape_from_args(const py::args& args, const std::string& who, const std::string& noun = "a shape");
/// An optional tensor argument: None gives an undefined Tensor. Throws
/// TypeError "<who> to be a tensor or None, but got <type>" for any other
/// object; `who` reads "<op>: expected <argument>".
Tensor optional_tensor(const py::object& obj, const std::string& who);
/// An undefined tensor as None, any other as the Python Tensor.
py::object tensor_or_none(const Tensor& t);
/// A tensor from a NumPy array, sharing its memory when the array is a
/// writeable, aligned float32/float64/int64 array with non-negative strides
/// (else a copy, int/bool arrays as int64 and float16 as float32). Throws
/// DtypeError for uint64 arrays (torch.from_numpy refuses them too: values
/// above 2^63 - 1 would wrap) and other dtypes tmem cannot hold.
Tensor from_numpy(const py::array& array);

/// A Python object (dict, list, number, string) as JSON, through Python's
/// json module. Throws ValueError naming `who` for a NaN or infinite float
/// (JSON has none: nlohmann would fail to parse Python's NaN token).
nlohmann::json json_of(py::handle obj, const std::string& who);
/// JSON as the Python object json.loads gives.
py::object py_of(const nlohmann::json& j);

/// The Python object for t: the live one already made for t's TensorImpl,
/// else make() (pybind11's cast of a copy of the handle), remembered until
/// it dies. So one tensor is one Python object, as in torch: `a is b`,
/// `p in set(model.parameters())` and dict keys hold across accesses
/// (before, every access made a new object, and such lookups silently
/// missed).
py::handle tensor_object(const Tensor& t, const std::function<py::handle()>& make);

void bind_tensor(py::module_& m);
void bind_ops(py::module_& m);
void bind_nn(py::module_& m);
void bind_io(py::module_& m);
void bind_models(py::module_& m);

}  // namespace tmem::py_bind

namespace pybind11::detail {

/// The caster of every class tmem binds: pybind11's own, except that an
/// object whose C++ part was never built (a Python subclass's instance made
/// by Sub.__new__(Sub), or used before super().__init__()) raises
/// AttributeError instead of pybind11 handing the method uninitialised
/// memory, which crashed the interpreter.
/// A Tensor goes to Python as the one object of its TensorImpl
/// (tensor_object), a copy of the handle whatever the return policy.
template <typename T>
class type_caster<T, enable_if_t<tmem::py_bind::checks_built<T>>> : public type_caster_base<T> {
 public:
  static handle cast(const T& src, return_value_policy policy, handle parent) {
    if constexpr (std::is_same_v<T, tmem::Tensor>)
      return tmem::py_bind::tensor_object(
          src, [&] { return type_caster_base<T>::cast(src, return_value_policy::copy, parent); });
    else
      return type_caster_base<T>::cast(src, policy, parent);
  }
  static handle cast(T&& src, return_value_policy policy, handle parent) {
    if constexpr (std::is_same_v<T, tmem::Tensor>)
      return tmem::py_bind::tensor_object(
          src, [&] { return type_caster_base<T>::cast(std::move(src), return_value_policy::move, parent); });
    else
      return type_caster_base<T>::cast(std::move(src), policy, parent);
  }
  static handle cast(const T* src, return_value_policy policy, handle parent) {
    if constexpr (std::is_same_v<T, tmem::Tensor>) {
      if (!src) return none().release();
      return cast(*src, policy, parent);
    } else {
      return type_caster_base<T>::cast(src, policy, parent);
    }
  }
  bool load(handle src, bool convert) { return this->template load_impl<type_caster>(src, convert); }
  void load_value(value_and_holder&& v_h) {
    if (!v_h.value_ptr()) tmem::py_bind::throw_unbuilt(reinterpret_cast<PyObject*>(v_h.inst));
    type_caster_base<T>::load_value(std::move(v_h));
  }
};

}  // namespace pybind11::detail
