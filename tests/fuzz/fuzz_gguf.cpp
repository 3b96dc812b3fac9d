// libFuzzer harness: the GGUF header, KV section and tensor infos (parse_gguf, src/formats/gguf.h), in
// both array modes. Summary must accept and refuse exactly what Values does, with the same message, and
// agree on everything but the array values; accepted tensors must lie inside the input.
#include <cstddef>
#include <cstdint>
#include <string>

#include "formats/gguf.h"
#include "fuzz_support.h"
#include "tensormorph/error.h"

namespace {

struct Outcome {
  bool ok = false;
  std::string error;
  tmorph::GgufFile file;
};

Outcome parse(const uint8_t* data, size_t size, tmorph::GgufArrays arrays) {
  Outcome o;
  try {
    o.file = tmorph::parse_gguf(data, size, "fuzz.gguf", arrays);
    o.ok = true;
  } catch (const tmorph::Error& e) {
    o.error = e.what();
  }
  return o;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Outcome values = parse(data, size, tmorph::GgufArrays::Values);
  const Outcome summary = parse(data, size, tmorph::GgufArrays::Summary);
  TM_FUZZ_CHECK(values.ok == summary.ok);
  TM_FUZZ_CHECK(values.error == summary.error);
  if (!values.ok) return 0;
  const tmorph::GgufFile& v = values.file;
  const tmorph::GgufFile& s = summary.file;
  TM_FUZZ_CHECK(v.kvs.size() == s.kvs.size() && v.tensors.size() == s.tensors.size());
  for (size_t i = 0; i < v.kvs.size(); ++i) {
    TM_FUZZ_CHECK(v.kvs[i].key == s.kvs[i].key && v.kvs[i].type == s.kvs[i].type && v.kvs[i].offset == s.kvs[i].offset);
    if (v.kvs[i].type == tmorph::GgufType::ARRAY) {
      TM_FUZZ_CHECK(v.kvs[i].element_type == s.kvs[i].element_type && v.kvs[i].count == s.kvs[i].count);
      TM_FUZZ_CHECK(v.kvs[i].value.is_array() && v.kvs[i].value.size() == v.kvs[i].count && s.kvs[i].value.is_null());
    } else {
      // Not ==: a NaN equals nothing. GGUF strings are bytes (not always UTF-8): dump() would throw.
      const auto text = [](const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); };
      TM_FUZZ_CHECK(text(v.kvs[i].value) == text(s.kvs[i].value));
    }
  }
  TM_FUZZ_CHECK(v.data_section_offset <= size);
  for (size_t i = 0; i < v.tensors.size(); ++i) {
    const auto& t = v.tensors[i];
    TM_FUZZ_CHECK(t.name == s.tensors[i].name && t.data_offset == s.tensors[i].data_offset && t.bytes == s.tensors[i].bytes);
    TM_FUZZ_CHECK(t.type && !t.ne.empty() && t.ne.size() <= 4 && t.shape.size() == t.ne.size());
    TM_FUZZ_CHECK(t.data_offset <= size && t.bytes <= size - t.data_offset);
    TM_FUZZ_CHECK(t.data_offset % v.alignment == v.data_section_offset % v.alignment);
  }
  return 0;
}
