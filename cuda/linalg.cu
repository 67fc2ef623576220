// Matrix products (ops/linalg.cpp's device half) through cuBLAS:
// cublasSgemmStridedBatched on the legacy default stream, one handle per
// device and host thread. cuBLAS is column-major: a row-major c[m, n] is the
// column-major c^T[n, m] = b^T a^T, so b goes first and a row-major operand
// (a column-major transpose to cuBLAS) is passed untransposed. The math mode
// is CUBLAS_DEFAULT_MATH: full float32, no TF32 (unless the environment sets
// NVIDIA_TF32_OVERRIDE).
//
// cuBLAS is loaded on the first matmul (dlopen), not linked: loading it costs
// every process about 0.1 s and 200 MB of resident memory, which every test
// program and `tmem` command would pay whether it multiplies on a GPU or not.
#include <cublas_v2.h>
#include <dlfcn.h>

#include <climits>
#include <string>

#include "tmem/core/error.h"
#include "tmem/cuda/check.h"
#include "tmem/cuda/kernels.h"

namespace tmem::cuda {

namespace {

// The cuBLAS entry points this file uses, from the library of the cuBLAS
// major version it was compiled against.
struct Cublas {
  decltype(&cublasCreate_v2) create;
  decltype(&cublasSetMathMode) set_math_mode;
  decltype(&cublasSgemmStridedBatched) sgemm_strided_batched;
  decltype(&cublasGetStatusString) status_string;
};

const Cublas& cublas() {
  static const Cublas api = [] {
    const std::string name = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
    void* lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) lib = dlopen((std::string(TMEM_CUDA_LIBRARY_DIR) + "/" + name).c_str(), RTLD_NOW | RTLD_LOCAL);
    check<DeviceError>(lib != nullptr, "matmul: cannot load cuBLAS (", name, "): ", dlerror());
    auto sym = [&](const char* s) {
      void* p = dlsym(lib, s);
      check<DeviceError>(p != nullptr, "matmul: ", name, " has no ", s);
      return p;
    };
    Cublas c;
    c.create = reinterpret_cast<decltype(c.create)>(sym("cublasCreate_v2"));
    c.set_math_mode = reinterpret_cast<decltype(c.set_math_mode)>(sym("cublasSetMathMode"));
    c.sgemm_strided_batched =
        reinterpret_cast<decltype(c.sgemm_strided_batched)>(sym("cublasSgemmStridedBatched"));
    c.status_string = reinterpret_cast<decltype(c.status_string)>(sym("cublasGetStatusString"));
    return c;
  }();
  return api;
}

}  // namespace

}  // namespace tmem::cuda

#define TMEM_CUBLAS_CHECK(call)                                                                \
  do {                                                                                         \
    const cublasStatus_t tmem_st_ = (call);                                                    \
    if (tmem_st_ != CUBLAS_STATUS_SUCCESS)                                                     \
      ::tmem::cuda::throw_cuda_error(                                                          \
          (std::string("cuBLAS: ") + ::tmem::cuda::cublas().status_string(tmem_st_)).c_str(), \
          __FILE__, __LINE__);                                                                 \
  } while (0)

namespace tmem::cuda {

namespace {

constexpr int kMaxHandles = 64;

// The calling thread's handle for the current device (made on first use;
// kept for the thread's life, as the driver frees everything at exit).
cublasHandle_t handle(int device) {
  check<DeviceError>(device >= 0 && device < kMaxHandles, "matmul: cuda device index ", device,
                     " is out of range");
  thread_local cublasHandle_t handles[kMaxHandles] = {};
  if (!handles[device]) {
    TMEM_CUBLAS_CHECK(cublas().create(&handles[device]));
    TMEM_CUBLAS_CHECK(cublas().set_math_mode(handles[device], CUBLAS_DEFAULT_MATH));
  }
  return handles[device];
}

int as_int(int64_t v, const char* what) {
  check<DeviceError>(v >= 0 && v <= INT_MAX, "matmul: ", what, " = ", v,
                     " is beyond what cuBLAS takes (2^31 - 1)");
  return static_cast<int>(v);
}

}  // namespace

// One strided-batched call per outer item.
void gemm(const GemmArgs<float>& g) {
  DeviceGuard guard(g.device);
  cublasHandle_t h = handle(g.device);
  const float alpha = 1.0f, beta = 0.0f;
  for (int64_t o = 0; o < g.outer; ++o)
    TMEM_CUBLAS_CHECK(cublas().sgemm_strided_batched(
        h, g.b_col_major ? CUBLAS_OP_T : CUBLAS_OP_N, g.a_col_major ? CUBLAS_OP_T : CUBLAS_OP_N,
        as_int(g.n, "n"), as_int(g.m, "m"), as_int(g.k, "k"), &alpha, g.b + o * g.outer_b, as_int(g.ldb, "ldb"),
        g.stride_b, g.a + o * g.outer_a, as_int(g.lda, "lda"), g.stride_a, &beta, g.c + o * g.batch * g.m * g.n,
        as_int(g.n, "n"), g.m * g.n, as_int(g.batch, "batch")));
  if (sync_after_launch()) TMEM_CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace tmem::cuda
