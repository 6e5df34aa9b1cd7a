# flashgen_embed_files(OUTPUT out.cpp BASE dir FILES dir/a.cuh dir/sub/b.h ...)
# Generates a .cpp that holds each file's text and a lookup by file name, so the
# installed runtime needs no source tree. Regenerated when any file changes.
function(flashgen_embed_files)
  cmake_parse_arguments(ARG "" "OUTPUT;BASE" "FILES" ${ARGN})
  add_custom_command(
    OUTPUT ${ARG_OUTPUT}
    COMMAND ${CMAKE_COMMAND} -DOUTPUT=${ARG_OUTPUT} -DBASE=${ARG_BASE} "-DFILES=${ARG_FILES}"
            -P ${PROJECT_SOURCE_DIR}/cmake/embed_files.cmake
    DEPENDS ${ARG_FILES} ${PROJECT_SOURCE_DIR}/cmake/embed_files.cmake
    COMMENT "Embedding templates into ${ARG_OUTPUT}"
    VERBATIM)
endfunction()
