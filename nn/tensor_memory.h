// The Tensor Memory layer (Swain et al. 2026, arXiv 2605.27686; docs/DESIGN.md §7):
// a fixed-size recurrent 3-D state (h, c), each [B, Cm, D, H, W], that tokens
// read by trilinear sampling at predicted coordinates and write with Gaussian
// soft writes, updated by a ConvLSTM3D cell once per chunk of K tokens.
#pragma once
#include <memory>
#include <vector>

#include "tmem/core/rng.h"
#include "tmem/nn/linear.h"
#include "tmem/nn/module.h"
#include "tmem/ops/convlstm.h"

namespace tmem::nn {

/// The ConvLSTM3D update as a module: the weights of convlstm3d_cell
/// (ops/convlstm.h) with the method's initialisation: depthwise taps identity
/// (centre 1, others 0), depthwise biases 0, pointwise Xavier-uniform, bias 0.
/// With factorized = false the depthwise taps stay at identity and their
/// biases at 0 as constants (not parameters): a pointwise-only update.
/// forget_bias starts the forget gate's C pointwise biases (rows C..2C of
/// pb, gate order i, f, o, g) at that value instead of 0, as LSTM recipes do
/// (Gers et al. 2000; Jozefowicz et al. 2015 use 1). Throws ValueError when
/// it is not finite as a float32 or a channel count is not positive.
class ConvLSTM3D : public Module {
 public:
  ConvLSTM3D(int64_t in_channels, int64_t channels, bool factorized = true,
             Generator& gen = default_generator(), double forget_bias = 0.0);
  /// One step: x[B, Cx, D, H, W], state h, c [B, C, D, H, W] -> new state.
  /// Throws ShapeError naming in_channels and channels when x, h or c has
  /// another rank or channel count (convlstm3d_cell checks the rest).
  ConvLSTM3DState forward(const Tensor& x, const ConvLSTM3DState& state) const;
  int64_t in_channels, channels;
  ConvLSTM3DWeights w;
};

struct TensorMemoryOptions {
  int64_t channels = 16;             // Cm, state channels
  int64_t D = 6, H = 6, W = 6;       // state grid
  int64_t chunk = 1;                 // K tokens per read/write step
  double sigma_scale = 0.25;         // write width multiplier (tmem's default)
  double gamma_init = 0.0;           // gate logit: 0 for text/toys, -2 for ViT/video
  double dropout = 0.0;              // on the read output
  bool shared_coords = true;         // one coordinate head for read and write (tied)
  // Ablations (docs/DESIGN.md §8):
  bool hard_write = false;  // write the content into the nearest cell only (no gradient to mu, sigma)
  bool factorized = true;   // false: the ConvLSTM3D update is pointwise only (depthwise taps fixed to identity)
  double forget_bias = 0.0; // the forget gate's initial bias (the method: 0, so f starts near sigmoid(0) = 0.5)
};

/// Per-layer Tensor Memory. forward(x, state) takes the layer-normed tokens
/// x[B, N, C] and returns sigmoid(gamma) * dropout(out)[B, N, C] for the
/// residual stream, advancing `state` by ceil(N / K) steps. For chunk k:
///   r_k = first token of the chunk, w_k = Linear(K*C -> C)(flattened chunk)
///   mu = tanh(Linear(C -> 3)(.)), order (x, y, z), tied for read and write
///   read:  m_k = grid_sample(h_{k-1}, mu(r_k), trilinear, border,
///          align_corners=true) [B, Cm];  out_k = Linear(Cm -> C)(m_k) for
///          every token of chunk k
///   write: content = Linear(C -> Cm)(w_k); sigma = (softplus(Linear(C -> 1)(w_k))
///          + 1e-4) * sigma_scale (that Linear's bias starts at 1.0);
///          v_k = gaussian_splat(content, mu(w_k), sigma)  (hard_write: content
///          in the cell nearest mu(w_k) only)
///   update: (h_k, c_k) = ConvLSTM3D(v_k, (h_{k-1}, c_{k-1}))
/// Read happens before write, so out_k depends only on chunks before k: the
/// layer is causal. The last chunk is right-padded with zeros; N = 0 gives
/// out [B, 0, C] and the state unchanged. The constructor throws ValueError
/// for a size that is not positive, chunk * dim past int64, a sigma_scale
/// that is not > 0 and finite in float32, dropout outside [0, 1]
/// or a gamma_init not finite in float32; forward throws ShapeError for x not
/// [B, N, C] or a state of the wrong shape.
class TensorMemory;

/// What forward returns: the gated read out [B, N, C] for the residual
/// stream and the state after the last chunk.
struct TensorMemoryOutput {
  Tensor out;
  ConvLSTM3DState state;
};

/// Collects the internals of every TensorMemory forward that runs on this
/// thread while the probe is alive (the innermost probe, if nested), for
/// gradient dumps and inspection; forward records nothing when no probe is
/// alive. Per forward: the layer, its detached read and write coordinates
/// [B, nchunks, 3] (order x, y, z) and write widths [B, nchunks, 1].
///
///   TensorMemoryProbe probe;
///   model.forward(batch, state);
///   for (const auto& r : probe.records()) ...
class TensorMemoryProbe {
 public:
  struct Record {
    const TensorMemory* layer;
    Tensor mu_read, mu_write, sigma;
  };
  TensorMemoryProbe();
  ~TensorMemoryProbe();
  TensorMemoryProbe(const TensorMemoryProbe&) = delete;
  TensorMemoryProbe& operator=(const TensorMemoryProbe&) = delete;
  const std::vector<Record>& records() const { return records_; }
  /// The last record of `layer` (its last forward, e.g. the last segment's),
  /// or nullptr when it did not run under this probe.
  const Record* last(const TensorMemory& layer) const;
  /// The probe forward records into, or nullptr.
  static TensorMemoryProbe* active();
  void record(Record r) { records_.push_back(std::move(r)); }

