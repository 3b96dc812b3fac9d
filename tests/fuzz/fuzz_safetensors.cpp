// libFuzzer harness: the safetensors header (parse_safetensors, src/formats/safetensors.h) over the
// whole input as a file. Accepted headers must describe tensors that lie inside the input, contiguous.
#include <cstddef>
#include <cstdint>

#include "formats/safetensors.h"
#include "fuzz_support.h"
#include "tensormorph/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const tmorph::SafetensorsHeader h = tmorph::parse_safetensors(data, size, "fuzz.safetensors");
    TM_FUZZ_CHECK(h.data_offset == 8 + h.header_bytes && h.data_offset <= size);
    uint64_t expected = h.data_offset;
    for (const auto& t : h.tensors) {
      TM_FUZZ_CHECK(t.file_offset == expected && t.end >= t.begin);
      TM_FUZZ_CHECK(t.end - t.begin <= size - t.file_offset);
      TM_FUZZ_CHECK(tmorph::safetensors_dtype_bits(t.dtype_name) != 0);
      expected += t.end - t.begin;
    }
    TM_FUZZ_CHECK(expected == size);
  } catch (const tmorph::Error&) {
  }
  return 0;
}
