#include "tmem/core/device_backend.h"

#include <atomic>

#include "tmem/core/error.h"

namespace tmem {

namespace {

// Indexed by Device::Kind (the CPU's slot stays null). Zero before any
// dynamic initialisation runs, so a backend may register from any static
// initialiser.
std::atomic<const DeviceBackend*> g_backends[2];

std::atomic<const DeviceBackend*>& slot(Device::Kind kind) {
  check<DeviceError>(kind != Device::Kind::CPU, "register_device_backend: the CPU has no backend slot");
  return g_backends[static_cast<int>(kind)];
}

}  // namespace

const DeviceBackend* register_device_backend(Device::Kind kind, const DeviceBackend* backend) {
  return slot(kind).exchange(backend);
}

const DeviceBackend* registered_device_backend(Device::Kind kind) {
  return kind == Device::Kind::CPU ? nullptr : slot(kind).load();
}

const DeviceBackend& device_backend(Device d, const char* op) {
  check<DeviceError>(!d.is_cpu(), op, ": the CPU has no device backend");
  const DeviceBackend* b = slot(d.kind).load();
  check<DeviceError>(b != nullptr, op, ": ", d.str(), " is not available: this build has no ",
                     Device::kind_name(d.kind), " backend (configure with -DTMEM_CUDA=ON where nvcc is installed)");
  const int n = b->device_count();
  check<DeviceError>(n > 0, op, ": ", d.str(), " is not available: no ", b->name,
                     " device was found on this machine");
  check<DeviceError>(d.index >= 0 && d.index < n, op, ": ", d.str(), " is not available: this machine has ",
                     n, " ", b->name, " device(s)");
  return *b;
}

int device_count(Device::Kind kind) {
  if (kind == Device::Kind::CPU) return 1;
  const DeviceBackend* b = slot(kind).load();
  return b ? b->device_count() : 0;
}

void throw_not_implemented(const char* op, Device d) {
  throw DeviceError(detail::cat(op, ": the ", Device::kind_name(d.kind),
                                " backend has no kernel for this op (got a tensor on ", d.str(), ")"));
}

AllocatorStats allocator_stats(Device d) {
  if (d.is_cpu()) return cpu_allocator_stats();
  return device_backend(d, "allocator_stats").allocator_stats(d.index);
}

void allocator_reset_peak(Device d) {
  if (d.is_cpu()) return cpu_allocator_reset_peak();
  device_backend(d, "allocator_reset_peak").allocator_reset_peak(d.index);
}

Device parse_device(const std::string& name) {
  if (name == "cpu" || name == "cpu:0") return Device::cpu();
  if (name == "cuda") return Device::cuda();
  const std::string prefix = "cuda:";
  if (name.size() > prefix.size() && name.compare(0, prefix.size(), prefix) == 0 &&
      name.find_first_not_of("0123456789", prefix.size()) == std::string::npos && name.size() <= prefix.size() + 4)
    return Device::cuda(std::stoi(name.substr(prefix.size())));
  throw ValueError(detail::cat("device: expected cpu, cpu:0, cuda or cuda:<index>, but got \"", printable(name), "\""));
}

void empty_cache(Device d) {
  if (d.is_cpu()) return cpu_empty_cache();
  device_backend(d, "empty_cache").empty_cache(d.index);
}

void synchronize(Device d) {
  if (d.is_cpu()) return;
  device_backend(d, "synchronize").synchronize(d.index);
}

}  // namespace tmem
