// The extension module tmem._tmem: tmem's exceptions as Python exceptions,
// dtypes, the conversions of common.h, and the parts bound in the other files.
#include <cmath>
#include <string>

#include "common.h"
#include "tmem/core/device_backend.h"
#include "tmem/core/parallel.h"

namespace tmem::py_bind {

namespace {

/// The Python exception types of tmem's errors, made once at import.
struct ExceptionTypes {
  PyObject* base = nullptr;
  PyObject* shape = nullptr;
  PyObject* dtype = nullptr;
  PyObject* device = nullptr;
  PyObject* index = nullptr;
  PyObject* value = nullptr;
  PyObject* io = nullptr;
  PyObject* out_of_memory = nullptr;
};
ExceptionTypes g_exc;

/// A new exception class tmem.<name> deriving from `parent` (default
/// tmem.Error) and `builtin`, added to module m.
PyObject* make_exception(py::module_& m, const char* name, PyObject* builtin, const char* doc,
                         PyObject* parent = nullptr) {
  const std::string qualified = std::string("tmem.") + name;
  py::tuple bases = parent    ? py::make_tuple(py::handle(parent))
                    : builtin ? py::make_tuple(py::handle(g_exc.base), py::handle(builtin))
                              : py::make_tuple(py::handle(PyExc_Exception));
  PyObject* type = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases.ptr(), nullptr);
  if (!type) throw py::error_already_set();
  m.add_object(name, py::handle(type));
  return type;
}

void bind_exceptions(py::module_& m) {
  g_exc.base = make_exception(m, "Error", nullptr, "Base of every tmem error.");
  g_exc.shape = make_exception(m, "ShapeError", PyExc_ValueError, "Incompatible shapes or ranks.");
  g_exc.dtype = make_exception(m, "DtypeError", PyExc_TypeError, "Unsupported or mismatched dtypes.");
  g_exc.device = make_exception(m, "DeviceError", PyExc_RuntimeError,
                                "Tensors on the wrong or on different devices, or a device failure.");
  g_exc.out_of_memory = make_exception(m, "OutOfMemoryError", nullptr,
                                       "Memory a device (the CPU included) cannot give (torch.OutOfMemoryError).",
                                       g_exc.device);
  g_exc.index = make_exception(m, "IndexError", PyExc_IndexError, "An index out of range.");
  g_exc.value = make_exception(m, "ValueError", PyExc_ValueError,
                               "A bad value: an option, a non-finite number, misuse of autograd.");
  g_exc.io = make_exception(m, "IOError", PyExc_OSError, "A file that cannot be read or written, or a malformed file.");
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const ShapeError& e) {
      PyErr_SetString(g_exc.shape, e.what());
    } catch (const DtypeError& e) {
      PyErr_SetString(g_exc.dtype, e.what());
    } catch (const OutOfMemoryError& e) {
      PyErr_SetString(g_exc.out_of_memory, e.what());
    } catch (const DeviceError& e) {
      PyErr_SetString(g_exc.device, e.what());
    } catch (const IndexError& e) {
      PyErr_SetString(g_exc.index, e.what());
    } catch (const ValueError& e) {
      PyErr_SetString(g_exc.value, e.what());
    } catch (const IOError& e) {
      PyErr_SetString(g_exc.io, e.what());
    } catch (const Error& e) {
      PyErr_SetString(g_exc.base, e.what());
    }
  });
}

}  // namespace

DType dtype_from_py(py::handle obj) {
  if (py::isinstance<DType>(obj)) return obj.cast<DType>();
  py::dtype dt;
  try {
    dt = py::dtype::from_args(py::reinterpret_borrow<py::object>(obj));
  } catch (const py::error_already_set& e) {  // NumPy's "data type 'x' not understood" named no argument
    throw DtypeError("dtype: tmem has the dtypes float32, float64 and int64, but got " +
                     printable(py::repr(obj).cast<std::string>()) + " (" + e.what() + ")");
  }
  if (dt.is(py::dtype::of<float>())) return DType::Float32;
  if (dt.is(py::dtype::of<double>())) return DType::Float64;
  if (dt.is(py::dtype::of<int64_t>())) return DType::Int64;
  const auto name = py::str(py::handle(dt)).cast<std::string>();
  if (name == "float32") return DType::Float32;
  if (name == "float64") return DType::Float64;
  if (name == "int64") return DType::Int64;
  throw DtypeError("dtype: tmem has the dtypes float32, float64 and int64, but got " + name);
}

py::dtype numpy_dtype(DType dtype) {
  switch (dtype) {
    case DType::Float32: return py::dtype::of<float>();
    case DType::Float64: return py::dtype::of<double>();
    case DType::Int64: return py::dtype::of<int64_t>();
  }
  throw DtypeError("unknown dtype");
}

