# `tmem frontier --vs` before the frontier has chosen its learning rates
# fails with the command to run first, and `--device gpu` with the device
# names it takes; neither leaves a run directory behind.
set(run runs/ctest-frontier-vs-nodir)
file(REMOVE_RECURSE ${run})
execute_process(COMMAND ${TMEM} frontier mqar --methods linear --name ctest-frontier-vs-nodir --vs G --values 0,2
                RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_VARIABLE out)
if(rc EQUAL 0)
  message(FATAL_ERROR "expected a failure, got rc 0: ${out}")
endif()
if(NOT err MATCHES "frontier: --vs needs the learning rate of linear: run `tmem frontier mqar --name ctest-frontier-vs-nodir --methods linear` first")
  message(FATAL_ERROR "unexpected error: ${err}")
endif()
if(EXISTS ${run})
  message(FATAL_ERROR "${run} was made although the command failed")
endif()
# So does a device that is not a device name.
execute_process(COMMAND ${TMEM} frontier mqar --methods none --name ctest-frontier-vs-nodir --device gpu
                RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_VARIABLE out)
if(rc EQUAL 0 OR NOT err MATCHES "device: expected cpu, cpu:0, cuda or cuda:<index>, but got \"gpu\"")
  message(FATAL_ERROR "--device gpu was not refused (rc ${rc}): ${err}")
endif()
if(EXISTS ${run})
  message(FATAL_ERROR "${run} was made although --device gpu was refused")
endif()
