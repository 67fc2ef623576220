// Helpers shared by the op test files (tests/test_<op>.cpp, one per op file):
// exception messages, PyTorch fixture cases, the spatial ops' fixture.
#pragma once
#include <array>
#include <cmath>
#include <functional>
#include <initializer_list>
#include <map>
#include <string>

#include "fixture.h"
#include "test_util.h"

namespace tmem::test {

inline bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// Runs f, expecting an exception of type E whose message holds every part.
template <class E, class F>
void check_throws_with(F f, std::initializer_list<std::string> parts) {
  try {
    f();
    FAIL_CHECK("expected an exception");
  } catch (const E& e) {
    for (const std::string& p : parts) {
      INFO("message: " << std::string(e.what()) << " / expected to contain: " << p);
      CHECK(contains(e.what(), p));
    }
  }
}

inline bool all_finite(const Tensor& t) {
  for (double v : t.to_vector())
    if (!std::isfinite(v)) return false;
  return true;
}

// Compares one fixture case: the op (given float32 inputs by name) against
// PyTorch's output and the gradients of sum(out * w).
inline void check_fixture_case(const nlohmann::json& c,
                               const std::function<Tensor(std::map<std::string, Tensor>&)>& fn,
                               double atol = 2e-6, double rtol = 1e-5) {
  std::map<std::string, Tensor> in;
  for (const auto& [name, j] : c.at("inputs").items()) {
    if (!c.at("grads").contains(name)) {  // class indices
      std::vector<int64_t> v;
      for (double x : fixture_values(j)) v.push_back(static_cast<int64_t>(x));
      in[name] = tensor_int(v, j.at("shape").get<Shape>());
      continue;
    }
    Tensor t = fixture_tensor(j);
    t.requires_grad_();
    in[name] = t;
  }
  Tensor out = fn(in);
  CHECK(out.shape() == c.at("out").at("shape").get<Shape>());
  {
    INFO("output");
    check_close(out, fixture_values(c.at("out")), atol, rtol);
  }
  sum(mul(out, fixture_tensor(c.at("w")))).backward();
  for (const auto& item : c.at("grads").items()) {
    const std::string name = item.key();  // a plain variable: INFO captures it
    const auto& j = item.value();
    INFO("gradient of " << name);
    REQUIRE(in[name].grad().defined());
    check_close(in[name].grad(), fixture_values(j), atol, rtol);
  }
}

// Float32 against the float64 PyTorch values: 1e-5 relative plus a small absolute.
constexpr double kAtol32 = 2e-5, kRtol32 = 1e-5;

inline const nlohmann::json& spatial_fixture() {
  static const nlohmann::json j = load_fixture("spatial");
  return j;
}

inline Tensor leaf(const nlohmann::json& j, DType dt) {
  Tensor t = fixture_tensor(j, dt);
  t.requires_grad_();
  return t;
}

inline std::array<int64_t, 3> arr3(const nlohmann::json& j) {
  return {j[0].get<int64_t>(), j[1].get<int64_t>(), j[2].get<int64_t>()};
}

// The message of the ShapeError that f throws ("" when it throws none).
template <class F>
std::string shape_error(F&& f) {
  try {
    f();
  } catch (const ShapeError& e) {
    return e.what();
  }
  return "";
}

}  // namespace tmem::test
