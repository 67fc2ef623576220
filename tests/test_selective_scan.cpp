// selective_scan (ops/selective_scan.h): float64 gradchecks of every input
// with the loss on both outputs, values against a plain sequential loop
// written here, gradients against the same scan composed from primitive
// ops, two chained calls against one call over the whole sequence, partial
// gradients, thread-count independence, empty sizes and errors.
#include <omp.h>

#include <cmath>
#include <string>

#include "test_util.h"

using namespace tmem;
using tmem::test::check_close;
using tmem::test::error_of;
using tmem::test::require_gradcheck;

namespace {

using V = std::vector<Tensor>;
const char* const kInputNames[] = {"u", "delta", "A", "Bm", "Cm", "D", "h0"};

// u, delta, A, Bm, Cm, D, h0 for (B, T, E, N), float64 leaves that require
// grad, delta in [dlo, dhi] and A in [alo, ahi].
V scan_inputs(int64_t B, int64_t T, int64_t E, int64_t N, uint64_t seed = 1, double dlo = 0.1, double dhi = 0.9,
              double alo = -1.5, double ahi = -0.2) {
  return {gc_input({B, T, E}, -1, 1, seed),     gc_input({B, T, E}, dlo, dhi, seed + 1),
          gc_input({E, N}, alo, ahi, seed + 2), gc_input({B, T, N}, -1, 1, seed + 3),
          gc_input({B, T, N}, -1, 1, seed + 4), gc_input({E}, -1, 1, seed + 5),
          gc_input({B, E, N}, -1, 1, seed + 6)};
}

// Fresh leaves holding v's values in dtype dt (undefined stays undefined),
// requiring grad where `mask` says.
V leaves(const V& v, DType dt, const std::vector<bool>& mask = std::vector<bool>(7, true)) {
  V out;
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].defined()) {
      out.push_back(Tensor());
      continue;
    }
    Tensor t = empty(v[i].shape(), dt);
    copy_data(t, v[i]);
    if (mask[i]) t.requires_grad_();
    out.push_back(t);
  }
  return out;
}

SelectiveScanResult scan(const V& v) { return selective_scan(v[0], v[1], v[2], v[3], v[4], v[5], v[6]); }

// y and h side by side in one tensor, so a gradcheck's loss weighs both.
Tensor both(const SelectiveScanResult& r) { return cat({reshape(r.y, {-1}), reshape(r.h, {-1})}, 0); }

// The recurrence of ops/selective_scan.h as a plain float64 loop.
SelectiveScanResult reference(const V& v) {
  const int64_t B = v[0].size(0), T = v[0].size(1), E = v[0].size(2), N = v[3].size(2);
  const std::vector<double> u = v[0].to_vector(), dl = v[1].to_vector(), A = v[2].to_vector(),
                            Bm = v[3].to_vector(), Cm = v[4].to_vector(), D = v[5].to_vector();
  const std::vector<double> h0 = v[6].defined() ? v[6].to_vector() : std::vector<double>(B * E * N, 0.0);
  std::vector<double> y(B * T * E), hout(B * E * N);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t e = 0; e < E; ++e) {
      std::vector<double> h(h0.begin() + (b * E + e) * N, h0.begin() + (b * E + e + 1) * N);
      for (int64_t t = 0; t < T; ++t) {
        const int64_t i = (b * T + t) * E + e;
        double acc = 0;
        for (int64_t n = 0; n < N; ++n) {
          h[n] = std::exp(dl[i] * A[e * N + n]) * h[n] + dl[i] * Bm[(b * T + t) * N + n] * u[i];
          acc += Cm[(b * T + t) * N + n] * h[n];
        }
        y[i] = acc + D[e] * u[i];
      }
      std::copy(h.begin(), h.end(), hout.begin() + (b * E + e) * N);
    }
  return {tensor(y, {B, T, E}, DType::Float64), tensor(hout, {B, E, N}, DType::Float64)};
}

// The same scan composed from primitive tmem ops (slice, exp, mul, add, sum,
// stack), whose gradients come from their own backwards.
SelectiveScanResult composed(const V& v) {
  const Tensor &u = v[0], &delta = v[1], &A = v[2], &Bm = v[3], &Cm = v[4], &D = v[5];
  const int64_t B = u.size(0), T = u.size(1), E = u.size(2), N = Bm.size(2);
  Tensor h = v[6].defined() ? v[6] : zeros({B, E, N}, u.dtype());
  V ys;
  for (int64_t t = 0; t < T; ++t) {
    Tensor dt = reshape(slice(delta, 1, t, t + 1), {B, E, 1});
    Tensor x = reshape(slice(u, 1, t, t + 1), {B, E, 1});
    Tensor Bt = reshape(slice(Bm, 1, t, t + 1), {B, 1, N});
    Tensor Ct = reshape(slice(Cm, 1, t, t + 1), {B, 1, N});
    h = exp(dt * A) * h + dt * x * Bt;
    ys.push_back(sum(h * Ct, {2}) + D * reshape(x, {B, E}));
  }
  return {stack(ys, 1), h};
}

