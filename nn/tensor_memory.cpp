#include "tmem/nn/tensor_memory.h"

#include <algorithm>
#include <cmath>

#include "tmem/ops/dropout.h"
#include "tmem/ops/elementwise.h"
#include "tmem/ops/gaussian_splat.h"
#include "tmem/ops/grid_sample.h"
#include "tmem/ops/shape.h"

namespace tmem::nn {

ConvLSTM3D::ConvLSTM3D(int64_t cx, int64_t c, bool factorized, Generator& gen, double forget_bias)
    : in_channels(cx), channels(c) {
  check<ValueError>(cx > 0 && c > 0, "ConvLSTM3D: expected positive in_channels and channels, but got in_channels ",
                    cx, " channels ", c);
  check<ValueError>(std::isfinite(static_cast<float>(forget_bias)),
                    "ConvLSTM3D: expected a forget_bias finite in float32, but got ", forget_bias);
  const int64_t cz = cx + c;
  auto identity_taps = [cz] {  // centre tap 1, others 0
    Tensor t = zeros({cz, 3});
    fill_data(make_view(t, {cz}, {3}, 1), 1.0);
    return t;
  };
  if (factorized) {
    w.dw_d = register_parameter("dw_d", identity_taps());
    w.dw_h = register_parameter("dw_h", identity_taps());
    w.dw_w = register_parameter("dw_w", identity_taps());
    w.db_d = register_parameter("db_d", zeros({cz}));
    w.db_h = register_parameter("db_h", zeros({cz}));
    w.db_w = register_parameter("db_w", zeros({cz}));
  } else {
    w.dw_d = w.dw_h = w.dw_w = identity_taps();
    w.db_d = w.db_h = w.db_w = zeros({cz});
  }
  const double bound = std::sqrt(6.0 / static_cast<double>(cz + 4 * c));
  w.pw = register_parameter("pw", rand({4 * c, cz}, -bound, bound, DType::Float32, gen));
  w.pb = register_parameter("pb", zeros({4 * c}));
  fill_data(make_view(w.pb, {c}, {1}, c), forget_bias);  // rows c..2c: the forget gate
}

ConvLSTM3DState ConvLSTM3D::forward(const Tensor& x, const ConvLSTM3DState& s) const {
  auto fits = [](const Tensor& t, int64_t ch) { return t.dim() == 5 && t.shape()[1] == ch; };
  check<ShapeError>(fits(x, in_channels) && fits(s.h, channels) && fits(s.c, channels), "ConvLSTM3D: expected x [B, ",
                    in_channels, ", D, H, W] and state h, c [B, ", channels, ", D, H, W] (in_channels ", in_channels,
                    ", channels ", channels, "), but got x ", shape_str(x.shape()), " h ", shape_str(s.h.shape()), " c ",
                    shape_str(s.c.shape()));
  // The pointwise-only update's fixed identity taps are neither parameters
  // nor buffers (a checkpoint holds none), so Module::to does not reach
  // them: they follow pw's device and dtype here.
  ConvLSTM3DWeights v = w;
  for (Tensor* t : {&v.dw_d, &v.dw_h, &v.dw_w, &v.db_d, &v.db_h, &v.db_w})
    if (t->dtype() != w.pw.dtype() || t->device() != w.pw.device()) *t = to_dtype(*t, w.pw.dtype()).to(w.pw.device());
  return convlstm3d_cell(x, s.h, s.c, v);
}

TensorMemory::TensorMemory(int64_t dim_, const TensorMemoryOptions& o, Generator& gen)
    : dim(dim_), opt(o), gen_(&gen) {
  check<ValueError>(o.channels > 0 && o.D > 0 && o.H > 0 && o.W > 0 && o.chunk > 0,
                    "TensorMemory: expected positive channels, grid and chunk, but got C ", o.channels,
                    " grid ", o.D, "x", o.H, "x", o.W, " chunk ", o.chunk);
  int64_t write_in = 0;  // write_proj's input width chunk * dim (a huge chunk wrapped to 0 or a negative width)
  check<ValueError>(dim_ > 0 && !__builtin_mul_overflow(o.chunk, dim_, &write_in), "TensorMemory: expected dim > 0 "
                    "and chunk * dim within int64, but got dim ", dim_, " chunk ", o.chunk);
  // sigma_scale multiplies float32 widths: inf (or 1e300, inf in float32)
  // made every write width inf, which gaussian_splat refused at forward.
  check<ValueError>(o.sigma_scale > 0 && std::isfinite(static_cast<float>(o.sigma_scale)),
                    "TensorMemory: expected a sigma_scale > 0 and finite in float32, but got ", o.sigma_scale);
  check<ValueError>(o.dropout >= 0 && o.dropout <= 1, "TensorMemory: expected dropout in [0, 1], but got ", o.dropout);
  check<ValueError>(std::isfinite(static_cast<float>(o.gamma_init)),
                    "TensorMemory: expected a gamma_init finite in float32, but got ", o.gamma_init);
  write_proj = register_module("write_proj", std::make_shared<Linear>(write_in, dim, true, gen));
  coord = register_module("coord", std::make_shared<Linear>(dim, 3, true, gen));
  if (!o.shared_coords) coord_write = register_module("coord_write", std::make_shared<Linear>(dim, 3, true, gen));
  read_out = register_module("read_out", std::make_shared<Linear>(o.channels, dim, true, gen));
  content = register_module("content", std::make_shared<Linear>(dim, o.channels, true, gen));
  sigma = register_module("sigma", std::make_shared<Linear>(dim, 1, true, gen));
  fill_data(sigma->bias, 1.0);
  cell = register_module("cell", std::make_shared<ConvLSTM3D>(o.channels, o.channels, o.factorized, gen, o.forget_bias));
  gamma = register_parameter("gamma", full({1}, o.gamma_init));
}

Tensor TensorMemory::nearest_cell(const Tensor& mu) const {
  const int64_t B = mu.shape()[0];
  std::vector<double> onehot(static_cast<size_t>(B * opt.D * opt.H * opt.W), 0.0);
  std::vector<double> m = mu.to_vector();
  auto idx = [](double x, int64_t n) {  // the cell centre nearest x on linspace(-1, 1, n)
    return n == 1 ? int64_t{0} : std::clamp<int64_t>(std::llround((x + 1) / 2 * (n - 1)), 0, n - 1);
  };
  for (int64_t b = 0; b < B; ++b)
    onehot[static_cast<size_t>(((b * opt.D + idx(m[b * 3 + 2], opt.D)) * opt.H + idx(m[b * 3 + 1], opt.H)) * opt.W +
                               idx(m[b * 3], opt.W))] = 1.0;
  return tensor(onehot, {B, 1, opt.D, opt.H, opt.W}, mu.dtype()).to(mu.device());
}

ConvLSTM3DState TensorMemory::initial_state(int64_t B) const {
  Shape s{B, opt.channels, opt.D, opt.H, opt.W};
  return {zeros(s, gamma.dtype(), gamma.device()), zeros(s, gamma.dtype(), gamma.device())};
}

namespace {
thread_local TensorMemoryProbe* active_probe = nullptr;
}  // namespace

TensorMemoryProbe::TensorMemoryProbe() : outer_(active_probe) { active_probe = this; }
TensorMemoryProbe::~TensorMemoryProbe() { active_probe = outer_; }
TensorMemoryProbe* TensorMemoryProbe::active() { return active_probe; }

const TensorMemoryProbe::Record* TensorMemoryProbe::last(const TensorMemory& layer) const {
  for (auto r = records_.rbegin(); r != records_.rend(); ++r)
    if (r->layer == &layer) return &*r;
  return nullptr;
}

void TensorMemory::check_finite_writes(const Tensor& mu_r, const Tensor& mu_w, const Tensor& sig, const Tensor& cont,
                                       int64_t N) const {
  const int64_t B = mu_r.shape()[0], nc = mu_r.shape()[1], K = opt.chunk, w = 7 + opt.channels;
  const std::vector<double> v =
      cat({mu_r.detach(), mu_w.detach(), sig.detach(), cont.detach()}, 2).to(Device::cpu()).to_vector();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t k = 0; k < nc; ++k)
      for (int64_t i = 0; i < w; ++i)
        check<ValueError>(std::isfinite(v[static_cast<size_t>((b * nc + k) * w + i)]), "TensorMemory: the ",
                          i < 3   ? "read coordinates are"
                          : i < 6 ? "write coordinates are"
                          : i < 7 ? "write width is"
                                  : "written content is",
                          " not finite for row ", b, ", tokens ", k * K, "-", std::min(k * K + K, N) - 1, ": x[", b,
                          ", ", k * K, ":", std::min(k * K + K, N), "] or the layer's weights hold NaN or Inf");
}

