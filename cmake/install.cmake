# `cmake --install <build> [--prefix P]` installs the C++ package (component
# `dev`): the headers under P/include/tmem/<layer>/ (and the umbrella
# P/include/tmem/tmem.h), the static libraries, and
#   P/<libdir>/cmake/tmem/  tmemConfig.cmake, tmemConfigVersion.cmake, tmemTargets*.cmake
#   P/<libdir>/pkgconfig/tmem.pc
# so that a project outside the repository needs only
#   find_package(tmem 0.1 REQUIRED)  +  target_link_libraries(app PRIVATE tmem::tmem)
# (or `pkg-config --cflags --libs tmem`). The program `tmem` (component cli)
# and the Python module (component python, python/CMakeLists.txt) are
# installed next to it.
include(CMakePackageConfigHelpers)

set(TMEM_INSTALL_TARGETS tmem_core tmem_ops tmem_nn tmem_dist tmem_data tmem_models tmem_all)
if(TMEM_WITH_CUDA)
  list(APPEND TMEM_INSTALL_TARGETS tmem_cuda)
endif()
install(TARGETS ${TMEM_INSTALL_TARGETS} EXPORT tmemTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)

# Every header of the layers a program can include, the CPU kernel headers of
# ops/cpu/ among them (ops/dispatch.h includes them). cuda/'s headers are
# included by cuda/*.cu only and stay private.
install(DIRECTORY core ops nn dist data models DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tmem COMPONENT dev
        FILES_MATCHING PATTERN "*.h" PATTERN "cache" EXCLUDE)
install(FILES tmem.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tmem COMPONENT dev)

set(TMEM_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/tmem)
install(EXPORT tmemTargets NAMESPACE tmem:: DESTINATION ${TMEM_CMAKE_DIR} COMPONENT dev)
configure_package_config_file(cmake/tmemConfig.cmake.in ${PROJECT_BINARY_DIR}/tmemConfig.cmake
                              INSTALL_DESTINATION ${TMEM_CMAKE_DIR})
# 0.x: a minor version may break the API, so 0.1 accepts only 0.1.*.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/tmemConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/tmemConfig.cmake ${PROJECT_BINARY_DIR}/tmemConfigVersion.cmake
        DESTINATION ${TMEM_CMAKE_DIR} COMPONENT dev)

# tmem.pc: the prefix is found from the file's own place (${pcfiledir}), so
# `cmake --install --prefix P` gives a correct file for any P. The libraries
# are static, so their dependencies are in Libs and Requires, not the
# .private fields; -u tmem_cuda_backend_anchor keeps the CUDA backend
# (CMakeLists.txt).
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(TMEM_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH TMEM_PC_UP "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
  string(REGEX REPLACE "/$" "" TMEM_PC_UP "${TMEM_PC_UP}")
  set(TMEM_PC_PREFIX "\${pcfiledir}/${TMEM_PC_UP}")
endif()
set(TMEM_PC_CFLAGS "${OpenMP_CXX_FLAGS}")
set(TMEM_PC_LIBS "-ltmem_models -ltmem_dist -ltmem_nn -ltmem_ops")
if(TMEM_WITH_CUDA)
  string(PREPEND TMEM_PC_LIBS "-Wl,--undefined=tmem_cuda_backend_anchor ")
  string(APPEND TMEM_PC_LIBS " -ltmem_cuda -L${CUDAToolkit_LIBRARY_DIR} -Wl,-rpath,${CUDAToolkit_LIBRARY_DIR} -lcudart -ldl")
  string(APPEND TMEM_PC_CFLAGS " -DTMEM_WITH_CUDA=1")
endif()
string(APPEND TMEM_PC_LIBS " -ltmem_data -ltmem_core ${OpenMP_CXX_FLAGS}")
if(TMEM_WITH_MPI)
  list(JOIN MPI_CXX_LIBRARIES " " TMEM_PC_MPI)
  string(APPEND TMEM_PC_LIBS " ${TMEM_PC_MPI}")
endif()
if(TMEM_WITH_NCCL)
  string(APPEND TMEM_PC_LIBS " ${NCCL_LIBRARY}")
endif()
configure_file(cmake/tmem.pc.in ${PROJECT_BINARY_DIR}/tmem.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/tmem.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT dev)
