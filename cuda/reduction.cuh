// The per-thread arithmetic of the max/min and var kernels (cuda/reduction.cu),
// built for the device by nvcc and for the host by g++ (cuda/hd.h), so
// tests/host_kernels_reduction_shape.cpp runs it without a GPU. Rows x[O, R]
// are contiguous float32. A row of at most kReduceShortRow elements is
// reduced by one thread; a longer row by one block of kReduceThreads threads,
// thread t taking elements t, t + kReduceThreads, ... and the block combining
// the threads' partials in a tree (halving strides) in shared memory. var's
// backward is elementwise over StridedArgs, one thread per element.
#pragma once
#include <cmath>
#include <cstdint>

#include "tmem/core/device_backend.h"
#include "tmem/cuda/hd.h"

namespace tmem::cuda {

/// Rows up to this length are reduced by one thread each.
inline constexpr int64_t kReduceShortRow = 64;
/// Threads of the block that reduces one longer row (a power of two).
inline constexpr int kReduceThreads = 256;

// ---- max / min (values + first index; NaN counts as the extreme) ----

/// A candidate extreme: value v at index i of its row (i < 0: none yet).
struct Extreme {
  float v;
  int64_t i;
};

/// Whether a comes before b in the order max (is_max) or min picks from: any
/// candidate before none, NaN before numbers, then the larger (max) or
/// smaller (min) value, then the lower index. A total order, so the result
/// does not depend on how a row is split among threads: it is the first NaN,
/// else the first index of the extreme value (the CPU kernel's answer).
TMEM_HD bool extreme_before(Extreme a, Extreme b, bool is_max) {
  if (b.i < 0) return a.i >= 0;
  if (a.i < 0) return false;
  const bool an = std::isnan(a.v), bn = std::isnan(b.v);
  if (an || bn) return an && (!bn || a.i < b.i);
  if (a.v != b.v) return is_max ? a.v > b.v : a.v < b.v;
  return a.i < b.i;
}

/// The one of a and b that comes first (extreme_before).
TMEM_HD Extreme extreme_combine(Extreme a, Extreme b, bool is_max) {
  return extreme_before(b, a, is_max) ? b : a;
}

/// The extreme of row[k] for k = begin, begin + step, ... < end.
TMEM_HD Extreme extreme_scan(const float* row, int64_t begin, int64_t end, int64_t step, bool is_max) {
  Extreme best{0.0f, -1};
  for (int64_t k = begin; k < end; k += step) best = extreme_combine(best, Extreme{row[k], k}, is_max);
  return best;
}

/// The backward of row i: rows[i R + indices[i]] = g[i] (rows zero elsewhere).
TMEM_HD void extreme_backward_one(const float* g, const int64_t* indices, float* rows, int64_t i, int64_t R) {
  rows[i * R + indices[i]] = g[i];
}

// ---- var (two passes: the mean, then the squared deviations from it) ----

/// row[begin] + row[begin + step] + ... (< end), in double.
TMEM_HD double row_partial_sum(const float* row, int64_t begin, int64_t end, int64_t step) {
  double s = 0.0;
  for (int64_t k = begin; k < end; k += step) s += row[k];
  return s;
}

/// The sum of (row[k] - mean)^2 over k = begin, begin + step, ... < end, in
/// double.
TMEM_HD double row_partial_sq_dev(const float* row, int64_t begin, int64_t end, int64_t step, float mean) {
  double s = 0.0;
  for (int64_t k = begin; k < end; k += step) {
    const double d = static_cast<double>(row[k] - mean);
    s += d * d;
  }
  return s;
}

/// The row's mean as var stores it: sum / R in float32 (NaN for R = 0).
TMEM_HD float row_mean(double sum, int64_t R) { return static_cast<float>(sum / static_cast<double>(R)); }

/// The variance from the squared deviations: sq_dev / denom in float32.
TMEM_HD float row_var(double sq_dev, double denom) { return static_cast<float>(sq_dev / denom); }

/// One element of var's input gradient, off its offsets in args
/// {gx, x, mean, g}: gx = (x - mean) * g * scale, in float32 in the order of
/// the CPU's sub, mul and mul_scalar.
TMEM_HD void var_backward_one(const StridedArgs<4>& args, const int64_t* off, float scale) {
  const float x = static_cast<const float*>(args.data[1])[off[1]];
  const float m = static_cast<const float*>(args.data[2])[off[2]];
  const float g = static_cast<const float*>(args.data[3])[off[3]];
  static_cast<float*>(args.data[0])[off[0]] = (x - m) * g * scale;
}

}  // namespace tmem::cuda
