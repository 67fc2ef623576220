// Tensor: a shared handle to Storage + shape + strides + offset + dtype +
// device + autograd meta (docs/DESIGN.md §2). Copying a Tensor copies the handle,
// not the data. Views share storage and the storage's version counter.
#pragma once
#include <atomic>
#include <concepts>
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tmem/core/dtype.h"
#include "tmem/core/error.h"
#include "tmem/core/shape.h"

namespace tmem {

struct Node;
struct DeviceBackend;

/// A flat buffer on one device, with the version counter shared by every
/// view of it (bumped by each in-place write; see autograd saved tensors).
/// CPU storage comes from the CPU caching allocator, device storage from the
/// device backend's allocator (core/device_backend.h).
struct Storage {
  void* data = nullptr;
  size_t nbytes = 0;
  Device device;
  const DeviceBackend* backend = nullptr;  // the one that allocated data; null on the CPU
  bool owned = true;                       // false: borrowed host memory (from_blob), never freed here
  std::atomic<uint64_t> version{0};
  /// Bumped when an in-place op gives the tensor on this storage a new
  /// autograd history (commit_inplace); views made before then re-base.
  std::atomic<uint64_t> history{0};

  /// nbytes on `device`. Throws DeviceError naming `op` when the device is
  /// not available (no backend in this build, no such device).
  Storage(size_t nbytes, Device device, const char* op);
  /// Borrows nbytes of host memory at `data` (from_blob): the caller keeps
  /// ownership, and the storage never frees it.
  Storage(void* data, size_t nbytes);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
};

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape shape;
  Shape strides;      // in elements
  int64_t offset = 0; // in elements
  DType dtype = DType::Float32;
  bool requires_grad = false;
  bool is_view = false;
  std::shared_ptr<TensorImpl> grad;  // leaf gradient, accumulated by accumulate_grad
  std::shared_ptr<Node> grad_fn;     // the node that made this tensor (null for leaves)
  int output_nr = 0;                 // which output of grad_fn this is
  /// For the output of a view op (set by record): the tensor it was taken
  /// from (the first of a chain of views) and Storage::history then. When an
  /// in-place op has since given the base a new history, the view's own is
  /// stale and is rebuilt from the base's on its next use (Tensor::sync_view).
  std::shared_ptr<TensorImpl> view_base;
  uint64_t view_history = 0;

  TensorImpl();
  ~TensorImpl();
  TensorImpl(const TensorImpl&) = delete;
  TensorImpl& operator=(const TensorImpl&) = delete;
};

