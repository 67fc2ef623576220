// End-to-end training through the C++ API: memory stays flat over many steps
// (the tape is freed after each backward), and a small regression converges.
#include "core/allocator.h"
#include "test_util.h"

using namespace tmem;

TEST_CASE("10,000 MLP training steps keep the tape and live tensors flat") {
  Generator gen(3);
  Tensor x = randn({16, 8}, 0, 1, DType::Float32, gen);
  Tensor target = sum(x * x, {1}, true) * 0.1;
  Tensor w1 = randn({8, 16}, 0, 0.3, DType::Float32, gen);
  Tensor b1 = zeros({16});
  Tensor w2 = randn({16, 1}, 0, 0.3, DType::Float32, gen);
  std::vector<Tensor*> params{&w1, &b1, &w2};
  for (Tensor* p : params) p->requires_grad_();

  const int64_t nodes_before = live_node_count();
  int64_t tensors_after_first = -1;
  size_t bytes_after_first = 0;
  double first_loss = 0, last_loss = 0;
  for (int step = 0; step < 10000; ++step) {
    {
      Tensor pred = matmul(tanh(matmul(x, w1) + b1), w2);
      Tensor loss = mean(pow(pred - target, 2.0));
      loss.backward();
      (step == 0 ? first_loss : last_loss) = loss.item();
      NoGradGuard no_grad;
      for (Tensor* p : params) {
        add_(*p, p->grad() * -0.05);
        p->zero_grad();
      }
    }
    REQUIRE(live_node_count() == nodes_before);
    if (step == 0) {
      tensors_after_first = live_tensor_count();
      bytes_after_first = cpu_allocator_stats().in_use;
    }
    REQUIRE(live_tensor_count() == tensors_after_first);
    REQUIRE(cpu_allocator_stats().in_use == bytes_after_first);
  }
  CHECK(last_loss < 0.2 * first_loss);
}

TEST_CASE("nodes are freed after backward even while the loss tensor is alive") {
  Tensor w = ones({4});
  w.requires_grad_();
  const int64_t before = live_node_count();
  Tensor loss = sum(exp(w * 2.0));
  CHECK(live_node_count() == before + 3);
  loss.backward();
  // The root keeps its own (released) node; its inputs' nodes are gone.
  CHECK(live_node_count() == before + 1);
}

TEST_CASE("the caching allocator reuses freed blocks of the same size class") {
  cpu_empty_cache();
  const size_t base = cpu_allocator_stats().in_use;
  void* p = cpu_allocate(3000);
  CHECK(cpu_allocator_stats().in_use == base + 4096);
  CHECK(reinterpret_cast<uintptr_t>(p) % 64 == 0);
  cpu_release(p, 3000);
  CHECK(cpu_allocator_stats().cached == 4096);
  void* q = cpu_allocate(4000);  // same class: the cached block comes back
  CHECK(q == p);
  cpu_release(q, 4000);
  cpu_empty_cache();
  CHECK(cpu_allocator_stats().cached == 0);
}
