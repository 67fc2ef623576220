// The per-thread arithmetic of the index_select and gather kernels
// (cuda/shape.cu), built for the device by nvcc and for the host by g++
// (cuda/hd.h), so tests/host_kernels_reduction_shape.cpp runs it without a
// GPU. One thread per output element (forward) or per gradient element
// (backward); the backward scatters with `add(p, v)` (*p += v), atomicAdd on
// the device since repeated indices hit one element from several threads.
// Indices are in range: ops/shape.cpp checks them on the host first.
#pragma once
#include <cstdint>

#include "tmem/core/device_backend.h"
#include "tmem/cuda/hd.h"

namespace tmem::cuda {

// ---- index_select: a [P, N, Q], index [K], out [P, K, Q], all contiguous ----

/// Element i of out [P, K, Q]: out[p, k, q] = a[p, index[k], q].
TMEM_HD void index_select_one(const float* a, const int64_t* index, float* out, int64_t i, int64_t N,
                              int64_t K, int64_t Q) {
  const int64_t q = i % Q, pk = i / Q, k = pk % K, p = pk / K;
  out[i] = a[(p * N + index[k]) * Q + q];
}

/// Element i of g [P, K, Q] into ga [P, N, Q]: ga[p, index[k], q] += g[p, k, q].
template <class Add>
TMEM_HD void index_select_backward_one(const float* g, const int64_t* index, float* ga, int64_t i, int64_t N,
                                       int64_t K, int64_t Q, Add add) {
  const int64_t q = i % Q, pk = i / Q, k = pk % K, p = pk / K;
  add(ga + (p * N + index[k]) * Q + q, g[i]);
}

// ---- gather: args {out or ga, index, a or g} over index's shape ----

/// One element of gather's forward, off its offsets in args {out, index, a}
/// (a's stride along the gathered dim is 0; `step` is that dim's real
/// stride): out[off0] = a[off2 + index[off1] * step].
TMEM_HD void gather_one(const StridedArgs<3>& args, const int64_t* off, int64_t step) {
  const int64_t v = static_cast<const int64_t*>(args.data[1])[off[1]];
  static_cast<float*>(args.data[0])[off[0]] = static_cast<const float*>(args.data[2])[off[2] + v * step];
}

/// One element of gather's backward, off its offsets in args {ga, index, g}
/// (ga's stride along the gathered dim is 0, `step` its real stride):
/// ga[off0 + index[off1] * step] += g[off2].
template <class Add>
TMEM_HD void gather_backward_one(const StridedArgs<3>& args, const int64_t* off, int64_t step, Add add) {
  const int64_t v = static_cast<const int64_t*>(args.data[1])[off[1]];
  add(static_cast<float*>(args.data[0]) + off[0] + v * step, static_cast<const float*>(args.data[2])[off[2]]);
}

}  // namespace tmem::cuda
