#include "tmem/core/safetensors.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <zlib.h>

#include "tmem/core/file_io.h"

namespace tmem {

namespace {

const char* st_dtype(DType t) {
  switch (t) {
    case DType::Float32: return "F32";
    case DType::Float64: return "F64";
    case DType::Int64: return "I64";
  }
  return "?";
}

// A dtype of the file: its size in bytes and the tmem dtype it loads as.
struct FileDType {
  size_t size;
  DType dtype;
};

FileDType from_st_dtype(const std::string& s, const std::string& path, const std::string& name) {
  if (s == "F32") return {4, DType::Float32};
  if (s == "F64") return {8, DType::Float64};
  if (s == "I64") return {8, DType::Int64};
  if (s == "F16" || s == "BF16") return {2, DType::Float32};
  if (s == "I32") return {4, DType::Int64};
  if (s == "BOOL") return {1, DType::Int64};
  throw IOError("load_safetensors: " + path + ": tensor \"" + printable(name) + "\" has unsupported dtype \"" +
                printable(s) + "\" (tmem reads F32, F64, I64, F16, BF16, I32 and BOOL)");
}

// IEEE 754 binary16 bits as a float (exact: every half is a float).
float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000 | (mant << 13);  // inf, NaN (payload kept)
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);  // normal: rebias 15 -> 127
  } else {
    // zero or subnormal: mant * 2^-24
    const float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// The n little-endian elements of `raw` (file dtype `st`) into t's storage.
void widen(const std::string& st, const unsigned char* raw, const Tensor& t) {
  const int64_t n = t.numel();
  auto le = [&](int64_t i, int bytes) {
    uint32_t v = 0;
    for (int b = 0; b < bytes; ++b) v |= static_cast<uint32_t>(raw[i * bytes + b]) << (8 * b);
    return v;
  };
  if (st == "F16" || st == "BF16") {
    float* out = t.data<float>();
    for (int64_t i = 0; i < n; ++i) {
      const uint32_t h = le(i, 2);
      if (st == "F16") {
        out[i] = half_to_float(static_cast<uint16_t>(h));
      } else {
        const uint32_t bits = h << 16;  // bfloat16 is the top half of a float
        std::memcpy(&out[i], &bits, 4);
      }
    }
  } else {
    int64_t* out = t.data<int64_t>();
    for (int64_t i = 0; i < n; ++i)
      out[i] = st == "I32" ? static_cast<int64_t>(static_cast<int32_t>(le(i, 4))) : (raw[i] != 0 ? 1 : 0);
  }
}

constexpr uint64_t kMaxHeader = 100u << 20;  // 100 MiB, as the reference implementation

// The CRC-32 (zlib's) that save_safetensors stores under kChecksumKey: of the
// header as JSON text without that key (and without an empty __metadata__
// it leaves), continued over the data section. It covers the metadata too
// (steps, generator states), which no other check could.
uLong header_crc(nlohmann::json header) {
  if (header.contains("__metadata__")) {
    header["__metadata__"].erase(kChecksumKey);
    if (header["__metadata__"].empty()) header.erase("__metadata__");
  }
  const std::string text = header.dump();
  return crc32_z(crc32_z(0, nullptr, 0), reinterpret_cast<const Bytef*>(text.data()), text.size());
}

}  // namespace

