// Files: safetensors checkpoints and the JSON gradient dumps (writer, reader,
// summaries and diffs). JSON crosses the boundary as text through Python's
// json module, so dump steps arrive as plain dicts. Paths are str or any
// os.PathLike (pathlib.Path), as torch.save and open() take them.
#include "common.h"
#include "tmem/core/file_io.h"
#include "tmem/core/json_dump.h"
#include "tmem/core/safetensors.h"

namespace tmem::py_bind {

namespace {

/// Dump steps given from Python, as JSON; `who` names the caller in errors.
std::vector<nlohmann::json> steps_from_py(const py::iterable& steps, const std::string& who) {
  std::vector<nlohmann::json> out;
  for (auto s : steps) out.push_back(json_of(s, who + ": step object " + std::to_string(out.size())));
  return out;
}

/// (name, tensor) pairs from a dict or an iterable of pairs; None (the grad
/// of a parameter that got none) is an undefined tensor, which write_step
/// names in "no_grad". Throws TypeError naming `who` for anything else.
std::vector<std::pair<std::string, Tensor>> named_tensors(const py::object& tensors, const std::string& who) {
  const py::object pairs = py::isinstance<py::dict>(tensors) ? tensors.attr("items")() : tensors;
  if (!py::isinstance<py::iterable>(pairs))
    throw py::type_error(who + ": expected a dict or (name, tensor) pairs, but got " +
                         py::str(py::type::of(tensors).attr("__name__")).cast<std::string>());
  std::vector<std::pair<std::string, Tensor>> out;
  for (auto item : pairs) {
    const bool pair = py::isinstance<py::sequence>(item) && py::len(item) == 2 &&
                      py::isinstance<py::str>(item[py::int_(0)]);
    const py::object t = pair ? item[py::int_(1)] : py::object(py::none());
    if (!pair || (!t.is_none() && !py::isinstance<Tensor>(t)))
      throw py::type_error(who + ": expected (name, tensor or None) pairs, but got " + py::repr(item).cast<std::string>());
    out.emplace_back(item[py::int_(0)].cast<std::string>(), optional_tensor(t, who + ": expected a gradient"));
  }
  return out;
}

}  // namespace

void bind_io(py::module_& m) {
  m.def("save_safetensors", [](const py::object& path, const std::map<std::string, Tensor>& tensors,
                               const StringMap& metadata) {
          const std::string file = path_from_py(path, "save_safetensors");
          py::gil_scoped_release release;
          save_safetensors(file, tensors, metadata);
        }, py::arg("path"), py::arg("tensors"), py::arg("metadata") = StringMap{},
        "Writes tensors (a dict, e.g. module.state_dict()) and string metadata to a safetensors file, atomically.");
  m.def("_write_file_atomic", [](const py::object& path, const py::bytes& data) {
          const std::string file = path_from_py(path, "save");
          const std::string_view bytes = data;
          py::gil_scoped_release release;
          write_file_atomic(file, bytes);
        }, py::arg("path"), py::arg("data"),
        "Writes bytes to a file atomically (core/file_io.h), for tmem.save; IOError naming the file on failure.");
  m.def("load_safetensors", [](const py::object& path, bool metadata) -> py::object {
          const std::string file = path_from_py(path, "load_safetensors");
          SafetensorsFile f;
          {
            py::gil_scoped_release release;
            f = load_safetensors(file);
          }
          if (metadata) return py::make_tuple(f.tensors, f.metadata);
          return py::cast(f.tensors);
        }, py::arg("path"), py::kw_only(), py::arg("metadata").noconvert() = false,
        "Reads a safetensors file: a dict of tensors, or (tensors, metadata) with metadata=True.");

  py::class_<GradDumpWriter>(m, "GradDumpWriter", "Writes a JSON gradient dump, one step object a line.")
      .def(py::init([](const py::object& path, int64_t first_step) {
             return std::make_unique<GradDumpWriter>(path_from_py(path, "GradDumpWriter"), first_step);
           }), py::arg("path"), py::arg("first_step") = 0,
           "Opens path for a run whose next step is first_step: 0 truncates the file; a resumed run keeps the "
           "steps before first_step.")
      .def("write_step", [](GradDumpWriter& w, int64_t step, double loss, const py::object& tensors, bool values,
                            const py::object& extra) {
             const auto named = named_tensors(tensors, "GradDumpWriter.write_step");
             const nlohmann::json x = extra.is_none() ? nlohmann::json::object() : json_of(extra, "GradDumpWriter.write_step: extra");
             py::gil_scoped_release release;
             w.write_step(step, loss, named, values, x);
           }, py::arg("step"), py::arg("loss"), py::arg("tensors"), py::arg("values").noconvert() = false,
           py::arg("extra") = py::none(),
           "Writes one step: summaries (norm, mean, std, min, max, NaN/Inf counts) of the named tensors, "
           "every element with values=True, and the keys of extra.");
  m.def("read_grad_dump", [](const py::object& path) {
          py::list out;
          for (const auto& j : read_grad_dump(path_from_py(path, "read_grad_dump"))) out.append(py_of(j));
          return out;
        }, py::arg("path"), "Every step object of a dump file, as dicts (NaN/Inf as the strings \"NaN\", ...).");
  m.def("tensor_summary", [](const std::string& name, const Tensor& t, bool values) {
          return py_of(tensor_summary(name, t, values));
        }, py::arg("name"), py::arg("tensor"), py::arg("values").noconvert() = false, "One tensor's dump summary, as a dict.");

  py::class_<GradSeries>(m, "GradSeries", "One tensor's gradient norms over the dumped steps.")
      .def_readonly("name", &GradSeries::name)
      .def_readonly("steps", &GradSeries::steps)
      .def_readonly("norms", &GradSeries::norms)
      .def_readonly("nan", &GradSeries::nan)
      .def_readonly("inf", &GradSeries::inf)
      .def_readonly("nonfinite_norms", &GradSeries::nonfinite_norms)
      .def_readonly("vanishing", &GradSeries::vanishing);
  m.def("summarize_grad_dump", [](const py::iterable& steps, double vanish_threshold) {
          return summarize_grad_dump(steps_from_py(steps, "summarize_grad_dump"), vanish_threshold);
        }, py::arg("steps"), py::arg("vanish_threshold") = 1e-10,
        "Per-tensor norm series of the steps of read_grad_dump.");
  py::class_<DumpDifference>(m, "DumpDifference", "One difference between two dumps.")
      .def_readonly("step", &DumpDifference::step)
      .def_readonly("name", &DumpDifference::name)
      .def_readonly("field", &DumpDifference::field)
      .def_readonly("a", &DumpDifference::a)
      .def_readonly("b", &DumpDifference::b)
      .def_readonly("rel", &DumpDifference::rel)
      .def_readonly("note", &DumpDifference::note);
  m.def("diff_grad_dumps", [](const py::iterable& a, const py::iterable& b, size_t top) {
          return diff_grad_dumps(steps_from_py(a, "diff_grad_dumps"), steps_from_py(b, "diff_grad_dumps"), top);
        }, py::arg("a"), py::arg("b"), py::arg("top") = 10,
        "The top largest relative differences between two dumps' steps.");
}

}  // namespace tmem::py_bind
