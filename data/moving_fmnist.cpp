#include "tmem/data/moving_fmnist.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

#include "tmem/core/error.h"

namespace tmem {

namespace {

constexpr int64_t kItem = 28;  // Fashion-MNIST image side

}  // namespace

MovingFashionMNIST::MovingFashionMNIST(ImageDataset data, MovingFashionMNISTOptions opt)
    : data_(std::move(data)), opt_(opt) {
  const Shape& s = data_.images.shape();
  check<ShapeError>(s.size() == 3 && s[1] == kItem && s[2] == kItem, "MovingFashionMNIST: expected images [M, 28, 28], but got ",
                    shape_str(s));
  check<ShapeError>(data_.labels.dim() == 1 && data_.labels.shape()[0] == s[0],
                    "MovingFashionMNIST: expected labels [", s[0], "], but got ", shape_str(data_.labels.shape()));
  check<ValueError>(opt_.frames >= 1 && opt_.items >= 1 && s[0] >= opt_.items, "MovingFashionMNIST: expected frames >= 1 and 1 <= items <= ",
                    s[0], " images, but got frames ", opt_.frames, ", items ", opt_.items);
  check<ValueError>(opt_.size >= kItem, "MovingFashionMNIST: expected a frame of at least 28 pixels, but got ", opt_.size);
  check<ValueError>(opt_.min_speed >= 0 && opt_.min_speed <= opt_.max_speed, "MovingFashionMNIST: expected 0 <= min_speed <= max_speed, but got ",
                    opt_.min_speed, " and ", opt_.max_speed);
  check<ValueError>(opt_.occluded_frames >= 0 && opt_.occluded_frames <= opt_.frames,
                    "MovingFashionMNIST: expected 0 <= occluded_frames <= frames, but got occluded_frames ",
                    opt_.occluded_frames, " and frames ", opt_.frames);
  check<ValueError>(opt_.occluder_width >= 1 && opt_.occluder_width <= opt_.size,
                    "MovingFashionMNIST: expected 1 <= occluder_width <= size, but got occluder_width ",
                    opt_.occluder_width, " and size ", opt_.size);
  check<DtypeError>(data_.images.dtype() == DType::Float32 && data_.labels.dtype() == DType::Int64,
                    "MovingFashionMNIST: expected float32 images and int64 labels, but got ",
                    dtype_name(data_.images.dtype()), " and ", dtype_name(data_.labels.dtype()));
  data_.images = contiguous_data(data_.images);
  data_.labels = contiguous_data(data_.labels);
}

MovingFashionMNISTBatch MovingFashionMNIST::allocate(int64_t B) const {
  const int64_t T = opt_.frames, S = opt_.size, N = opt_.items;
  MovingFashionMNISTBatch out;
  out.frames = zeros({B, T, S, S});
  out.labels = empty({B, N}, DType::Int64);
  out.positions = empty({B, T, N, 2});
  out.occluded = full({B}, -1, DType::Int64);
  return out;
}

MovingFashionMNISTBatch MovingFashionMNIST::sample(int64_t B, Generator& gen) const {
  check<ValueError>(B >= 1, "MovingFashionMNIST::sample: expected a batch of at least 1 clip, but got ", B);
  const int64_t N = opt_.items, M = data_.images.shape()[0];
  MovingFashionMNISTBatch out = allocate(B);
  for (int64_t b = 0; b < B; ++b) {
    std::vector<int64_t> chosen;
    while (static_cast<int64_t>(chosen.size()) < N) {
      const int64_t m = gen.randint(M);
      if (std::find(chosen.begin(), chosen.end(), m) == chosen.end()) chosen.push_back(m);
    }
    render(b, chosen.data(), gen, out);
  }
  return out;
}

MovingFashionMNISTBatch MovingFashionMNIST::clips_of(const std::vector<int64_t>& items, Generator& gen) const {
  const int64_t N = opt_.items, M = data_.images.shape()[0], n = static_cast<int64_t>(items.size());
  check<ValueError>(n >= 1 && n % N == 0, "MovingFashionMNIST::clips_of: expected a positive multiple of ", N,
                    " items (", N, " per clip), but got ", n);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t m = items[static_cast<size_t>(i)], first = i - i % N;
    check<ValueError>(m >= 0 && m < M, "MovingFashionMNIST::clips_of: item ", i, " is image ", m, ", outside [0, ", M,
                      ")");
    for (int64_t j = first; j < i; ++j)
      check<ValueError>(items[static_cast<size_t>(j)] != m, "MovingFashionMNIST::clips_of: clip ", i / N,
                        " has image ", m, " twice");
  }
  MovingFashionMNISTBatch out = allocate(n / N);
  for (int64_t b = 0; b < n / N; ++b) render(b, items.data() + b * N, gen, out);
  return out;
}

