// Error hierarchy (DESIGN.md 2). Library code throws these for every user
// error; it never aborts. Messages name the op and print the shapes or values
// at fault, PyTorch ATen style: "op: expected ..., but got ...".
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

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
/// An index out of range (embedding rows, gather indices, dims).
class IndexError : public Error { public: using Error::Error; };
/// A bad value: non-finite where forbidden, bad option, misuse of autograd.
class ValueError : public Error { public: using Error::Error; };
/// File input/output failures and malformed files.
class IOError : public Error { public: using Error::Error; };

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
