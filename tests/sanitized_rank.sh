#!/bin/sh
# Runs one rank of an MPI test in the sanitizer build (tools/sanitize.sh;
# tests/CMakeLists.txt puts it between mpirun and the program). Open MPI
# unloads its components at MPI_Finalize, so LeakSanitizer needs the full
# unwinder to see that what they allocated comes from Open MPI's libraries,
# which tools/lsan_mpi.supp suppresses; tmem's own leaks are still reported.
here=$(cd "$(dirname "$0")" && pwd)
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0" \
LSAN_OPTIONS="suppressions=$here/../tools/lsan_mpi.supp:print_suppressions=0" \
exec "$@"