void MovingFashionMNIST::render(int64_t b, const int64_t* chosen, Generator& gen, MovingFashionMNISTBatch& out) const {
  const int64_t T = opt_.frames, S = opt_.size, N = opt_.items;
  const int64_t lim = S - kItem;  // top-left coordinates lie in [0, lim]
  float* frames = out.frames.data<float>();
  float* pos = out.positions.data<float>();
  const float* images = data_.images.data<float>();
  const int64_t* labels = data_.labels.data<int64_t>();
  std::vector<int64_t> corner(static_cast<size_t>(T * N * 2));  // drawn top-left (x, y)
  for (int64_t n = 0; n < N; ++n) {
    out.labels.data<int64_t>()[b * N + n] = labels[chosen[n]];
    double p[2] = {gen.uniform() * static_cast<double>(lim), gen.uniform() * static_cast<double>(lim)};
    const double angle = gen.uniform() * 2 * std::numbers::pi;
    const double speed = opt_.min_speed + gen.uniform() * (opt_.max_speed - opt_.min_speed);
    double v[2] = {speed * std::cos(angle), speed * std::sin(angle)};
    for (int64_t t = 0; t < T; ++t) {
      for (int a = 0; a < 2; ++a) {
        const auto c = static_cast<int64_t>(std::lround(p[a]));
        corner[(t * N + n) * 2 + a] = c;
        pos[((b * T + t) * N + n) * 2 + a] = static_cast<float>(c) + kItem / 2.0f;
        p[a] += v[a];  // bounce off the borders
        if (p[a] < 0) p[a] = -p[a], v[a] = -v[a];
        if (p[a] > static_cast<double>(lim)) p[a] = 2.0 * static_cast<double>(lim) - p[a], v[a] = -v[a];
      }
      const float* img = images + chosen[n] * kItem * kItem;
      float* f = frames + (b * T + t) * S * S;
      const int64_t x0 = corner[(t * N + n) * 2], y0 = corner[(t * N + n) * 2 + 1];
      for (int64_t y = 0; y < kItem; ++y)
        for (int64_t x = 0; x < kItem; ++x) {
          float& dst = f[(y0 + y) * S + x0 + x];
          dst = std::max(dst, img[y * kItem + x]);
        }
    }
  }
  if (!opt_.occlusion || opt_.occluded_frames == 0) return;
  const int64_t k = gen.randint(N);
  out.occluded.data<int64_t>()[b] = k;
  const bool horizontal = gen.randint(2) == 0;
  // The bar is centred on item k's last-frame box along one axis and spans
  // the frame along the other.
  const int64_t centre = corner[((T - 1) * N + k) * 2 + (horizontal ? 1 : 0)] + kItem / 2;
  const int64_t lo = std::clamp<int64_t>(centre - opt_.occluder_width / 2, 0, S - opt_.occluder_width);
  for (int64_t t = T - opt_.occluded_frames; t < T; ++t) {
    float* f = frames + (b * T + t) * S * S;
    for (int64_t i = lo; i < lo + opt_.occluder_width; ++i)
      for (int64_t j = 0; j < S; ++j) f[horizontal ? i * S + j : j * S + i] = static_cast<float>(opt_.occluder_value);
  }
}

}  // namespace tmem