/// Number of TensorImpl objects alive in the process (for leak tests).
int64_t live_tensor_count();

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl().shape; }
  const Shape& strides() const { return impl().strides; }
  int64_t offset() const { return impl().offset; }
  /// Size of dim (negative counts from the end); throws IndexError.
  int64_t size(int64_t dim) const;
  int64_t dim() const { return static_cast<int64_t>(impl().shape.size()); }
  int64_t numel() const { return numel_of(impl().shape); }
  DType dtype() const { return impl().dtype; }
  Device device() const { return impl().storage->device; }
  bool is_contiguous() const;
  bool is_leaf() const {
    sync_view();
    return impl().grad_fn == nullptr;
  }

  /// Typed pointer to element [0,...,0] (CPU or device memory). Throws
  /// DtypeError when T does not match the dtype.
  template <class T>
  T* data() const {
    check<DtypeError>(dtype_of<T>() == dtype(), "data<", dtype_name(dtype_of<T>()),
                      ">: tensor has dtype ", dtype_name(dtype()));
    return static_cast<T*>(impl().storage->data) + impl().offset;
  }
  void* raw_data() const {
    return static_cast<char*>(impl().storage->data) + impl().offset * dtype_size(dtype());
  }

  /// The single value of a one-element tensor, as double (copied from the
  /// device when t is not on the CPU). Throws ValueError.
  double item() const;
  /// The single value of a one-element int64 tensor, exactly (item() rounds
  /// values beyond 2^53 to a double). Throws ValueError for another element
  /// count, DtypeError for another dtype.
  int64_t item_int() const;
  /// All elements in row-major order, as double (any layout and device; a
  /// device tensor is copied to the host first).
  std::vector<double> to_vector() const;
  /// All elements of an int64 tensor in row-major order (any device).
  std::vector<int64_t> to_int_vector() const;

  // ---- devices ----
  /// This tensor on `device`: itself when already there, else a contiguous
  /// copy. Differentiable (op "to_device"): the gradient goes back to this
  /// tensor's device. Throws DeviceError naming "to" when `device` is not
  /// available in this build or on this machine.
  Tensor to(Device device) const;
  /// to(Device::cpu()).
  Tensor cpu() const { return to(Device::cpu()); }
  /// Replaces this leaf's data (storage, strides, offset) with src's data,
  /// keeping the tensor itself: every handle to it, an optimizer's included,
  /// sees the new data and device; views made of the old data keep the old
  /// data (PyTorch's `t.data = src`); it is no view afterwards, of src's
  /// base or of its own former base. src needs this tensor's shape; its
  /// device and dtype become this tensor's (a gradient already held keeps
  /// its own: the next backward refuses to add a gradient of another dtype
  /// or device to it); its autograd history is not taken. Throws ShapeError,
  /// DtypeError for int64 data into a tensor that requires grad, or
  /// ValueError for a non-leaf.
  void set_data(const Tensor& src) const;

  // ---- autograd ----
  bool requires_grad() const {
    sync_view();
    return impl().requires_grad;
  }
  /// Re-bases a view whose base an in-place op has given a new autograd
  /// history since the view was taken (PyTorch does the same): the view's
  /// history becomes a strided window of the base's current one, so its
  /// gradient goes through that op. Called by requires_grad() and is_leaf(),
  /// so every op input and backward root is current. Throws ValueError for a
  /// view with a broadcast (stride-0) dim or of a non-contiguous base.
  void sync_view() const {
    const TensorImpl& i = impl();
    if (i.view_base && i.view_history != i.storage->history.load(std::memory_order_relaxed))
      rebase_view();
  }
  /// Marks a leaf as needing a gradient (PyTorch requires_grad_). Throws
  /// ValueError on a non-leaf or an int64 tensor.
  Tensor& requires_grad_(bool on = true);
  /// The accumulated gradient of a leaf (undefined before any backward).
  Tensor grad() const { return impl().grad ? Tensor(impl().grad) : Tensor(); }
  void zero_grad() const { impl().grad.reset(); }
  /// A tensor sharing storage (and version counter) with no autograd history.
  Tensor detach() const;
  /// Runs reverse-mode autodiff from this tensor (see core/autograd.h).
  void backward(const Tensor& grad_output = Tensor(), bool retain_graph = false) const;
  /// Storage version counter (bumped by in-place writes).
  uint64_t version() const { return impl().storage->version.load(); }
  /// Marks an in-place write to this tensor's storage.
  void bump_version() const { impl().storage->version.fetch_add(1); }

  TensorImpl& impl() const {
    check<ValueError>(impl_ != nullptr, "use of an undefined tensor");
    return *impl_;
  }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  std::string str() const;  // "Tensor[2,3] float32 cpu"

 private:
  void rebase_view() const;  // core/autograd.cpp
  std::shared_ptr<TensorImpl> impl_;
};

// ---- factories (CPU unless a device is given) ----
/// Uninitialised contiguous tensor. Throws ShapeError naming `op` (the
/// factory called: rand, randn, ...) and the shape for a negative dim or a
/// size whose element or byte count overflows int64; OutOfMemoryError naming
/// the dtype, shape and device when the device has no memory for it.
Tensor empty(const Shape& shape, DType dtype = DType::Float32, Device device = Device::cpu(), const char* op = "empty");
Tensor zeros(const Shape& shape, DType dtype = DType::Float32, Device device = Device::cpu());
Tensor ones(const Shape& shape, DType dtype = DType::Float32, Device device = Device::cpu());
/// A tensor filled with `value` cast to dtype (an int64 tensor holds the
/// double's value: use full_int for integers beyond 2^53). Throws
/// ValueError for an int64 dtype and a value that is not finite or outside
/// int64's range (as tensor() and fill_data).
Tensor full(const Shape& shape, double value, DType dtype = DType::Float32,
            Device device = Device::cpu());
/// An int64 tensor filled with `value` exactly.
Tensor full_int(const Shape& shape, int64_t value, Device device = Device::cpu());
/// A tensor of the given shape holding `values` (row-major). Throws ShapeError
/// when the counts differ.
Tensor tensor(const std::vector<double>& values, const Shape& shape, DType dtype = DType::Float32);
Tensor tensor_int(const std::vector<int64_t>& values, const Shape& shape);
/// A copy of a std::vector<float> (float32) or std::vector<int64_t> (int64)
/// with the given shape (libtorch torch::tensor(vector).reshape(shape)).
/// Throws ShapeError when the counts differ. A template, so that a braced
/// list `tensor({1, 2}, {2})` still means the float64-valued overload above.
template <class T>
  requires std::same_as<T, float> || std::same_as<T, int64_t>
