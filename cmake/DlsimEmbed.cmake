# dlsim_embed_files(OUT_VAR BASE folder NAMESPACE ns FUNCTION fn FILES a.yaml ...)
# Generates a C++ source defining `const std::vector<dlsim::EmbeddedFile>& ns::fn()` with the
# listed files (paths relative to the repository root) and puts its path in OUT_VAR.
function(dlsim_embed_files out_var)
  cmake_parse_arguments(ARG "" "BASE;NAMESPACE;FUNCTION" "FILES" ${ARGN})
  list(TRANSFORM ARG_FILES PREPEND "${PROJECT_SOURCE_DIR}/" OUTPUT_VARIABLE abs)
  set(cpp ${CMAKE_CURRENT_BINARY_DIR}/${ARG_FUNCTION}_data.cpp)
  add_custom_command(
    OUTPUT ${cpp}
    COMMAND ${CMAKE_COMMAND} -DOUT=${cpp} -DROOT=${PROJECT_SOURCE_DIR} -DBASE=${ARG_BASE}
            "-DFILES=${ARG_FILES}" -DNAMESPACE=${ARG_NAMESPACE} -DFUNCTION=${ARG_FUNCTION}
            -P ${PROJECT_SOURCE_DIR}/cmake/embed_files.cmake
    DEPENDS ${abs} ${PROJECT_SOURCE_DIR}/cmake/embed_files.cmake
    COMMENT "Embedding ${ARG_BASE}"
    VERBATIM)
  set(${out_var} ${cpp} PARENT_SCOPE)
endfunction()
