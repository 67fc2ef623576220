// The stand-in "cuda" backend of the device tests: device memory is host
// memory, so everything but the CUDA kernels themselves runs without a GPU.
// tests/test_device.cpp checks the plumbing with it (Tensor::to, dispatch,
// launch arguments); tests/test_device_kernels.cpp runs the host build of the
// kernels' own arithmetic (tests/host_kernels.h) through it.
#pragma once
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "tmem/core/device_backend.h"
#include "tmem/ops/dispatch.h"
#include "test_util.h"

namespace tmem::test {

inline AllocatorStats g_fake_stats;

inline int fake_count() { return 1; }
inline void* fake_allocate(int, size_t n) {
  g_fake_stats.in_use += n;
  g_fake_stats.peak_in_use = std::max(g_fake_stats.peak_in_use, g_fake_stats.in_use);
  return std::malloc(n > 0 ? n : 1);
}
inline void fake_release(int, void* p, size_t n) noexcept {
  g_fake_stats.in_use -= n;
  std::free(p);
}
inline void fake_memcpy(int, void* dst, const void* src, size_t n) { std::memcpy(dst, src, n); }
inline void fake_copy_between(int, void* dst, int, const void* src, size_t n) { std::memcpy(dst, src, n); }

inline double load(const void* p, DType t, int64_t i) {
  switch (t) {
    case DType::Float32: return static_cast<const float*>(p)[i];
    case DType::Float64: return static_cast<const double*>(p)[i];
    default: return static_cast<double>(static_cast<const int64_t*>(p)[i]);
  }
}
inline void store(void* p, DType t, int64_t i, double v) {
  switch (t) {
    case DType::Float32: static_cast<float*>(p)[i] = static_cast<float>(v); break;
    case DType::Float64: static_cast<double*>(p)[i] = v; break;
    default: static_cast<int64_t*>(p)[i] = static_cast<int64_t>(v); break;
  }
}
// f(offsets) for every element of a, as a device kernel would visit them.
template <size_t N, class F>
void each(const StridedArgs<N>& a, F f) {
  for (int64_t i = 0; i < a.numel; ++i) {
    int64_t off[N] = {}, r = i;
    for (int d = a.ndim - 1; d >= 0; --d) {
      const int64_t idx = r % a.shape[d];
      r /= a.shape[d];
      for (size_t j = 0; j < N; ++j) off[j] += idx * a.strides[j][d];
    }
    f(off);
  }
}
inline void fake_copy(int, const StridedArgs<2>& a, DType dt, DType st) {
  each(a, [&](const int64_t* o) { store(a.data[0], dt, o[0], load(a.data[1], st, o[1])); });
}
inline void fake_fill(int, const StridedArgs<1>& a, DType t, double v) {
  each(a, [&](const int64_t* o) { store(a.data[0], t, o[0], v); });
}
inline void fake_accumulate(int, const StridedArgs<2>& a, DType t) {
  each(a, [&](const int64_t* o) {
    store(a.data[0], t, o[0], load(a.data[0], t, o[0]) + load(a.data[1], t, o[1]));
  });
}
inline void fake_sync(int) {}
inline AllocatorStats fake_stats(int) { return g_fake_stats; }
inline void fake_reset_peak(int) { g_fake_stats.peak_in_use = g_fake_stats.in_use; }
inline void fake_empty_cache(int) {}

// Host versions of the kernels matmul, sum and mean use, reading the launch
// arguments exactly as OpKernels documents them.
inline void fake_unary_forward(int, OpId op, UnaryParams p, const StridedArgs<2>& a) {
  REQUIRE(op == OpId::MulScalar);
  each(a, [&](const int64_t* o) {
    static_cast<float*>(a.data[0])[o[0]] = static_cast<const float*>(a.data[1])[o[1]] * static_cast<float>(p.a);
  });
}
inline void fake_sum_rows(int, const float* x, float* out, int64_t rows, int64_t len, double scale) {
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0;
    for (int64_t j = 0; j < len; ++j) s += x[r * len + j];
    out[r] = static_cast<float>(s * scale);
  }
}
// out[j] = scale * sum of column j, as ops/kernel_list.h documents sum_columns.
inline void fake_sum_columns(int, const float* x, float* out, int64_t rows, int64_t cols, double scale) {
  for (int64_t j = 0; j < cols; ++j) {
    double s = 0;
    for (int64_t i = 0; i < rows; ++i) s += x[i * cols + j];
    out[j] = static_cast<float>(s * scale);
  }
}
inline void fake_gemm(const GemmArgs<float>& g) {
  REQUIRE(g.lda >= (g.a_col_major ? g.m : g.k));
  REQUIRE(g.ldb >= (g.b_col_major ? g.k : g.n));
  auto at = [](const float* p, bool col_major, int64_t ld, int64_t r, int64_t q) {
    return col_major ? p[r + q * ld] : p[r * ld + q];
  };
  for (int64_t i = 0; i < g.outer * g.batch; ++i) {
    const float* a = g.a + i / g.batch * g.outer_a + i % g.batch * g.stride_a;
    const float* b = g.b + i / g.batch * g.outer_b + i % g.batch * g.stride_b;
    for (int64_t r = 0; r < g.m; ++r)
      for (int64_t q = 0; q < g.n; ++q) {
        double s = 0;
        for (int64_t k = 0; k < g.k; ++k)
          s += static_cast<double>(at(a, g.a_col_major, g.lda, r, k)) * at(b, g.b_col_major, g.ldb, k, q);
        g.c[i * g.m * g.n + r * g.n + q] = static_cast<float>(s);
      }
  }
}

