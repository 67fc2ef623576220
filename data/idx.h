// IDX readers (the MNIST / Fashion-MNIST file format, docs/DESIGN.md §10) and the
// Fashion-MNIST loader. IDX files are read gzip-compressed through zlib
// (one gzip member, its trailer verified).
//
// IDX layout (all integers big-endian): a 4-byte magic 0x00 0x00 <type>
// <ndims> (type 0x08 = unsigned byte), ndims 4-byte sizes, then the
// row-major data. Images are magic 0x00000803 (3 dims N, rows, cols),
// labels 0x00000801 (1 dim N).
#pragma once
#include <string>

#include "tmem/core/tensor.h"

namespace tmem {

/// Magic number of an IDX file of unsigned-byte images [N, rows, cols].
inline constexpr uint32_t kIdxImagesMagic = 0x00000803;
/// Magic number of an IDX file of unsigned-byte labels [N].
inline constexpr uint32_t kIdxLabelsMagic = 0x00000801;
/// Where Debian's dataset-fashion-mnist package installs the four files.
inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

/// Reads a gzip-compressed IDX image file (magic 0x00000803).
/// Returns a float32 CPU tensor [N, rows, cols] (Fashion-MNIST: rows = cols
/// = 28), pixel byte p mapped to p / 255, so values lie in [0, 1].
/// Throws IOError naming the file and the fault when the file is missing,
/// empty, not gzip-compressed, a corrupt or truncated gzip stream (the
/// trailer's CRC-32 and length are checked), has bytes after its one gzip
/// member, has the wrong magic number, declares a shape with no element (0
/// images), holds fewer data bytes than its header promises, or has bytes
/// left after the data.
Tensor read_idx_images(const std::string& path);

/// Reads a gzip-compressed IDX label file (magic 0x00000801).
/// Returns an int64 CPU tensor [N] holding the label bytes (0 ... 255).
/// Throws IOError for the same faults as read_idx_images.
Tensor read_idx_labels(const std::string& path);

/// Images and labels of one split of an image classification data set.
struct ImageDataset {
  Tensor images;  ///< float32 [N, rows, cols], values in [0, 1]
  Tensor labels;  ///< int64 [N], class indices
};

/// Loads one Fashion-MNIST split from `dir` (the Debian package puts it in
/// kFashionMnistDir): train = true reads train-{images-idx3,labels-idx1}-ubyte.gz
/// (60,000 images), false reads t10k-*-ubyte.gz (10,000 images).
/// Returns images float32 [N, 28, 28] in [0, 1] and labels int64 [N] in
/// 0 ... 9. Throws IOError when the folder or a file is missing (naming the
/// Debian package to install), when a file is malformed (see
/// read_idx_images), when the image and label counts differ, when images are
/// not 28 x 28, or when a label is outside 0 ... 9.
ImageDataset load_fashion_mnist(const std::string& dir, bool train);

/// The first n images of `d` and their labels: images [n, rows, cols],
/// labels [n], views of d's storage (no copy). Throws ValueError naming n
/// and the data set's size unless 1 <= n <= N, and ShapeError unless images
/// [N, ...] and labels [N] agree on N.
ImageDataset take_first(const ImageDataset& d, int64_t n);

}  // namespace tmem
