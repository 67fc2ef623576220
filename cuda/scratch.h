// A block of the caching device allocator for the lifetime of a launcher,
// for the intermediate buffers a kernel entry composes (cuda/layer_norm.cu's
// partial column sums, cuda/attention.cu's delta). Kernels queued on the
// legacy default stream before its release finish before any later user of
// the block runs.
#pragma once
#include <cstddef>

#include "tmem/cuda/kernels.h"

namespace tmem::cuda {

/// `bytes` of device memory on `device`, released when it goes out of scope.
class Scratch {
 public:
  Scratch(int device, size_t bytes) : device_(device), bytes_(bytes), p_(allocate(device, bytes)) {}
  ~Scratch() { release(device_, p_, bytes_); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  float* data() const { return static_cast<float*>(p_); }

 private:
  int device_;
  size_t bytes_;
  void* p_;
};

}  // namespace tmem::cuda
