# `tmem frontier --report --with NAME=LABEL` tables and plots the bounded
# methods of another run beside this run's (runs in the runs of
# tmem_frontier_tiny and tmem_frontier_forget_bias), and refuses a run that
# does not exist, an argument without its label, and a run that is not a
# frontier of this task (a train run's cells would only be warned about).
execute_process(COMMAND ${TMEM} frontier mqar --name ctest-frontier --report --steps 2 --batch 2 --eval-batches 1 --with "ctest-frontier-fb=forget bias 2"
                RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "report failed (rc ${rc}): ${err}")
endif()
if(NOT out MATCHES "linear +f32 +4352 .*forget bias 2 \\(runs/ctest-frontier-fb\\):\ntensor +C2_4\\^3 +512 .*tensor +C16_4\\^3 +4096 +0.001 ")
  message(FATAL_ERROR "the other run's tensor row is not under its label: ${out}")
endif()
file(READ runs/ctest-frontier/frontier.svg svg)
if(NOT svg MATCHES ">linear<" OR NOT svg MATCHES ">tensor \\(forget bias 2\\)<")
  message(FATAL_ERROR "the plot lacks the linear line or the labelled tensor line: ${svg}")
endif()
file(READ runs/ctest-frontier/results.json results)
if(NOT results MATCHES "\"label\": \"forget bias 2\"")
  message(FATAL_ERROR "results.json lacks the --with run: ${results}")
endif()
foreach(bad "ctest-no-such-run=x" "ctest-frontier-fb" "=x" "a/b=x" "..=x")
  execute_process(COMMAND ${TMEM} frontier mqar --name ctest-frontier --report --with ${bad}
                  RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
  if(rc EQUAL 0 OR NOT err MATCHES "frontier: --with")
    message(FATAL_ERROR "--with ${bad} was not refused (rc ${rc}): ${err}")
  endif()
endforeach()
foreach(other "train mqar" "frontier map-recall")
  string(REPLACE " " "-" dir "ctest-with-${other}")
  file(MAKE_DIRECTORY runs/${dir})
  file(WRITE runs/${dir}/config.json "{\"command\": \"${other}\", \"config\": {}}\n")
  execute_process(COMMAND ${TMEM} frontier mqar --name ctest-frontier --report --with ${dir}=x
                  RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
  if(rc EQUAL 0 OR NOT err MATCHES "frontier: --with ${dir}=x: runs/${dir} is a run of `tmem ${other}`, not a frontier of mqar")
    message(FATAL_ERROR "--with a run of `tmem ${other}` was not refused (rc ${rc}): ${err}")
  endif()
  file(REMOVE_RECURSE runs/${dir})
endforeach()
# tools/frontier_tables.py tables the --with run's rows under its label from
# the cells results.json keeps for it.
execute_process(COMMAND ${PYTHON} ${CMAKE_CURRENT_LIST_DIR}/frontier_tables.py runs/ctest-frontier
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "\n\\| \\*forget bias 2:\\* \\|[ |]*\n\\| tensor \\| C2_4\\^3 \\| 512 \\| [0-9e-]+ \\| [0-9.]+ \\+- 0.0 \\| [0-9.]+ \\|")
  message(FATAL_ERROR "frontier_tables.py (rc ${rc}) did not table the --with run's cells: ${out}${err}")
endif()
