// The CUDA kernels' arithmetic, checked on the host: the stand-in "cuda"
// backend (fake_device.h) with the host-built kernel table (host_kernels.h)
// runs every op that table implements on its op-table gradcheck cases, in
// float32, and compares the outputs and all gradients with the CPU op.
#include <algorithm>

#include "fake_device.h"
#include "host_kernels.h"
#include "tmem/ops/op_table.h"

using namespace tmem;

TEST_CASE("device kernels: every op with host-built CUDA kernels matches the CPU on its gradcheck cases") {
  test::FakeCuda fake(&test::host_op_kernels());
  int ops = 0;
  for (const OpInfo& info : op_table()) {
    if (!test::host_op_kernels().implemented[static_cast<size_t>(info.id)]) continue;
    ++ops;
    for (const OpCase& c : info.cases)
      test::check_parity(std::string(info.name()) + ": " + c.label, c.fn, test::float32_inputs(c), 1e-4,
                         info.id == OpId::ToDevice);
  }
  MESSAGE(ops << " ops have host-built CUDA kernels");
  // A new op needs its kernels here too; OpId::Custom (a program's own ops) has none.
  CHECK(ops == static_cast<int>(kOpCount) - 1);
}

TEST_CASE("device kernels: copy_ from another device sends the gradient back to the source's device") {
  // a's history once ended in a node on w's device, so backward failed with a
  // device error.
  test::FakeCuda fake(&test::host_op_kernels());
  Tensor w = tensor({1, 2}, {2});
  w.requires_grad_();
  Tensor a = zeros({2}).to(Device::cuda());
  copy_(a, w * 3.0);
  CHECK(a.device() == Device::cuda());
  Tensor back = a.cpu();
  sum(back * back).backward();
  CHECK(w.grad().device().is_cpu());
  CHECK(w.grad().to_vector() == std::vector<double>{18, 36});
}
