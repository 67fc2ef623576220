// Checkpoints in the safetensors format (huggingface/safetensors; readable by
// PyTorch): 8-byte little-endian header length N, an N-byte JSON header
// {"__metadata__": {str: str}, name: {"dtype": "F32"|"F64"|"I64"|..., "shape": [...],
// "data_offsets": [begin, end]}}, then the raw little-endian data.
#pragma once
#include <map>
#include <string>

#include "tmem/core/tensor.h"

namespace tmem {

using StringMap = std::map<std::string, std::string>;

/// The metadata key of the CRC-32 that save_safetensors writes and
/// load_safetensors checks (of the header without it, then the data).
inline constexpr const char* kChecksumKey = "tmem_crc32";

/// Writes `tensors` (any layout and device; device tensors are copied to the
/// host) and `metadata` to `path` atomically through AtomicFileWriter
/// (core/file_io.h): a crash or a full disk never leaves a half-written
/// checkpoint, and the previous file survives a failed save. The metadata
/// gains kChecksumKey, a CRC-32 of the header and the data, so a later
/// change or damage is caught on load. Throws IOError naming the path, or
/// for metadata that holds kChecksumKey itself.
void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const StringMap& metadata = {});

struct SafetensorsFile {
  std::map<std::string, Tensor> tensors;
  StringMap metadata;
  bool checksummed = false;  // the file carried kChecksumKey, and it matched
};

/// Reads a safetensors file. F32, F64 and I64 tensors load as float32,
/// float64 and int64; the dtypes tmem has no type for are widened exactly:
/// F16 and BF16 (PyTorch half / bfloat16) to float32, I32 to int64, BOOL to
/// int64 0 / 1. Throws IOError naming the file and the fault for
/// a path that is not a regular file (a directory, a FIFO: never opened), a
/// truncated file, an oversized or malformed header (or one nested deeper
/// than parse_json's 64 levels), an unknown dtype, or
/// a shape that is not a list of integers in [0, 2^63), data_offsets that are
/// not two integers >= 0 (4.5 or -4 included) or do not match the shape or
/// lie outside the file, or tensors that do not tile the
/// data section exactly (overlapping bytes or gaps, as the format's
/// reference loader refuses), and for a file whose kChecksumKey does not
/// match its header and data (a file without the key, written by another
/// tool or an older tmem, is read unchecked: `checksummed` then says so).
/// The returned metadata leaves kChecksumKey out.
SafetensorsFile load_safetensors(const std::string& path);

}  // namespace tmem
