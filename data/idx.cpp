// IDX readers over zlib's inflate (see data/idx.h for the format).
#include "tmem/data/idx.h"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <climits>
#include <filesystem>
#include <fstream>
#include <vector>

#include <fmt/format.h>

namespace tmem {
namespace {

namespace fs = std::filesystem;

/// A gzip-compressed file read through zlib's inflate: exactly one gzip
/// member, whose trailer (CRC-32 and length of the data) inflate checks when
/// the member ends. Every fault is an IOError naming the file: not gzip, a
/// corrupt or truncated stream, a trailer that does not match, bytes after
/// the member.
class GzReader {
 public:
  explicit GzReader(const std::string& path) : path_(path) {
    std::error_code ec;
    check<IOError>(fs::exists(path, ec), "idx: ", path, ": no such file");
    check<IOError>(fs::is_regular_file(path, ec), "idx: ", path, ": not a regular file");
    size_ = fs::file_size(path, ec);
    check<IOError>(!ec, "idx: ", path, ": cannot read the file size (", ec.message(), ")");
    check<IOError>(size_ > 0, "idx: ", path, ": the file is empty");
    in_.open(path, std::ios::binary);
    check<IOError>(in_.is_open(), "idx: ", path, ": cannot open the file");
    fill();
    check<IOError>(z_.avail_in >= 2 && buf_[0] == 0x1f && buf_[1] == 0x8b, "idx: ", path,
                   ": not gzip-compressed (expected a .gz IDX file starting with the gzip bytes 1f 8b)");
    // 16 + MAX_WBITS: a gzip wrapper only (no zlib or raw deflate), trailer checked.
    check<IOError>(inflateInit2(&z_, 16 + MAX_WBITS) == Z_OK, "idx: ", path, ": zlib cannot start (out of memory)");
    started_ = true;
  }
  ~GzReader() {
    if (started_) inflateEnd(&z_);
  }
  GzReader(const GzReader&) = delete;
  GzReader& operator=(const GzReader&) = delete;

  /// Reads up to n bytes into dst; returns how many were read (fewer only at
  /// the end of the gzip member, whose trailer is then verified). Throws
  /// IOError on a corrupt or truncated stream.
  size_t read(void* dst, size_t n) {
    auto* out = static_cast<unsigned char*>(dst);
    size_t done = 0;
    while (done < n && !ended_) {
      if (z_.avail_in == 0) fill();
      const auto want = static_cast<uInt>(std::min<size_t>(n - done, 1u << 30));
      z_.next_out = out + done;
      z_.avail_out = want;
      const int rc = inflate(&z_, Z_NO_FLUSH);
      done += want - z_.avail_out;
      if (rc == Z_STREAM_END) ended_ = true;
      else if (rc == Z_BUF_ERROR && z_.avail_in == 0 && eof_)
        throw IOError(detail::cat("idx: ", path_, ": truncated gzip stream (the compressed data ends early)"));
      else if (rc != Z_OK && rc != Z_BUF_ERROR)
        throw IOError(detail::cat("idx: ", path_, ": corrupt gzip stream (zlib: ",
                                  z_.msg != nullptr ? std::string(z_.msg) : "error " + std::to_string(rc),
                                  explain(z_.msg), ")"));
    }
    return done;
  }

  /// Throws IOError unless the data ends here: no more decompressed bytes
  /// (the IDX payload is `data_bytes` long), the gzip member ends (its trailer
  /// verified) and no byte follows it in the file.
  void expect_end(uint64_t data_bytes) {
    char extra[4096];
    uint64_t left = 0;
    size_t got;
    while ((got = read(extra, sizeof extra)) > 0) left += got;
    check<IOError>(left == 0, "idx: ", path_, ": ", left,
                   " bytes after the data (the header promises ", data_bytes, " data bytes)");
    check<IOError>(z_.total_in == size_, "idx: ", path_, ": ", size_ - z_.total_in,
                   " bytes after the end of the gzip stream (trailing garbage or a second gzip member)");
  }

  const std::string& path() const { return path_; }

 private:
  // Moves the next bytes of the file into the input buffer.
  void fill() {
    in_.read(reinterpret_cast<char*>(buf_.data()), static_cast<std::streamsize>(buf_.size()));
    check<IOError>(!in_.bad(), "idx: ", path_, ": read error");
    z_.next_in = buf_.data();
    z_.avail_in = static_cast<uInt>(in_.gcount());
    eof_ = in_.eof();
  }

  // What zlib's trailer messages mean.
  static std::string explain(const char* msg) {
    const std::string m = msg != nullptr ? msg : "";
    if (m == "incorrect data check") return ": the CRC-32 in the gzip trailer does not match the data";
    if (m == "incorrect length check") return ": the length in the gzip trailer does not match the data";
    return "";
  }

