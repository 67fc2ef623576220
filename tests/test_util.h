// Helpers shared by the test files.
#pragma once
#include <doctest/doctest.h>

#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <sys/resource.h>

#include "tmem/ops/op_table.h"
#include "tmem/ops/ops.h"

namespace tmem::test {

/// A path in the system's temp folder.
inline std::string tmp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / name).string();
}

/// The bytes of a file ("" when it cannot be read).
inline std::string read_all(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

/// Replaces a file's contents with `bytes`.
inline void write_all(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary);
  out << bytes;
}

/// Limits the size of files this process writes to `bytes` while alive
/// (RLIMIT_FSIZE, with SIGXFSZ ignored): a write past it fails with EFBIG as
/// a write to a full disk fails with ENOSPC. Works for root too.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    old_handler_ = std::signal(SIGXFSZ, SIG_IGN);
    getrlimit(RLIMIT_FSIZE, &old_);
    rlimit lim = old_;
    lim.rlim_cur = bytes;
    setrlimit(RLIMIT_FSIZE, &lim);
  }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &old_);
    std::signal(SIGXFSZ, old_handler_);
  }

 private:
  rlimit old_{};
  void (*old_handler_)(int) = nullptr;
};

/// Element-wise |a - b| <= atol + rtol |b| for every element, with a message
/// naming the first element that fails.
inline void check_close(const std::vector<double>& a, const std::vector<double>& b,
                        double atol = 1e-6, double rtol = 1e-5) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    bool ok = std::abs(a[i] - b[i]) <= atol + rtol * std::abs(b[i]) ||
              (std::isnan(a[i]) && std::isnan(b[i])) || (std::isinf(a[i]) && a[i] == b[i]);
    if (!ok) {
      FAIL_CHECK("element " << i << ": got " << a[i] << ", expected " << b[i]);
      return;
    }
  }
}

inline void check_close(const Tensor& a, const std::vector<double>& b, double atol = 1e-6,
                        double rtol = 1e-5) {
  check_close(a.to_vector(), b, atol, rtol);
}

/// Runs gradcheck and fails the test with its message when it does not pass.
inline void require_gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f,
                              const std::vector<Tensor>& inputs, double eps = 1e-6,
                              double atol = 1e-5, double rtol = 1e-3) {
  GradcheckResult r = gradcheck(f, inputs, eps, atol, rtol);
  INFO(r.message);
  CHECK(r.ok);
}

/// The message of the E that f throws ("" when it throws none; an exception
/// of another type propagates).
template <class E = Error, class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "";
}

/// The inputs of an op-table gradcheck case in float32, the dtype device
/// kernels take: floating inputs converted (requires_grad kept), index and
/// undefined inputs as they are.
inline std::vector<Tensor> float32_inputs(const OpCase& c) {
  std::vector<Tensor> in;
  for (const Tensor& t : c.inputs()) {
    if (!t.defined() || !is_floating(t.dtype())) {
      in.push_back(t);
      continue;
    }
    Tensor f = to_dtype(t.detach(), DType::Float32);
    if (t.requires_grad()) f.requires_grad_();
    in.push_back(f);
  }
  return in;
}

}  // namespace tmem::test
