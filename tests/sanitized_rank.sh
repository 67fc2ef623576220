#!/bin/sh
# Runs one rank of an MPI test in the sanitizer build (tools/sanitize.sh;
# tests/CMakeLists.txt puts it between mpirun and the program). Open MPI
# allocates at MPI_Init what it never frees; tools/lsan_mpi.supp suppresses
# those leaks by module (dist/mpi.cpp checks for leaks before MPI_Finalize
# unloads Open MPI's components); tmem's own leaks are still reported.
here=$(cd "$(dirname "$0")" && pwd)
LSAN_OPTIONS="suppressions=$here/../tools/lsan_mpi.supp:print_suppressions=0" \
exec "$@"
