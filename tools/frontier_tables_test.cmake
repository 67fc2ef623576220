# tools/frontier_tables.py turns a frontier report (tests/fixtures/
# frontier_report: results.json with a --with run, and vs-G.json) into the
# Markdown tables of docs/RESULTS.md, exactly as expected.md holds them
# (each seed's accuracy in seed order, the chosen rate in bold, "-" for a
# cell not finished), and refuses, in one line, files that are no report.
if(NOT PYTHON)
  message(FATAL_ERROR "no /usr/bin/python3 (Debian's python3) to run tools/frontier_tables.py")
endif()
set(script ${CMAKE_CURRENT_LIST_DIR}/frontier_tables.py)
set(fixture ${CMAKE_CURRENT_LIST_DIR}/../tests/fixtures/frontier_report)
execute_process(COMMAND ${PYTHON} ${script} ${fixture} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
file(READ ${fixture}/expected.md expected)
if(NOT rc EQUAL 0 OR NOT out STREQUAL expected)
  message(FATAL_ERROR "frontier_tables.py (rc ${rc}) printed:\n${out}${err}\nexpected:\n${expected}")
endif()

set(bad ${CMAKE_CURRENT_BINARY_DIR}/frontier_tables_bad)
# Runs the script on ${bad}, whose files `what` describes, and checks that it
# fails with a message matching `pattern`.
function(expect_refusal what pattern)
  execute_process(COMMAND ${PYTHON} ${script} ${bad} RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
  if(rc EQUAL 0 OR NOT err MATCHES "${pattern}")
    message(FATAL_ERROR "${what} was not refused (rc ${rc}): ${err}")
  endif()
endfunction()
file(MAKE_DIRECTORY ${bad})
file(WRITE ${bad}/results.json "{\"task\": \"mqar\", \"cells\": []}\n")
expect_refusal("a results.json that is not a report"
               "frontier_tables: .*: results.json or vs-\\*.json is not a `tmem frontier --report` result \\(KeyError: 'table'\\)")
file(READ ${fixture}/results.json report)
file(WRITE ${bad}/results.json "${report}")
file(WRITE ${bad}/vs-G.json "{\"vs\": \"G\", \"to_run\": []}\n")
expect_refusal("a vs-G.json without rows" "is not a `tmem frontier --report` result \\(KeyError: 'rows'\\)")
# A sweep that trained (not --report) writes no to_run: none left.
file(READ ${fixture}/vs-G.json vs)
string(REGEX REPLACE ",[ \n]*\"to_run\": \\[[^]]*\\]" "" vs "${vs}")
file(WRITE ${bad}/vs-G.json "${vs}")
execute_process(COMMAND ${PYTHON} ${script} ${bad} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "\\| ssm \\(N32\\) \\| 93.8 \\| - \\|\n\nto run: none\n$")
  message(FATAL_ERROR "a trained sweep's vs-G.json (no to_run) was not tabled (rc ${rc}): ${out}${err}")
endif()
file(REMOVE ${bad}/vs-G.json)
string(REPLACE "\"to_run\": [" "\"to_run\": \"x\", \"was\": [" report "${report}")
file(WRITE ${bad}/results.json "${report}")
expect_refusal("a to_run that is a string" "TypeError: to_run is not a list of cell names: 'x'")
file(REMOVE_RECURSE ${bad})
