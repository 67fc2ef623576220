// The Moving Fashion-MNIST generator (data/moving_fmnist.h) on synthetic
// 28x28 items whose pixels are exact, so rendering, bouncing and the occluder
// can be checked pixel by pixel.
#include <algorithm>
#include <cmath>

#include "tmem/data/moving_fmnist.h"
#include "test_util.h"

using namespace tmem;

namespace {

// M binary items: item m is all ones (a solid 28x28 square), label m % 10.
ImageDataset solid_items(int64_t M) {
  std::vector<int64_t> labels(static_cast<size_t>(M));
  for (int64_t m = 0; m < M; ++m) labels[static_cast<size_t>(m)] = m % 10;
  return {ones({M, 28, 28}), tensor_int(labels, {M})};
}

}  // namespace

TEST_CASE("moving fashion-mnist: shapes, seeding, labels and in-frame bouncing") {
  MovingFashionMNISTOptions opt;
  MovingFashionMNIST gen_a(solid_items(12), opt);
  Generator g1(7), g2(7);
  auto a = gen_a.sample(5, g1), b = gen_a.sample(5, g2);
  CHECK(a.frames.shape() == Shape{5, 16, 64, 64});
  CHECK(a.labels.shape() == Shape{5, 2});
  CHECK(a.positions.shape() == Shape{5, 16, 2, 2});
  CHECK(a.frames.to_vector() == b.frames.to_vector());
  CHECK(a.positions.to_vector() == b.positions.to_vector());
  const auto lab = a.labels.to_int_vector();
  for (int64_t i = 0; i < 5; ++i) CHECK(lab[i * 2] != lab[i * 2 + 1]);  // distinct items (labels m % 10, M = 12 < 20)
  const auto pos = a.positions.to_vector();
  for (double p : pos) {
    CHECK(p >= 14.0);
    CHECK(p <= 64.0 - 14.0);
  }
  // Steps of at most max_speed per axis (plus rounding), every clip moving.
  for (int64_t c = 0; c < 5; ++c)
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t t = 1; t < 16; ++t)
        for (int64_t ax = 0; ax < 2; ++ax) {
          const double d = pos[((c * 16 + t) * 2 + n) * 2 + ax] - pos[((c * 16 + t - 1) * 2 + n) * 2 + ax];
          CHECK(std::abs(d) <= opt.max_speed + 1.0);
        }
  int64_t non_binary = 0;
  for (double v : a.frames.to_vector()) non_binary += v != 0.0 && v != 1.0;
  CHECK(non_binary == 0);
  CHECK(a.occluded.to_int_vector() == std::vector<int64_t>(5, -1));
}

TEST_CASE("moving fashion-mnist: an item is drawn as its 28x28 image at its position") {
  MovingFashionMNISTOptions opt;
  opt.items = 1;
  MovingFashionMNIST mf(solid_items(3), opt);
  Generator gen(3);
  auto s = mf.sample(2, gen);
  const auto f = s.frames.to_vector();
  const auto pos = s.positions.to_vector();
  for (int64_t c = 0; c < 2; ++c)
    for (int64_t t = 0; t < 16; ++t) {
      const auto cx = static_cast<int64_t>(pos[(c * 16 + t) * 2]), cy = static_cast<int64_t>(pos[(c * 16 + t) * 2 + 1]);
      double total = 0, inside = 0;
      for (int64_t y = 0; y < 64; ++y)
        for (int64_t x = 0; x < 64; ++x) {
          const double v = f[((c * 16 + t) * 64 + y) * 64 + x];
          total += v;
          if (x >= cx - 14 && x < cx + 14 && y >= cy - 14 && y < cy + 14) inside += v;
        }
      CHECK(total == 784.0);
      CHECK(inside == 784.0);
    }
}

