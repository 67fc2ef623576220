# cmake -DREADME=<README.md> -DEXAMPLE=<examples/x.cpp> -P readme_example.cmake
# Fails unless README.md shows EXAMPLE whole from its first #include line on, as
# one ```cpp block, so the README's snippet is the code CTest builds and runs.
file(READ ${README} readme)
file(READ ${EXAMPLE} example)
string(FIND "${example}" "\n#include" start)
math(EXPR start "${start} + 1")
string(SUBSTRING "${example}" ${start} -1 body)
string(FIND "${readme}" "```cpp\n${body}```\n" at)
if(at EQUAL -1)
  message(FATAL_ERROR "${README} does not show ${EXAMPLE} from its first #include on as a ```cpp block; "
                      "copy the file's text into the README")
endif()
