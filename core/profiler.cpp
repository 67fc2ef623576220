#include "tmem/core/profiler.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <iterator>
#include <map>
#include <mutex>

#include <fmt/format.h>

#include "tmem/core/error.h"
#include "tmem/core/file_io.h"

#if TMEM_NVTX
#include <nvtx3/nvToolsExt.h>
#endif

namespace tmem {

namespace detail {
std::atomic<bool> g_profiling{false};
}  // namespace detail

namespace {

constexpr size_t kPhases = 3;
constexpr const char* kPhaseNames[kPhases] = {"forward", "backward", "other"};

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct KeyTotals {
  PhaseTotals phase[kPhases];
};

// One closed range kept for the trace.
struct Event {
  int64_t start_ns, dur_ns, bytes;
  uint32_t key;
  ProfilePhase phase;
};

// What one thread recorded in one session; its mutex orders the thread's
// writes against stop() gathering them.
struct ThreadLog {
  std::mutex mu;
  int tid = 0;
  std::vector<Event> events;
  std::vector<KeyTotals> totals;  // by key: OpId, then kOpCount + region index
  std::vector<int64_t> unranged = std::vector<int64_t>(kOpCount);
  int64_t outside_bytes = 0;
};

struct Session {
  uint64_t id = 0;
  size_t max_events = 0;
  std::atomic<size_t> events{0};
  std::atomic<int64_t> dropped{0};
  std::vector<std::shared_ptr<ThreadLog>> logs;  // guarded by g_mu
};

std::mutex g_mu;  // guards g_session, its logs, g_next_id and the region names
std::shared_ptr<Session> g_session;
std::atomic<uint64_t> g_session_id{0};
uint64_t g_next_id = 0;

// Region names, process-wide (a region keeps its key across sessions); a
// deque, so the c_str handed to NVTX stays put.
std::deque<std::string>& region_names() {
  static auto* d = new std::deque<std::string>;  // never destroyed: ranges may close during exit
  return *d;
}
std::map<std::string, uint32_t, std::less<>>& region_keys() {
  static auto* m = new std::map<std::string, uint32_t, std::less<>>;
  return *m;
}

// An open range on this thread's stack.
struct Frame {
  uint32_t key;
  ProfilePhase phase;
  bool folded;  // inside an op's backward function: counted in that backward
  int64_t start_ns;
  int64_t child_ns = 0;  // durations of the ranges nested in it (not folded)
  int64_t bytes = 0;
};

struct ThreadState {
  uint64_t session = 0;
  std::shared_ptr<Session> s;
  std::shared_ptr<ThreadLog> log;
  std::vector<Frame> stack;
};
thread_local ThreadState t_state;

// Attaches this thread to the session recording now (a new log, an empty
// stack); false when none records.
bool attach(ThreadState& t) {
  const uint64_t sid = g_session_id.load(std::memory_order_acquire);
  if (sid != 0 && sid == t.session) return true;
  std::lock_guard<std::mutex> lock(g_mu);
  t.stack.clear();
  if (!g_session) {
    t.session = 0;
    t.s.reset();
    t.log.reset();
    return false;
  }
  t.session = g_session->id;
  t.s = g_session;
  t.log = std::make_shared<ThreadLog>();
  t.log->tid = static_cast<int>(t.s->logs.size());
  t.s->logs.push_back(t.log);
  return true;
}

KeyTotals& totals_of(ThreadLog& log, uint32_t key) {
  if (log.totals.size() <= key) log.totals.resize(key + 1);
  return log.totals[key];
}

}  // namespace

namespace detail {

uint64_t profiler_begin(uint32_t key, ProfilePhase phase, const char* name) {
  ThreadState& t = t_state;
  if (!attach(t)) return 0;
  const bool folded = !t.stack.empty() &&
                      (t.stack.back().folded ||
                       (t.stack.back().phase == ProfilePhase::Backward && t.stack.back().key < kOpCount));
#if TMEM_NVTX
  nvtxRangePushA(name);
#else
  (void)name;
#endif
  t.stack.push_back({key, phase, folded, now_ns()});
  return t.session;
}

uint64_t profiler_begin_region(std::string_view name, ProfilePhase phase) {
  uint32_t key;
  const char* c_name;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto& keys = region_keys();
    auto it = keys.find(name);
    if (it == keys.end()) {
      region_names().emplace_back(name);
      it = keys.emplace(std::string(name), static_cast<uint32_t>(kOpCount + region_names().size() - 1)).first;
    }
    key = it->second;
    c_name = region_names()[key - kOpCount].c_str();
  }
  return profiler_begin(key, phase, c_name);
}

void profiler_end(uint64_t token) {
  const int64_t end = now_ns();
#if TMEM_NVTX
  nvtxRangePop();
#endif
  ThreadState& t = t_state;
  if (t.session != token || t.stack.empty()) return;  // the session it opened in has stopped
  const Frame f = t.stack.back();
  t.stack.pop_back();
  const int64_t dur = end - f.start_ns;
  if (!t.stack.empty()) {
    Frame& parent = t.stack.back();
    if (f.folded) parent.bytes += f.bytes;
    else parent.child_ns += dur;
  }
  Session& s = *t.s;
  const bool keep = s.events.fetch_add(1, std::memory_order_relaxed) < s.max_events;
  std::lock_guard<std::mutex> lock(t.log->mu);
  if (!f.folded) {
    PhaseTotals& p = totals_of(*t.log, f.key).phase[static_cast<size_t>(f.phase)];
    ++p.calls;
    p.self_ns += dur - f.child_ns;
    p.bytes += f.bytes;
  }
  if (keep) t.log->events.push_back({f.start_ns, dur, f.bytes, f.key, f.phase});
  else s.dropped.fetch_add(1, std::memory_order_relaxed);
}

void profiler_note_alloc(size_t n) {
  ThreadState& t = t_state;
  if (!attach(t)) return;
  if (!t.stack.empty()) {
    t.stack.back().bytes += static_cast<int64_t>(n);
    return;
  }
  std::lock_guard<std::mutex> lock(t.log->mu);
  t.log->outside_bytes += static_cast<int64_t>(n);
}

void profiler_note_record(OpId op) {
  if (op == OpId::Custom) return;  // a program's own op: its range is up to the program
  ThreadState& t = t_state;
  if (!attach(t)) return;
  if (!t.stack.empty() && t.stack.back().key == static_cast<uint32_t>(op) &&
      t.stack.back().phase == ProfilePhase::Forward)
    return;
  std::lock_guard<std::mutex> lock(t.log->mu);
  ++t.log->unranged[static_cast<size_t>(op)];
}

}  // namespace detail

