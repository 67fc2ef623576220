#include "host_kernels.h"

#include "fake_device.h"

namespace tmem::test {

const OpKernels& host_op_kernels() {
  static const OpKernels table = [] {
    OpKernels k = make_fake_ops();
    k.implemented = {};
    add_elementwise_host_kernels(k);
    add_reduction_shape_host_kernels(k);
    add_nn_host_kernels(k);
    add_spatial_host_kernels(k);
    add_optim_host_kernels(k);
    add_scan_host_kernels(k);
    add_attention_host_kernels(k);
    return k;
  }();
  return table;
}

}  // namespace tmem::test
