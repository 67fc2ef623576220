// Strided iteration over N tensors of one shape (broadcast strides may be 0).
// The innermost dim is handed to the callback as a row so kernels can
// vectorise it; rows are split across OpenMP threads when the work is large.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "core/shape.h"

namespace tmem {

/// Work (elements) below which kernels stay single-threaded.
inline constexpr int64_t kParallelGrain = 32768;

/// For each row of `shape` (all dims but the last), calls
/// f(std::array<int64_t, N> offsets, int64_t len, std::array<int64_t, N> inner_strides),
/// offsets in elements relative to each tensor's first element. With
/// `parallel`, rows of large work run on OpenMP threads: f must then write
/// disjoint memory and must not throw.
template <size_t N, class F>
void for_each_row(const Shape& shape, const std::array<Shape, N>& strides, F&& f,
                  bool parallel = true) {
  const int64_t total = numel_of(shape);
  if (total == 0) return;
  const int64_t r = static_cast<int64_t>(shape.size());
  const int64_t len = r ? shape[r - 1] : 1;
  std::array<int64_t, N> inner{};
  for (size_t j = 0; j < N; ++j) inner[j] = r ? strides[j][r - 1] : 0;
  const int64_t rows = total / len;
  auto offsets_of = [&](int64_t row) {
    std::array<int64_t, N> off{};
    for (int64_t d = r - 2; d >= 0; --d) {
      int64_t i = row % shape[d];
      row /= shape[d];
      for (size_t j = 0; j < N; ++j) off[j] += i * strides[j][d];
    }
    return off;
  };
  if (parallel && total >= kParallelGrain && rows > 1) {
#pragma omp parallel for schedule(static)
    for (int64_t row = 0; row < rows; ++row) f(offsets_of(row), len, inner);
  } else {
    for (int64_t row = 0; row < rows; ++row) f(offsets_of(row), len, inner);
  }
}

/// Calls f(std::array<int64_t, N> offsets) for every element, in row-major
/// order on the calling thread (f may throw).
template <size_t N, class F>
void for_each_element(const Shape& shape, const std::array<Shape, N>& strides, F&& f) {
  for_each_row<N>(shape, strides, [&](std::array<int64_t, N> off, int64_t len,
                                      std::array<int64_t, N> inner) {
    for (int64_t i = 0; i < len; ++i) {
      f(off);
      for (size_t j = 0; j < N; ++j) off[j] += inner[j];
    }
  }, false);
}

}  // namespace tmem