struct profiler::Result {
  std::vector<std::string> names;  // by key
  std::vector<KeyTotals> totals;   // by key, every thread
  std::vector<std::pair<int, Event>> events;  // (tid, event)
  std::vector<int64_t> unranged = std::vector<int64_t>(kOpCount);
  int64_t outside_bytes = 0, dropped = 0;
};

profiler::profiler(ProfilerOptions options) : options_(options) {
  std::lock_guard<std::mutex> lock(g_mu);
  check<ValueError>(!g_session, "profiler: another profiler is already recording; stop it (or let it go out "
                                "of scope) before starting one");
  auto s = std::make_shared<Session>();
  s->id = ++g_next_id;
  s->max_events = options.max_trace_events;
  start_ns_ = now_ns();
  g_session = s;
  g_session_id.store(s->id, std::memory_order_release);
  detail::g_profiling.store(true, std::memory_order_relaxed);
}

profiler::~profiler() { stop(); }

void profiler::stop() {
  if (result_) return;
  stop_ns_ = now_ns();
  auto r = std::make_unique<Result>();
  std::shared_ptr<Session> s;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    detail::g_profiling.store(false, std::memory_order_relaxed);
    g_session_id.store(0, std::memory_order_release);
    s = std::move(g_session);
    for (size_t k = 0; k < kOpCount; ++k) r->names.emplace_back(op_name(static_cast<OpId>(k)));
    for (const std::string& n : region_names()) r->names.push_back(n);
  }
  r->totals.resize(r->names.size());
  for (const auto& log : s->logs) {
    std::lock_guard<std::mutex> lock(log->mu);
    for (size_t k = 0; k < log->totals.size(); ++k)
      for (size_t p = 0; p < kPhases; ++p) {
        PhaseTotals& to = r->totals[k].phase[p];
        const PhaseTotals& from = log->totals[k].phase[p];
        to.calls += from.calls;
        to.self_ns += from.self_ns;
        to.bytes += from.bytes;
      }
    for (const Event& e : log->events) r->events.emplace_back(log->tid, e);
    for (size_t k = 0; k < kOpCount; ++k) r->unranged[k] += log->unranged[k];
    r->outside_bytes += log->outside_bytes;
  }
  r->dropped = s->dropped.load();
  result_ = std::move(r);
}

double profiler::wall_ms() const { return ((result_ ? stop_ns_ : now_ns()) - start_ns_) * 1e-6; }

std::vector<ProfileRow> profiler::key_averages() {
  stop();
  std::vector<ProfileRow> rows;
  for (size_t k = 0; k < result_->totals.size(); ++k) {
    const KeyTotals& t = result_->totals[k];
    if (t.phase[0].calls + t.phase[1].calls + t.phase[2].calls == 0) continue;
    rows.push_back({result_->names[k], k >= kOpCount, t.phase[0], t.phase[1], t.phase[2]});
  }
  std::stable_sort(rows.begin(), rows.end(), [](const ProfileRow& a, const ProfileRow& b) {
    return a.total_ms() > b.total_ms();
  });
  return rows;
}