Device device_from_py(py::handle obj) {
  if (obj.is_none()) return Device::cpu();
  return parse_device(py::str(obj).cast<std::string>());
}

std::vector<int64_t> ints_from_py(py::handle obj, const std::string& who, const std::string& what) {
  const auto beyond_int64 = [](py::handle h) {
    int overflow = 0;
    return PyLong_Check(h.ptr()) && (PyLong_AsLongLongAndOverflow(h.ptr(), &overflow), overflow != 0);
  };
  const auto fail = [&] {
    bool big = beyond_int64(obj);
    if (py::isinstance<py::sequence>(obj) && !py::isinstance<py::str>(obj))
      for (const py::handle item : obj) big = big || beyond_int64(item);
    return py::type_error(who + ": expected " + what + (big ? " that fit int64" : "") + ", but got " +
                          printable(py::repr(obj).cast<std::string>()));
  };
  // A bool is an int to Python, but zeros(True) is no shape (torch: TypeError).
  const auto is_bool = [](py::handle h) {
    return PyBool_Check(h.ptr()) || py::isinstance(h, py::module_::import("numpy").attr("bool_"));
  };
  try {
    if (py::isinstance<py::str>(obj) || py::isinstance<py::bytes>(obj) || is_bool(obj)) throw fail();
    if (py::isinstance<py::sequence>(obj)) {
      for (const py::handle item : obj)
        if (is_bool(item)) throw fail();
      return obj.cast<std::vector<int64_t>>();
    }
    return {obj.cast<int64_t>()};
  } catch (const py::cast_error&) {
    throw fail();
  }
}

double number_from_py(py::handle obj, const std::string& who, const std::string& what) {
  py::detail::make_caster<double> number;
  if (!number.load(obj, true)) {
    PyErr_Clear();  // a failed __float__ leaves its error set
    const std::string repr = printable(py::repr(obj).cast<std::string>());
    if (PyLong_Check(obj.ptr()))  // an int beyond float64, as Python's float() refuses it
      throw ValueError(who + ": " + what + " " + repr + " is too large for a float64");
    throw py::type_error(who + ": expected " + what + " to be a number, but got " + repr);
  }
  return py::detail::cast_op<double>(number);
}

std::string path_from_py(py::handle obj, const std::string& who) {
  // A __fspath__ that raises or returns another type keeps its own error, as open() gives it.
  const bool path_like = py::hasattr(py::type::of(obj), "__fspath__");
  const py::object fs = py::reinterpret_steal<py::object>(PyOS_FSPath(obj.ptr()));
  if (!fs) {
    if (path_like) throw py::error_already_set();
    PyErr_Clear();
    throw py::type_error(who + ": expected path to be a str or os.PathLike, but got " +
                         py::str(py::type::of(obj).attr("__name__")).cast<std::string>());
  }
  // os.fsencode: the file system's encoding with surrogateescape, so a name
  // os.listdir gave back reaches the same file.
  const py::object bytes = PyBytes_Check(fs.ptr()) ? fs : py::reinterpret_steal<py::object>(PyUnicode_EncodeFSDefault(fs.ptr()));
  if (!bytes) throw py::error_already_set();
  return std::string(PyBytes_AS_STRING(bytes.ptr()), static_cast<size_t>(PyBytes_GET_SIZE(bytes.ptr())));
}

Shape shape_from_py(py::handle obj, const std::string& who, const std::string& noun) {
  return ints_from_py(obj, who, noun + " of ints (an int, a tuple or a list)");
}

Shape shape_from_args(const py::args& args, const std::string& who, const std::string& noun) {
  if (args.size() == 1) return shape_from_py(args[0], who, noun);
  return ints_from_py(args, who, noun + " of ints");
}

Tensor optional_tensor(const py::object& obj, const std::string& who) {
  if (obj.is_none()) return Tensor();
  if (!py::isinstance<Tensor>(obj))
    throw py::type_error(who + " to be a tensor or None, but got " +
                         py::str(py::type::of(obj).attr("__name__")).cast<std::string>());
  return obj.cast<Tensor>();
}

py::object tensor_or_none(const Tensor& t) { return t.defined() ? py::cast(t) : py::none(); }

void throw_unbuilt(PyObject* inst) {
  const auto name = [](PyTypeObject* type) {
    return py::str(py::handle(reinterpret_cast<PyObject*>(type)).attr("__name__")).cast<std::string>();
  };
  const std::string sub = name(Py_TYPE(inst));
  const std::string base = name(py::detail::all_type_info(Py_TYPE(inst)).front()->type);
  throw py::attribute_error(sub + ": cannot use it before " + base + ".__init__() has run (call super().__init__() "
                            "first)");
}

bool is_built(py::handle obj) {
  return reinterpret_cast<py::detail::instance*>(obj.ptr())->get_value_and_holder().value_ptr() != nullptr;
}

