# `tmem frontier --report` leaves out, with a warning naming the file, a cell
# whose result.json holds a key of the wrong type or a config of another
# task (and the other faults below), and reports the good cells (runs in the run of tmem_frontier_tiny).
set(src runs/ctest-frontier/none_lr0.001_seed42)
set(run runs/ctest-frontier-bad)
file(REMOVE_RECURSE ${run})
file(MAKE_DIRECTORY ${run})
file(COPY ${src} DESTINATION ${run})
file(READ ${src}/result.json good)
string(REGEX REPLACE "\"state_floats\": *[0-9]+" "\"state_floats\": \"many\"" typed "${good}")
string(REGEX REPLACE "\"task\": *\"mqar\"" "\"task\": \"map-recall\"" other "${good}")
if(typed STREQUAL good OR other STREQUAL good)
  message(FATAL_ERROR "the fixture cell has no state_floats or task to corrupt: ${good}")
endif()
foreach(bad typed other)
  file(MAKE_DIRECTORY ${run}/${bad})
  file(WRITE ${run}/${bad}/result.json "${${bad}}")
endforeach()
execute_process(COMMAND ${TMEM} frontier mqar --name ctest-frontier-bad --report --steps 2 --batch 2 --eval-batches 1
                RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "report failed (rc ${rc}): ${err}")
endif()
if(NOT err MATCHES "warning: ${run}/typed/result.json is not a finished frontier cell \\(a key is missing or of the wrong type\\): left out")
  message(FATAL_ERROR "no warning for the mistyped cell: ${err}")
endif()
if(NOT err MATCHES "warning: ${run}/other/result.json is not a cell of this frontier \\(its config is of task \"map-recall\", not mqar\\): left out")
  message(FATAL_ERROR "no warning for the other task's cell: ${err}")
endif()
if(NOT out MATCHES "none +- +0 +0.001 .* 1 ")
  message(FATAL_ERROR "the good cell is not in the table: ${out}")
endif()
# A torn result.json, an accuracy out of [0, 1], and a cell copied or edited
# so that its directory is not the one its method, size, lr and seed name
# (a copy would count as a second seed; an edited lr would be chosen) are
# left out with a warning each.
string(SUBSTRING "${good}" 0 40 torn)
string(REGEX REPLACE "\"eval_accuracy\": *[0-9.e+-]+" "\"eval_accuracy\": 5.0" high "${good}")
string(REGEX REPLACE "\"lr\": *[0-9.e+-]+" "\"lr\": 0.5" edited "${good}")
file(MAKE_DIRECTORY ${run}/torn ${run}/high ${run}/none_copy ${run}/none_lr0.001_seed43)
file(WRITE ${run}/torn/result.json "${torn}")
file(WRITE ${run}/high/result.json "${high}")
file(WRITE ${run}/none_copy/result.json "${good}")
file(WRITE ${run}/none_lr0.001_seed43/result.json "${edited}")
execute_process(COMMAND ${TMEM} frontier mqar --name ctest-frontier-bad --report --steps 2 --batch 2 --eval-batches 1
                RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_VARIABLE out)
foreach(expected "${run}/torn/result.json is not a finished frontier cell \\(frontier: cell ${run}/torn/result.json: "
                 "${run}/high/result.json is not a cell of this frontier \\(eval_accuracy 5 is outside \\[0, 1\\]\\)"
                 "${run}/none_copy/result.json is not a cell of this frontier \\(its method, size, lr and seed make the cell none_lr0.001_seed42, not none_copy\\)"
                 "${run}/none_lr0.001_seed43/result.json is not a cell of this frontier \\(its method, size, lr and seed make the cell none_lr0.5_seed42, not none_lr0.001_seed43\\)")
  if(NOT err MATCHES "warning: ${expected}")
    message(FATAL_ERROR "no warning matching ${expected}: ${err}")
  endif()
endforeach()
if(NOT rc EQUAL 0 OR NOT out MATCHES "none +- +0 +0.001 .* 1 ")
  message(FATAL_ERROR "the good cell alone is not the none row (rc ${rc}): ${out}")
endif()
# JSON that is not an object, a stop past the run's steps, a config of
# another state size than the cell's name, and a cell trained with another
# batch than the run's (averaged in, it would skew its row) are left out
# with a warning each, naming the setting.
set(lin runs/ctest-frontier/linear_f4_lr0.003_seed42)
file(READ ${lin}/result.json lin_good)
file(READ runs/ctest-frontier/none_lr0.001_seed43/result.json seed43)
string(REGEX REPLACE "\"stopped_at\": *-?[0-9]+" "\"stopped_at\": 999999" late "${seed43}")
string(REGEX REPLACE "\"linear_features\": *4," "\"linear_features\": 32," resized "${lin_good}")
string(REGEX REPLACE "\"batch\": *2," "\"batch\": 4," rebatched "${good}")
if(late STREQUAL seed43 OR resized STREQUAL lin_good OR rebatched STREQUAL good)
  message(FATAL_ERROR "the fixture cells have no stopped_at, linear_features or batch to corrupt")
endif()
file(REMOVE_RECURSE ${run}/torn ${run}/high ${run}/none_copy ${run}/none_lr0.001_seed43)
file(MAKE_DIRECTORY ${run}/array ${run}/none_lr0.001_seed43 ${run}/linear_f4_lr0.003_seed42)
file(WRITE ${run}/array/result.json "[]")
file(WRITE ${run}/none_lr0.001_seed43/result.json "${late}")
file(WRITE ${run}/linear_f4_lr0.003_seed42/result.json "${resized}")
file(WRITE ${run}/none_lr0.001_seed42/result.json "${rebatched}")
file(READ ${run}/results.json results_before)
execute_process(COMMAND ${TMEM} frontier mqar --name ctest-frontier-bad --report --steps 2 --batch 2 --eval-batches 1
                RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_VARIABLE out)
foreach(expected "${run}/array/result.json is not a finished frontier cell \\(it holds a JSON array, not an object\\)"
                 "${run}/none_lr0.001_seed43/result.json is not a cell of this frontier \\(stopped_at 999999 is past its config's 2 steps\\)"
                 "${run}/linear_f4_lr0.003_seed42/result.json is not a cell of this frontier \\(it was trained with other settings than this command's options:\n  linear_features: saved 32, now 4\\): left out"
                 "${run}/none_lr0.001_seed42/result.json is not a cell of this frontier \\(it was trained with other settings than this command's options:\n  batch: saved 4, now 2\\): left out")
  if(NOT err MATCHES "warning: ${expected}")
    message(FATAL_ERROR "no warning matching ${expected}: ${err}")
  endif()
endforeach()
# With no cell of its options left, the report is refused and the run's
# results.json stays as it was (a report under other options than the run's
# would replace it with an empty table).
file(READ ${run}/results.json results_after)
if(rc EQUAL 0 OR NOT err MATCHES "frontier: no cell in ${run} \\([0-9]+ there\\) is a finished cell of this command's options"
   OR NOT results_before STREQUAL results_after)
  message(FATAL_ERROR "the report of no cell was not refused, or results.json changed (rc ${rc}): ${err}")
endif()