int64_t profiler::bytes_outside_ranges() {
  stop();
  return result_->outside_bytes;
}

int64_t profiler::dropped_events() {
  stop();
  return result_->dropped;
}

std::vector<std::string> profiler::unranged_ops() {
  stop();
  std::vector<std::string> ops;
  for (size_t k = 0; k < kOpCount; ++k)
    if (result_->unranged[k]) ops.emplace_back(op_name(static_cast<OpId>(k)));
  return ops;
}

std::string profiler::table() {
  const std::vector<ProfileRow> rows = key_averages();
  const double wall = wall_ms();
  size_t width = 20;
  for (const ProfileRow& r : rows) width = std::max(width, r.name.size() + (r.region ? 3 : 1));
  std::string out;
  auto put = std::back_inserter(out);
  fmt::format_to(put, "{:<{}} {:>9} {:>9} {:>11} {:>11} {:>11} {:>6} {:>9}\n", "op", width, "calls", "bwd calls",
                 "forward ms", "backward ms", "total ms", "%", "MB");
  auto ms_or_dash = [](const PhaseTotals& p) { return p.calls ? fmt::format("{:.3f}", p.self_ns * 1e-6) : "-"; };
  double sum = 0;
  for (const ProfileRow& r : rows) {
    sum += r.total_ms();
    const std::string name = r.region ? "[" + r.name + "]" : r.name;
    const std::string calls = r.calls() ? std::to_string(r.calls()) : "-";
    const std::string bwd = r.backward.calls ? std::to_string(r.backward.calls) : "-";
    fmt::format_to(put, "{:<{}} {:>9} {:>9} {:>11} {:>11} {:>11.3f} {:>6.1f} {:>9.2f}\n", name, width, calls, bwd,
                   ms_or_dash(r.forward), ms_or_dash(r.backward), r.total_ms(),
                   wall > 0 ? 100 * r.total_ms() / wall : 0.0, r.bytes() / 1e6);
  }
  fmt::format_to(put,
                 "rows sum to {:.3f} ms of {:.3f} ms profiled wall time ({:.1f}%); outside every range: {:.3f} ms\n", sum,
                 wall, wall > 0 ? 100 * sum / wall : 0.0, wall - sum);
  out += "(self times: a nested op or region counts once, in its own row; the ops a backward calls count in that "
         "op's backward; [name]: a region)\n";
  if (result_->outside_bytes)
    fmt::format_to(put, "allocated outside every range: {:.2f} MB\n", result_->outside_bytes / 1e6);
  if (result_->dropped)
    fmt::format_to(put, "trace: {} ranges past max_trace_events ({}) not kept\n", result_->dropped,
                   options_.max_trace_events);
  return out;
}

void profiler::export_chrome_trace(const std::string& path) {
  stop();
  std::vector<std::pair<int, Event>> events = result_->events;
  std::sort(events.begin(), events.end(), [](const auto& a, const auto& b) {
    if (a.first != b.first) return a.first < b.first;
    if (a.second.start_ns != b.second.start_ns) return a.second.start_ns < b.second.start_ns;
    return a.second.dur_ns > b.second.dur_ns;  // the enclosing range first
  });
  std::vector<std::string> quoted;
  for (const std::string& n : result_->names) quoted.push_back(nlohmann::json(n).dump());
  const long pid = static_cast<long>(getpid());
  AtomicFileWriter out(path);
  std::string chunk;
  auto put = std::back_inserter(chunk);
  fmt::format_to(put,
                 "{{\"displayTimeUnit\":\"ms\",\"otherData\":{{\"tool\":\"tmem profiler\",\"wall_ms\":{:.3f},"
                 "\"dropped_events\":{}}},\"traceEvents\":[\n"
                 "{{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":{},\"tid\":0,\"args\":{{\"name\":\"tmem\"}}}}",
                 wall_ms(), result_->dropped, pid);
  for (const auto& [tid, e] : events) {
    chunk += ",\n{\"name\":";
    chunk += quoted[e.key];
    fmt::format_to(put,
                   ",\"cat\":\"{}\",\"ph\":\"X\",\"ts\":{:.3f},\"dur\":{:.3f},\"pid\":{},\"tid\":{},"
                   "\"args\":{{\"bytes\":{}}}}}",
                   kPhaseNames[static_cast<size_t>(e.phase)], (e.start_ns - start_ns_) * 1e-3, e.dur_ns * 1e-3, pid,
                   tid, e.bytes);
    if (chunk.size() > (1 << 20)) {
      out.write(chunk);
      chunk.clear();
    }
  }
  chunk += "\n]}\n";
  out.write(chunk);
  out.commit();
}

}  // namespace tmem