namespace {

// Where the first NaN or infinite float of obj (through dicts, lists and
// tuples) sits, as its keys and value ("['lr'] = nan"); empty if none.
std::string first_non_finite(py::handle obj) {
  if (PyFloat_Check(obj.ptr()))
    return std::isfinite(PyFloat_AS_DOUBLE(obj.ptr())) ? "" : " = " + py::repr(obj).cast<std::string>();
  if (py::isinstance<py::dict>(obj)) {
    for (auto kv : obj.cast<py::dict>()) {
      const std::string at = first_non_finite(kv.second);
      if (!at.empty()) return "[" + py::repr(kv.first).cast<std::string>() + "]" + at;
    }
  } else if (py::isinstance<py::list>(obj) || py::isinstance<py::tuple>(obj)) {
    int64_t i = 0;
    for (auto v : obj) {
      const std::string at = first_non_finite(v);
      if (!at.empty()) return "[" + std::to_string(i) + "]" + at;
      ++i;
    }
  }
  return "";
}

}  // namespace

nlohmann::json json_of(py::handle obj, const std::string& who) {
  const std::string at = first_non_finite(obj);
  check<ValueError>(at.empty(), who, ": JSON has no NaN or infinities (write them as the strings \"NaN\", ",
                    "\"Infinity\", \"-Infinity\"), but got ", at.substr(at[0] == ' ' ? 3 : 0));
  return nlohmann::json::parse(py::module_::import("json").attr("dumps")(obj).cast<std::string>());
}

py::object py_of(const nlohmann::json& j) { return py::module_::import("json").attr("loads")(j.dump()); }

}  // namespace tmem::py_bind

/// tp_traverse of every class with dynamic attributes (nn.Module and the
/// layers): pybind11's, except for an instance of a Python subclass on
/// CPython 3.11+, whose own traverse (subtype_traverse) has visited its
/// managed __dict__ before calling this one. pybind11 2.10 visited it a
/// second time, so the collector counted the dict's one reference twice and
/// a Python module in a reference cycle (`self.me = [self]`, a closure
/// over self) was never freed.
extern "C" int traverse_dict_once(PyObject* self, visitproc visit, void* arg) {
#if PY_VERSION_HEX >= 0x030B0000
  if (Py_TYPE(self)->tp_traverse != traverse_dict_once) {
    Py_VISIT(Py_TYPE(self));
    return 0;
  }
#endif
  return pybind11::detail::pybind11_traverse(self, visit, arg);
}

PYBIND11_MODULE(_tmem, m) {
  using namespace tmem::py_bind;
  m.doc() = "tmem: tape autograd, the op library, nn modules (incl. TensorMemory) and optimizers";
  bind_exceptions(m);
  py::enum_<tmem::DType>(m, "dtype", "Element type of a tensor: float32, float64 or int64.")
      .value("float32", tmem::DType::Float32)
      .value("float64", tmem::DType::Float64)
      .value("int64", tmem::DType::Int64);
  m.attr("float32") = tmem::DType::Float32;
  m.attr("float64") = tmem::DType::Float64;
  m.attr("int64") = tmem::DType::Int64;
  m.attr("float") = tmem::DType::Float32;
  m.attr("double") = tmem::DType::Float64;
  m.attr("long") = tmem::DType::Int64;
  m.def("set_num_threads", &tmem::set_num_threads, py::arg("n"),
        "The OpenMP threads of later ops (as `tmem train --threads n`).");
  m.def("get_num_threads", &tmem::get_num_threads, "The OpenMP threads ops use.");
  m.def("set_flush_denormal", [](bool mode) { return tmem::set_flush_denormal(mode); }, py::arg("mode"),
        "Flush denormal floats to 0 on the CPU (torch.set_flush_denormal); False where the CPU cannot. The "
        "`tmem` command turns it on; here it is off until called.");
  m.def("_is_built", [](const py::handle& obj) {
        if (!py::detail::get_type_info(Py_TYPE(obj.ptr())))
          throw py::type_error("_is_built: expected an instance of a tmem class, but got " +
                               py::str(py::type::of(obj).attr("__name__")).cast<std::string>());
        return is_built(obj);
      }, py::arg("obj"), "Whether obj's C++ object exists (a Python subclass builds it in super().__init__()).");
  m.def("_check_built", [](const py::handle& obj) {
        if (py::detail::get_type_info(Py_TYPE(obj.ptr())) && !is_built(obj)) throw_unbuilt(obj.ptr());
      }, py::arg("obj"), "Raises the AttributeError of a method call when obj's C++ object does not exist.");
  bind_tensor(m);
  bind_ops(m);
  bind_nn(m);
  bind_io(m);
  bind_models(m);
  for (const auto& [type, infos] : py::detail::get_internals().registered_types_py)
    if (type->tp_traverse == py::detail::pybind11_traverse) type->tp_traverse = traverse_dict_once;
}
