// CUDA backend tests: registered always, skipped with a visible message when
// the build has no CUDA backend or the machine has no GPU.
#include "test_util.h"

#ifdef TMEM_WITH_CUDA
#include "cuda/runtime.h"
#endif

TEST_CASE("cuda: first kernel adds on the device") {
#ifndef TMEM_WITH_CUDA
  MESSAGE("SKIPPED: built without the CUDA backend (no nvcc found)");
#else
  if (tmem::cuda::device_count() == 0) {
    MESSAGE("SKIPPED: no CUDA device");
    return;
  }
  std::vector<float> a(1000), b(1000), out(1000);
  for (int i = 0; i < 1000; ++i) {
    a[i] = i;
    b[i] = 0.5f * i;
  }
  tmem::cuda::add_f32_roundtrip(a.data(), b.data(), out.data(), 1000);
  for (int i = 0; i < 1000; ++i) CHECK(out[i] == doctest::Approx(1.5 * i));
#endif
}
