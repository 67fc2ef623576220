#include "core/json_dump.h"

#include <cmath>
#include <limits>

namespace tmem {

using nlohmann::json;

json number_to_json(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  return v;
}

double number_from_json(const json& j) {
  if (j.is_number()) return j.get<double>();
  if (j.is_string()) {
    const auto& s = j.get_ref<const std::string&>();
    if (s == "NaN") return std::numeric_limits<double>::quiet_NaN();
    if (s == "Infinity") return std::numeric_limits<double>::infinity();
    if (s == "-Infinity") return -std::numeric_limits<double>::infinity();
    throw IOError("number_from_json: expected a number, \"NaN\", \"Infinity\" or \"-Infinity\", "
                  "but got the string \"" + s + "\"");
  }
  throw IOError("number_from_json: expected a number, but got " + j.dump());
}

json tensor_summary(const std::string& name, const Tensor& t, bool values) {
  std::vector<double> v = t.to_vector();
  int64_t nan = 0, inf = 0, n = 0;
  double mx = -std::numeric_limits<double>::infinity(), mn = -mx;
  double scale = 0;  // max |x|: the norm is scale * sqrt(sum((x/scale)^2)), which cannot overflow
  double mean = 0, m2 = 0;  // Welford
  for (double x : v) {
    if (std::isnan(x)) { ++nan; continue; }
    if (std::isinf(x)) { ++inf; continue; }
    ++n;
    double d = x - mean;
    mean += d / n;
    m2 += d * (x - mean);
    mx = std::max(mx, x);
    mn = std::min(mn, x);
    scale = std::max(scale, std::abs(x));
  }
  double ss = 0;
  if (scale > 0)
    for (double x : v)
      if (std::isfinite(x)) ss += (x / scale) * (x / scale);
  json j;
  j["name"] = name;
  j["shape"] = t.shape();
  j["norm"] = number_to_json(scale * std::sqrt(ss));
  j["mean"] = n ? number_to_json(mean) : json("NaN");
  j["std"] = n > 1 ? number_to_json(std::sqrt(m2 / (n - 1))) : json("NaN");
  j["min"] = n ? number_to_json(mn) : json("NaN");
  j["max"] = n ? number_to_json(mx) : json("NaN");
  j["nan"] = nan;
  j["inf"] = inf;
  if (values) {
    json arr = json::array();
    for (double x : v) arr.push_back(number_to_json(x));
    j["values"] = std::move(arr);
  }
  return j;
}

Tensor tensor_from_summary(const json& j) {
  if (!j.contains("values") || !j.contains("shape"))
    throw IOError("tensor_from_summary: the summary of \"" + j.value("name", std::string("?")) +
                  "\" has no values (dump it with values=true)");
  Shape shape = j["shape"].get<Shape>();
  std::vector<double> v;
  for (const json& x : j["values"]) v.push_back(number_from_json(x));
  if (static_cast<int64_t>(v.size()) != numel_of(shape))
    throw IOError("tensor_from_summary: " + std::to_string(v.size()) + " values for shape " +
                  shape_str(shape));
  return tensor(v, shape, DType::Float64);
}

GradDumpWriter::GradDumpWriter(const std::string& path) : path_(path), out_(path) {
  if (!out_) throw IOError("GradDumpWriter: cannot open " + path + " for writing");
}

void GradDumpWriter::write_step(int64_t step, double loss,
                                const std::vector<std::pair<std::string, Tensor>>& tensors,
                                bool values, const json& extra) {
  json j = extra;
  j["step"] = step;
  j["loss"] = number_to_json(loss);
  json arr = json::array();
  for (const auto& [name, t] : tensors) arr.push_back(tensor_summary(name, t, values));
  j["tensors"] = std::move(arr);
  out_ << j.dump() << '\n';
  out_.flush();
  if (!out_) throw IOError("GradDumpWriter: write to " + path_ + " failed");
}

std::vector<json> read_grad_dump(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw IOError("read_grad_dump: cannot open " + path);
  std::vector<json> steps;
  std::string line;
  int64_t lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    json j;
    try {
      j = json::parse(line);
    } catch (const json::parse_error& e) {
      throw IOError("read_grad_dump: " + path + " line " + std::to_string(lineno) + ": " + e.what());
    }
    if (j.is_array()) {
      for (auto& s : j) steps.push_back(std::move(s));
    } else {
      steps.push_back(std::move(j));
    }
  }
  return steps;
}

}  // namespace tmem
