#include "decode_table.h"

#include <array>
#include <cstring>
#include <mutex>

namespace tmorph::cpu {

const std::vector<double>& decode_table(DType dtype) {
  static std::array<std::vector<double>, TM_DTYPE_COUNT_> tables;
  static std::array<std::once_flag, TM_DTYPE_COUNT_> once;
  const auto slot = static_cast<size_t>(dtype);
  std::call_once(once[slot], [&] {
    const size_t width = dtype_size(dtype);
    const size_t patterns = size_t{1} << (8 * width);
    auto& t = tables[slot];
    t.resize(patterns);
    for (size_t p = 0; p < patterns; ++p) {
      uint8_t bytes[2] = {static_cast<uint8_t>(p & 0xFF), static_cast<uint8_t>(p >> 8)};
      t[p] = element_to_double(dtype, bytes);
    }
  });
  return tables[slot];
}

}  // namespace tmorph::cpu