TEST_CASE("moving fashion-mnist: the occluder hides the chosen item in the last frames only") {
  MovingFashionMNISTOptions opt;
  opt.occlusion = true;
  MovingFashionMNIST mf(solid_items(10), opt);
  Generator gen(11);
  auto s = mf.sample(6, gen);
  const auto f = s.frames.to_vector();
  const auto pos = s.positions.to_vector();
  const auto occ = s.occluded.to_int_vector();
  for (int64_t c = 0; c < 6; ++c) {
    REQUIRE((occ[c] == 0 || occ[c] == 1));
    auto px = [&](int64_t t, int64_t x, int64_t y) { return f[((c * 16 + t) * 64 + y) * 64 + x]; };
    // Last frame: every pixel of the occluded item's box shows the grey bar.
    const int64_t k = occ[c];
    const auto cx = static_cast<int64_t>(pos[((c * 16 + 15) * 2 + k) * 2]);
    const auto cy = static_cast<int64_t>(pos[((c * 16 + 15) * 2 + k) * 2 + 1]);
    int64_t grey = 0;
    for (int64_t y = cy - 14; y < cy + 14; ++y)
      for (int64_t x = cx - 14; x < cx + 14; ++x) grey += px(15, x, y) == 0.5;
    CHECK(grey == 784);
    // Frames before the occluder shows hold no grey pixel; frames after do.
    for (int64_t t = 0; t < 16; ++t) {
      bool any_grey = false;
      for (int64_t i = 0; i < 64 * 64 && !any_grey; ++i) any_grey = f[(c * 16 + t) * 64 * 64 + i] == 0.5;
      CHECK(any_grey == (t >= 16 - opt.occluded_frames));
    }
  }
}

TEST_CASE("moving fashion-mnist: bad options and inputs raise clear errors") {
  MovingFashionMNISTOptions opt;
  CHECK_THROWS_AS(MovingFashionMNIST({ones({4, 28, 27}), tensor_int({0, 1, 2, 3}, {4})}, opt), ShapeError);
  CHECK_THROWS_AS(MovingFashionMNIST({ones({4, 28, 28}), tensor_int({0, 1, 2}, {3})}, opt), ShapeError);
  CHECK_THROWS_AS(MovingFashionMNIST(solid_items(1), opt), ValueError);  // 2 items need 2 images
  opt.size = 20;
  CHECK_THROWS_AS(MovingFashionMNIST(solid_items(4), opt), ValueError);
  opt = {};
  opt.min_speed = 5;
  CHECK_THROWS_AS(MovingFashionMNIST(solid_items(4), opt), ValueError);
  opt = {};
  MovingFashionMNIST mf(solid_items(4), opt);
  Generator gen(1);
  CHECK_THROWS_AS(mf.sample(0, gen), ValueError);
}

TEST_CASE("moving fashion-mnist: clips_of renders the given images with the motion sample() draws after its choice") {
  MovingFashionMNISTOptions opt;
  opt.occlusion = true;
  MovingFashionMNIST mf(solid_items(12), opt);
  for (uint64_t seed : {1u, 5u, 9u}) {
    Generator g1(seed), g2(seed);
    const auto drawn = mf.sample(1, g1);
    std::vector<int64_t> chosen;  // sample()'s choice: distinct images by rejection
    while (chosen.size() < 2) {
      const int64_t m = g2.randint(12);
      if (std::find(chosen.begin(), chosen.end(), m) == chosen.end()) chosen.push_back(m);
    }
    const auto given = mf.clips_of(chosen, g2);
    CHECK(given.frames.to_vector() == drawn.frames.to_vector());
    CHECK(given.positions.to_vector() == drawn.positions.to_vector());
    CHECK(given.labels.to_int_vector() == drawn.labels.to_int_vector());
    CHECK(given.occluded.to_int_vector() == drawn.occluded.to_int_vector());
    CHECK(g1.next_u64() == g2.next_u64());
  }
  Generator gen(3);
  const auto two = mf.clips_of({3, 11, 4, 7}, gen);  // labels m % 10, clip by clip
  CHECK(two.labels.to_int_vector() == std::vector<int64_t>{3, 1, 4, 7});
  CHECK_THROWS_WITH_AS(mf.clips_of({3, 11, 4}, gen), doctest::Contains("multiple of 2"), ValueError);
  CHECK_THROWS_WITH_AS(mf.clips_of({}, gen), doctest::Contains("got 0"), ValueError);
  CHECK_THROWS_WITH_AS(mf.clips_of({3, 12}, gen), doctest::Contains("image 12, outside [0, 12)"), ValueError);
  CHECK_THROWS_WITH_AS(mf.clips_of({1, 2, 5, 5}, gen), doctest::Contains("clip 1 has image 5 twice"), ValueError);
  CHECK_NOTHROW(mf.clips_of({5, 6, 6, 5}, gen));  // an image may recur in another clip
}
