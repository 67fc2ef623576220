#include "host_kernels.h"

#include <vector>

#include "fake_device.h"

namespace tmem::test {

void host::sum_rows(int device, const float* x, float* out, int64_t rows, int64_t len, double scale) {
  fake_sum_rows(device, x, out, rows, len, scale);
}

// As cuda/reduction.cu's entry: the columns copied into rows, then sum_rows.
void host::sum_columns(int device, const float* x, float* out, int64_t rows, int64_t cols, double scale) {
  std::vector<float> t(static_cast<size_t>(rows * cols));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) t[static_cast<size_t>(j * rows + i)] = x[i * cols + j];
  host::sum_rows(device, t.data(), out, cols, rows, scale);
}

void host::gemm(const GemmArgs<float>& args) { fake_gemm(args); }

const OpKernels& host_op_kernels() {
  static const OpKernels table = [] {
    OpKernels k;
#define TMEM_SET_KERNEL(name, result, params) k.name = &host::name;
    TMEM_OP_KERNELS(TMEM_SET_KERNEL)
#undef TMEM_SET_KERNEL
    for (OpId op : kDeviceOps) k.implemented[static_cast<size_t>(op)] = true;
    return k;
  }();
  return table;
}

}  // namespace tmem::test
