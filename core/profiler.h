// The op profiler (PyTorch torch.autograd.profiler.profile, libtorch
// RecordProfile): while a `profiler` guard lives, every op's forward (its
// range opened at the op's entry, ops/*.cpp), every backward function the
// autograd engine runs (core/autograd.cpp) and every named region
// (RecordFunction: the optimizer step, gradient clipping, the engine's own
// bookkeeping) is timed on the thread that runs it, together with the bytes
// of tensor storage it allocates (core/tensor.cpp, any device).
//
// Times in the table are self times: a range's duration minus the ranges
// opened inside it, so nested ops (matmul calling reshape) never count twice.
// The ops a backward function calls are part of that backward (they are how
// it computes the gradient): they show in the trace, nested, but their time
// and bytes go to the backward's row. Per (op, phase) the profiler keeps the
// calls, the self time and the bytes for the whole guarded span, and the
// first `max_trace_events` ranges for the Chrome trace.
//
// With no profiler alive an op pays one relaxed atomic load. Times are the
// host's: a device op's row holds its (asynchronous) launches. On CUDA
// builds every range is also an NVTX range (nvtx3), so Nsight Systems shows
// the ops on its timeline above their kernels.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tmem/core/op_id.h"

namespace tmem {

/// Which column a range's time goes to: an op's forward, a backward (an op's
/// backward function, or the autograd engine), or other work (optimizer
/// steps, user regions).
enum class ProfilePhase : uint8_t { Forward = 0, Backward = 1, Other = 2 };

/// Totals of one phase of one row: ranges closed, self time, bytes of
/// tensor storage allocated inside them (and not inside a nested range).
struct PhaseTotals {
  int64_t calls = 0;
  int64_t self_ns = 0;
  int64_t bytes = 0;
};

/// One row of the profiler's table: an op (name as in the op table) or a
/// named region, with its totals per phase.
struct ProfileRow {
  std::string name;
  bool region = false;  // a RecordFunction region, not an op
  PhaseTotals forward, backward, other;
  int64_t calls() const { return forward.calls + other.calls; }
  double forward_ms() const { return forward.self_ns * 1e-6; }
  double backward_ms() const { return backward.self_ns * 1e-6; }
  double total_ms() const { return (forward.self_ns + backward.self_ns + other.self_ns) * 1e-6; }
  int64_t bytes() const { return forward.bytes + backward.bytes + other.bytes; }
};

struct ProfilerOptions {
  /// Ranges kept for the Chrome trace; later ranges still count in the
  /// table and are counted as dropped (about 120 bytes of JSON each).
  size_t max_trace_events = 1000000;
};

/// Records ops while it lives (RAII; one at a time per process). Usage:
///   tmem::profiler prof;
///   ... train ...
///   std::cout << prof.table();
///   prof.export_chrome_trace("trace.json");   // open in ui.perfetto.dev
/// Ranges on every thread count; the table's percentages are of the guard's
/// wall time (construction to stop()).
class profiler {
 public:
  /// Starts recording. Throws ValueError when another profiler is recording.
  explicit profiler(ProfilerOptions options = {});
  /// Stops recording (see stop()).
  ~profiler();
  profiler(const profiler&) = delete;
  profiler& operator=(const profiler&) = delete;

  /// Stops recording and gathers every thread's ranges; ranges still open
  /// then are not counted. Calling it again does nothing.
  void stop();
  /// Wall time from construction to stop() (or to now while recording), ms.
  double wall_ms() const;
  /// The rows (ops and regions with at least one call), by total self time,
  /// largest first. Stops recording first.
  std::vector<ProfileRow> key_averages();
  /// The table: name, forward calls, backward calls, forward ms, backward
  /// ms, total ms, % of the wall time, MB allocated; then the sum of the
  /// rows against the wall time, the time and bytes outside every range,
  /// and the trace events dropped. Stops recording first.
  std::string table();
  /// Writes the Chrome trace-event JSON (complete "X" events: name, cat
  /// forward/backward/other, ts and dur in microseconds from the start,
  /// pid, tid, args.bytes) atomically to `path` (core/file_io.h); opens in
  /// Perfetto and chrome://tracing. Throws IOError naming path. Stops
  /// recording first.
  void export_chrome_trace(const std::string& path);
  /// Bytes of tensor storage allocated while no range was open.
  int64_t bytes_outside_ranges();
  /// Ranges not kept for the trace (past max_trace_events).
  int64_t dropped_events();
  /// A self-check of tmem's ops: the ops whose tape record was made while
  /// their own forward range was not the innermost open one (an op entry
  /// point without a range; OpId::Custom is not checked). Empty when every
  /// op is covered.
  std::vector<std::string> unranged_ops();

 private:
  struct Result;
  ProfilerOptions options_;
  int64_t start_ns_ = 0, stop_ns_ = 0;
  std::unique_ptr<Result> result_;  // set by stop()
};

namespace detail {
/// True while a profiler records (relaxed: a range opened while it turns on
/// or off is simply not counted).
extern std::atomic<bool> g_profiling;
/// Opens a range (returns its session token, 0 when none records) and closes
/// the range a token opened.
uint64_t profiler_begin(uint32_t key, ProfilePhase phase, const char* name);
void profiler_end(uint64_t token);
/// profiler_begin for the region `name` (its row is made on first use).
uint64_t profiler_begin_region(std::string_view name, ProfilePhase phase);
/// Storage of n bytes was allocated on this thread.
void profiler_note_alloc(size_t n);
/// The tape records `op` (core/autograd.cpp): checks that op's range is open.
void profiler_note_record(OpId op);
}  // namespace detail

/// An op's range (ops/*.cpp: the first statement of every op entry point).
/// Times the op's forward, including its tape record. A program's own op
/// (OpId::Custom, examples/custom_op.cpp) opens one too to be timed; its
/// backward is timed by the engine either way.
class OpRange {
 public:
  explicit OpRange(OpId op, ProfilePhase phase = ProfilePhase::Forward) {
    if (detail::g_profiling.load(std::memory_order_relaxed))
      token_ = detail::profiler_begin(static_cast<uint32_t>(op), phase, op_name(op).data());
  }
  ~OpRange() {
    if (token_) detail::profiler_end(token_);
  }
  OpRange(const OpRange&) = delete;
  OpRange& operator=(const OpRange&) = delete;

 private:
  uint64_t token_ = 0;
};

/// A named region's range (PyTorch record_function): its self time is a row
/// of its own, shown as "[name]". Regions of one name share a row.
class RecordFunction {
 public:
  explicit RecordFunction(std::string_view name, ProfilePhase phase = ProfilePhase::Other) {
    if (detail::g_profiling.load(std::memory_order_relaxed)) token_ = detail::profiler_begin_region(name, phase);
  }
  ~RecordFunction() {
    if (token_) detail::profiler_end(token_);
  }
  RecordFunction(const RecordFunction&) = delete;
  RecordFunction& operator=(const RecordFunction&) = delete;

 private:
  uint64_t token_ = 0;
};

}  // namespace tmem
