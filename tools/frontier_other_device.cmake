# A frontier cell finished on another device (its result.json says cuda:0)
# is reused under --resume on the CPU, not refused as another config (runs
# in a copy of the run of tmem_frontier_tiny).
set(run runs/ctest-frontier-device)
file(REMOVE_RECURSE ${run})
file(COPY runs/ctest-frontier/ DESTINATION ${run})
set(cell ${run}/none_lr0.001_seed42/result.json)
file(READ ${cell} good)
string(REGEX REPLACE "\"device\": *\"cpu\"" "\"device\": \"cuda:0\"" moved "${good}")
if(moved STREQUAL good)
  message(FATAL_ERROR "the fixture cell has no device to change: ${good}")
endif()
file(WRITE ${cell} "${moved}")
execute_process(COMMAND ${TMEM} frontier mqar --methods none --lr 1e-3,3e-3 --seed 42,43 --steps 2 --batch 2
                        --eval-batches 1 --threads 1 --name ctest-frontier-device --resume
                RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_VARIABLE out)
if(NOT rc EQUAL 0 OR NOT out MATCHES "none_lr0.001_seed42: done earlier")
  message(FATAL_ERROR "the cuda:0 cell was not reused (rc ${rc}): ${out} ${err}")
endif()
file(READ ${cell} after)
if(NOT after STREQUAL moved)
  message(FATAL_ERROR "the reused cell's result.json was rewritten: ${after}")
endif()
file(REMOVE_RECURSE ${run})
