# cmake -DIN=<onnx/onnx.proto> -DOUT=<dir/tm_onnx.proto> -P onnx_schema.cmake
# ONNX's schema as Debian's libonnx-dev ships it, for protoc: in package tm_onnx (so that its classes never meet
# libonnx_proto's onnx:: classes in one process, e.g. the Python module beside `import onnx`) and for the lite
# runtime (libprotobuf-lite: no descriptors, no reflection). The field numbers, which are all the wire format
# depends on, are unchanged.
file(READ "${IN}" schema)
string(REGEX REPLACE "\npackage onnx;" "\npackage tm_onnx;" schema "${schema}")
if(NOT schema MATCHES "\npackage tm_onnx;")
  message(FATAL_ERROR "${IN}: no 'package onnx;' line: not ONNX's onnx.proto?")
endif()
if(NOT schema MATCHES "optimize_for = LITE_RUNTIME")
  string(APPEND schema "\noption optimize_for = LITE_RUNTIME;\n")
endif()
file(WRITE "${OUT}.new" "${schema}")
file(COPY_FILE "${OUT}.new" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.new")
