// dist/backend.h on MPI (Open MPI from Debian; any MPI-3 library works).
// MPI's default error handler (MPI_ERRORS_ARE_FATAL) stays: a transport
// failure ends the whole job, which is what a rank that cannot talk to the
// others must do.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <unordered_map>

#include "tmem/dist/backend.h"

#if defined(__SANITIZE_ADDRESS__)
#define TMEM_LEAK_CHECK 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(leak_sanitizer)
#define TMEM_LEAK_CHECK 1
#endif
#endif
#ifdef TMEM_LEAK_CHECK
#include <sanitizer/lsan_interface.h>
#endif

namespace tmem::dist::backend {

namespace {

std::unordered_map<int64_t, MPI_Request> g_requests;
int64_t g_next_request = 1;

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::Float32: return MPI_FLOAT;
    case DType::Float64: return MPI_DOUBLE;
    case DType::Int64: return MPI_INT64_T;
  }
  return MPI_BYTE;
}

// The first of these environment variables that is set, as an int; -1 when none is.
int env_rank(std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (const char* v = std::getenv(n)) return std::atoi(v);
  return -1;
}

// MPI counts are int: a larger buffer goes in pieces of at most INT_MAX elements.
template <class F>
void in_pieces(char* data, int64_t count, size_t elem, F f) {
  for (int64_t done = 0; done < count;) {
    const int n = static_cast<int>(std::min<int64_t>(count - done, INT_MAX));
    f(data + done * elem, n);
    done += n;
  }
}

}  // namespace

const char* unavailable_reason() { return ""; }

void init(int& rank, int& world_size, int& local_rank) {
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  local_rank = env_rank({"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"});
  if (local_rank < 0) {
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local_rank);
    MPI_Comm_free(&node);
  }
}

void finalize() {
#ifdef TMEM_LEAK_CHECK
  // Under LeakSanitizer: check for leaks now, while Open MPI's components are
  // still loaded. MPI_Finalize unloads them, and the exit-time check would
  // then see their allocations come from unknown modules that
  // tools/lsan_mpi.supp cannot name (only the slow unwinder on every malloc
  // got past that, at 15 times the run time).
  __lsan_do_leak_check();
#endif
  MPI_Finalize();
}

void abort(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

void barrier() { MPI_Barrier(MPI_COMM_WORLD); }

void broadcast(void* data, size_t bytes, int root) {
  in_pieces(static_cast<char*>(data), static_cast<int64_t>(bytes), 1,
            [root](char* p, int n) { MPI_Bcast(p, n, MPI_BYTE, root, MPI_COMM_WORLD); });
}

void all_reduce_sum(void* data, int64_t count, DType dtype) {
  in_pieces(static_cast<char*>(data), count, dtype_size(dtype), [dtype](char* p, int n) {
    MPI_Allreduce(MPI_IN_PLACE, p, n, mpi_type(dtype), MPI_SUM, MPI_COMM_WORLD);
  });
}

void all_reduce_max(int64_t* data, int count) {
  MPI_Allreduce(MPI_IN_PLACE, data, count, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
}

void all_gather(const void* in, void* out, size_t bytes) {
  check<ValueError>(bytes <= static_cast<size_t>(INT_MAX), "dist::all_gather: ", bytes,
                    " bytes per rank is more than MPI's int count allows (", INT_MAX, ")");
  MPI_Allgather(in, static_cast<int>(bytes), MPI_BYTE, out, static_cast<int>(bytes), MPI_BYTE, MPI_COMM_WORLD);
}

int64_t all_reduce_sum_start(void* data, int64_t count, DType dtype) {
  check<ValueError>(count <= INT_MAX, "dist::all_reduce_async: ", count,
                    " elements is more than MPI's int count allows (", INT_MAX, ")");
  MPI_Request r;
  MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(count), mpi_type(dtype), MPI_SUM, MPI_COMM_WORLD, &r);
  const int64_t id = g_next_request++;
  g_requests[id] = r;
  return id;
}

bool test(int64_t id) {
  auto it = g_requests.find(id);
  int done = 1;
  if (it == g_requests.end()) return true;
  MPI_Test(&it->second, &done, MPI_STATUS_IGNORE);
  if (done) g_requests.erase(it);
  return done != 0;
}

void wait(int64_t id) {
  auto it = g_requests.find(id);
  if (it == g_requests.end()) return;
  MPI_Wait(&it->second, MPI_STATUS_IGNORE);
  g_requests.erase(it);
}

}  // namespace tmem::dist::backend
