# cmake --install: public headers, libflashgen (shared and static), the tools, a CMake
# package (find_package(flashgen CONFIG) -> flashgen::runtime, flashgen::runtime_static,
# flashgen::compiler) and flashgen.pc. Templates and third-party headers stay internal.
include(CMakePackageConfigHelpers)
set(FLASHGEN_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/flashgen)

install(FILES include/flashgen/flashgen.h include/flashgen/flashgen.hpp include/flashgen/types.hpp
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/flashgen)
install(TARGETS flashgen_runtime flashgen_runtime_static flashgen_compiler EXPORT flashgenTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# flashgen::compiler (KernelSpec -> CUDA source; libflashgen_compiler.a, no CUDA, no LLVM):
# its headers go to include/flashgen/compiler/ and are included as <compiler/codegen.h>,
# as in the source tree (the target puts include/flashgen/ on the include path).
install(DIRECTORY ${PROJECT_SOURCE_DIR}/compiler/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/flashgen/compiler
        FILES_MATCHING PATTERN "*.h")

# The tools find libflashgen next to them (../lib) and their other libraries where the build found them.
foreach(tool IN ITEMS flashgen flashgen-opt)
  if(TARGET ${tool})
    set_target_properties(${tool} PROPERTIES
      INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}" INSTALL_RPATH_USE_LINK_PATH ON)
    install(TARGETS ${tool} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  endif()
endforeach()

install(EXPORT flashgenTargets NAMESPACE flashgen:: DESTINATION ${FLASHGEN_CMAKE_DIR})
configure_package_config_file(cmake/flashgenConfig.cmake.in
  ${PROJECT_BINARY_DIR}/flashgenConfig.cmake INSTALL_DESTINATION ${FLASHGEN_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/flashgenConfigVersion.cmake
  COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/flashgenConfig.cmake ${PROJECT_BINARY_DIR}/flashgenConfigVersion.cmake
        DESTINATION ${FLASHGEN_CMAKE_DIR})

# flashgen.pc locates the prefix from its own directory, so `--prefix` at install time works.
file(RELATIVE_PATH FLASHGEN_PC_TO_PREFIX
     ${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig ${CMAKE_INSTALL_PREFIX})
configure_file(cmake/flashgen.pc.in ${PROJECT_BINARY_DIR}/flashgen.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/flashgen.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# pip install <repo root> (pyproject.toml, scikit-build-core sets SKBUILD): the wheel's only
# native file is libflashgen.so in the package directory, named as python/flashgen/_library.py
# looks for it (a wheel cannot carry the SONAME links).
install(FILES $<TARGET_FILE:flashgen_runtime> DESTINATION flashgen RENAME libflashgen.so
        COMPONENT python_wheel EXCLUDE_FROM_ALL)
if(SKBUILD)  # the wheel's library: the C API only (cmake/wheel-exports.map)
  target_link_options(flashgen_runtime PRIVATE "LINKER:--version-script=${PROJECT_SOURCE_DIR}/cmake/wheel-exports.map")
  set_property(TARGET flashgen_runtime APPEND PROPERTY LINK_DEPENDS ${PROJECT_SOURCE_DIR}/cmake/wheel-exports.map)
endif()
# The CLI, self-contained (the runtime linked in: a wheel cannot carry libflashgen.so.0's
# SONAME link), run by the `flashgen` console script (python/flashgen/_cli.py).
install(PROGRAMS $<TARGET_FILE:flashgen_cli_wheel> DESTINATION flashgen/_bin RENAME flashgen
        COMPONENT python_wheel EXCLUDE_FROM_ALL)
