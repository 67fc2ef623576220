// Built against the installed package (tests/package/run.cmake), once through
// find_package(tmem) and once through pkg-config: exits 0 when the CUDA
// backend is registered exactly when the installed tmem has one (argv[1]:
// "1" or "0"), i.e. the consumer got the backend without doing anything.
#include <cstdio>
#include <cstring>

#include <tmem/core/device_backend.h>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: backend_probe 0|1 (whether tmem was built with CUDA)\n");
    return 2;
  }
  const bool expected = std::strcmp(argv[1], "1") == 0;
  const bool registered = tmem::registered_device_backend(tmem::Device::Kind::CUDA) != nullptr;
  std::printf("cuda backend: %s (expected %s)\n", registered ? "registered" : "absent",
              expected ? "registered" : "absent");
  return registered == expected ? 0 : 1;
}
