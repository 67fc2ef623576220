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
/// Peak memory bandwidth of device `index` in GB/s (1e9 bytes/s): twice the
/// memory clock times the bus width (double data rate), from the driver's
/// attributes. Throws DeviceError.
double memory_bandwidth_gbs(int index);

}  // namespace tmem::cuda
