// Error hierarchy (docs/DESIGN.md §2). Library code throws these for every user
// error; it never aborts. Messages name the op and print the shapes or values
// at fault, PyTorch ATen style: "op: expected ..., but got ...".
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>

namespace tmem {

/// Base of every tmem exception.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
/// Incompatible shapes or ranks.
class ShapeError : public Error { public: using Error::Error; };
/// Unsupported or mismatched dtypes.
class DtypeError : public Error { public: using Error::Error; };
/// Tensors on the wrong or on different devices, or a device failure.
class DeviceError : public Error { public: using Error::Error; };
/// Memory a device (the CPU included) cannot give: an allocation the system
/// refused (torch.OutOfMemoryError).
class OutOfMemoryError : public DeviceError { public: using DeviceError::DeviceError; };
/// An index out of range (embedding rows, gather indices, dims).
class IndexError : public Error { public: using Error::Error; };
/// A bad value: non-finite where forbidden, bad option, misuse of autograd.
class ValueError : public Error { public: using Error::Error; };
/// File input/output failures and malformed files.
class IOError : public Error { public: using Error::Error; };

/// `s` as it may appear in an error message: bytes outside printable ASCII
/// as \xNN, and at most `max` characters, the rest cut and counted
/// ("... (12345 bytes in all)"), so an untrusted value (a config entry, an
/// option, a file's contents) never floods a message.
inline std::string printable(std::string_view s, size_t max = 80) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (out.size() >= max) return out + "... (" + std::to_string(s.size()) + " bytes in all)";
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f) out += static_cast<char>(c);
    else out += std::string("\\x") + kHex[c >> 4] + kHex[c & 15];
  }
  return out;
}

namespace detail {
template <class... Args>
std::string cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
}  // namespace detail

/// Throws E with the streamed concatenation of args when cond is false.
template <class E, class... Args>
inline void check(bool cond, const Args&... args) {
  if (!cond) throw E(detail::cat(args...));
}

}  // namespace tmem
