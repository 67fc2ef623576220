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
if(rc EQUAL 0 OR NOT err MATCHES "frontier_tables: .*: results.json or vs-\\*.json is not a `tmem frontier --report` result \\(KeyError: 'table'\\)")
  message(FATAL_ERROR "a results.json that is not a report was not refused (rc ${rc}): ${err}")
endif()
# A report whose vs-G.json lacks its rows, and one whose to_run is a string.
file(READ ${fixture}/results.json report)
file(WRITE ${bad}/results.json "${report}")
file(WRITE ${bad}/vs-G.json "{\"vs\": \"G\", \"to_run\": []}\n")
execute_process(COMMAND ${PYTHON} ${CMAKE_CURRENT_LIST_DIR}/frontier_tables.py ${bad}
                RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT err MATCHES "is not a `tmem frontier --report` result \\(KeyError: 'rows'\\)")
  message(FATAL_ERROR "a vs-G.json without rows was not refused (rc ${rc}): ${err}")
endif()
file(REMOVE ${bad}/vs-G.json)
string(REPLACE "\"to_run\": [" "\"to_run\": \"x\", \"was\": [" report "${report}")
file(WRITE ${bad}/results.json "${report}")
execute_process(COMMAND ${PYTHON} ${CMAKE_CURRENT_LIST_DIR}/frontier_tables.py ${bad}
                RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT err MATCHES "TypeError: to_run is not a list of cell names: 'x'")
  message(FATAL_ERROR "a to_run that is a string was not refused (rc ${rc}): ${err}")
endif()
file(REMOVE_RECURSE ${bad})
