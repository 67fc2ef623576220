// Strided iteration over N tensors of one shape (broadcast strides may be 0).
// The innermost dim is handed to the callback as a row so kernels can
// vectorise it; rows are split across OpenMP threads when the work is large.
// Dims that are laid out alike in every tensor are merged first (a
// contiguous [B,C,6,6,6] tensor is one row of B*C*216 elements, not B*C*36
// rows of 6), so kernels see long rows.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include <omp.h>

#include "tmem/core/device_backend.h"
#include "tmem/core/error.h"
#include "tmem/core/shape.h"

namespace tmem {

/// Work (elements) below which kernels stay single-threaded.
inline constexpr int64_t kParallelGrain = 32768;

namespace detail {

/// shape and strides with size-1 dims dropped and each dim merged into the
/// next inner one where, for every tensor, stride[d] == stride[d+1] *
/// shape[d+1]. Iterating the result in row-major order visits the same
/// elements in the same order.
template <size_t N>
struct Coalesced {
  std::vector<int64_t> shape;
  std::array<std::vector<int64_t>, N> strides;

  /// The dims of launch arguments, merged already: taken as they are.
  explicit Coalesced(const StridedArgs<N>& a) : shape(a.shape, a.shape + a.ndim) {
    for (size_t j = 0; j < N; ++j) strides[j].assign(a.strides[j], a.strides[j] + a.ndim);
  }

