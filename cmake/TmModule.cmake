# tm_module(NAME SOURCES files... [PUBLIC deps...] [PRIVATE deps...])
# One static library per folder of src/ (tm_NAME). Its dependencies are the edges that
# docs/architecture.md allows for the folder; tests/layering/check_layers.py reads these calls and
# fails on a dependency the picture forbids. PUBLIC: the folder's headers include the dependency's
# headers; PRIVATE: only its .cpp files do.
function(tm_module name)
  cmake_parse_arguments(M "" "" "SOURCES;PUBLIC;PRIVATE" ${ARGN})
  add_library(tm_${name} STATIC ${M_SOURCES})
  # Sources name headers from the repository's roots: "core/error.h", "tensormorph/plugin_abi.h".
  target_include_directories(tm_${name} PUBLIC ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(tm_${name} PUBLIC ${M_PUBLIC} PRIVATE ${M_PRIVATE})
endfunction()
