#include "core/npy.h"

#include "tensormorph/error.h"

namespace tmorph {

std::string npy_descr(DType t, bool* widen) {
  *widen = false;
  switch (t) {
    case DType::F64: return "<f8";
    case DType::F32: return "<f4";
    case DType::F16: return "<f2";
    case DType::I8: return "|i1";
    case DType::I16: return "<i2";
    case DType::I32: return "<i4";
    case DType::I64: return "<i8";
    case DType::U8: return "|u1";
    case DType::U16: return "<u2";
    case DType::U32: return "<u4";
    case DType::U64: return "<u8";
    case DType::BOOL: return "|b1";
    default: *widen = true; return "<f4";  // bf16, f8: every value is exactly a float32
  }
}

std::string npy_preamble(const std::string& descr, const std::vector<uint64_t>& shape) {
  std::string dims;
  for (uint64_t d : shape) dims += std::to_string(d) + ", ";
  if (shape.size() > 1) dims.resize(dims.size() - 1);  // "(2, 3,)" but "(5, )": both valid tuples
  std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (" + dims + "), }";
  const size_t unpadded = 10 + header.size() + 1;
  header += std::string((64 - unpadded % 64) % 64, ' ') + "\n";
  if (header.size() > 65535) throw Error(ErrorKind::InvalidArgument, "npy: shape too long for a .npy v1.0 header");
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xFF);
  out += static_cast<char>(header.size() >> 8);
  return out + header;
}

}  // namespace tmorph
