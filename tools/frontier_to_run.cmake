# `tmem frontier --report` lists the cells of its grid (--methods, --lr,
# --seed) not finished yet, in training order, and says when every cell is
# in. Runs on a copy of the run of tmem_frontier_tiny (none and linear at lr
# 1e-3 and 3e-3, seeds 42 and 43), so the run's own config.json is not
# rewritten.
set(run runs/ctest-frontier-to-run)
file(REMOVE_RECURSE ${run})
file(COPY runs/ctest-frontier/ DESTINATION ${run})
function(report expected)
  execute_process(COMMAND ${TMEM} frontier mqar --name ctest-frontier-to-run --report --steps 2 --batch 2 --eval-batches 1 ${ARGN}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0 OR NOT out MATCHES "${expected}")
    message(FATAL_ERROR "report ${ARGN} (rc ${rc}) does not match \"${expected}\":\n${out}${err}")
  endif()
endfunction()
report("every cell of the grid is in \\(2 methods, 2 learning rates, 2 seeds\\)"
       --methods none,linear --lr 1e-3,3e-3 --seed 42,43)
# A third seed for both, and a method whose learning rate is not chosen yet.
report("to run: 4 cells, then the grid of ssm at the chosen learning rate: none_lr0.00[13]_seed44, linear_f32_lr0.00[13]_seed44, ssm_N32_lr0.001_seed42, ssm_N32_lr0.003_seed42\n"
       --methods none,linear,ssm --lr 1e-3,3e-3 --seed 42,43,44)
file(READ ${run}/results.json results)
string(JSON n LENGTH "${results}" to_run)
if(NOT n EQUAL 4)
  message(FATAL_ERROR "results.json's to_run holds ${n} cells, not 4: ${results}")
endif()
# A finished cell taken away is to run again.
file(GLOB f4 ${run}/linear_f4_*)
list(LENGTH f4 found)
if(NOT found EQUAL 1)
  message(FATAL_ERROR "expected one linear f4 cell in ${run}, found ${found}")
endif()
get_filename_component(f4_name ${f4} NAME)
file(REMOVE_RECURSE ${f4})
report("to run: 1 cell: ${f4_name}\n" --methods none,linear --lr 1e-3,3e-3 --seed 42,43)
