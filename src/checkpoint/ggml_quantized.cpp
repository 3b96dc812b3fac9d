#include "checkpoint/ggml_quantized.h"

#include "formats/gguf.h"
#include "tensormorph/error.h"

namespace tmorph {

QuantizedTensor quantized_tensor(uint32_t ggml_type_id, const uint8_t* data, uint64_t elements) {
  const GgmlType* g = ggml_type(ggml_type_id);
  if (!g || g->dense) throw Error(ErrorKind::BadInput, "ggml type " + std::to_string(ggml_type_id) + " is not a block format");
  if (elements % g->block_size)
    throw Error(ErrorKind::BadInput, std::string(g->name) + ": " + std::to_string(elements) +
                                         " elements are not a whole number of " + std::to_string(g->block_size) + "-element blocks");
  return {g->id, g->name, g->block_size, g->type_size, data, elements};
}

}  // namespace tmorph
