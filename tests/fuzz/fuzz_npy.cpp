// libFuzzer harness: the NumPy .npy header (parse_npy_header, src/formats/npy_header.h) over the whole input
// as a file. An accepted header's payload lies inside the input, and a readable dtype's size is the element size.
#include <cstddef>
#include <cstdint>

#include "formats/npy_header.h"
#include "fuzz_support.h"
#include "tensormorph/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const tmorph::NpyHeader h = tmorph::parse_npy_header(data, size, "fuzz.npy");
    TM_FUZZ_CHECK(h.data_offset <= size && h.data_bytes <= size - h.data_offset);
    TM_FUZZ_CHECK(h.dtype.has_value() != !h.unavailable_reason.empty());
    if (h.dtype) TM_FUZZ_CHECK(tmorph::dtype_size(*h.dtype) == h.element_size);
    uint64_t elements = 1;
    for (uint64_t d : h.shape) elements *= d;
    TM_FUZZ_CHECK(elements == h.elements && h.elements * h.element_size == h.data_bytes);
  } catch (const tmorph::Error&) {
  }
  return 0;
}
