// CUDA runtime entry points that plain C++ (ops/, tests) may call. Every CUDA
// call is checked; a failure throws tmem::DeviceError with file:line.
#pragma once
#include <cstdint>

namespace tmem::cuda {

/// Number of usable CUDA devices (0 when there is no driver or no GPU).
int device_count();
/// Name of device `index`. Throws DeviceError.
const char* device_name(int index);
/// out[i] = a[i] + b[i] for n float32 elements; pointers are host memory, the
/// data goes through the device and back (the first kernel of the backend).
/// Throws DeviceError when no device is present or a CUDA call fails.
void add_f32_roundtrip(const float* a, const float* b, float* out, int64_t n);

}  // namespace tmem::cuda