 private:
  std::vector<Record> records_;
  TensorMemoryProbe* outer_;
};

/// The Tensor Memory layer (the formulas above).
class TensorMemory : public Module {
 public:
  TensorMemory(int64_t dim, const TensorMemoryOptions& opt, Generator& gen = default_generator());
  /// The zero state (h, c) [B, channels, D, H, W] for a batch of B
  /// sequences, on the layer's device and of its dtype.
  ConvLSTM3DState initial_state(int64_t B) const;
  /// x [B, N, C] and the state before it -> the read out and the new state;
  /// records its internals into the active TensorMemoryProbe, if any.
  /// Throws ShapeError for another x or state shape, DtypeError or
  /// DeviceError for a state of another dtype or device than x, and
  /// ValueError naming the row and tokens when the read or write
  /// coordinates, widths or written content are not finite (x or the
  /// weights hold NaN or Inf: a NaN coordinate would read 0 and write cell 0
  /// silently, an infinite content would make the state NaN).
  TensorMemoryOutput forward(const Tensor& x, const ConvLSTM3DState& state) const;

  int64_t dim;
  TensorMemoryOptions opt;
  std::shared_ptr<Linear> write_proj, coord, coord_write, read_out, content, sigma;
  std::shared_ptr<ConvLSTM3D> cell;
  Tensor gamma;  // [1], the gate logit
  /// hard_write's volume [B, 1, D, H, W]: 1 in the cell nearest mu[B, 3]
  /// (order x, y, z), 0 elsewhere; no gradient.
  Tensor nearest_cell(const Tensor& mu) const;

 private:
  // Throws the ValueError of forward when a coordinate mu_r, mu_w [B, nc, 3],
  // width sig [B, nc, 1] or content cont [B, nc, channels] is not finite
  // (N: the tokens of x).
  void check_finite_writes(const Tensor& mu_r, const Tensor& mu_w, const Tensor& sig, const Tensor& cont,
                           int64_t N) const;
  Generator* gen_;
};

}  // namespace tmem::nn
