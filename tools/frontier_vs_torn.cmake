# `tmem frontier --vs P --report` leaves out a --vs cell whose result.json
# is torn, with one warning naming the file (not one from the frontier's
# cells and another from the sweep's), and tables "-" for it (runs in a
# copy of the run of tmem_frontier_tiny and tmem_frontier_vs_P).
set(run runs/ctest-frontier-vs-torn)
file(REMOVE_RECURSE ${run})
file(COPY runs/ctest-frontier/ DESTINATION ${run})
file(GLOB cells LIST_DIRECTORIES true ${run}/linear_f32_lr*_seed42_P16)
list(LENGTH cells n)
if(NOT n EQUAL 1)
  message(FATAL_ERROR "expected one linear P 16 cell in ${run}, found: ${cells}")
endif()
file(READ ${cells}/result.json good)
string(SUBSTRING "${good}" 0 40 torn)
file(WRITE ${cells}/result.json "${torn}")
execute_process(COMMAND ${TMEM} frontier mqar --methods none,linear --lr 1e-3,3e-3 --seed 42 --steps 2 --batch 2
                        --eval-batches 1 --name ctest-frontier-vs-torn --vs P --values 16,64 --report
                RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "report failed (rc ${rc}): ${err}")
endif()
string(REGEX MATCHALL "warning: " warnings "${err}")
list(LENGTH warnings n)
get_filename_component(cell ${cells} NAME)
if(NOT n EQUAL 1 OR NOT err MATCHES "warning: cell ${run}/${cell}/result.json: not valid JSON [^\n]*: left out\n")
  message(FATAL_ERROR "expected one warning naming ${run}/${cell}/result.json: ${err}")
endif()
if(NOT out MATCHES "\nlinear +f32 +- +[0-9.]+\n")
  message(FATAL_ERROR "the torn cell is not \"-\" in the table: ${out}")
endif()
file(REMOVE_RECURSE ${run})
