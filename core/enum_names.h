// Enums that are names at the program's edges (CLI options, JSON configs,
// checkpoints, the Python bindings): each enum has one table of names, in the
// order of its values, that its to_string and its parser share, so a name is
// compared only where it is parsed (docs/DESIGN.md §13).
#pragma once
#include <array>
#include <cstddef>
#include <string>
#include <string_view>

#include "tmem/core/error.h"

namespace tmem {

/// "a, b, c or d": the choices an error message lists.
template <size_t N>
std::string choices_str(const std::array<std::string_view, N>& names) {
  std::string s;
  for (size_t i = 0; i < N; ++i) s += std::string(i == 0 ? "" : i + 1 == N ? " or " : ", ") + std::string(names[i]);
  return s;
}

/// The name of e: names[e], names listing every value of E in order.
template <class E, size_t N>
std::string enum_name(const std::array<std::string_view, N>& names, E e) {
  return std::string(names.at(static_cast<size_t>(e)));
}

/// The value of E named `name` in `names`. Throws ValueError
/// `<what> "<name>" (expected a, b or c)`, e.g. what = "unknown LM method";
/// the name is cut by printable().
template <class E, size_t N>
E parse_enum(const std::array<std::string_view, N>& names, std::string_view name, std::string_view what) {
  for (size_t i = 0; i < N; ++i)
    if (names[i] == name) return static_cast<E>(i);
  throw ValueError(std::string(what) + " \"" + printable(name) + "\" (expected " + choices_str(names) + ")");
}

}  // namespace tmem