// Runs f on leaves of `base` in dtype dt (requiring grad where `mask`
// says), backpropagates sum(y wy) + sum(h wh) with fixed random weights,
// and returns {y, h, then each input's gradient (undefined where none)}.
template <class F>
V run(F f, const V& base, DType dt, const std::vector<bool>& mask = std::vector<bool>(7, true)) {
  V in = leaves(base, dt, mask);
  SelectiveScanResult r = f(in);
  Generator gen(5);
  Tensor wy = rand(r.y.shape(), 0.5, 1.5, dt, gen), wh = rand(r.h.shape(), 0.5, 1.5, dt, gen);
  (sum(r.y * wy) + sum(r.h * wh)).backward();
  V out{r.y, r.h};
  for (const Tensor& t : in) out.push_back(t.defined() && t.requires_grad() ? t.grad() : Tensor());
  return out;
}

// Every output and gradient of a and b (from run) agree.
void check_runs(const V& a, const V& b, double tol) {
  INFO("y");
  check_close(a[0], b[0].to_vector(), tol, tol);
  INFO("h");
  check_close(a[1], b[1].to_vector(), tol, tol);
  for (size_t k = 2; k < a.size(); ++k) {
    INFO("gradient of " << std::string(kInputNames[k - 2]));
    REQUIRE(a[k].defined() == b[k].defined());
    if (a[k].defined()) check_close(a[k], b[k].to_vector(), tol, tol);
  }
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("selective_scan gradcheck, float64, every input with the loss on y and h") {
  auto f = [](const V& v) { return both(scan(v)); };
  SUBCASE("B=2 T=6 E=3 N=4") { require_gradcheck(f, scan_inputs(2, 6, 3, 4, 11)); }
  SUBCASE("B=1 T=7 E=5 N=3, channels split over several backward tasks") {
    require_gradcheck(f, scan_inputs(1, 7, 5, 3, 21));
  }
  SUBCASE("B=65 T=2 E=2 N=2, one backward task per batch item") { require_gradcheck(f, scan_inputs(65, 2, 2, 2, 31)); }
  SUBCASE("large steps and fast decays: delta up to 3, A down to -4") {
    require_gradcheck(f, scan_inputs(2, 5, 3, 4, 41, 0.5, 3.0, -4.0, -0.5));
  }
  SUBCASE("A near 0 and positive: slow decay and growth") {
    require_gradcheck(f, scan_inputs(2, 5, 3, 4, 51, 0.1, 0.9, -0.1, 0.3));
  }
  SUBCASE("h0 undefined") {
    require_gradcheck([](const V& v) { return both(selective_scan(v[0], v[1], v[2], v[3], v[4], v[5], Tensor())); },
                      scan_inputs(2, 5, 3, 4, 61));
  }
  SUBCASE("loss on y only") { require_gradcheck([](const V& v) { return scan(v).y; }, scan_inputs(2, 5, 3, 4, 71)); }
  SUBCASE("loss on h only") { require_gradcheck([](const V& v) { return scan(v).h; }, scan_inputs(2, 5, 3, 4, 81)); }
}

TEST_CASE("selective_scan equals a plain sequential loop, float32 and float64") {
  for (bool with_h0 : {true, false}) {
    V base = scan_inputs(3, 9, 4, 5, 91);
    if (!with_h0) base[6] = Tensor();
    const SelectiveScanResult ref = reference(base);
    for (DType dt : {DType::Float64, DType::Float32}) {
      INFO(dtype_name(dt) << (with_h0 ? " with h0" : " from zeros"));
      const double tol = dt == DType::Float64 ? 1e-12 : 2e-6;
      const SelectiveScanResult r = scan(leaves(base, dt));
      CHECK(r.y.dtype() == dt);
      CHECK(r.y.shape() == Shape{3, 9, 4});
      CHECK(r.h.shape() == Shape{3, 4, 5});
      check_close(r.y, ref.y.to_vector(), tol, tol);
      check_close(r.h, ref.h.to_vector(), tol, tol);
    }
  }
}

TEST_CASE("selective_scan: exact values of a one-channel, one-state scan") {
  // h = 0.5: step 1: h = e^{-1} 0.5 + 1 * 2 * 3 = 6.18394, y = 4 h + 10 * 3.
  Tensor u = tensor({3.0}, {1, 1, 1}, DType::Float64), dl = tensor({1.0}, {1, 1, 1}, DType::Float64);
  Tensor A = tensor({-1.0}, {1, 1}, DType::Float64), Bm = tensor({2.0}, {1, 1, 1}, DType::Float64);
  Tensor Cm = tensor({4.0}, {1, 1, 1}, DType::Float64), D = tensor({10.0}, {1}, DType::Float64);
  Tensor h0 = tensor({0.5}, {1, 1, 1}, DType::Float64);
  const SelectiveScanResult r = selective_scan(u, dl, A, Bm, Cm, D, h0);
  const double h = std::exp(-1.0) * 0.5 + 6.0;
  check_close(r.h, {h}, 1e-15, 0);
  check_close(r.y, {4.0 * h + 30.0}, 1e-13, 0);
}

TEST_CASE("selective_scan: values and all gradients equal the scan composed from primitive ops") {
  struct Case {
    const char* what;
    int64_t B, T, E, N;
    bool h0;
  };
  for (const Case& c : {Case{"B=2 T=8 E=6 N=4", 2, 8, 6, 4, true}, Case{"B=1 T=9 E=70 N=3, chunked", 1, 9, 70, 3, true},
                        Case{"B=70 T=3 E=2 N=5, one task per item", 70, 3, 2, 5, true},
                        Case{"B=3 T=5 E=4 N=2 from zeros", 3, 5, 4, 2, false}}) {
    INFO(c.what);
    V base = scan_inputs(c.B, c.T, c.E, c.N, 101);
    if (!c.h0) base[6] = Tensor();
    check_runs(run(scan, base, DType::Float64), run(composed, base, DType::Float64), 1e-11);
    check_runs(run(scan, base, DType::Float32), run(composed, base, DType::Float32), 2e-5);
  }
}

TEST_CASE("selective_scan: two chained calls equal one call over the concatenated T, values and gradients") {
  const int64_t T1 = 4;
  // One call over T = 10, or two calls (t < 4, then t >= 4 from the first's
  // h), on slices of the same leaves.
  auto chained = [&](const V& v) {
    auto part = [&](int64_t t0, int64_t t1, const Tensor& h0) {
      return selective_scan(slice(v[0], 1, t0, t1), slice(v[1], 1, t0, t1), v[2], slice(v[3], 1, t0, t1),
                            slice(v[4], 1, t0, t1), v[5], h0);
    };
    const SelectiveScanResult first = part(0, T1, v[6]);
    const SelectiveScanResult second = part(T1, v[0].size(1), first.h);
    return SelectiveScanResult{cat({first.y, second.y}, 1), second.h};
  };
  for (bool with_h0 : {true, false}) {
    INFO((with_h0 ? "with h0" : "from zeros"));
    V base = scan_inputs(3, 10, 5, 4, 121);
    if (!with_h0) base[6] = Tensor();
    check_runs(run(chained, base, DType::Float64), run(scan, base, DType::Float64), 1e-12);
    check_runs(run(chained, base, DType::Float32), run(scan, base, DType::Float32), 2e-5);
  }
}

TEST_CASE("selective_scan: only the inputs that need a gradient get one, with the same values") {
  for (int64_t B : {1, 70}) {
    const V base = scan_inputs(B, 6, 5, 3, 141);
    const V full = run(scan, base, DType::Float64);
    for (size_t k = 0; k < 7; ++k) {
      INFO("B=" << B << ", only " << std::string(kInputNames[k]));
      std::vector<bool> mask(7, false);
      mask[k] = true;
      const V one = run(scan, base, DType::Float64, mask);
      for (size_t i = 0; i < 7; ++i) CHECK(one[2 + i].defined() == (i == k));
      check_close(one[2 + k], full[2 + k].to_vector(), 0, 0);
    }
  }
}

TEST_CASE("selective_scan: the results do not depend on the thread count") {
  const int saved_threads = omp_get_max_threads();
  const V base = scan_inputs(3, 40, 32, 16, 161);  // enough work to run on several threads
  omp_set_num_threads(1);
  const V one = run(scan, base, DType::Float32);
  omp_set_num_threads(3);
  const V three = run(scan, base, DType::Float32);
  omp_set_num_threads(saved_threads);
  check_runs(three, one, 0);
}

TEST_CASE("selective_scan: T=0 gives an empty y and h = h0, and h0's gradient is h's") {
  V in = leaves(scan_inputs(2, 0, 3, 4, 181), DType::Float64);
  const SelectiveScanResult r = scan(in);
  CHECK(r.y.shape() == Shape{2, 0, 3});
  check_close(r.h, in[6].to_vector(), 0, 0);
  Generator gen(3);
  Tensor wh = rand({2, 3, 4}, 0.5, 1.5, DType::Float64, gen);
  sum(r.h * wh).backward();
  check_close(in[6].grad(), wh.to_vector(), 0, 0);
  check_close(in[2].grad(), std::vector<double>(12, 0.0), 0, 0);
  check_close(in[5].grad(), std::vector<double>(3, 0.0), 0, 0);
  CHECK(in[0].grad().shape() == Shape{2, 0, 3});
  const SelectiveScanResult z = selective_scan(in[0], in[1], in[2], in[3], in[4], in[5], Tensor());
  check_close(z.h, std::vector<double>(24, 0.0), 0, 0);
}

TEST_CASE("selective_scan: changing a saved input in place before backward is reported") {
  V in = leaves(scan_inputs(2, 3, 2, 2, 191), DType::Float64);
  Tensor u = in[0] * 2.0;
  const SelectiveScanResult r = selective_scan(u, in[1], in[2], in[3], in[4], in[5], in[6]);
  add_(u, 1.0);
  const std::string e = error_of<ValueError>([&] { sum(r.y).backward(); });
  CHECK(contains(e, "selective_scan"));
  CHECK(contains(e, "modified in place"));
}

TEST_CASE("selective_scan: bad shapes and dtypes raise errors naming the op and the shapes") {
  auto shape_error = [](const V& v) { return error_of<ShapeError>([&] { scan(v); }); };
  V v = scan_inputs(2, 5, 3, 4);
  v[2] = zeros({3, 5}, DType::Float64);
  CHECK(shape_error(v) == "selective_scan: expected A [E,N] = [3,4], but got [3,5] (B,T,E from u[2,5,3], N from Bm[2,5,4])");
  v = scan_inputs(2, 5, 3, 4);
  v[1] = zeros({2, 6, 3}, DType::Float64);
  CHECK(shape_error(v) ==
        "selective_scan: expected delta [B,T,E] = [2,5,3], but got [2,6,3] (B,T,E from u[2,5,3], N from Bm[2,5,4])");
  v = scan_inputs(2, 5, 3, 4);
  v[4] = zeros({2, 5, 3}, DType::Float64);
  CHECK(contains(shape_error(v), "expected Cm [B,T,N] = [2,5,4], but got [2,5,3]"));
  v = scan_inputs(2, 5, 3, 4);
  v[3] = zeros({1, 5, 4}, DType::Float64);
  CHECK(contains(shape_error(v), "expected Bm [B,T,N] = [2,5,4], but got [1,5,4]"));
  v = scan_inputs(2, 5, 3, 4);
  v[5] = Tensor();
  CHECK(contains(shape_error(v), "expected D [E] = [3], but got (undefined)"));
  v = scan_inputs(2, 5, 3, 4);
  v[6] = zeros({2, 4, 3}, DType::Float64);
  CHECK(contains(shape_error(v), "expected h0 [B,E,N] = [2,3,4], but got [2,4,3]"));
  v = scan_inputs(2, 5, 3, 4);
  v[0] = zeros({2, 5}, DType::Float64);
  CHECK(shape_error(v) == "selective_scan: expected u [B,T,E], but got [2,5]");
  v = scan_inputs(2, 5, 3, 4);
  v[3] = zeros({2, 5, 4, 1}, DType::Float64);
  CHECK(shape_error(v) == "selective_scan: expected Bm [B,T,N], but got [2,5,4,1]");

  v = scan_inputs(2, 5, 3, 4);
  v[4] = zeros({2, 5, 4}, DType::Float32);
  CHECK(error_of<DtypeError>([&] { scan(v); }) ==
        "selective_scan: expected every input of u's dtype float64, but Cm is float32");
  V ints;
  for (const Tensor& t : scan_inputs(2, 5, 3, 4)) ints.push_back(zeros(t.shape(), DType::Int64));
  CHECK(error_of<DtypeError>([&] { scan(ints); }) ==
        "selective_scan: expected a floating dtype (float32 or float64), but got int64");
}
