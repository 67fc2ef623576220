# Runs an MPI job in which one rank fails and checks that the whole job ends
# within LIMIT seconds, with a non-zero exit status and output matching
# EXPECT (the failing rank's message). Usage:
#   cmake -D "CMD=mpirun|-np|2|prog|args" -D EXPECT=regex -D LIMIT=seconds -P dist_expect_abort.cmake
# (CMD's arguments are separated by '|': a ';' would split the CTest command).
# With -D NO_PATH=dir, dir is removed first and must not exist afterwards (a
# job refused before any work leaves no run directory); with -D STATUS=n the
# exit status must be n (2 for a usage error every rank refuses).
string(REPLACE "|" ";" cmd "${CMD}")
if(DEFINED NO_PATH)
  file(REMOVE_RECURSE "${NO_PATH}")
endif()
string(TIMESTAMP t0 "%s")
execute_process(COMMAND ${cmd} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT ${LIMIT})
string(TIMESTAMP t1 "%s")
math(EXPR seconds "${t1} - ${t0}")
message("${out}${err}")
if(NOT rc MATCHES "^[0-9]+$")
  message(FATAL_ERROR "the job did not end within ${LIMIT} s (${rc}): a rank hangs")
endif()
if(rc EQUAL 0)
  message(FATAL_ERROR "the job exited with status 0 although a rank failed")
endif()
if(DEFINED STATUS AND NOT rc EQUAL STATUS)
  message(FATAL_ERROR "the job exited with status ${rc}, not ${STATUS}")
endif()
if(NOT "${out}${err}" MATCHES "${EXPECT}")
  message(FATAL_ERROR "the output does not name the failure (expected a match of \"${EXPECT}\")")
endif()
message(STATUS "the job ended after ${seconds} s with exit status ${rc}")
if(DEFINED NO_PATH AND EXISTS "${NO_PATH}")
  message(FATAL_ERROR "${NO_PATH} exists: the refused job left it behind")
endif()
