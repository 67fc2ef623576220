// Fuzz target: the IDX readers (data/idx.h). The first input byte picks the
// reader (images or labels) and whether the rest is the file as is (the gzip
// layer is fuzzed) or is gzip-compressed first (the IDX layer behind it is).
#include <zlib.h>

#include <vector>

#include "tmem/data/idx.h"
#include "tmem/ops/elementwise.h"
#include "tmem/ops/reduction.h"
#include "fuzz_util.h"

namespace {

std::vector<uint8_t> gzip(const uint8_t* data, size_t size) {
  z_stream z{};
  if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) std::abort();
  std::vector<uint8_t> out(deflateBound(&z, size) + 32);
  z.next_in = const_cast<Bytef*>(data);
  z.avail_in = static_cast<uInt>(size);
  z.next_out = out.data();
  z.avail_out = static_cast<uInt>(out.size());
  if (deflate(&z, Z_FINISH) != Z_STREAM_END) std::abort();
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  std::vector<uint8_t> file(data + 1, data + size);
  if (mode & 1) file = gzip(file.data(), file.size());
  const std::string path = tmem::fuzz::scratch_file(file.data(), file.size(), ".gz");
  try {
    const tmem::Tensor t = (mode & 2) ? tmem::read_idx_labels(path) : tmem::read_idx_images(path);
    (void)tmem::sum(tmem::to_dtype(t, tmem::DType::Float64)).item();
  } catch (const tmem::Error&) {
  }
  return 0;
}
