// Copies between host and device, strided copies with dtype conversion,
// fills and the gradient accumulation of core (DeviceBackend's memory
// functions). Kernels first, then launchers. Shapes: StridedArgs, any rank up
// to kMaxDims after merging.
#include <cstdint>

#include "tmem/core/error.h"
#include "tmem/cuda/check.h"
#include "tmem/cuda/kernels.h"
#include "tmem/cuda/strided.cuh"

namespace tmem::cuda {

namespace {

// ---- kernels (element functors for strided_kernel) ----

template <class D, class S>
struct CopyOp {
  __device__ void operator()(const StridedArgs<2>& a, const int64_t (&o)[2]) const {
    static_cast<D*>(a.data[0])[o[0]] = static_cast<D>(static_cast<const S*>(a.data[1])[o[1]]);
  }
};

template <class T>
struct FillOp {
  T value;
  __device__ void operator()(const StridedArgs<1>& a, const int64_t (&o)[1]) const {
    static_cast<T*>(a.data[0])[o[0]] = value;
  }
};

template <class T>
struct AccumulateOp {
  __device__ void operator()(const StridedArgs<2>& a, const int64_t (&o)[2]) const {
    static_cast<T*>(a.data[0])[o[0]] += static_cast<const T*>(a.data[1])[o[1]];
  }
};

// Calls f.template operator()<T>() with T the C++ type of `type`.
template <class F>
void with_type(DType type, F&& f) {
  switch (type) {
    case DType::Float32: return f.template operator()<float>();
    case DType::Float64: return f.template operator()<double>();
    case DType::Int64: return f.template operator()<int64_t>();
  }
}

template <class D>
struct CopyFrom {
  int device;
  const StridedArgs<2>& args;
  template <class S>
  void operator()() const { launch_strided(device, args, CopyOp<D, S>{}); }
};

struct CopyTo {
  int device;
  const StridedArgs<2>& args;
  DType src_type;
  template <class D>
  void operator()() const { with_type(src_type, CopyFrom<D>{device, args}); }
};

struct FillWith {
  int device;
  const StridedArgs<1>& args;
  double value;
  template <class T>
  void operator()() const { launch_strided(device, args, FillOp<T>{static_cast<T>(value)}); }
};

}  // namespace

// ---- launchers ----

void copy_from_host(int device, void* dst, const void* src, size_t n) {
  DeviceGuard guard(device);
  TMEM_CUDA_CHECK(cudaMemcpy(dst, src, n, cudaMemcpyHostToDevice));
}

void copy_to_host(int device, void* dst, const void* src, size_t n) {
  DeviceGuard guard(device);
  TMEM_CUDA_CHECK(cudaMemcpy(dst, src, n, cudaMemcpyDeviceToHost));
}

void copy_between(int dst_device, void* dst, int src_device, const void* src, size_t n) {
  DeviceGuard guard(dst_device);
  TMEM_CUDA_CHECK(cudaMemcpyPeer(dst, dst_device, src, src_device, n));
}

void copy(int device, const StridedArgs<2>& args, DType dst_type, DType src_type) {
  with_type(dst_type, CopyTo{device, args, src_type});
}

void fill(int device, const StridedArgs<1>& args, DType type, double value) {
  with_type(type, FillWith{device, args, value});
}

void accumulate(int device, const StridedArgs<2>& args, DType type) {
  switch (type) {
    case DType::Float32: return launch_strided(device, args, AccumulateOp<float>{});
    case DType::Float64: return launch_strided(device, args, AccumulateOp<double>{});
    default: throw DtypeError("accumulate_grad: expected a floating dtype on cuda, but got int64");
  }
}

void synchronize(int device) {
  DeviceGuard guard(device);
  TMEM_CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace tmem::cuda