  Coalesced(const Shape& s, const std::array<Shape, N>& st) {
    shape.reserve(s.size());
    for (auto& v : strides) v.reserve(s.size());
    for (size_t d = 0; d < s.size(); ++d) {
      if (s[d] == 1) continue;
      bool merge = !shape.empty();
      for (size_t j = 0; j < N && merge; ++j) merge = strides[j].back() == st[j][d] * s[d];
      if (merge) {
        shape.back() *= s[d];
        for (size_t j = 0; j < N; ++j) strides[j].back() = st[j][d];
      } else {
        shape.push_back(s[d]);
        for (size_t j = 0; j < N; ++j) strides[j].push_back(st[j][d]);
      }
    }
  }
};

/// for_each_row's loop over the merged dims c of `total` elements (> 0).
template <size_t N, class F>
void for_each_row(const Coalesced<N>& c, int64_t total, F& f, bool parallel) {
  const int64_t r = static_cast<int64_t>(c.shape.size());
  const int64_t len = r ? c.shape[r - 1] : 1;
  std::array<int64_t, N> inner{};
  for (size_t j = 0; j < N; ++j) inner[j] = r ? c.strides[j][r - 1] : 0;
  const int64_t rows = total / len;
  auto offsets_of = [&](int64_t row) {
    std::array<int64_t, N> off{};
    for (int64_t d = r - 2; d >= 0; --d) {
      int64_t i = row % c.shape[d];
      row /= c.shape[d];
      for (size_t j = 0; j < N; ++j) off[j] += i * c.strides[j][d];
    }
    return off;
  };
  const int nthr = parallel && total >= kParallelGrain ? omp_get_max_threads() : 1;
  // A tensor that steps across its rows (inner stride not 0 or 1) while the
  // next dim out runs along memory (stride 1) is being transposed: visit
  // kTile x kTile tiles so that both sides stay in cache and in the TLB.
  constexpr int64_t kTile = 32;
  bool transposed = false;
  if (parallel && r >= 2 && len > kTile && c.shape[r - 2] > kTile)
    for (size_t j = 0; j < N; ++j)
      transposed = transposed || (inner[j] != 0 && inner[j] != 1 && c.strides[j][r - 2] == 1);
  if (transposed) {
    const int64_t outer = c.shape[r - 2];
    const int64_t ti = (outer + kTile - 1) / kTile, tj = (len + kTile - 1) / kTile;
    const int64_t tiles = (rows / outer) * ti * tj;
#pragma omp parallel for schedule(static) if (nthr > 1)
    for (int64_t t = 0; t < tiles; ++t) {
      const int64_t g = t / (ti * tj), i0 = (t / tj) % ti * kTile, j0 = t % tj * kTile;
      const int64_t n = std::min(kTile, len - j0);
      for (int64_t i = i0; i < std::min(i0 + kTile, outer); ++i) {
        std::array<int64_t, N> off = offsets_of(g * outer + i);
        for (size_t j = 0; j < N; ++j) off[j] += j0 * inner[j];
        f(off, n, inner);
      }
    }
    return;
  }
  if (nthr > 1 && rows >= nthr) {
#pragma omp parallel for schedule(static)
    for (int64_t row = 0; row < rows; ++row) f(offsets_of(row), len, inner);
  } else if (nthr > 1) {
    // Fewer rows than threads: each row in pieces of a multiple of 64 elements.
    const int64_t per_row = (nthr + rows - 1) / rows;
    const int64_t piece = ((len + per_row - 1) / per_row + 63) / 64 * 64;
    const int64_t pieces = (len + piece - 1) / piece;
#pragma omp parallel for schedule(static)
    for (int64_t k = 0; k < rows * pieces; ++k) {
      std::array<int64_t, N> off = offsets_of(k / pieces);
      const int64_t start = (k % pieces) * piece;
      for (size_t j = 0; j < N; ++j) off[j] += start * inner[j];
      f(off, std::min(piece, len - start), inner);
    }
  } else {
    for (int64_t row = 0; row < rows; ++row) f(offsets_of(row), len, inner);
  }
}

}  // namespace detail

/// For each row of `shape` (all dims but the last, after merging dims laid
/// out alike), calls
/// f(std::array<int64_t, N> offsets, int64_t len, std::array<int64_t, N> inner_strides),
/// offsets in elements relative to each tensor's first element. With
/// `parallel`, large work runs on OpenMP threads, a long row may be handed to
/// f in pieces and a transposing layout is visited tile by tile: f must then
/// write disjoint memory, must not depend on how or in which order the
/// elements are split into calls, and must not throw. Without `parallel` the
/// rows come whole, in row-major order, on the calling thread.
template <size_t N, class F>
void for_each_row(const Shape& shape, const std::array<Shape, N>& strides, F&& f,
                  bool parallel = true) {
  const int64_t total = numel_of(shape);
  if (total == 0) return;
  detail::for_each_row(detail::Coalesced<N>(shape, strides), total, f, parallel);
}

/// for_each_row over the operands of kernel launch arguments (their dims
/// already merged): the CPU kernels' loop over a StridedArgs.
template <size_t N, class F>
void for_each_row(const StridedArgs<N>& args, F&& f, bool parallel = true) {
  if (args.numel == 0) return;
  detail::for_each_row(detail::Coalesced<N>(args), args.numel, f, parallel);
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

/// for_each_element over the operands of kernel launch arguments, in
/// row-major order on the calling thread.
template <size_t N, class F>
void for_each_element(const StridedArgs<N>& args, F&& f) {
  for_each_row<N>(args, [&](std::array<int64_t, N> off, int64_t len, std::array<int64_t, N> inner) {
    for (int64_t i = 0; i < len; ++i) {
      f(off);
      for (size_t j = 0; j < N; ++j) off[j] += inner[j];
    }
  }, false);
}

/// The launch arguments of a device kernel over N operands of `shape`:
/// strides per operand (0 along broadcast dims) and pointers to each
/// operand's element [0,...,0], with dims merged as for_each_row merges them.
/// Throws ShapeError naming `op` when more than kMaxDims dims remain.
template <size_t N>
StridedArgs<N> strided_args(const Shape& shape, const std::array<Shape, N>& strides,
                            const std::array<void*, N>& data, const char* op) {
  const detail::Coalesced<N> c(shape, strides);
  check<ShapeError>(c.shape.size() <= static_cast<size_t>(kMaxDims), op, ": shape ",
                    shape_str(shape), " has more than ", kMaxDims,
                    " dims after merging, which device kernels do not take");
  StridedArgs<N> a;
  a.ndim = static_cast<int>(c.shape.size());
  a.numel = numel_of(shape);
  for (int d = 0; d < a.ndim; ++d) a.shape[d] = c.shape[d];
  for (size_t j = 0; j < N; ++j) {
    a.data[j] = data[j];
    for (int d = 0; d < a.ndim; ++d) a.strides[j][d] = c.strides[j][d];
  }
  return a;
}

}  // namespace tmem
