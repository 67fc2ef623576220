// Moving Fashion-MNIST (docs/DESIGN.md §10): video clips generated from real
// Fashion-MNIST images with a seed, as Moving MNIST (Srivastava et al. 2015)
// is generated from MNIST: items of 28 x 28 pixels move in straight lines in
// a square frame and bounce off its borders; where items overlap the brighter
// pixel wins. An optional occluder, a grey bar across the frame, covers every
// item that passes behind it during the frames it is shown. Shapes: B clips,
// T frames, S frame size (pixels), N items per clip.
#pragma once
#include <cstdint>
#include <vector>

#include "tmem/core/rng.h"
#include "tmem/data/idx.h"

namespace tmem {

struct MovingFashionMNISTOptions {
  int64_t frames = 16;      ///< T
  int64_t size = 64;        ///< S: frames are S x S pixels
  int64_t items = 2;        ///< N items per clip (distinct images)
  double min_speed = 2.0;   ///< pixels per frame, drawn uniformly in [min, max]
  double max_speed = 4.0;
  bool occlusion = false;   ///< show the occluder
  int64_t occluder_width = 28;    ///< the bar's thickness in pixels (28: the whole item)
  double occluder_value = 0.5;    ///< the bar's grey level
  /// The occluder is shown from frame T - occluded_frames to the last frame,
  /// placed (horizontal or vertical, at random) over the last-frame centre of
  /// one item chosen at random, so that item is hidden (fully, at the default
  /// width) at the end of the clip and must be remembered.
  int64_t occluded_frames = 6;
};

/// A batch of clips.
struct MovingFashionMNISTBatch {
  Tensor frames;     ///< float32 [B, T, S, S], values in [0, 1]
  Tensor labels;     ///< int64 [B, N], the class (0 ... 9) of each item
  Tensor positions;  ///< float32 [B, T, N, 2], each item's centre (x, y) in pixels
  Tensor occluded;   ///< int64 [B], the item the occluder is placed over (-1 without occlusion)
};

/// Generates clips from one split of Fashion-MNIST (train images for
/// training, test images for evaluation).
class MovingFashionMNIST {
 public:
  /// data: images [M, 28, 28] in [0, 1] and labels [M] (load_fashion_mnist).
  /// Throws ShapeError for images not [M, 28, 28] or labels not [M],
  /// DtypeError unless images are float32 and labels int64,
  /// ValueError for frames < 1, items < 1 or M < items, a frame smaller than
  /// an item, speeds outside 0 <= min <= max, occluded_frames outside
  /// [0, frames] or occluder_width outside [1, size].
  MovingFashionMNIST(ImageDataset data, MovingFashionMNISTOptions opt = {});
  /// B clips drawn from gen: for each clip, N distinct images at random,
  /// start positions uniform over the frame, directions uniform on the
  /// circle, speeds uniform in [min_speed, max_speed]. Deterministic for a
  /// given generator state. Throws ValueError for B < 1.
  MovingFashionMNISTBatch sample(int64_t B, Generator& gen) const;
  /// Clips of the given images: items [B * N] holds clip b's N image
  /// indices at [b * N, (b + 1) * N) (as a DataLoader over the image indices
  /// hands them out), and gen draws the motion (and the occluder) exactly as
  /// sample() does after its choice of images. Throws ValueError for an
  /// empty list, a size that is not a multiple of N, an index outside
  /// [0, M) or an image twice in one clip.
  MovingFashionMNISTBatch clips_of(const std::vector<int64_t>& items, Generator& gen) const;
  const MovingFashionMNISTOptions& options() const { return opt_; }

 private:
  MovingFashionMNISTBatch allocate(int64_t B) const;
  /// Draws clip b's motion and occluder from gen and renders it into out.
  void render(int64_t b, const int64_t* chosen, Generator& gen, MovingFashionMNISTBatch& out) const;

  ImageDataset data_;
  MovingFashionMNISTOptions opt_;
};

}  // namespace tmem