inline OpKernels make_fake_ops() {
  OpKernels k{};
  for (OpId op : {OpId::Matmul, OpId::Sum, OpId::Mean}) k.implemented[static_cast<size_t>(op)] = true;
  k.unary_forward = &fake_unary_forward;
  k.sum_rows = &fake_sum_rows;
  k.sum_columns = &fake_sum_columns;
  k.gemm = &fake_gemm;
  return k;
}
inline const OpKernels kFakeOps = make_fake_ops();

// The stand-in "cuda" backend with op kernels `ops` (null: none).
inline DeviceBackend fake_backend(const OpKernels* ops) {
  return {"cuda",         &fake_count,      &fake_allocate,   &fake_release,
          &fake_memcpy,   &fake_memcpy,     &fake_copy_between, &fake_copy,
          &fake_fill,     &fake_accumulate, &fake_sync,       &fake_stats,
          &fake_reset_peak, &fake_empty_cache, ops};
}

// Installs fake_backend(ops) for its lifetime, then restores the real
// backend.
struct FakeCuda {
  DeviceBackend backend;
  const DeviceBackend* prev;
  explicit FakeCuda(const OpKernels* ops = nullptr)
      : backend(fake_backend(ops)), prev(register_device_backend(Device::Kind::CUDA, &backend)) {}
  ~FakeCuda() { register_device_backend(Device::Kind::CUDA, prev); }
  FakeCuda(const FakeCuda&) = delete;
  FakeCuda& operator=(const FakeCuda&) = delete;
};

// f on CPU inputs and on "cuda" copies of them: the outputs and the
// gradients of every input that requires grad must agree to
// |dev - cpu| <= tol + tol |cpu|. Inputs keep their dtype (indices stay
// int64); the output must be on the device unless `any_device`.
inline void check_parity(const std::string& what, const std::function<Tensor(const std::vector<Tensor>&)>& f,
                         const std::vector<Tensor>& cpu, double tol = 1e-5, bool any_device = false) {
  INFO(what);
  std::vector<Tensor> dev;
  for (const Tensor& t : cpu) {
    if (!t.defined()) {
      dev.push_back(t);
      continue;
    }
    Tensor d = t.detach().to(Device::cuda());
    if (t.requires_grad()) d.requires_grad_();
    dev.push_back(d);
  }
  Tensor yc = f(cpu), yd = f(dev);
  if (!any_device) CHECK(yd.device() == Device::cuda());
  REQUIRE(yd.shape() == yc.shape());
  test::check_close(yd.to_vector(), yc.to_vector(), tol, tol);
  if (!yc.requires_grad()) return;
  Generator gen(99);
  Tensor go = rand(yc.shape(), -1.0, 1.0, yc.dtype(), gen);
  yc.backward(go);
  yd.backward(go.to(yd.device()));
  for (size_t i = 0; i < cpu.size(); ++i) {
    if (!cpu[i].defined() || !cpu[i].requires_grad() || !cpu[i].grad().defined()) continue;
    INFO("gradient of input " << i);
    REQUIRE(dev[i].grad().defined());
    CHECK(dev[i].grad().device() == Device::cuda());
    test::check_close(dev[i].grad().to_vector(), cpu[i].grad().to_vector(), tol, tol);
  }
}

// check_parity on float32 U[-1, 1) inputs of the given shapes, all requiring
// grad (seeds 1, 2, ...).
inline void check_parity(const std::string& what, const std::function<Tensor(const std::vector<Tensor>&)>& f,
                         const std::vector<Shape>& shapes) {
  std::vector<Tensor> cpu;
  uint64_t seed = 1;
  for (const Shape& s : shapes) {
    Generator gen(seed++);
    Tensor t = rand(s, -1.0, 1.0, DType::Float32, gen);
    t.requires_grad_();
    cpu.push_back(t);
  }
  check_parity(what, f, cpu);
}

}  // namespace tmem::test
