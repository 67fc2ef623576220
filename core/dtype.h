// Element types and devices (docs/DESIGN.md §2). C++17, so that nvcc (which
// compiles cuda/ as C++17) can include it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "tmem/core/error.h"

namespace tmem {

/// Element type. float32 on every device, float64 on CPU (used by gradcheck),
/// int64 for indices and labels.
enum class DType : uint8_t { Float32, Float64, Int64 };

inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::Int64: return "int64";
  }
  return "?";
}

inline size_t dtype_size(DType t) {
  return t == DType::Float32 ? 4 : 8;
}

inline bool is_floating(DType t) { return t != DType::Int64; }

template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::Float32; }
template <> constexpr DType dtype_of<double>() { return DType::Float64; }
template <> constexpr DType dtype_of<int64_t>() { return DType::Int64; }

/// A device: the CPU, or CUDA device `index`.
struct Device {
  enum class Kind : uint8_t { CPU, CUDA };
  Kind kind = Kind::CPU;
  int index = 0;

  static Device cpu() { return {}; }
  static Device cuda(int i = 0) { return {Kind::CUDA, i}; }
  bool is_cpu() const { return kind == Kind::CPU; }
  bool is_cuda() const { return kind == Kind::CUDA; }
  bool operator==(const Device& o) const { return kind == o.kind && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
  /// "cpu" or "cuda".
  static const char* kind_name(Kind k) { return k == Kind::CPU ? "cpu" : "cuda"; }
  /// "cpu" or "cuda:<index>".
  std::string str() const { return is_cpu() ? "cpu" : "cuda:" + std::to_string(index); }
};

/// Calls f.template operator()<T>() with T the C++ type of a floating dtype;
/// throws DtypeError naming `op` for int64.
template <class F>
decltype(auto) dispatch_floating(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::Float32: return f.template operator()<float>();
    case DType::Float64: return f.template operator()<double>();
    default:
      throw DtypeError(detail::cat(op, ": expected a floating dtype (float32 or float64), but got ",
                                   dtype_name(t)));
  }
}

/// As dispatch_floating, but int64 is accepted too.
template <class F>
decltype(auto) dispatch_all(DType t, F&& f) {
  switch (t) {
    case DType::Float32: return f.template operator()<float>();
    case DType::Float64: return f.template operator()<double>();
    default: return f.template operator()<int64_t>();
  }
}

}  // namespace tmem