void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const StringMap& metadata) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<Tensor> data;
  uint64_t offset = 0;
  check<IOError>(!metadata.count(kChecksumKey), "save_safetensors: the metadata key ", kChecksumKey,
                 " is the file's checksum, which save_safetensors writes itself");
  for (const auto& [name, t] : tensors) {
    check<IOError>(name != "__metadata__", "save_safetensors: a tensor cannot be named __metadata__");
    Tensor c = contiguous_data(t.detach().cpu());
    uint64_t n = static_cast<uint64_t>(c.numel()) * dtype_size(c.dtype());
    header[name] = {{"dtype", st_dtype(c.dtype())}, {"shape", c.shape()}, {"data_offsets", {offset, offset + n}}};
    offset += n;
    data.push_back(c);
  }
  uLong crc = header_crc(header);
  for (const Tensor& c : data)
    crc = crc32_z(crc, static_cast<const Bytef*>(c.raw_data()), static_cast<size_t>(c.numel()) * dtype_size(c.dtype()));
  header["__metadata__"][kChecksumKey] = fmt::format("{:08x}", crc);
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');
  uint64_t hlen = h.size();
  unsigned char len_le[8];
  for (int i = 0; i < 8; ++i) len_le[i] = static_cast<unsigned char>(hlen >> (8 * i));
  AtomicFileWriter out(path);
  out.write(len_le, 8);
  out.write(h);
  for (const Tensor& c : data) out.write(c.raw_data(), static_cast<size_t>(c.numel()) * dtype_size(c.dtype()));
  out.commit();
}

