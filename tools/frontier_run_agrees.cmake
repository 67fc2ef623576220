# A lane that adds cells to a frontier run with other settings is refused
# (its cells would share one table with the run's), as is another task's
# frontier in a run that lost its config.json; neither touches the run's
# files (runs in a copy of the run of tmem_frontier_tiny).
set(run runs/ctest-frontier-mix)
file(REMOVE_RECURSE ${run})
file(COPY runs/ctest-frontier/ DESTINATION ${run})
file(READ ${run}/results.json results_before)
execute_process(COMMAND ${TMEM} frontier mqar --methods none --lr 1e-3,3e-3 --seed 42,43 --steps 2 --batch 4
                        --eval-batches 1 --threads 1 --name ctest-frontier-mix --resume
                RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_VARIABLE out)
if(rc EQUAL 0 OR NOT err MATCHES "tmem: error: frontier: ${run} holds cells trained with other settings than this command gives them \\(every lane of a run takes the same options\\); [a-z0-9_.]+:\n  batch: saved 2, now 4\n")
  message(FATAL_ERROR "--batch 4 over a run of --batch 2 was not refused (rc ${rc}): ${out} ${err}")
endif()
# Another method's cells at other steps: refused too (a --resume extends only its own methods' cells).
execute_process(COMMAND ${TMEM} frontier mqar --methods none --lr 1e-3,3e-3 --seed 42,43 --steps 3 --batch 2
                        --eval-batches 1 --threads 1 --name ctest-frontier-mix --resume
                RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_VARIABLE out)
if(rc EQUAL 0 OR NOT err MATCHES "linear_[a-z0-9_.]+:\n  steps: saved 2, now 3\n")
  message(FATAL_ERROR "--steps 3 over linear cells of 2 steps was not refused (rc ${rc}): ${out} ${err}")
endif()
file(REMOVE ${run}/config.json)
execute_process(COMMAND ${TMEM} frontier map-recall --methods none --lr 1e-3 --seed 42 --steps 2 --batch 2
                        --eval-batches 1 --threads 1 --name ctest-frontier-mix
                RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_VARIABLE out)
if(rc EQUAL 0 OR NOT err MATCHES "tmem: error: frontier: --name: ${run} holds cells of task \"mqar\" \\(${run}/[a-z0-9_.]+/result.json\\), not map-recall")
  message(FATAL_ERROR "map-recall over an mqar run without config.json was not refused (rc ${rc}): ${out} ${err}")
endif()
file(READ ${run}/results.json results_after)
if(NOT results_after STREQUAL results_before OR EXISTS ${run}/config.json)
  message(FATAL_ERROR "a refused lane changed the run's files")
endif()
file(REMOVE_RECURSE ${run})
