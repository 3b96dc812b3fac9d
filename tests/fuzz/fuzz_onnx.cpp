// libFuzzer harness: ONNX models (parse_onnx, src/formats/onnx.h) over the whole input as a model file. Every tensor
// it accepts lies inside the input unless it is external; an external tensor's location stays in the model's folder;
// a readable tensor's size is its element count times its dtype's size, except encoded values (the typed varint
// fields: at least one byte per element), whose runs lie inside the input and decode (every value was checked when
// the model was parsed) into exactly element count × dtype size bytes.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "formats/onnx.h"
#include "fuzz_support.h"
#include "tensormorph/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const tmorph::OnnxModel m = tmorph::parse_onnx(data, size, "fuzz.onnx");
    TM_FUZZ_CHECK(m.header_bytes <= size);
    for (const tmorph::OnnxTensor& t : m.tensors) {
      TM_FUZZ_CHECK(!t.name.empty());
      TM_FUZZ_CHECK(t.dtype.has_value() != !t.unavailable_reason.empty());
      if (t.external) {
        TM_FUZZ_CHECK(tmorph::onnx_location_problem(t.location).empty());
        TM_FUZZ_CHECK(t.offset <= UINT64_MAX - t.bytes);
      } else {
        TM_FUZZ_CHECK(t.offset <= size && t.bytes <= size - t.offset);
      }
      if (t.dtype && !t.encoded) TM_FUZZ_CHECK(t.elements * tmorph::dtype_size(*t.dtype) == t.bytes);
      if (t.encoded) {
        TM_FUZZ_CHECK(t.dtype.has_value() && !t.external);
        uint64_t run_bytes = 0;
        for (const tmorph::ByteRun& r : t.encoded->runs) {
          TM_FUZZ_CHECK(r.offset <= size && r.bytes <= size - r.offset);
          run_bytes += r.bytes;
        }
        TM_FUZZ_CHECK(run_bytes == t.bytes && t.elements <= t.bytes);  // the decoded copy is at most 8 × the input
        if (t.encoded->encoding == tmorph::ValueEncoding::LittleEndian) TM_FUZZ_CHECK(t.elements * tmorph::dtype_size(*t.dtype) == t.bytes);
        std::vector<uint8_t> decoded(t.elements * tmorph::dtype_size(*t.dtype));
        bool decodes = true;
        try {
          tmorph::decode_values(data, size, *t.encoded, *t.dtype, t.elements, decoded.data(), "fuzz.onnx", t.name);
        } catch (const tmorph::Error&) {
          decodes = false;
        }
        TM_FUZZ_CHECK(decodes);
      }
      uint64_t elements = 1;
      for (uint64_t d : t.shape) elements *= d;
      TM_FUZZ_CHECK(elements == t.elements);
      if (tmorph::fuzz::verbose())
        std::fprintf(stderr, "tensor %s %s %llu elements, %s\n", t.name.c_str(), t.stored_type.c_str(),
                     static_cast<unsigned long long>(t.elements), t.dtype ? "readable" : t.unavailable_reason.c_str());
    }
  } catch (const tmorph::Error&) {
  }
  return 0;
}
