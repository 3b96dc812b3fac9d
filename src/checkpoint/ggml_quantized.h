// A tensor stored in a ggml block format, described for the dequantization ops (ops/dequantize.h): its
// block geometry comes from the GGUF format's type table, which the op layer does not know.
#pragma once

#include <cstdint>

#include "ops/dequantize.h"

namespace tmorph {

// The tensor's geometry from the ggml type table. Throws BadInput when the id is unknown or the
// element count is not a whole number of blocks.
QuantizedTensor quantized_tensor(uint32_t ggml_type, const uint8_t* data, uint64_t elements);

}  // namespace tmorph
