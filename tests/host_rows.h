// The launchers of cuda/nn_launch.cuh on the host, for the host builds of
// the row programs (cuda/rows.cuh) and per-index functors: tests/
// host_kernels_nn.cpp and host_kernels_spatial.cpp. A row program runs with
// one thread per row when its rows are short and otherwise as the CUDA block
// per row does, on a block of host threads that exchange their partials
// through a barrier, so the block-per-row partition (each thread's strided
// elements, the combined reductions) is checked too. Only the first
// kHostBlockRows rows of a launch take the block: a barrier costs a thread
// wake-up, and model training on the stand-in device makes millions of row
// reductions; the other rows run the same program on one thread.
#pragma once
#include <algorithm>
#include <barrier>
#include <cstdint>
#include <thread>
#include <vector>

#include "tmem/cuda/rows.cuh"

namespace tmem::test {

/// Threads of a host block (any count exercises the same partition).
inline constexpr int kHostBlock = 4;
/// Rows of a launch that run on a host block; the rest take one thread each.
inline constexpr int64_t kHostBlockRows = 8;

/// A block of kHostBlock host threads running a row program over rows
/// [0, rows), as row_per_block_kernel of cuda/nn_launch.cuh does with one
/// block.
class HostBlock {
 public:
  template <class F>
  static void run(int64_t rows, const F& f) {
    HostBlock b;
    std::vector<std::thread> threads;
    for (int t = 0; t < kHostBlock; ++t)
      threads.emplace_back([&b, &f, rows, t] {
        for (int64_t r = 0; r < rows; ++r) f(r, t, kHostBlock, Reduce{&b, t});
      });
    for (std::thread& t : threads) t.join();
  }

 private:
  // The reduce of a row program: every thread's partial, combined in thread
  // order in the partial's type (float, or double for gaussian_splat's sums).
  struct Reduce {
    HostBlock* block;
    int thread;
    template <class T, class Op>
    T operator()(T v, Op op) const {
      return block->reduce(thread, v, op);
    }
  };

  template <class T, class Op>
  T reduce(int thread, T v, Op op) {
    parts_[thread] = static_cast<double>(v);  // exact for float and double
    barrier_.arrive_and_wait();
    T s = Op::identity();
    for (double p : parts_) s = op(s, static_cast<T>(p));
    barrier_.arrive_and_wait();  // parts_ is reused by the next call
    return s;
  }

  double parts_[kHostBlock] = {};
  std::barrier<> barrier_{kHostBlock};
};

/// launch_rows of cuda/nn_launch.cuh on the host: rows of at most
/// cuda::kShortRow elements one thread each; longer ones the block per row,
/// its first kHostBlockRows rows on a HostBlock.
template <class F>
void run_rows(int64_t rows, int64_t len, const F& f) {
  int64_t r = 0;
  if (len > cuda::kShortRow) {
    r = std::min(rows, kHostBlockRows);
    if (r > 0) HostBlock::run(r, f);
  }
  for (; r < rows; ++r) f(r, 0, 1, cuda::OneThread{});
}

/// launch_index of cuda/nn_launch.cuh on the host.
template <class F>
void run_index(int64_t n, const F& f) {
  for (int64_t i = 0; i < n; ++i) f(i);
}

}  // namespace tmem::test
