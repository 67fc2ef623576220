// dist/backend.h in a build without MPI: init() refuses with the reason
// (TMEM_NO_MPI_REASON, set by dist/CMakeLists.txt); dist/dist.cpp calls none
// of the others before a successful init(), and they refuse the same way.
#include <cstdlib>
#include <string>

#include "tmem/dist/backend.h"

namespace tmem::dist::backend {

namespace {
[[noreturn]] void refuse(const char* op) {
  throw ValueError(std::string(op) + ": distributed training is unavailable: " + TMEM_NO_MPI_REASON);
}
}  // namespace

const char* unavailable_reason() { return TMEM_NO_MPI_REASON; }
void init(int&, int&, int&) { refuse("dist::init"); }
void finalize() {}
void abort(int code) { std::_Exit(code); }
void barrier() { refuse("dist::barrier"); }
void broadcast(void*, size_t, int) { refuse("dist::broadcast"); }
void all_reduce_sum(void*, int64_t, DType) { refuse("dist::all_reduce"); }
void all_reduce_max(int64_t*, int) { refuse("dist::all_reduce"); }
void all_gather(const void*, void*, size_t) { refuse("dist::all_gather"); }
int64_t all_reduce_sum_start(void*, int64_t, DType) { refuse("dist::all_reduce_async"); }
bool test(int64_t) { refuse("dist::Work::test"); }
void wait(int64_t) { refuse("dist::Work::wait"); }

}  // namespace tmem::dist::backend
