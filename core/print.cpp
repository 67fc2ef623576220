// operator<< for tensors: a port of PyTorch's repr (torch/_tensor_str.py,
// v1.13, default printoptions), so a tensor prints as it would in Python.
#include <algorithm>
#include <cmath>
#include <ostream>
#include <string>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "tmem/core/autograd.h"
#include "tmem/core/tensor.h"

namespace tmem {

namespace {

constexpr int kPrecision = 4;      // digits after the point
constexpr int64_t kThreshold = 1000;  // more elements than this are summarized
constexpr int64_t kEdgeItems = 3;  // entries kept at each end of a summarized dim
constexpr int64_t kLineWidth = 80;

// Python's spelling of non-finite floats ("nan" never signed).
std::string nonfinite_str(double v) { return std::isnan(v) ? "nan" : v > 0 ? "inf" : "-inf"; }

std::string sci_str(double v) { return std::isfinite(v) ? fmt::format("{:.{}e}", v, kPrecision) : nonfinite_str(v); }
std::string fixed_str(double v) { return std::isfinite(v) ? fmt::format("{:.{}f}", v, kPrecision) : nonfinite_str(v); }
std::string whole_str(double v) { return fmt::format("{:.0f}", v); }

// torch's _Formatter: one notation and width for every element printed.
// Floating values come as doubles, int64 ones as themselves (exact).
struct Formatter {
  bool floating = true, int_mode = true, sci_mode = false;
  size_t width = 1;

  Formatter(const std::vector<double>& vals, const std::vector<int64_t>& ints, bool is_float)
      : floating(is_float) {
    for (int64_t v : ints) width = std::max(width, std::to_string(v).size());
    std::vector<double> nz;
    for (double v : vals)
      if (std::isfinite(v) && v != 0) nz.push_back(v);
    if (nz.empty()) return;
    double lo = std::abs(nz[0]), hi = lo;
    for (double v : nz) {
      lo = std::min(lo, std::abs(v));
      hi = std::max(hi, std::abs(v));
      if (v != std::ceil(v)) int_mode = false;
    }
    sci_mode = hi / lo > 1000.0 || hi > 1e8 || (!int_mode && lo < 1e-4);
    for (double v : nz) {
      const size_t w = sci_mode ? sci_str(v).size() : int_mode ? whole_str(v).size() + 1 : fixed_str(v).size();
      width = std::max(width, w);
    }
  }

  std::string pad(std::string s) const { return s.size() < width ? std::string(width - s.size(), ' ') + s : s; }
  std::string format(int64_t v) const { return pad(std::to_string(v)); }
  std::string format(double v) const {
    if (sci_mode) return pad(sci_str(v));
    if (int_mode) return pad(std::isfinite(v) ? whole_str(v) + "." : nonfinite_str(v));
    return pad(fixed_str(v));
  }
};

class Printer {
 public:
  explicit Printer(const Tensor& t)
      : h_(t.device().is_cpu() ? t : t.detach().cpu()), summarize_(t.numel() > kThreshold),
        fmt_(summarized<double>(), summarized<int64_t>(), is_floating(t.dtype())) {}

  // The body: "[[1., 2.],\n ...]" (indent: the columns taken before it).
  std::string body(int64_t indent) const { return str(0, h_.offset(), indent); }

 private:
  // The indices of dim d to print; -1 marks the "..." of a summarized dim.
  std::vector<int64_t> indices(size_t d) const {
    const int64_t n = h_.shape()[d];
    std::vector<int64_t> out;
    const bool cut = summarize_ && n > 2 * kEdgeItems;
    for (int64_t i = 0; i < n; ++i) {
      if (cut && i == kEdgeItems) {
        out.push_back(-1);
        i = n - kEdgeItems;
      }
      out.push_back(i);
    }
    return out;
  }

  // The element at storage offset `off`: int64 as itself, floats as double.
  template <class R>
  R at(int64_t off) const {
    return dispatch_all(h_.dtype(), [&]<class T>() {
      return static_cast<R>(static_cast<const T*>(h_.impl().storage->data)[off]);
    });
  }
  std::string cell(int64_t off) const {
    return h_.dtype() == DType::Int64 ? fmt_.format(at<int64_t>(off)) : fmt_.format(at<double>(off));
  }

