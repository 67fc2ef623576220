// The tape (docs/DESIGN.md §3). Each differentiable op, when grad mode is on and an
// input requires grad, records a Node {op id, input edges, saved tensors,
// backward function}. Nodes are numbered in creation order; backward() walks
// the nodes reachable from the loss in reverse creation order (iteratively,
// never recursively), routes every gradient through accumulate_grad, and then
// frees the nodes unless retain_graph was asked for.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tmem/core/op_id.h"
#include "tmem/core/tensor.h"

namespace tmem {

struct Node;

/// Where a gradient goes: output `output_nr` of node `fn`, or a leaf tensor.
struct Edge {
  std::shared_ptr<Node> fn;
  int output_nr = 0;
  std::shared_ptr<TensorImpl> leaf;
  bool valid() const { return fn != nullptr || leaf != nullptr; }
};

/// A tensor saved for backward, with the storage version it had when saved;
/// a mismatch at backward time means it was modified in place.
struct SavedTensor {
  Tensor data;
  uint64_t version = 0;
};

/// Backward of one node: given the gradients of the node's outputs (one per
/// output, zeros where an output got none), returns one gradient per input
/// (undefined where `node.needs_input_grad(i)` is false). Runs in no-grad mode.
using BackwardFn = std::function<std::vector<Tensor>(const struct Node&, const std::vector<Tensor>&)>;

struct Node {
  OpId op;
  uint64_t seq = 0;                  // creation order
  std::vector<Edge> next;            // one per op input
  std::vector<Shape> input_shapes;   // to check returned gradients
  std::vector<DType> input_dtypes;
  std::vector<Device> input_devices;
  std::vector<Shape> output_shapes;
  std::vector<DType> output_dtypes;
  Device device;
  std::vector<SavedTensor> saved;
  BackwardFn backward;
  bool released = false;

  Node();
  ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  bool needs_input_grad(size_t i) const { return i < next.size() && next[i].valid(); }
  /// The i-th saved tensor (its version was checked before backward ran).
  const Tensor& saved_tensor(size_t i) const { return saved.at(i).data; }
  std::string name() const;  // "sigmoid (node #12)"
};

/// Nodes alive in the process: the tape's size. Zero once every graph has
/// been backpropagated (without retain_graph) and its tensors dropped.
int64_t live_node_count();

/// Whether ops record nodes (thread-local; on by default).
bool grad_enabled();
/// Sets whether ops record nodes on this thread (PyTorch's
/// torch.set_grad_enabled called as a function); NoGradGuard and the Python
/// context managers restore the mode they found.
void set_grad_enabled(bool enabled);
/// Disables recording for its lifetime (PyTorch torch.no_grad()).
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;
 private:
  bool prev_;
};

/// Anomaly mode (thread-local, off by default): every recorded op's outputs
/// are checked for NaN and every backward's gradients for NaN/Inf, and a
/// ValueError names the op and its node number. Outputs may hold Inf: -inf
/// attention masks (masked_fill) and log(0) are meant; an Inf that matters
/// turns into a NaN or an Inf gradient further on.
bool anomaly_enabled();
class AnomalyModeGuard {
 public:
  explicit AnomalyModeGuard(bool on = true);
  ~AnomalyModeGuard();
  AnomalyModeGuard(const AnomalyModeGuard&) = delete;
  AnomalyModeGuard& operator=(const AnomalyModeGuard&) = delete;
 private:
  bool prev_;
};

/// True when grad mode is on and any of `inputs` requires grad.
bool needs_grad(std::initializer_list<Tensor> inputs);
bool needs_grad(const std::vector<Tensor>& inputs);

/// Records `op` on the tape if needs_grad(inputs): makes a node whose edges
/// point at the inputs' histories, saves `saved`, and makes each output a
/// non-leaf with this node as grad_fn. Outputs must be freshly made tensors.
/// An op written outside tmem records itself as OpId::Custom
/// (examples/custom_op.cpp).
/// An output that is a view of an input (same storage) remembers that input
/// as its base, recorded or not, so that an in-place op on the base later
/// re-bases it (Tensor::sync_view). Stale view inputs are re-based before
/// the node is made, so their new nodes precede it.
/// Returns the node (null when nothing was recorded). In anomaly mode the
/// outputs are checked for NaN.
std::shared_ptr<Node> record(OpId op, const std::vector<Tensor>& inputs,
                             const std::vector<Tensor>& outputs, const std::vector<Tensor>& saved,
                             BackwardFn backward);

/// Adds `grad` into leaf `leaf`'s .grad: the one place gradients meet
/// parameters. Throws ShapeError/DtypeError/DeviceError naming `op` when the
/// gradient's shape, dtype or device differs from the leaf's.
void accumulate_grad(TensorImpl& leaf, const Tensor& grad, const char* op);

/// Runs backward from `root` (see Tensor::backward). grad_output may be
/// undefined only for a one-element root. Throws ValueError when root does not
/// require grad or when the graph was freed by an earlier backward.
void backward(const Tensor& root, const Tensor& grad_output = Tensor(), bool retain_graph = false);

/// The gradients of root with respect to each of inputs (torch.autograd.grad):
/// backward from root (grad_output as for backward), summed per input, with
/// no leaf's .grad changed and no leaf hook run (non-leaf tensors' hooks
/// run). An input may be a leaf or an intermediate tensor. Frees the graph
/// unless retain_graph; the gradients carry no history (no create_graph).
/// Throws ValueError for an input that does not require grad, and for one
/// the root does not depend on unless allow_unused (its entry is then an
/// undefined Tensor), and as backward for the root.
std::vector<Tensor> grad(const Tensor& root, const std::vector<Tensor>& inputs, const Tensor& grad_output = Tensor(),
                         bool retain_graph = false, bool allow_unused = false);

/// Finishes an in-place op on `self`: copies `result` into self's storage,
/// bumps the version, and (in grad mode, when self or result needs grad)
/// makes result's history self's. A view's write becomes its base's history
/// instead (a copy_slices node, PyTorch's CopySlices: the base's old history
/// gets the gradient outside the view's window, result the window's).
/// Views taken of self (or of its base) before then re-base on their next
/// use (Tensor::sync_view). Throws ShapeError when result's shape is not
/// self's (an operand that broadcasts past self), ValueError for self with
/// several elements at one memory location (a stride 0 along a dim of size
/// > 1: an expand; strides that overlap, as a NumPy as_strided window's), a
/// leaf that requires grad or a view of one (in grad mode), or a view that
/// needs grad whose base is not contiguous.
void commit_inplace(const Tensor& self, const Tensor& result, const char* op);

/// Throws ValueError naming `what` if t has NaN or (unless allow_inf) Inf
/// (floating tensors on any device; a device tensor is copied to the host to
/// be checked).
void check_finite(const Tensor& t, const std::string& what, bool allow_inf = false);

}  // namespace tmem
