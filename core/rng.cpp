#include "tmem/core/rng.h"

#include <bit>
#include <cmath>
#include <cstdlib>
#include <numbers>
#include <sstream>

#include <fmt/format.h>

namespace tmem {

double Generator::normal() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  double u1 = 1.0 - uniform();  // (0, 1]
  double u2 = uniform();
  double r = std::sqrt(-2.0 * std::log(u1));
  spare_ = r * std::sin(2.0 * std::numbers::pi * u2);
  has_spare_ = true;
  return r * std::cos(2.0 * std::numbers::pi * u2);
}

int64_t Generator::randint(int64_t n) {
  check<ValueError>(n > 0, "randint: expected a positive upper bound, but got ", n);
  uint64_t un = static_cast<uint64_t>(n);
  uint64_t limit = UINT64_MAX - UINT64_MAX % un;
  uint64_t x;
  do x = engine_(); while (x >= limit);
  return static_cast<int64_t>(x % un);
}

std::string Generator::state() const {
  std::ostringstream os;
  os << engine_ << ' ' << has_spare_ << ' ' << fmt::format("{:016x}", std::bit_cast<uint64_t>(spare_));
  return os.str();
}

void Generator::set_state(const std::string& s) {
  std::istringstream is(s);
  std::mt19937_64 e;
  bool has = false;
  std::string spare_text;
  is >> e >> has >> spare_text;
  check<ValueError>(!is.fail() && (is >> std::ws).eof(), "Generator::set_state: malformed state text");
  // An engine whose state words are all 0 yields only 0 (a zeroed or edited
  // checkpoint entry): every later draw would be the same number.
  std::istringstream words(s);
  bool nonzero = false;
  for (size_t i = 0; i < std::mt19937_64::state_size; ++i) {
    uint64_t w = 0;
    words >> w;
    nonzero = nonzero || w != 0;
  }
  check<ValueError>(nonzero, "Generator::set_state: the engine's ", std::mt19937_64::state_size,
                    " state words are all 0, a state that draws only 0");
  double spare = 0;
  const char* begin = spare_text.c_str();
  char* end = nullptr;
  if (spare_text.find_first_of(".p") != std::string::npos) {
    // Written by tmem before the bit pattern: a hexfloat such as 0x1.8p-3
    // (exact too, but std::istream cannot read it back; strtod can).
    spare = std::strtod(begin, &end);
  } else {
    const unsigned long long bits = std::strtoull(begin, &end, 16);
    spare = std::bit_cast<double>(static_cast<uint64_t>(bits));
  }
  check<ValueError>(!spare_text.empty() && end == begin + spare_text.size(),
                    "Generator::set_state: malformed cached normal \"", printable(spare_text), "\"");
  engine_ = e;
  has_spare_ = has;
  spare_ = spare;
}

Generator& default_generator() {
  static Generator gen(0);
  return gen;
}

void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }

Tensor rand(const Shape& shape, double low, double high, DType dtype, Generator& gen) {
  Tensor t = empty(shape, dtype, Device::cpu(), "rand");
  dispatch_floating(dtype, "rand", [&]<class T>() {
    T* p = t.data<T>();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<T>(low + (high - low) * gen.uniform());
  });
  return t;
}

Tensor randn(const Shape& shape, double mean, double std, DType dtype, Generator& gen) {
  Tensor t = empty(shape, dtype, Device::cpu(), "randn");
  dispatch_floating(dtype, "randn", [&]<class T>() {
    T* p = t.data<T>();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<T>(mean + std * gen.normal());
  });
  return t;
}

Tensor randint(const Shape& shape, int64_t high, Generator& gen) {
  Tensor t = empty(shape, DType::Int64, Device::cpu(), "randint");
  int64_t* p = t.data<int64_t>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = gen.randint(high);
  return t;
}

}  // namespace tmem
