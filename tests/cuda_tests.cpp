// CUDA backend tests, a program of their own so CTest can report them as
// skipped (exit code 77) with a visible reason when the build has no CUDA
// backend or the machine has no GPU.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <vector>

#ifdef TMEM_WITH_CUDA
#include "cuda/runtime.h"
#endif

namespace {
constexpr int kSkip = 77;
}

#ifdef TMEM_WITH_CUDA
TEST_CASE("cuda: first kernel adds on the device") {
  std::vector<float> a(1000), b(1000), out(1000);
  for (int i = 0; i < 1000; ++i) {
    a[i] = static_cast<float>(i);
    b[i] = 0.5f * static_cast<float>(i);
  }
  tmem::cuda::add_f32_roundtrip(a.data(), b.data(), out.data(), 1000);
  for (int i = 0; i < 1000; ++i) CHECK(out[i] == doctest::Approx(1.5 * i));
}
#endif

int main(int argc, char** argv) {
#ifndef TMEM_WITH_CUDA
  std::printf("SKIPPED: built without the CUDA backend (nvcc not found)\n");
  return kSkip;
#else
  if (tmem::cuda::device_count() == 0) {
    std::printf("SKIPPED: no CUDA device on this machine\n");
    return kSkip;
  }
  std::printf("CUDA device 0: %s\n", tmem::cuda::device_name(0));
  doctest::Context ctx(argc, argv);
  return ctx.run();
#endif
}
