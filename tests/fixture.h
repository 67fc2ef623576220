// Reading the PyTorch reference fixtures written by tools/make_fixtures.py.
#pragma once
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tmem/core/json_dump.h"
#include "tmem/core/tensor.h"

namespace tmem::test {

/// Parses tests/fixtures/<name>.json. Throws IOError when missing.
inline nlohmann::json load_fixture(const std::string& name) {
  // Appended in place: GCC 12 warns (-Warray-bounds, a false positive) on
  // the inlined operator+ of a short temporary.
  std::string path = TMEM_FIXTURE_DIR;
  path.append("/").append(name).append(".json");
  std::ifstream in(path);
  if (!in) throw IOError("fixture " + path + " not found; run /usr/bin/python3 tools/make_fixtures.py");
  return nlohmann::json::parse(in);
}

/// A fixture tensor {"shape", "data"} as a CPU tensor of `dtype`.
inline Tensor fixture_tensor(const nlohmann::json& j, DType dtype = DType::Float32) {
  std::vector<double> v;
  for (const auto& x : j.at("data")) v.push_back(number_from_json(x));
  return tensor(v, j.at("shape").get<Shape>(), dtype);
}

/// The values of a fixture tensor, as doubles.
inline std::vector<double> fixture_values(const nlohmann::json& j) {
  std::vector<double> v;
  for (const auto& x : j.at("data")) v.push_back(number_from_json(x));
  return v;
}

}  // namespace tmem::test
