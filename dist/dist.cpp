#include "tmem/dist/dist.h"

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "tmem/core/autograd.h"
#include "tmem/dist/backend.h"
#include "tmem/dist/nccl.h"
#include "tmem/ops/elementwise.h"

namespace tmem::dist {

namespace {

enum class State { Off, On, Finalized };
State g_state = State::Off;
int g_rank = 0, g_world = 1, g_local_rank = 0;

void check_initialized(const char* op) {
  check<ValueError>(g_state == State::On, op, ": the distributed job is not initialized; call "
                    "tmem::dist::init() first (and launch with mpirun or srun)");
}

// A defined tensor on the CPU (MPI) or a CUDA device (NCCL, when built).
void check_placement(const Tensor& t, const char* op) {
  check<ValueError>(t.defined(), op, ": expected a defined tensor");
  const Device d = t.device();
  if (d.is_cpu()) return;
  check<DeviceError>(d.kind == Device::Kind::CUDA, op, ": expected a CPU or CUDA tensor, but got one on ", d.str());
  check<DeviceError>(*nccl::unavailable_reason() == '\0', op, ": a tensor on ", d.str(),
                     " needs the NCCL transport, which this build does not have: ", nccl::unavailable_reason());
}

// Throws ValueError on every rank when the ranks' dtypes, element counts or
// roots differ: one all-reduce of (count, -count, dtype, -dtype, root, -root)
// with max.
void check_agreement(const Tensor& t, const char* op, int root = 0) {
  const auto dt = static_cast<int64_t>(t.dtype());
  int64_t v[6] = {t.numel(), -t.numel(), dt, -dt, root, -root};
  backend::all_reduce_max(v, 6);
  check<ValueError>(v[0] == -v[1] && v[2] == -v[3], op, ": the ranks passed different tensors (",
                    "element counts from ", -v[1], " to ", v[0], ", dtypes ",
                    dtype_name(static_cast<DType>(-v[3])), " to ", dtype_name(static_cast<DType>(v[2])),
                    "); rank ", g_rank, " passed ", t.str());
  check<ValueError>(v[4] == -v[5], op, ": the ranks passed different roots, from ", -v[5], " to ", v[4]);
}

// Runs f on a contiguous tensor with t's data, then copies the result back
// into t when t was not contiguous itself.
template <class F>
void on_contiguous(const Tensor& t, F f) {
  Tensor c = contiguous_data(t);
  f(c);
  if (c.raw_data() != t.raw_data()) copy_data(t, c);
  else t.bump_version();
}

void divide(const Tensor& t, int n) {
  if (!t.device().is_cpu()) {
    const NoGradGuard no_grad;
    copy_data(t, mul(t, 1.0 / n));
    return;
  }
  dispatch_floating(t.dtype(), "dist::all_reduce", [&]<class T>() {
    T* p = t.data<T>();
    const T d = static_cast<T>(n);
    for (int64_t i = 0, e = t.numel(); i < e; ++i) p[i] /= d;
  });
}

// A finished async all_reduce: the Mean division, and the write marked.
void finish(const Tensor& t, ReduceOp op) {
  if (op == ReduceOp::Mean) divide(t, g_world);
  t.bump_version();
}

void check_reduce_dtype(const Tensor& t, ReduceOp op, const char* name) {
  check<DtypeError>(op == ReduceOp::Sum || is_floating(t.dtype()), name,
                    ": ReduceOp::Mean needs a floating tensor, but got ", dtype_name(t.dtype()));
}

// The message of the exception being handled ("unknown exception" for one
// that is not a std::exception).
std::string current_exception_message() {
  try {
    throw;
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown exception";
  }
}

[[noreturn]] void terminate_handler() {
  abort(std::current_exception() ? "uncaught exception: " + current_exception_message()
                                 : "std::terminate called");
}

int64_t env_int(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::atoll(v) : 0;
}

}  // namespace

std::string unavailable_reason() { return backend::unavailable_reason(); }

bool launched_distributed() {
  return env_int("OMPI_COMM_WORLD_SIZE") > 1 || env_int("PMI_SIZE") > 1 ||
         env_int("SLURM_STEP_NUM_TASKS") > 1;
}

void init() {
  if (g_state == State::On) return;
  check<ValueError>(g_state == State::Off,
                    "dist::init: the job was finalized; MPI cannot be initialized twice in one process");
  backend::init(g_rank, g_world, g_local_rank);
  g_state = State::On;
  std::set_terminate(terminate_handler);
}

bool is_initialized() { return g_state == State::On; }
int rank() { return g_rank; }
int world_size() { return g_world; }
int local_rank() { return g_local_rank; }

void finalize() {
  if (g_state != State::On) return;
  nccl::finalize();
  backend::finalize();
  g_state = State::Finalized;
  g_rank = 0;
  g_world = 1;
  g_local_rank = 0;
}

void barrier() {
  check_initialized("dist::barrier");
  backend::barrier();
}

void broadcast(const Tensor& t, int root) {
  check_initialized("dist::broadcast");
  check_placement(t, "dist::broadcast");
  check_agreement(t, "dist::broadcast", root);
  check<ValueError>(root >= 0 && root < g_world, "dist::broadcast: root ", root,
                    " is not a rank of this job of ", g_world);
  on_contiguous(t, [&](const Tensor& c) {
    const size_t bytes = static_cast<size_t>(c.numel()) * dtype_size(c.dtype());
    if (c.device().is_cpu()) backend::broadcast(c.raw_data(), bytes, root);
    else nccl::broadcast(c.device().index, c.raw_data(), bytes, root);
  });
}

void all_reduce(const Tensor& t, ReduceOp op) {
  check_initialized("dist::all_reduce");
  check_placement(t, "dist::all_reduce");
  check_reduce_dtype(t, op, "dist::all_reduce");
  check_agreement(t, "dist::all_reduce");
  on_contiguous(t, [&](const Tensor& c) {
    if (c.device().is_cpu()) backend::all_reduce_sum(c.raw_data(), c.numel(), c.dtype());
    else nccl::all_reduce_sum(c.device().index, c.raw_data(), c.numel(), c.dtype());
    if (op == ReduceOp::Mean) divide(c, g_world);
  });
}

Tensor all_gather(const Tensor& t) {
  check_initialized("dist::all_gather");
  check_placement(t, "dist::all_gather");
  check_agreement(t, "dist::all_gather");
  Shape shape{g_world};
  shape.insert(shape.end(), t.shape().begin(), t.shape().end());
  Tensor out = empty(shape, t.dtype(), t.device());
  Tensor c = contiguous_data(t);
  const size_t bytes = static_cast<size_t>(c.numel()) * dtype_size(c.dtype());
  if (c.device().is_cpu()) backend::all_gather(c.raw_data(), out.raw_data(), bytes);
  else nccl::all_gather(c.device().index, c.raw_data(), out.raw_data(), bytes);
  return out;
}

Work::Work(Work&& o) noexcept
    : id_(std::exchange(o.id_, 0)), t_(std::move(o.t_)), op_(o.op_) {}

Work& Work::operator=(Work&& o) noexcept {
  if (this != &o) {
    if (pending()) wait();
    id_ = std::exchange(o.id_, 0);
    t_ = std::move(o.t_);
    op_ = o.op_;
  }
  return *this;
}

Work::~Work() {
  if (pending() && id_ != kEnqueued) backend::wait(id_);
}

bool Work::test() {
  if (!pending()) return true;
  if (id_ != kEnqueued && !backend::test(id_)) return false;
  id_ = 0;
  finish(t_, op_);
  return true;
}

void Work::wait() {
  if (!pending()) return;
  if (const int64_t id = std::exchange(id_, 0); id != kEnqueued) backend::wait(id);
  finish(t_, op_);
}

Work all_reduce_async(const Tensor& t, ReduceOp op) {
  check_initialized("dist::all_reduce_async");
  check_placement(t, "dist::all_reduce_async");
  check<ValueError>(t.is_contiguous(), "dist::all_reduce_async: expected a contiguous tensor, but got ",
                    t.str(), " with strides ", shape_str(t.strides()));
  check<DtypeError>(is_floating(t.dtype()), "dist::all_reduce_async: expected float32 or float64, but got ",
                    dtype_name(t.dtype()));
  Work w;
  if (t.device().is_cpu()) {
    w.id_ = backend::all_reduce_sum_start(t.raw_data(), t.numel(), t.dtype());
  } else {
    nccl::all_reduce_sum(t.device().index, t.raw_data(), t.numel(), t.dtype());
    w.id_ = Work::kEnqueued;
  }
  w.t_ = t;
  w.op_ = op;
  return w;
}

void abort(const std::string& message) {
  fmt::print(stderr, "tmem: rank {} of {} failed: {}\n", g_rank, g_world, message);
  std::fflush(stderr);
  std::fflush(stdout);
  if (g_state == State::On) backend::abort(1);
  std::_Exit(1);
}

int run(const std::function<int()>& body) {
  try {
    return body();
  } catch (...) {
    abort(current_exception_message());
  }
}

Session::Session() : uncaught_(std::uncaught_exceptions()) { init(); }

Session::~Session() {
  if (std::uncaught_exceptions() > uncaught_)
    abort("an exception is unwinding past the dist::Session (its message is printed where it is caught, "
          "if anywhere)");
  finalize();
}

}  // namespace tmem::dist
