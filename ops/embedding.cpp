// Embedding: the checks and the one body over the kernel tables
// (ops/cpu/embedding_kernel.cpp, cuda/embedding.cu). Shapes: weight[V, D],
// indices[...] (K = numel indices) -> out[..., D]; saved for backward: the
// indices. The indices are range-checked on the host first, so every device
// throws the same IndexError before anything is read.
#include "tmem/ops/embedding.h"

#include "tmem/core/autograd.h"
#include "tmem/core/profiler.h"
#include "tmem/ops/dispatch.h"
#include "tmem/ops/op_table.h"

namespace tmem {

namespace {
using Grads = std::vector<Tensor>;
}  // namespace

Tensor embedding(const Tensor& weight, const Tensor& indices, std::optional<int64_t> padding_idx) {
  const OpRange range(OpId::Embedding);
  check<DeviceError>(weight.device() == indices.device(),
                     "embedding: expected operands on one device, but got ", weight.device().str(),
                     " and ", indices.device().str());
  check<ShapeError>(weight.dim() == 2, "embedding: expected weight of shape [V, D], but got weight",
                    shape_str(weight.shape()), " with indices", shape_str(indices.shape()));
  check<DtypeError>(indices.dtype() == DType::Int64,
                    "embedding: expected int64 indices, but got ", dtype_name(indices.dtype()));
  const int64_t V = weight.shape()[0], D = weight.shape()[1];
  check<ValueError>(!padding_idx || (*padding_idx >= -V && *padding_idx < V), "embedding: padding_idx ",
                    padding_idx.value_or(0), " is outside the ", V, " rows of weight", shape_str(weight.shape()));
  const int64_t pad = padding_idx ? (*padding_idx + V) % V : -1;
  const bool on_cpu = weight.device().is_cpu();
  Tensor idx = contiguous_data(indices);
  const int64_t K = idx.numel();
  // The range check reads the indices on the host (a device's are copied over).
  const std::vector<int64_t> host_idx = on_cpu ? std::vector<int64_t>() : idx.to_int_vector();
  const int64_t* ip = on_cpu ? idx.data<int64_t>() : host_idx.data();
  for (int64_t k = 0; k < K; ++k)
    check<IndexError>(ip[k] >= 0 && ip[k] < V, "embedding: index ", ip[k], " (at flat position ",
                      k, " of indices", shape_str(indices.shape()),
                      ") is out of range for a table of ", V, " rows (weight",
                      shape_str(weight.shape()), ")");
  Shape out_shape = indices.shape();
  out_shape.push_back(D);
  const Device dev = weight.device();
  Tensor w = contiguous_data(weight);
  Tensor out = empty(out_shape, weight.dtype(), dev);
  dispatch_kernels(OpId::Embedding, weight, [&]<class T>(const KernelTable<T>& k) {
    k.embedding_forward(dev.index, w.data<T>(), idx.data<int64_t>(), out.data<T>(), K, D);
  });
  record(OpId::Embedding, {weight, indices}, {out}, {idx}, [V, D, pad](const Node& n, const Grads& g) {
    if (!n.needs_input_grad(0)) return Grads{Tensor(), Tensor()};
    const Tensor& ix = n.saved_tensor(0);
    Tensor go = contiguous_data(g[0]);
    Tensor gw = zeros({V, D}, go.dtype(), go.device());
    dispatch_kernels(OpId::Embedding, go, [&]<class T>(const KernelTable<T>& k) {
      k.embedding_backward(go.device().index, ix.data<int64_t>(), go.data<T>(), gw.data<T>(),
                           ix.numel(), D);
    });
    if (pad >= 0) fill_data(make_view(gw, {D}, {1}, pad * D), 0.0);
    return Grads{gw, Tensor()};
  });
  return out;
}

void register_embedding_ops(std::vector<OpInfo>& t) {
  using V = std::vector<Tensor>;
  t.push_back({OpId::Embedding, {"cpu"}, {"weight"},
               {{"[5,3] table, [2,3] indices with repeats",
                 [] { return V{gc_input({5, 3}), tensor_int({4, 0, 4, 2, 2, 4}, {2, 3})}; },
                 [](const V& v) { return embedding(v[0], v[1]); }},
                {"[4,19] table (vector body + tail), 0-d index",
                 [] { return V{gc_input({4, 19}, -1, 1, 2), tensor_int({3}, {})}; },
                 [](const V& v) { return embedding(v[0], v[1]); }}}});
}

}  // namespace tmem
