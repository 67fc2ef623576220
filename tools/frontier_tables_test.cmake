# tools/frontier_tables.py turns a frontier report (tests/fixtures/
# frontier_report: results.json with a --with run, and vs-G.json) into the
# Markdown tables of docs/RESULTS.md, exactly as expected.md holds them
# (each seed's accuracy in seed order, the chosen rate in bold, "-" for a
# cell not finished), and refuses a results.json that is not a report.
if(NOT PYTHON)
  message(FATAL_ERROR "no /usr/bin/python3 (Debian's python3) to run tools/frontier_tables.py")
endif()
set(fixture ${CMAKE_CURRENT_LIST_DIR}/../tests/fixtures/frontier_report)
execute_process(COMMAND ${PYTHON} ${CMAKE_CURRENT_LIST_DIR}/frontier_tables.py ${fixture}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
file(READ ${fixture}/expected.md expected)
if(NOT rc EQUAL 0 OR NOT out STREQUAL expected)
  message(FATAL_ERROR "frontier_tables.py (rc ${rc}) printed:\n${out}${err}\nexpected:\n${expected}")
endif()
set(bad ${CMAKE_CURRENT_BINARY_DIR}/frontier_tables_bad)
file(MAKE_DIRECTORY ${bad})
file(WRITE ${bad}/results.json "{\"task\": \"mqar\", \"cells\": []}\n")
execute_process(COMMAND ${PYTHON} ${CMAKE_CURRENT_LIST_DIR}/frontier_tables.py ${bad}
                RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT err MATCHES "frontier_tables: .*/results.json is not a `tmem frontier --report` result")
  message(FATAL_ERROR "a results.json that is not a report was not refused (rc ${rc}): ${err}")
endif()
file(REMOVE_RECURSE ${bad})
