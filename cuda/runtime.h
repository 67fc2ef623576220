// CUDA runtime queries that plain C++ (tests, tools) may call directly. The
// rest of the backend is reached through the tables it registers
// (core/device_backend.h).
#pragma once

namespace tmem::cuda {

/// Number of usable CUDA devices (0 when there is no driver or no GPU; the
/// count is taken once).
int device_count();
/// Name of device `index`. Throws DeviceError.
const char* device_name(int index);

}  // namespace tmem::cuda