Tensor tensor(const std::vector<T>& values, const Shape& shape);
/// The same as a 1-D tensor [N].
template <class T>
  requires std::same_as<T, float> || std::same_as<T, int64_t>
Tensor tensor(const std::vector<T>& values) {
  return tensor(values, Shape{static_cast<int64_t>(values.size())});
}
/// A tensor over host memory the caller owns (libtorch from_blob): no copy
/// is made and the memory is never freed by tmem. `data` must hold
/// numel(shape) contiguous row-major elements of `dtype`, suitably aligned,
/// and must outlive the tensor and every tensor sharing its storage (views,
/// tensors autograd saved for backward); writes through either side are seen
/// by the other. contiguous_data or clone it to get an owning copy. Throws
/// ValueError for a null `data` with a non-empty shape, ShapeError for a
/// negative dim.
Tensor from_blob(void* data, const Shape& shape, DType dtype = DType::Float32);
/// 1-D tensor start, start+step, ... < end: ceil((end - start) / step)
/// values start + i * step (PyTorch torch.arange). Throws ValueError for
/// step 0, a non-finite start, end or step, a count whose bytes an int64
/// cannot count, and int64 values outside int64's range.
Tensor arange(double start, double end, double step = 1.0, DType dtype = DType::Float32);
/// arange(0, end).
Tensor arange(double end, DType dtype = DType::Float32);
/// The int64 arange, exact for every int64 start, end and step (PyTorch's
/// torch.arange of integers): ceil((end - start) / step) values start + i *
/// step. Throws ValueError for step 0 and a count whose bytes an int64
/// cannot count.
Tensor arange_int(int64_t start, int64_t end, int64_t step = 1);
/// `steps` evenly spaced values from start to end inclusive (PyTorch
/// torch.linspace): with step = (end - start) / (steps - 1), value i is
/// start + i * step for i < steps / 2 and end - (steps - 1 - i) * step after
/// (PyTorch's split, so both ends are exact), computed in double and rounded
/// once to the dtype. PyTorch computes float32 in float32, in vector lanes,
/// so its values can differ from these in the last bit. steps 1 gives
/// [start], 0 an empty tensor; int64 values are truncated toward zero.
/// Throws ValueError for steps < 0.
Tensor linspace(double start, double end, int64_t steps, DType dtype = DType::Float32);
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor empty_like(const Tensor& t);

/// A view of t with new shape/strides/offset over the same storage (no
/// autograd; ops/shape.h provides the differentiable views).
Tensor make_view(const Tensor& t, Shape shape, Shape strides, int64_t offset);
/// A contiguous copy of t's data with no autograd history (returns t's own
/// data when already contiguous).
Tensor contiguous_data(const Tensor& t);
/// t's data viewed with a new shape of the same numel (copies only when t is
/// not contiguous); no autograd. Throws ShapeError on a numel mismatch.
Tensor reshape_data(const Tensor& t, const Shape& shape);
/// Copies src's data into dst (same shape, any strides, any dtype pair, any
/// devices: a src on another device is copied over first); bumps dst's
/// version. No autograd.
void copy_data(const Tensor& dst, const Tensor& src);
/// Fills every element of t with value (any device); bumps the version.
/// Throws ValueError when t is int64 and value does not fit it (NaN, inf,
/// beyond +-2^63).
void fill_data(const Tensor& t, double value);
/// Writes t's values as PyTorch's repr does (torch/_tensor_str.py with the
/// default printoptions: precision 4, line width 80, integer / fixed /
/// scientific notation chosen from the values): "tensor([[1., 2.],\n        [3., 4.]])",
/// with a dtype= suffix for float64, device= off the CPU, grad_fn=<op> or
/// requires_grad=True. A tensor of more than 1000 elements is summarized
/// with "..." after the first and before the last 3 entries of every dim,
/// and then (unlike PyTorch) also names its size=(...). An empty tensor
/// prints "tensor([])" (with its size unless 1-d), an undefined one
/// "tensor(undefined)". Device tensors are copied to the host first.
std::ostream& operator<<(std::ostream& os, const Tensor& t);

/// The gate of every op that has only a CPU kernel: throws DeviceError
/// "<op>: the cuda backend has no kernel for this op (...)" unless t is on the CPU.
void check_cpu(const Tensor& t, const char* op);

/// Throws ValueError "<op>: value <v> cannot be converted to int64 without
/// overflow" unless value is finite and inside int64's range (where a cast
/// toward zero is defined).
void check_int64_value(double value, const char* op);

}  // namespace tmem