SafetensorsFile load_safetensors(const std::string& path) {
  // Checked before opening: a directory would read as an empty buffer and a
  // FIFO would block the open until a writer came.
  check_path(path, "load_safetensors");
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  check<IOError>(!ec && std::filesystem::exists(st), "load_safetensors: cannot open ", path,
                 ec ? ": " + ec.message() : ": no such file");
  check<IOError>(std::filesystem::is_regular_file(st), "load_safetensors: ", path,
                 " is not a regular file (a checkpoint is a .safetensors file)");
  std::ifstream in(path, std::ios::binary);
  check<IOError>(static_cast<bool>(in), "load_safetensors: cannot open ", path);
  in.seekg(0, std::ios::end);
  const std::streamoff end = in.tellg();
  check<IOError>(end >= 0, "load_safetensors: ", path, " cannot be read (it has no size to seek to)");
  const uint64_t size = static_cast<uint64_t>(end);
  in.seekg(0);
  check<IOError>(size >= 8, "load_safetensors: ", path, " is truncated (", size, " bytes, no header length)");
  unsigned char len_le[8];
  in.read(reinterpret_cast<char*>(len_le), 8);
  uint64_t hlen = 0;
  for (int i = 0; i < 8; ++i) hlen |= static_cast<uint64_t>(len_le[i]) << (8 * i);
  check<IOError>(hlen <= kMaxHeader && hlen <= size - 8, "load_safetensors: ", path, " declares a ",
                 hlen, "-byte header but the file has ", size, " bytes");
  std::string h(hlen, '\0');
  in.read(h.data(), static_cast<std::streamsize>(hlen));
  const nlohmann::json header = parse_json(h, "load_safetensors: " + path + ": header");
  check<IOError>(header.is_object(), "load_safetensors: ", path, ": the header is not a JSON object");
  const uint64_t data_start = 8 + hlen, data_size = size - data_start;
  SafetensorsFile out;
  struct Span {
    uint64_t begin, end;
    std::string name;
    uLong crc;  // of its bytes, combined in file order for the checksum
  };
  std::vector<Span> spans;  // each tensor's bytes in the data section
  try {
    for (const auto& [name, entry] : header.items()) {
      if (name == "__metadata__") {
        // The format's metadata is text to text; name the first other entry.
        check<IOError>(entry.is_object(), "load_safetensors: ", path, ": __metadata__ is not an object of strings");
        for (const auto& [key, value] : entry.items())
          check<IOError>(value.is_string(), "load_safetensors: ", path, ": __metadata__ entry \"", printable(key),
                         "\" is ", printable(value.dump()), ", not a string");
        out.metadata = entry.get<StringMap>();
        continue;
      }
      const std::string st = entry.at("dtype").get<std::string>();
      const auto [item_size, dt] = from_st_dtype(st, path, name);
      const nlohmann::json& dims = entry.at("shape");
      // Unsigned integers that fit int64: nlohmann reads 4.5 as 4 and 2^64 - 1
      // as int64 -1 without a word.
      auto all_uint = [](const nlohmann::json& list, uint64_t max) {
        return list.is_array() && std::all_of(list.begin(), list.end(), [&](const nlohmann::json& d) {
                 return d.is_number_unsigned() && d.get<uint64_t>() <= max;
               });
      };
      check<IOError>(all_uint(dims, static_cast<uint64_t>(std::numeric_limits<int64_t>::max())), "load_safetensors: ",
                     path, ": tensor \"", printable(name),
                     "\" has a shape that is not a list of integers in [0, 2^63): ", printable(dims.dump()));
      const Shape shape = dims.get<Shape>();
      const nlohmann::json& offsets = entry.at("data_offsets");
      check<IOError>(all_uint(offsets, std::numeric_limits<uint64_t>::max()) && offsets.size() == 2,
                     "load_safetensors: ", path, ": tensor \"", printable(name),
                     "\" has data_offsets that are not two integers >= 0: ", printable(offsets.dump()));
      auto offs = offsets.get<std::vector<uint64_t>>();
      uint64_t n = 0;
      try {
        check<IOError>(!__builtin_mul_overflow(static_cast<uint64_t>(numel_of(shape)), item_size, &n),
                       "load_safetensors: ", path, ": tensor \"", printable(name), "\" of shape ", shape_str(shape),
                       " needs more bytes than a file can hold");
      } catch (const ShapeError& e) {
        throw IOError("load_safetensors: " + path + ": tensor \"" + printable(name) + "\": " + e.what());
      }
      check<IOError>(offs.size() == 2 && offs[0] <= offs[1] && offs[1] <= data_size &&
                         offs[1] - offs[0] == n,
                     "load_safetensors: ", path, ": tensor \"", printable(name), "\" of shape ", shape_str(shape),
                     " has bad data offsets ", fmt::format("[{}]", fmt::join(offs, ", ")), " (its shape and dtype take ",
                     n, " bytes; the data section holds ", data_size, ")");
      Tensor t = empty(shape, dt);
      const bool same = st == "F32" || st == "F64" || st == "I64";  // stored as tmem stores it: read in place
      std::vector<unsigned char> raw(same ? 0 : n);
      in.seekg(static_cast<std::streamoff>(data_start + offs[0]));
      in.read(same ? static_cast<char*>(t.raw_data()) : reinterpret_cast<char*>(raw.data()),
              static_cast<std::streamsize>(n));
      check<IOError>(static_cast<bool>(in), "load_safetensors: ", path, ": short read for \"", printable(name), "\"");
      const Bytef* bytes = same ? static_cast<const Bytef*>(t.raw_data()) : raw.data();
      spans.push_back({offs[0], offs[1], name, crc32_z(crc32_z(0, nullptr, 0), bytes, n)});
      if (!same) widen(st, raw.data(), t);
      out.tensors[name] = t;
    }
  } catch (const nlohmann::json::exception& e) {
    throw IOError("load_safetensors: " + path + ": malformed header entry: " + e.what());
  }
  // As the format's reference loader: the tensors tile the data section, in
  // some order, with no overlap and no gap.
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t at = 0;
  uLong data_crc = crc32_z(0, nullptr, 0);
  for (const Span& sp : spans) {
    check<IOError>(sp.begin == at, "load_safetensors: ", path, ": tensor \"", printable(sp.name), "\" starts at byte ",
                   sp.begin, " of the data, but the tensors before it end at ", at,
                   sp.begin < at ? " (overlapping data)" : " (a gap)");
    at = sp.end;
    data_crc = crc32_combine(data_crc, sp.crc, static_cast<z_off_t>(sp.end - sp.begin));
  }
  check<IOError>(at == data_size, "load_safetensors: ", path, ": the tensors cover ", at, " of the ", data_size,
                 " data bytes");
  if (const auto it = out.metadata.find(kChecksumKey); it != out.metadata.end()) {
    const std::string computed =
        fmt::format("{:08x}", crc32_combine(header_crc(header), data_crc, static_cast<z_off_t>(data_size)));
    check<IOError>(it->second == computed, "load_safetensors: ", path, ": the checksum does not match (stored ",
                   printable(it->second), ", computed ", computed,
                   "): the file was changed or damaged after it was written");
    out.metadata.erase(it);
    out.checksummed = true;
  }
  return out;
}

}  // namespace tmem
