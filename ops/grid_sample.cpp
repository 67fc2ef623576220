// grid_sample: the shape checks and the one body over the kernel tables
// (ops/cpu/grid_sample_kernel.cpp, cuda/grid_sample.cu), and the op-table
// cases.
#include "tmem/ops/grid_sample.h"

#include <string>
#include <vector>

#include "tmem/core/autograd.h"
#include "tmem/core/grad_buffer.h"
#include "tmem/core/profiler.h"
#include "tmem/ops/dispatch.h"
#include "tmem/ops/op_table.h"

namespace tmem {

namespace {

using Grads = std::vector<Tensor>;
constexpr const char* kOp = "grid_sample";

void check_args(const Tensor& input, const Tensor& grid) {
  const Shape &si = input.shape(), &sg = grid.shape();
  // The messages (with both shapes) are built only when a check fails.
  auto require = [&](bool ok, const auto& what) {
    if (!ok)
      throw ShapeError(detail::cat(kOp, ": expected ", what, ", but got input", shape_str(si),
                                   " grid", shape_str(sg)));
  };
  require(si.size() == 4 || si.size() == 5, "a 4-D (N,C,H,W) or 5-D (N,C,D,H,W) input");
  const size_t k = si.size() - 2;
  if (sg.size() != si.size())
    require(false, detail::cat("a ", si.size(), "-D grid for a ", si.size(), "-D input"));
  if (sg.back() != static_cast<int64_t>(k))
    require(false, detail::cat("grid.shape[-1] == ", k, " for a ", si.size(), "-D input"));
  require(sg[0] == si[0], "grid.shape[0] == input.shape[0] (the batch)");
  for (size_t a = 2; a < si.size(); ++a) require(si[a] > 0, "non-empty input spatial dims");
  if (input.dtype() != grid.dtype())
    throw DtypeError(detail::cat(kOp, ": expected input and grid of one dtype, but got ",
                                 dtype_name(input.dtype()), " and ", dtype_name(grid.dtype())));
  if (!(input.device() == grid.device()))
    throw DeviceError(detail::cat(kOp, ": expected input and grid on one device, but got ",
                                  input.device().str(), " and ", grid.device().str()));
}

// The kernels' description of a call (input [N,C,(D,)H,W], grid [N,...,K]
// flattened to [N,P,K]).
GridSampleArgs kernel_args(const Shape& in, const Shape& grid, GridSampleMode mode,
                           GridSamplePadding pad, bool align) {
  GridSampleArgs a;
  a.K = static_cast<int>(in.size()) - 2;
  a.N = in[0];
  a.C = in[1];
  a.P = 1;
  for (int k = 0; k < a.K; ++k) {
    a.size[k] = in[2 + k];
    a.P *= grid[1 + k];
  }
  a.nearest = mode == GridSampleMode::Nearest;
  a.padding = static_cast<int>(pad);
  a.align_corners = align;
  return a;
}

}  // namespace

const char* grid_sample_mode_name(GridSampleMode mode) {
  return mode == GridSampleMode::Bilinear ? "bilinear" : "nearest";
}

const char* grid_sample_padding_name(GridSamplePadding pad) {
  switch (pad) {
    case GridSamplePadding::Zeros: return "zeros";
    case GridSamplePadding::Border: return "border";
    case GridSamplePadding::Reflection: return "reflection";
  }
  return "?";
}

Tensor grid_sample(const Tensor& input, const Tensor& grid, GridSampleMode mode,
                   GridSamplePadding padding_mode, bool align_corners) {
  const OpRange range(OpId::GridSample);
  check_args(input, grid);
  const Shape in_shape = input.shape(), grid_shape = grid.shape();
  const GridSampleArgs args = kernel_args(in_shape, grid_shape, mode, padding_mode, align_corners);
  Shape out_shape = {in_shape[0], in_shape[1]};
  for (int k = 0; k < args.K; ++k) out_shape.push_back(grid_shape[1 + k]);
  const Device dev = input.device();
  Tensor out = empty(out_shape, input.dtype(), dev);
  {
    Tensor x = contiguous_data(input), g = contiguous_data(grid);
    dispatch_kernels(OpId::GridSample, input, [&]<class T>(const KernelTable<T>& k) {
      k.grid_sample_forward(dev.index, args, x.data<T>(), g.data<T>(), out.data<T>());
    });
  }
  // The input's values are read only by the bilinear grid gradient.
  const bool keep_input = mode == GridSampleMode::Bilinear && grid.requires_grad();
  std::vector<Tensor> saved = {grid};
  if (keep_input) saved.push_back(input);
  record(OpId::GridSample, {input, grid}, {out}, saved,
         [args, in_shape, grid_shape](const Node& n, const Grads& g) {
           const bool need_in = n.needs_input_grad(0), need_grid = n.needs_input_grad(1);
           const Device dev = g[0].device();
           const DType dt = g[0].dtype();
           // The sparse scatter goes straight into the input's pending gradient when there is one.
           const GradBuffer buffer = need_in ? input_grad_buffer(n, 0) : GradBuffer{};
           GridSampleArgs a = args;
           a.accumulate = buffer.accumulate;
           const Tensor& gin = buffer.grad;
           Tensor ggrid = need_grid ? zeros(grid_shape, dt, dev) : Tensor();
           const bool grid_kernel = need_grid && !args.nearest;
           if (!need_in && !grid_kernel) return Grads{gin, ggrid};
           check<ValueError>(!grid_kernel || n.saved.size() > 1, kOp,
                             ": the grid gradient needs the input, which was not saved");
           Tensor gr = contiguous_data(n.saved_tensor(0));
           Tensor go = contiguous_data(g[0]);
           Tensor x = grid_kernel ? contiguous_data(n.saved_tensor(1)) : Tensor();
           dispatch_kernels(OpId::GridSample, g[0], [&]<class T>(const KernelTable<T>& k) {
             k.grid_sample_backward(dev.index, a, grid_kernel ? x.data<T>() : nullptr,
                                    gr.data<T>(), go.data<T>(), need_in ? gin.data<T>() : nullptr,
                                    grid_kernel ? ggrid.data<T>() : nullptr);
           });
           return Grads{gin, ggrid};
         });
  return out;
}

// ---- op table ----

namespace {

// A float64 grid leaf whose source indices (for input spatial sizes
// `sizes_xyz`, ordered x, y, z) cycle through `pos`: points strictly inside
// cells, at least 0.04 cells from every integer and every reflection or
// clipping kink, so the sampled function is smooth there.
Tensor smooth_grid(const Shape& shape, const std::vector<int64_t>& sizes_xyz, bool align,
                   bool requires_grad) {
  const int64_t k = shape.back();
  const int64_t count = numel_of(shape);
  std::vector<double> v(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    const int64_t j = i % k;
    const double s = static_cast<double>(sizes_xyz[static_cast<size_t>(j)]);
    // Index positions relative to the borders: outside, near and inside.
    const double pos[] = {-2.3, -1.6, -0.7, -0.3, 0.04, 0.45, 0.6,
                          1.3, s - 1.04, s - 0.7, s - 0.3, s + 0.4};
    const double src = pos[(i * 5 + j * 3) % 12];
    v[static_cast<size_t>(i)] = align ? 2 * src / (s - 1) - 1 : (2 * src + 1) / s - 1;
  }
  Tensor t = tensor(v, shape, DType::Float64);
  if (requires_grad) t.requires_grad_();
  return t;
}

}  // namespace

void register_grid_sample_ops(std::vector<OpInfo>& t) {
  using V = std::vector<Tensor>;
  using P = GridSamplePadding;
  std::vector<OpCase> cases;
  for (P pad : {P::Zeros, P::Border, P::Reflection})
    for (bool align : {false, true}) {
      const std::string tail = std::string(grid_sample_padding_name(pad)) +
                               (align ? " align_corners" : "");
      cases.push_back({"4-D bilinear " + tail,
                       [align] {
                         return V{gc_input({2, 2, 3, 4}, -1, 1, 21),
                                  smooth_grid({2, 3, 2, 2}, {4, 3}, align, true)};
                       },
                       [pad, align](const V& v) {
                         return grid_sample(v[0], v[1], GridSampleMode::Bilinear, pad, align);
                       }});
      cases.push_back({"5-D trilinear " + tail,
                       [align] {
                         return V{gc_input({1, 2, 3, 3, 4}, -1, 1, 22),
                                  smooth_grid({1, 2, 2, 2, 3}, {4, 3, 3}, align, true)};
                       },
                       [pad, align](const V& v) {
                         return grid_sample(v[0], v[1], GridSampleMode::Bilinear, pad, align);
                       }});
    }
  for (P pad : {P::Zeros, P::Reflection}) {
    cases.push_back({std::string("4-D nearest ") + grid_sample_padding_name(pad) + " (input only)",
                     [] {
                       return V{gc_input({2, 2, 3, 4}, -1, 1, 23),
                                smooth_grid({2, 3, 2, 2}, {4, 3}, false, false)};
                     },
                     [pad](const V& v) {
                       return grid_sample(v[0], v[1], GridSampleMode::Nearest, pad, false);
                     }});
  }
  cases.push_back({"5-D nearest border align_corners (input only)",
                   [] {
                     return V{gc_input({1, 2, 3, 3, 4}, -1, 1, 24),
                              smooth_grid({1, 2, 2, 2, 3}, {4, 3, 3}, true, false)};
                   },
                   [](const V& v) {
                     return grid_sample(v[0], v[1], GridSampleMode::Nearest, P::Border, true);
                   }});
  t.push_back({OpId::GridSample, {"cpu"}, {"input", "grid"}, std::move(cases)});
}

}  // namespace tmem
