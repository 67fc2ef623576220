# CTest test "package_install_and_examples" (tests/CMakeLists.txt): installs
# the just-built tree into a fresh prefix and uses it as a project outside
# the repository would:
#   1. cmake --install <build> --prefix <work>/prefix (components dev, python)
#   2. examples/ as a project of its own: find_package(tmem) against the
#      prefix, build, run its tests (the examples)
#   3. tests/package/ (the probe project): "core/tensor.h" does not resolve on
#      tmem::tmem's include path; the CUDA backend is there exactly when tmem
#      was built with it, through find_package and through pkg-config
#   4. the installed Python module imports from the prefix (when built)
# Variables (-D): BUILD_DIR, SOURCE_DIR, WORK_DIR, GENERATOR, BUILD_TYPE,
# CXX_COMPILER, PYTHON (empty without the module), PYTHON_DIR (its install
# folder, relative to the prefix).
cmake_minimum_required(VERSION 3.25)

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}): ${ARGN}\n${out}")
  endif()
  message(STATUS "${what}: ok")
  set(run_output "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)
# The C++ package (component dev) and the Python module (component python);
# the program tmem (component cli) is not needed here.
run("install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix} --component dev)
if(PYTHON)
  run("install python" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix} --component python)
endif()
if(NOT EXISTS ${prefix}/include/tmem/tmem.h OR NOT EXISTS ${prefix}/include/tmem/ops/cpu/simd.h)
  message(FATAL_ERROR "the install has no ${prefix}/include/tmem/tmem.h or ops/cpu/simd.h")
endif()
if(EXISTS ${prefix}/include/core)
  message(FATAL_ERROR "the install put headers in ${prefix}/include/core: a bare \"core/...\" would resolve")
endif()
# Every tmem header an installed header includes is installed too.
file(GLOB_RECURSE headers ${prefix}/include/tmem/*.h)
foreach(h ${headers})
  file(STRINGS ${h} includes REGEX "^#include [\"<]tmem/")
  foreach(line ${includes})
    string(REGEX REPLACE "^#include [\"<](tmem/[^\">]+)[\">].*" "\\1" included "${line}")
    if(NOT EXISTS ${prefix}/include/${included})
      message(FATAL_ERROR "${h} includes ${included}, which is not installed")
    endif()
  endforeach()
endforeach()
list(LENGTH headers n_headers)
message(STATUS "${n_headers} installed headers, each tmem header they include installed")

# A consumer's configure: only the prefix, no package registry (so nothing can
# find the build tree instead).
set(configure_args -G ${GENERATOR} -DCMAKE_BUILD_TYPE=${BUILD_TYPE} -DCMAKE_CXX_COMPILER=${CXX_COMPILER}
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF)
run("configure examples/" ${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples -B ${WORK_DIR}/examples ${configure_args})
file(STRINGS ${WORK_DIR}/examples/CMakeCache.txt tmem_dir REGEX "^tmem_DIR:")
string(FIND "${tmem_dir}" "tmem_DIR:PATH=${prefix}/" at)
if(NOT at EQUAL 0)
  message(FATAL_ERROR "examples/ found tmem elsewhere than in ${prefix}: ${tmem_dir}")
endif()
run("build examples/" ${CMAKE_COMMAND} --build ${WORK_DIR}/examples --parallel 2)
run("run examples/" ${CMAKE_CTEST_COMMAND} --test-dir ${WORK_DIR}/examples --output-on-failure)
message("${run_output}")

run("configure tests/package/" ${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/package -B ${WORK_DIR}/probe ${configure_args})
run("build tests/package/" ${CMAKE_COMMAND} --build ${WORK_DIR}/probe)
file(READ ${WORK_DIR}/probe/with_cuda.txt with_cuda)
run("backend_probe (find_package)" ${WORK_DIR}/probe/backend_probe ${with_cuda})
message("${run_output}")

# pkg-config: the same probe compiled and linked from tmem.pc alone.
find_program(PKG_CONFIG pkg-config REQUIRED)
file(GLOB pc_file ${prefix}/lib/pkgconfig/tmem.pc ${prefix}/lib/*/pkgconfig/tmem.pc)
get_filename_component(pc_dir "${pc_file}" DIRECTORY)
set(ENV{PKG_CONFIG_PATH} "${pc_dir}")
run("pkg-config" ${PKG_CONFIG} --cflags --libs tmem)
string(STRIP "${run_output}" pc_flags)
separate_arguments(pc_flags UNIX_COMMAND "${pc_flags}")
run("build backend_probe (pkg-config)" ${CXX_COMPILER} -std=c++20 ${SOURCE_DIR}/tests/package/backend_probe.cpp
    ${pc_flags} -o ${WORK_DIR}/backend_probe_pc)
run("backend_probe (pkg-config)" ${WORK_DIR}/backend_probe_pc ${with_cuda})

if(PYTHON)
  set(ENV{PYTHONPATH} ${prefix}/${PYTHON_DIR})
  # (Lines, not ';': CMake would split the argument at a ';'.)
  run("import tmem" ${PYTHON} -c "import tmem\nprint(tmem.__file__)\nprint(tmem.randn(2, 3).shape)")
  string(FIND "${run_output}" "${prefix}/${PYTHON_DIR}/tmem/" at)
  if(NOT at EQUAL 0)
    message(FATAL_ERROR "python imported tmem from elsewhere than ${prefix}/${PYTHON_DIR}: ${run_output}")
  endif()
  message("${run_output}")
endif()