  template <class R>
  void collect(size_t d, int64_t off, std::vector<R>& out) const {
    if (d == h_.shape().size()) {
      out.push_back(at<R>(off));
      return;
    }
    for (int64_t i : indices(d))
      if (i >= 0) collect(d + 1, off + i * h_.strides()[d], out);
  }

  // The values printed (all, or the edges of a summarized tensor), when R is
  // the type they are formatted as; empty otherwise.
  template <class R>
  std::vector<R> summarized() const {
    std::vector<R> out;
    if ((h_.dtype() == DType::Int64) == std::is_same_v<R, int64_t>) collect(0, h_.offset(), out);
    return out;
  }

  std::string str(size_t d, int64_t off, int64_t indent) const {
    const size_t rank = h_.shape().size();
    if (d == rank) return cell(off);
    std::vector<std::string> parts;
    for (int64_t i : indices(d))
      parts.push_back(i < 0 ? (d + 1 == rank ? " ..." : "...") : str(d + 1, off + i * h_.strides()[d], indent + 1));
    std::string out = "[";
    if (d + 1 == rank) {  // torch's _vector_str: as many entries per line as fit
      const int64_t per_line =
          std::max<int64_t>(1, (kLineWidth - indent) / static_cast<int64_t>(fmt_.width + 2));
      for (size_t k = 0; k < parts.size(); ++k) {
        if (k > 0) out += k % per_line == 0 ? ",\n" + std::string(indent + 1, ' ') : ", ";
        out += parts[k];
      }
    } else {
      const std::string sep = "," + std::string(rank - d - 1, '\n') + std::string(indent + 1, ' ');
      for (size_t k = 0; k < parts.size(); ++k) out += (k > 0 ? sep : "") + parts[k];
    }
    return out + "]";
  }

  Tensor h_;
  bool summarize_;
  Formatter fmt_;
};

// Python's str(tuple(shape)): "(2, 3)", "(5,)".
std::string size_tuple(const Shape& s) {
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i) out += (i > 0 ? ", " : "") + std::to_string(s[i]);
  return out + (s.size() == 1 ? ",)" : ")");
}

}  // namespace

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  if (!t.defined()) return os << "tensor(undefined)";
  const std::string prefix = "tensor(";
  const int64_t indent = static_cast<int64_t>(prefix.size());
  std::vector<std::string> suffixes;
  if (!t.device().is_cpu()) suffixes.push_back("device='" + t.device().str() + "'");
  std::string body;
  if (t.numel() == 0) {
    body = "[]";
    if (t.dim() != 1) suffixes.push_back("size=" + size_tuple(t.shape()));
    if (t.dtype() != DType::Float32) suffixes.push_back(std::string("dtype=torch.") + dtype_name(t.dtype()));
  } else {
    body = Printer(t).body(indent);
    if (t.numel() > kThreshold) suffixes.push_back("size=" + size_tuple(t.shape()));
    if (t.dtype() == DType::Float64) suffixes.push_back("dtype=torch.float64");
  }
  if (!t.is_leaf()) suffixes.push_back("grad_fn=<" + std::string(op_name(t.impl().grad_fn->op)) + ">");
  else if (t.requires_grad()) suffixes.push_back("requires_grad=True");
  // torch's _add_suffixes, including its count of the last line's length.
  std::string out = prefix + body;
  const size_t nl = out.rfind('\n');
  int64_t last = static_cast<int64_t>(out.size()) - (nl == std::string::npos ? -1 : static_cast<int64_t>(nl)) + 1;
  for (const std::string& s : suffixes) {
    const auto len = static_cast<int64_t>(s.size());
    if (last + len + 2 > kLineWidth) {
      out += ",\n" + std::string(indent, ' ') + s;
      last = indent + len;
    } else {
      out += ", " + s;
      last += len + 2;
    }
  }
  return os << out << ")";
}

}  // namespace tmem