  std::string path_;
  std::ifstream in_;
  std::uintmax_t size_ = 0;
  std::vector<unsigned char> buf_ = std::vector<unsigned char>(size_t{1} << 16);
  z_stream z_{};
  bool started_ = false, ended_ = false, eof_ = false;
};

/// Reads a big-endian 32-bit unsigned integer; `what` names it in errors.
uint32_t read_u32(GzReader& in, const char* what) {
  std::array<unsigned char, 4> b{};
  size_t got = in.read(b.data(), b.size());
  check<IOError>(got == b.size(), "idx: ", in.path(), ": truncated header (the file ends inside ",
                 what, ")");
  return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | uint32_t{b[3]};
}

std::string hex32(uint32_t v) { return fmt::format("0x{:08X}", v); }

/// Reads the header (magic and the `ndims` sizes) and the data bytes of an
/// unsigned-byte IDX file; returns the sizes and fills `bytes`.
Shape read_idx_bytes(const std::string& path, uint32_t magic, const char* kind,
                     std::vector<unsigned char>& bytes) {
  GzReader in(path);
  uint32_t got_magic = read_u32(in, "the magic number");
  check<IOError>(got_magic == magic, "idx: ", path, ": expected the IDX ", kind, " magic number ",
                 hex32(magic), ", but got ", hex32(got_magic));
  const size_t ndims = magic & 0xFF;
  Shape shape;
  uint64_t count = 1;
  for (size_t d = 0; d < ndims; ++d) {
    uint32_t n = read_u32(in, "the dimension sizes");
    check<IOError>(n <= static_cast<uint32_t>(INT32_MAX), "idx: ", path, ": dimension ", d,
                   " has an absurd size ", n);
    shape.push_back(static_cast<int64_t>(n));
    check<IOError>(n == 0 || count <= (uint64_t{1} << 40) / n, "idx: ", path,
                   ": the header promises an absurd number of elements");
    count *= n;
  }
  check<IOError>(count > 0, "idx: ", path, ": the header declares the shape ", shape_str(shape), ": no ", kind,
                 " (an empty data set cannot be trained or tested on)");
  // Read in chunks so a corrupt header cannot make us allocate more memory
  // than the file really holds.
  constexpr size_t kChunk = size_t{1} << 20;
  bytes.clear();
  while (bytes.size() < count) {
    size_t want = std::min<uint64_t>(kChunk, count - bytes.size());
    size_t old = bytes.size();
    bytes.resize(old + want);
    size_t got = in.read(bytes.data() + old, want);
    if (got < want) {
      throw IOError(detail::cat("idx: ", path, ": truncated file: the header promises ", count,
                                " data bytes (shape ", shape_str(shape), "), but the file holds ",
                                old + got));
    }
  }
  in.expect_end(count);
  return shape;
}

}  // namespace

Tensor read_idx_images(const std::string& path) {
  std::vector<unsigned char> bytes;
  Shape shape = read_idx_bytes(path, kIdxImagesMagic, "images", bytes);
  Tensor out = empty(shape, DType::Float32);
  float* dst = out.data<float>();
  for (size_t i = 0; i < bytes.size(); ++i) dst[i] = static_cast<float>(bytes[i]) / 255.0f;
  return out;
}

Tensor read_idx_labels(const std::string& path) {
  std::vector<unsigned char> bytes;
  Shape shape = read_idx_bytes(path, kIdxLabelsMagic, "labels", bytes);
  Tensor out = empty(shape, DType::Int64);
  int64_t* dst = out.data<int64_t>();
  for (size_t i = 0; i < bytes.size(); ++i) dst[i] = static_cast<int64_t>(bytes[i]);
  return out;
}

ImageDataset load_fashion_mnist(const std::string& dir, bool train) {
  std::error_code ec;
  check<IOError>(fs::is_directory(dir, ec), "fashion-mnist: ", dir,
                 ": no such folder (install the Debian package dataset-fashion-mnist, "
                 "e.g. bash tools/setup.sh)");
  const std::string prefix = train ? "train" : "t10k";
  const std::string image_path = (fs::path(dir) / (prefix + "-images-idx3-ubyte.gz")).string();
  const std::string label_path = (fs::path(dir) / (prefix + "-labels-idx1-ubyte.gz")).string();
  for (const std::string& p : {image_path, label_path}) {
    check<IOError>(fs::exists(p, ec), "fashion-mnist: ", p,
                   ": no such file (install the Debian package dataset-fashion-mnist, "
                   "e.g. bash tools/setup.sh)");
  }
  ImageDataset ds{read_idx_images(image_path), read_idx_labels(label_path)};
  const int64_t n_images = ds.images.size(0);
  const int64_t n_labels = ds.labels.size(0);
  check<IOError>(n_images == n_labels, "fashion-mnist: ", image_path, " holds ", n_images,
                 " images but ", label_path, " holds ", n_labels, " labels");
  check<IOError>(ds.images.size(1) == 28 && ds.images.size(2) == 28, "fashion-mnist: ",
                 image_path, ": expected 28 x 28 images, but got ", ds.images.size(1), " x ",
                 ds.images.size(2));
  const int64_t* labels = ds.labels.data<int64_t>();
  for (int64_t i = 0; i < n_labels; ++i) {
    check<IOError>(labels[i] >= 0 && labels[i] <= 9, "fashion-mnist: ", label_path, ": label ",
                   i, " is ", labels[i], ", expected a class in 0 ... 9");
  }
  return ds;
}

ImageDataset take_first(const ImageDataset& d, int64_t n) {
  check<ShapeError>(d.images.dim() >= 1 && d.labels.dim() == 1 && d.images.shape()[0] == d.labels.shape()[0],
                    "take_first: expected images [N, ...] and labels [N], but got ", shape_str(d.images.shape()),
                    " and ", shape_str(d.labels.shape()));
  const int64_t N = d.labels.shape()[0];
  check<ValueError>(n >= 1 && n <= N, "take_first: expected 1 <= n <= ", N, " (the data set's images), but got ", n);
  auto first = [n](const Tensor& t) {
    Shape shape = t.shape();
    shape[0] = n;
    return make_view(t, shape, t.strides(), t.offset());
  };
  return {first(d.images), first(d.labels)};
}

}  // namespace tmem
