// The op library under tmem.* with PyTorch's names and argument orders, and
// the same ops as Tensor methods. Ops with a real amount of work release the
// GIL while they run.
#include <cmath>
#include <limits>
#include <optional>

#include "common.h"

namespace tmem::py_bind {

namespace {

using release_gil = py::call_guard<py::gil_scoped_release>;

/// A dim argument of reduction `op`: None (every dim), an int or a sequence.
/// Throws TypeError naming op for anything else.
std::vector<int64_t> dims_from_py(const py::object& dim, const char* op) {
  if (dim.is_none()) return {};
  return ints_from_py(dim, op, "dim to be None, an int or a sequence of ints");
}

/// Whether x is an int64 CPU tensor, whose sum, max and min NumPy computes
/// (tmem's kernels are floating only), as the Python operators do.
bool is_cpu_int64(const Tensor& x) { return x.dtype() == DType::Int64 && x.device().is_cpu(); }

/// numpy.<reduction>(x, axis, keepdims) of an int64 CPU tensor, as an int64
/// tensor (0-d for axis None). Throws ShapeError for an empty tensor, as the
/// floating reductions do for max and min.
Tensor int64_reduction(const char* reduction, const Tensor& x, const py::object& axis, bool keepdim) {
  check<ShapeError>(x.numel() > 0 || std::string(reduction) == "sum", reduction,
                    ": the tensor is empty (shape ", shape_str(x.shape()), "), which has no ", reduction);
  py::module_ np = py::module_::import("numpy");
  const py::object r = np.attr(reduction)(py::cast(x).attr("numpy")(), py::arg("axis") = axis,
                                          py::arg("keepdims") = keepdim);
  return from_numpy(np.attr("asarray")(r, py::arg("dtype") = np.attr("int64")));
}

/// The (values, indices) pair of max/min along a dim, as tmem.return_types.
py::object values_indices(const ValuesIndices& r) {
  return py::module_::import("tmem._tmem").attr("ValuesIndices")(r.values, r.indices);
}

/// A per-axis triple of argument `arg` of op from an int or a 3-sequence.
/// Throws TypeError naming both for anything else.
std::array<int64_t, 3> triple(const py::object& v, const std::string& op, const std::string& arg) {
  const std::string what = arg + " to be an int or a sequence of 3 ints";
  const std::vector<int64_t> i = ints_from_py(v, op, what);
  if (py::isinstance<py::int_>(v)) return {i[0], i[0], i[0]};
  if (i.size() != 3) throw py::type_error(op + ": expected " + what + ", but got " + py::repr(v).cast<std::string>());
  return {i[0], i[1], i[2]};
}

GridSampleMode grid_mode(const std::string& s) {
  if (s == "bilinear") return GridSampleMode::Bilinear;
  if (s == "nearest") return GridSampleMode::Nearest;
  throw ValueError("grid_sample: mode must be \"bilinear\" or \"nearest\", but got \"" + printable(s) + "\"");
}

GridSamplePadding grid_padding(const std::string& s) {
  if (s == "zeros") return GridSamplePadding::Zeros;
  if (s == "border") return GridSamplePadding::Border;
  if (s == "reflection") return GridSamplePadding::Reflection;
  throw ValueError("grid_sample: padding_mode must be \"zeros\", \"border\" or \"reflection\", but got \"" +
                   printable(s) + "\"");
}

/// The binary ops taking a tensor or a number as the second operand `arg`
/// (ts for a number). Throws TypeError naming op and arg for anything else.
Tensor binary(const Tensor& a, const py::object& b, const char* op, const char* arg,
              Tensor (*tt)(const Tensor&, const Tensor&), const std::function<Tensor(const Tensor&, double)>& ts) {
  if (py::isinstance<Tensor>(b)) return tt(a, b.cast<Tensor>());
  py::detail::make_caster<double> number;
  if (!number.load(b, true))
    throw py::type_error(std::string(op) + ": expected " + arg + " to be a tensor or a number, but got " +
                         py::str(py::type::of(b).attr("__name__")).cast<std::string>());
  return ts(a, py::detail::cast_op<double>(number));
}

/// Binds a function both as tmem.<name>(input, ...) and as the method
/// Tensor.<name>(...), input being the tensor itself.
template <class F, class... Extra>
void both(py::module_& m, py::class_<Tensor>& cls, const char* name, F f, const py::arg& input,
          const Extra&... extra) {
  m.def(name, f, input, extra...);
  cls.def(name, f, extra...);
}

}  // namespace

void bind_ops(py::module_& m) {
  auto cls = py::reinterpret_borrow<py::class_<Tensor>>(m.attr("Tensor"));
  const auto a = py::arg("input");

  // ---- elementwise ----
  both(m, cls, "add", [](const Tensor& x, const py::object& y) {
         return binary(x, y, "add", "other", &add, [](const Tensor& t, double s) { return add(t, s); });
       }, a, py::arg("other"), "input + other (broadcast; other may be a number).");
  both(m, cls, "sub", [](const Tensor& x, const py::object& y) {
         return binary(x, y, "sub", "other", &sub, [](const Tensor& t, double s) { return add(t, -s); });
       }, a, py::arg("other"), "input - other (broadcast).");
  both(m, cls, "mul", [](const Tensor& x, const py::object& y) {
         return binary(x, y, "mul", "other", &mul, [](const Tensor& t, double s) { return mul(t, s); });
       }, a, py::arg("other"), "input * other (broadcast).");
  both(m, cls, "div", [](const Tensor& x, const py::object& y) {
         return binary(x, y, "div", "other", &div, [](const Tensor& t, double s) { return mul(t, 1.0 / s); });
       }, a, py::arg("other"), "input / other (broadcast, IEEE division).");
  both(m, cls, "pow", [](const Tensor& x, const py::object& y) {
         return binary(x, y, "pow", "exponent", &pow, [](const Tensor& t, double s) { return pow(t, s); });
       }, a, py::arg("exponent"), "input ** exponent (broadcast).");
  const auto unary = [&](const char* name, Tensor (*f)(const Tensor&), const char* doc) {
    both(m, cls, name, f, py::arg("input"), doc);
  };
  unary("neg", &neg, "-input.");
  unary("exp", &exp, "e ** input.");
  unary("log", &log, "Natural log (log(0) = -inf).");
  unary("sqrt", &sqrt, "Square root.");
  unary("rsqrt", &rsqrt, "1 / sqrt(input).");
  unary("reciprocal", &reciprocal, "1 / input.");
  unary("abs", &abs, "|input| (gradient 0 at 0).");
  unary("relu", &relu, "max(input, 0).");
  unary("silu", &silu, "input * sigmoid(input).");
  unary("sigmoid", &sigmoid, "1 / (1 + exp(-input)).");
  unary("tanh", &tanh, "Hyperbolic tangent.");
  unary("softplus", &softplus, "log(1 + exp(input)), linear above 20.");
  unary("sin", &sin, "Sine (radians).");
  unary("cos", &cos, "Cosine (radians).");
  unary("log1p", &log1p, "log(1 + input), accurate for small input.");
  unary("expm1", &expm1, "exp(input) - 1, accurate for small input.");
  unary("floor", &floor, "Rounded toward -inf (gradient 0).");
  unary("ceil", &ceil, "Rounded toward +inf (gradient 0).");
  unary("round", &round, "Rounded to the nearest whole number, half to even (torch.round; gradient 0).");
  unary("trunc", &trunc, "Rounded toward 0 (gradient 0).");
  unary("sign", &sign, "-1, 0 or 1 by input's sign (gradient 0).");
  both(m, cls, "gelu", [](const Tensor& x, const std::string& approximate) {
         check<ValueError>(approximate == "none" || approximate == "tanh",
                           "gelu: approximate must be \"none\" or \"tanh\", but got \"", printable(approximate), "\"");
         return gelu(x, approximate == "tanh");
       }, a, py::arg("approximate") = "none", "GELU: x Phi(x) (erf), or the tanh form with approximate=\"tanh\".");
  both(m, cls, "clamp", [](const Tensor& x, const py::object& lo, const py::object& hi) {
         check<ValueError>(!lo.is_none() || !hi.is_none(), "clamp: at least one of min and max must not be None");
         // As torch: an int64 input stays int64 for integer bounds (taken
         // exactly, not through a double) and is float32 for a float bound.
         if (x.dtype() == DType::Int64) {
           const auto exact = [](const py::object& v) {
             return v.is_none() ? std::optional<int64_t>() : exact_int(v, "clamp", "bound");
           };
           const std::optional<int64_t> l = exact(lo), h = exact(hi);
           if ((lo.is_none() || l) && (hi.is_none() || h)) return clamp(x, l, h);
         }
         const Tensor in = x.dtype() == DType::Int64 ? to_dtype(x, DType::Float32) : x;
         const auto value = [](const py::object& v, double none, const char* what) {
           return v.is_none() ? none : number_from_py(v, "clamp", what);
         };
         const double inf = std::numeric_limits<double>::infinity();
         return clamp(in, value(lo, -inf, "min"), value(hi, inf, "max"));
       }, a, py::arg("min") = py::none(), py::arg("max") = py::none(),
       "min(max(input, min), max); an int64 input stays int64 for integer bounds, float32 for a float one.");
  m.def("where", [](const Tensor& condition, const py::object& x, const py::object& y) {
          // As torch.where, input or other may be a number: a 0-d tensor of
          // the other operand's dtype and device (when both are numbers,
          // int64 for two integers, else float32; a float beside an int64
          // tensor makes it float32 too).
          const auto tensor_of = [](const py::object& v) { return py::isinstance<Tensor>(v) ? v.cast<Tensor>() : Tensor(); };
          Tensor tx = tensor_of(x), ty = tensor_of(y);
          const Tensor like = tx.defined() ? tx : ty;
          const bool integers = exact_int(x, "where", "input") && exact_int(y, "where", "other");
          DType dtype = like.defined() ? like.dtype() : integers ? DType::Int64 : DType::Float32;
          const Device device = like.defined() ? like.device() : condition.device();
          const auto number = [&](const py::object& v, const char* what) {
            const std::optional<int64_t> i = dtype == DType::Int64 ? exact_int(v, "where", what) : std::nullopt;
            return i ? full_int({}, *i, device) : full({}, number_from_py(v, "where", what), dtype, device);
          };
          if (dtype == DType::Int64 && ((!tx.defined() && !exact_int(x, "where", "input")) ||
                                        (!ty.defined() && !exact_int(y, "where", "other")))) {
            dtype = DType::Float32;
            if (tx.defined()) tx = to_dtype(tx, dtype);
            if (ty.defined()) ty = to_dtype(ty, dtype);
          }
          if (!tx.defined()) tx = number(x, "input");
          if (!ty.defined()) ty = number(y, "other");
          return where(condition, tx, ty);
        }, py::arg("condition"), a, py::arg("other"),
        "input where condition is non-zero, else other (broadcast); either may be a number.");
  both(m, cls, "masked_fill", [](const Tensor& x, const Tensor& mask, const py::object& value) {
         // A tensor value is 0-d (torch's), cast to the input's dtype; an
         // integer goes into an int64 input exactly, not through a double.
         if (py::isinstance<Tensor>(value)) {
           const Tensor v = value.cast<Tensor>();
           return masked_fill(x, mask, v.dtype() == x.dtype() ? v : to_dtype(v, x.dtype()));
         }
         if (x.dtype() == DType::Int64)
           if (const std::optional<int64_t> i = exact_int(value, "masked_fill", "value"))
             return masked_fill(x, mask, full_int({}, *i, x.device()));
         return masked_fill(x, mask, number_from_py(value, "masked_fill", "value"));
       }, a, py::arg("mask"), py::arg("value"),
       "input with value (a number or a 0-d tensor) wherever mask (broadcast) is non-zero.");

  // ---- reductions ----
  both(m, cls, "sum", [](const Tensor& x, const py::object& dim, bool keepdim) {
         const std::vector<int64_t> dims = dims_from_py(dim, "sum");
         if (!is_cpu_int64(x)) return sum(x, dims, keepdim);
         py::tuple axes(dims.size());
         for (size_t i = 0; i < dims.size(); ++i) axes[i] = normalize_dim(dims[i], x.dim(), "sum");
         return int64_reduction("sum", x, dims.empty() ? py::object(py::none()) : py::object(axes), keepdim);
       }, a, py::arg("dim") = py::none(), py::arg("keepdim").noconvert() = false, "Sum over dims (all when None).");
  both(m, cls, "mean", [](const Tensor& x, const py::object& dim, bool keepdim) {
         return mean(x, dims_from_py(dim, "mean"), keepdim);
       }, a, py::arg("dim") = py::none(), py::arg("keepdim").noconvert() = false, "Mean over dims (all when None).");
  both(m, cls, "var", [](const Tensor& x, const py::object& dim, int64_t correction, bool keepdim) {
         return var(x, dims_from_py(dim, "var"), correction, keepdim);
       }, a, py::arg("dim") = py::none(), py::kw_only(), py::arg("correction") = 1, py::arg("keepdim").noconvert() = false,
       "Variance over dims with Bessel's correction (1: unbiased).");
  m.attr("ValuesIndices") = py::module_::import("collections").attr("namedtuple")("ValuesIndices", "values indices");
  // max and min: the extremum (0-d), or (values, indices) along dim.
  struct Extremum {
    const char* name;
    const char* arg;  // NumPy's index function for int64 tensors
    Tensor (*all)(const Tensor&);
    ValuesIndices (*along)(const Tensor&, int64_t, bool);
    const char* doc;
    const char* arg_doc;
  };
  for (const Extremum& e :
       {Extremum{"max", "argmax", &max, &max, "The maximum (0-d), or (values, indices) along dim.",
                 "The int64 index of the first maximum along dim, or into the flattened input without a dim."},
        Extremum{"min", "argmin", &min, &min, "The minimum (0-d), or (values, indices) along dim.",
                 "The int64 index of the first minimum along dim, or into the flattened input without a dim."}}) {
    both(m, cls, e.name, [e](const Tensor& x, std::optional<int64_t> dim, bool keepdim) -> py::object {
           // torch.max(x, keepdim=True) without a dim is a TypeError; it was ignored.
           if (!dim && keepdim) throw py::type_error(std::string(e.name) + ": keepdim=True needs a dim");
           if (is_cpu_int64(x)) {
             if (!dim) return py::cast(int64_reduction(e.name, x, py::none(), false));
             const int64_t d = normalize_dim(*dim, x.dim(), e.name);
             return values_indices({int64_reduction(e.name, x, py::int_(d), keepdim),
                                    int64_reduction(e.arg, x, py::int_(d), keepdim)});
           }
           if (!dim) return py::cast(e.all(x));
           return values_indices(e.along(x, *dim, keepdim));
         }, a, py::arg("dim") = py::none(), py::arg("keepdim").noconvert() = false, e.doc);
    both(m, cls, e.arg, [e](const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
           // torch.argmax: without a dim, the index into the flattened input (keepdim then gives all dims 1).
           const Tensor flat = dim ? x : reshape(x, {-1});
           const int64_t d = dim ? normalize_dim(*dim, x.dim(), e.arg) : 0;
           Tensor index = is_cpu_int64(x) ? int64_reduction(e.arg, flat, py::int_(d), keepdim && dim.has_value())
                                          : e.along(flat, d, keepdim && dim.has_value()).indices;
           if (!dim && keepdim) index = reshape(index, Shape(static_cast<size_t>(x.dim()), 1));
           return index;
         }, a, py::arg("dim") = py::none(), py::arg("keepdim").noconvert() = false, e.arg_doc);
  }

  // ---- linear algebra ----
  both(m, cls, "matmul", &matmul, a, py::arg("other"), release_gil(),
       "Matrix product with broadcast batch dims (torch.matmul).");
  both(m, cls, "bmm", &bmm, a, py::arg("mat2"), release_gil(), "Batched [B,M,K] @ [B,K,N].");

  // ---- shapes ----
  m.def("reshape", [](const Tensor& x, const py::object& shape) { return reshape(x, shape_from_py(shape, "reshape")); },
        a, py::arg("shape"), "input with a new shape (a view when possible; -1 inferred).");
  cls.def("reshape", [](const Tensor& x, const py::args& s) { return reshape(x, shape_from_args(s, "reshape")); },
          "This tensor with a new shape (a view when possible; -1 inferred).");
  both(m, cls, "flatten", [](const Tensor& x, int64_t start_dim, int64_t end_dim) {
         if (x.dim() == 0) return reshape(x, {1});
         const int64_t start = normalize_dim(start_dim, x.dim(), "flatten");
         const int64_t end = normalize_dim(end_dim, x.dim(), "flatten");
         check<ValueError>(start <= end, "flatten: start_dim ", start_dim, " comes after end_dim ", end_dim);
         Shape shape(x.shape().begin(), x.shape().begin() + start);
         shape.push_back(-1);
         shape.insert(shape.end(), x.shape().begin() + end + 1, x.shape().end());
         return reshape(x, shape);
       }, a, py::arg("start_dim") = 0, py::arg("end_dim") = -1,
       "input with dims start_dim..end_dim merged into one (a view when possible; torch.flatten).");
  cls.def("view", [](const Tensor& x, const py::args& s) { return view(x, shape_from_args(s, "view")); },
          "A view with a new shape (ShapeError when the strides allow none).");
  m.def("permute", [](const Tensor& x, const py::object& dims) { return permute(x, shape_from_py(dims, "permute", "dims")); },
        a, py::arg("dims"), "input with its dims reordered (a view).");
  cls.def("permute", [](const Tensor& x, const py::args& d) {
            return permute(x, shape_from_args(d, "permute", "dims"));
          },
          "This tensor with its dims reordered (a view).");
  both(m, cls, "transpose", &transpose, a, py::arg("dim0"), py::arg("dim1"), "Swaps two dims (a view).");
  both(m, cls, "t", [](const Tensor& x) {
         check<ShapeError>(x.dim() <= 2, "t: expected a tensor of at most 2 dims, but got ", x.dim(),
                           " dims; use transpose(dim0, dim1)");
         return x.dim() < 2 ? x : transpose(x, 0, 1);
       }, a, "input with dims 0 and 1 swapped (a view; torch.t): [R, C] -> [C, R], 0-D and 1-D as they are.");
  cls.def_property_readonly("T", [](const Tensor& x) {
    std::vector<int64_t> d(x.dim());
    for (int64_t i = 0; i < x.dim(); ++i) d[i] = x.dim() - 1 - i;
    return permute(x, d);
  }, "The dims reversed (a view).");
  m.def("expand", [](const Tensor& x, const py::object& size) { return expand(x, shape_from_py(size, "expand")); },
        a, py::arg("size"), "Broadcasts size-1 dims to size (a view).");
  cls.def("expand", [](const Tensor& x, const py::args& s) { return expand(x, shape_from_args(s, "expand")); },
          "Broadcasts size-1 dims (a view; -1 keeps a dim).");
  both(m, cls, "squeeze", [](const Tensor& x, std::optional<int64_t> dim) {
         if (dim) return squeeze(x, *dim);
         Tensor out = x;
         for (int64_t d = x.dim() - 1; d >= 0; --d)
           if (x.size(d) == 1) out = squeeze(out, d);
         return out;
       }, a, py::arg("dim") = py::none(), "Removes a size-1 dim, or every size-1 dim when dim is None (a view).");
  both(m, cls, "unsqueeze", &unsqueeze, a, py::arg("dim"), "Inserts a size-1 dim (a view).");
  both(m, cls, "contiguous", &contiguous, a, "input itself when contiguous, else a contiguous copy.");
  both(m, cls, "narrow", &narrow, a, py::arg("dim"), py::arg("start"), py::arg("length"),
       "length elements from start along dim (a view); out-of-range start or length raise.");
  both(m, cls, "index_select", &index_select, a, py::arg("dim"), py::arg("index"),
       "input indexed along dim by an int64 vector.");
  both(m, cls, "gather", &gather, a, py::arg("dim"), py::arg("index"), "torch.gather.");
  // A sequence of tensors, not one tensor, which pybind11 would take as the
  // sequence of its rows (torch raises TypeError).
  const auto sequence_op = [](const char* name, Tensor (*f)(const std::vector<Tensor>&, int64_t)) {
    return [name, f](const py::object& tensors, int64_t dim) {
      const std::string expected = std::string(name) + ": expected a list or tuple of tensors, but got ";
      if (py::isinstance<Tensor>(tensors)) throw py::type_error(expected + "a Tensor");
      std::vector<Tensor> ts;
      try {
        ts = tensors.cast<std::vector<Tensor>>();
      } catch (const py::cast_error&) {
        throw py::type_error(expected + printable(py::repr(tensors).cast<std::string>()));
      }
      return f(ts, dim);
    };
  };
  m.def("cat", sequence_op("cat", &cat), py::arg("tensors"), py::arg("dim") = 0, "Concatenates along dim.");
  m.def("concat", sequence_op("concat", &cat), py::arg("tensors"), py::arg("dim") = 0,
        "Concatenates along dim (alias of cat).");
  m.def("stack", sequence_op("stack", &stack), py::arg("tensors"), py::arg("dim") = 0, "Stacks along a new dim.");
  both(m, cls, "split", &split, a, py::arg("split_size"), py::arg("dim") = 0,
       "Chunks of split_size along dim (the last may be smaller).");
  both(m, cls, "unbind", &unbind, a, py::arg("dim") = 0, "The slices along dim, with dim removed (views).");
  m.def("pad", [](const Tensor& x, const py::object& pads, double value) {
          return pad(x, shape_from_py(pads, "pad", "pads"), value);
        }, a, py::arg("pad"), py::arg("value") = 0.0,
        "Constant padding, pads as torch.nn.functional.pad (last dim first).");
  both(m, cls, "repeat_interleave", &repeat_interleave, a, py::arg("repeats"), py::arg("dim"),
       "Repeats each element along dim.");

  // ---- softmax, normalisation, losses ----
  both(m, cls, "softmax", &softmax, a, py::arg("dim"), release_gil(),
       "Softmax along dim (torch.softmax). A row that is entirely -inf (a fully masked attention row) gives zeros "
       "and a zero gradient, where torch gives NaN.");
  both(m, cls, "log_softmax", &log_softmax, a, py::arg("dim"), release_gil(),
       "Log-softmax along dim (torch.log_softmax). A row that is entirely -inf gives -inf and a zero gradient, "
       "where torch gives NaN.");
  m.def("layer_norm", [](const Tensor& x, const py::object& shape, const py::object& weight,
                         const py::object& bias, double eps) {
          const Shape normalized_shape = shape_from_py(shape, "layer_norm", "a normalized_shape");
          check<ShapeError>(x.dim() > 0, "layer_norm: expected an input of at least 1 dim, but got a 0-d tensor");
          check<ShapeError>(normalized_shape.size() == 1 && normalized_shape[0] == x.size(-1),
                            "layer_norm: tmem normalises over the last dim only: expected normalized_shape [",
                            x.size(-1), "], but got ", shape_str(normalized_shape));
          const Tensor w = optional_tensor(weight, "layer_norm: expected weight"), b = optional_tensor(bias, "layer_norm: expected bias");
          py::gil_scoped_release release;
          return layer_norm(x, w, b, eps);
        }, a, py::arg("normalized_shape"), py::arg("weight") = py::none(), py::arg("bias") = py::none(),
        py::arg("eps") = 1e-5, "Layer normalisation over the last dim (torch.nn.functional.layer_norm).");
  m.def("cross_entropy", [](const Tensor& logits, const Tensor& target, int64_t ignore_index,
                            const std::string& reduction, double label_smoothing) {
          py::gil_scoped_release release;
          return cross_entropy(logits, target, ignore_index, label_smoothing, reduction);
        }, a, py::arg("target"), py::kw_only(), py::arg("ignore_index") = -100, py::arg("reduction") = "mean",
        py::arg("label_smoothing") = 0.0, "Cross-entropy of logits [N, C] against int64 class indices [N] (torch.nn.functional.cross_entropy). A row of "
        "logits that is entirely -inf has loss inf, where torch gives NaN.");
  m.def("embedding", [](const Tensor& indices, const Tensor& weight, std::optional<int64_t> padding_idx) {
          return embedding(weight, indices, padding_idx);
        }, a, py::arg("weight"), py::arg("padding_idx") = py::none(), release_gil(),
        "weight's rows at int64 indices; the row padding_idx gets no gradient (torch.nn.functional.embedding).");
  m.def("dropout", [](const Tensor& x, double p, bool training, Generator* generator) {
          return dropout(x, p, training, generator ? *generator : default_generator());
        }, a, py::arg("p") = 0.5, py::arg("training").noconvert() = true, py::kw_only(), py::arg("generator") = nullptr,
        "Inverted dropout (identity when not training).");

  // ---- attention ----
  m.def("scaled_dot_product_attention", [](const Tensor& q, const Tensor& k, const Tensor& v,
                                           const py::object& attn_mask,
                                           double dropout_p, bool is_causal, std::optional<double> scale,
                                           int64_t window, Generator* generator) {
          const Tensor mask = optional_tensor(attn_mask, "scaled_dot_product_attention: expected attn_mask");
          Generator& gen = generator ? *generator : default_generator();
          py::gil_scoped_release release;
          return scaled_dot_product_attention(q, k, v, mask, is_causal, window, dropout_p, scale, gen);
        }, py::arg("query"), py::arg("key"), py::arg("value"), py::arg("attn_mask") = py::none(),
        py::arg("dropout_p") = 0.0, py::arg("is_causal").noconvert() = false, py::arg("scale") = py::none(), py::kw_only(),
        py::arg("window") = 0, py::arg("generator") = nullptr,
        "softmax(q k^T * scale + mask) v for q [B,H,T,Dh], k [B,H,S,Dh], v [B,H,S,Dv]; window > 0: causal "
        "sliding window.");
  m.def("causal_linear_attention", &causal_linear_attention, py::arg("query"), py::arg("key"), py::arg("value"),
        py::arg("eps") = 1e-6, py::arg("chunk") = 64, release_gil(),
        "Causal linear attention (Katharopoulos et al. 2020) for non-negative feature-mapped q, k.");

  // ---- the Tensor Memory ops ----
  m.def("grid_sample", [](const Tensor& x, const Tensor& grid, const std::string& mode,
                          const std::string& padding_mode, std::optional<bool> align_corners) {
          const GridSampleMode gm = grid_mode(mode);
          const GridSamplePadding gp = grid_padding(padding_mode);
          py::gil_scoped_release release;
          return grid_sample(x, grid, gm, gp, align_corners.value_or(false));
        }, a, py::arg("grid"), py::arg("mode") = "bilinear", py::arg("padding_mode") = "zeros",
        py::arg("align_corners").noconvert() = py::none(),
        "Samples a 4-D/5-D input at the normalised points of grid (torch.nn.functional.grid_sample).");
  m.def("gaussian_splat", &gaussian_splat, py::arg("content"), py::arg("mu"), py::arg("sigma"), py::arg("D"),
        py::arg("H"), py::arg("W"), py::arg("truncate") = 0.0, release_gil(),
        "content [B,C] splatted at mu [B,3] (x,y,z) with width sigma [B] into a [B,C,D,H,W] volume.");
  m.def("conv3d_depthwise", [](const Tensor& x, const Tensor& weight, const py::object& bias, const py::object& stride,
                               const py::object& padding) {
          const Tensor b = optional_tensor(bias, "conv3d_depthwise: expected bias");
          const auto s = triple(stride, "conv3d_depthwise", "stride");
          const auto p = triple(padding, "conv3d_depthwise", "padding");
          py::gil_scoped_release release;
          return conv3d_depthwise(x, weight, b, s, p);
        }, a, py::arg("weight"), py::arg("bias") = py::none(), py::arg("stride") = 1, py::arg("padding") = 0,
        "Depthwise 3-D convolution: weight [C,1,kD,kH,kW] (conv3d with groups=C).");
  m.def("convlstm3d_cell", [](const Tensor& x, const Tensor& h, const Tensor& c, const Tensor& dw_d,
                              const Tensor& dw_h, const Tensor& dw_w, const Tensor& db_d, const Tensor& db_h,
                              const Tensor& db_w, const Tensor& pw, const Tensor& pb) {
          ConvLSTM3DState s;
          {
            py::gil_scoped_release release;
            s = convlstm3d_cell(x, h, c, {dw_d, dw_h, dw_w, db_d, db_h, db_w, pw, pb});
          }
          return py::make_tuple(s.h, s.c);
        }, py::arg("x"), py::arg("h"), py::arg("c"), py::arg("dw_d"), py::arg("dw_h"), py::arg("dw_w"),
        py::arg("db_d"), py::arg("db_h"), py::arg("db_w"), py::arg("pw"), py::arg("pb"),
        "One fused ConvLSTM3D step; returns (h', c'). Weights as in ops/convlstm.h.");
  m.def("selective_scan", [](const Tensor& u, const Tensor& delta, const Tensor& A, const Tensor& B,
                             const Tensor& C, const Tensor& D, const py::object& h0) {
          const Tensor h = optional_tensor(h0, "selective_scan: expected h0");
          SelectiveScanResult r;
          {
            py::gil_scoped_release release;
            r = selective_scan(u, delta, A, B, C, D, h);
          }
          return py::make_tuple(r.y, r.h);
        }, py::arg("u"), py::arg("delta"), py::arg("A"), py::arg("B"), py::arg("C"), py::arg("D"),
        py::arg("h0") = py::none(),
        "Mamba's selective scan: u, delta [B,T,E], A [E,N], B, C [B,T,N], D [E], h0 [B,E,N]; returns (y, h).");

  // ---- gradient checking ----
  py::class_<GradcheckResult>(m, "GradcheckResult", "The outcome of gradcheck.")
      .def_readonly("ok", &GradcheckResult::ok)
      .def_readonly("max_abs_err", &GradcheckResult::max_abs_err)
      .def_readonly("message", &GradcheckResult::message)
      .def("__bool__", [](const GradcheckResult& r) { return r.ok; });
  m.def("gradcheck", [](const py::function& fn, const std::vector<Tensor>& inputs, double eps, double atol,
                        double rtol) {
          return gradcheck([&fn](const std::vector<Tensor>& xs) {
                             const py::object out = fn(*py::cast(xs));
                             if (!py::isinstance<Tensor>(out))
                               throw py::type_error("gradcheck: expected fn to return a tensor, but it returned " +
                                                    py::repr(out).cast<std::string>());
                             return out.cast<Tensor>();
                           }, inputs, eps, atol, rtol);
        }, py::arg("fn"), py::arg("inputs"), py::arg("eps") = 1e-6, py::arg("atol") = 1e-5, py::arg("rtol") = 1e-3,
        "Checks fn's gradients at float64 inputs against central differences. Raises TypeError when fn "
        "returns something other than a tensor, ValueError for eps not finite and > 0 or atol, rtol not finite "
        "and >= 0.");
  m.def("op_names", [] {
    std::vector<std::string> names;
    for (const OpInfo& op : op_table()) names.emplace_back(op.name());
    return names;
  }, "The names of every op of the op table.");
}

}  // namespace tmem::py_bind