TensorMemoryOutput TensorMemory::forward(const Tensor& x, const ConvLSTM3DState& state_in) const {
  check<ShapeError>(x.dim() == 3 && x.shape()[2] == dim, "TensorMemory: expected x [B, N, ", dim,
                    "], but got ", shape_str(x.shape()));
  const int64_t B = x.shape()[0], N = x.shape()[1], K = opt.chunk;
  const Shape state_shape{B, opt.channels, opt.D, opt.H, opt.W};
  check<ShapeError>(state_in.h.shape() == state_shape && state_in.c.shape() == state_shape,
                    "TensorMemory: expected state h, c ", shape_str(state_shape), ", but got h ",
                    shape_str(state_in.h.shape()), " c ", shape_str(state_in.c.shape()));
  for (const Tensor* t : {&state_in.h, &state_in.c}) {
    check<DtypeError>(t->dtype() == x.dtype(), "TensorMemory: expected state h, c of x's dtype ", dtype_name(x.dtype()),
                      ", but got h ", dtype_name(state_in.h.dtype()), " c ", dtype_name(state_in.c.dtype()));
    check<DeviceError>(t->device() == x.device(), "TensorMemory: expected state h, c on x's device ",
                       x.device().str(), ", but got h on ", state_in.h.device().str(), " c on ",
                       state_in.c.device().str());
  }
  const int64_t nc = (N + K - 1) / K;
  // No token: no chunk to read or write, and the state stays as it was.
  if (nc == 0) return {zeros({B, 0, dim}, x.dtype(), x.device()), state_in};
  Tensor xp = nc * K == N ? x : pad(x, {0, 0, 0, nc * K - N});
  Tensor chunks = reshape(xp, {B, nc, K, dim});
  Tensor r = squeeze(slice(chunks, 2, 0, 1), 2);                      // [B, nc, C]
  Tensor wtok = write_proj->forward(reshape(chunks, {B, nc, K * dim}));  // [B, nc, C]
  Tensor mu_r = tanh(coord->forward(r));                                 // [B, nc, 3]
  Tensor mu_w = tanh((coord_write ? coord_write : coord)->forward(wtok));
  Tensor cont = content->forward(wtok);                                  // [B, nc, Cm]
  Tensor sig = (softplus(sigma->forward(wtok)) + 1e-4) * opt.sigma_scale;  // [B, nc, 1]
  check_finite_writes(mu_r, mu_w, sig, cont, N);
  if (TensorMemoryProbe* probe = TensorMemoryProbe::active())
    probe->record({this, mu_r.detach(), mu_w.detach(), sig.detach()});

  ConvLSTM3DState state = state_in;
  std::vector<Tensor> reads;
  reads.reserve(nc);
  // Per-chunk inputs as views of one split node each (not a slice per chunk,
  // whose backward would zero-fill the whole tensor once per chunk).
  const std::vector<Tensor> mu_r_k = unbind(mu_r, 1), cont_k = unbind(cont, 1), mu_w_k = unbind(mu_w, 1),
                            sig_k = unbind(sig, 1);
  for (int64_t k = 0; k < nc; ++k) {
    Tensor grid = reshape(mu_r_k[k], {B, 1, 1, 1, 3});
    Tensor m = grid_sample(state.h, grid, GridSampleMode::Bilinear, GridSamplePadding::Border, true);
    reads.push_back(reshape(m, {B, opt.channels}));
    Tensor v = opt.hard_write ? mul(reshape(cont_k[k], {B, opt.channels, 1, 1, 1}), nearest_cell(mu_w_k[k]))
                              : gaussian_splat(cont_k[k], mu_w_k[k], reshape(sig_k[k], {B}), opt.D, opt.H, opt.W);
    state = cell->forward(v, state);
  }
  Tensor out = read_out->forward(stack(reads, 1));  // [B, nc, C]
  if (K > 1) out = slice(repeat_interleave(out, K, 1), 1, 0, N);
  if (opt.dropout > 0 && is_training()) out = dropout(out, opt.dropout, true, *gen_);
  return {sigmoid(gamma) * out, std::move(state)};
}

}  // namespace tmem::nn
