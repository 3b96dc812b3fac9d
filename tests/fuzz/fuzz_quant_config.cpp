// libFuzzer harness: packed quantization schemes as a safetensors checkpoint's config.json decides them
// (quantization_config(), recognise_packed_tensors: src/checkpoint/checkpoint.cpp, packed_schemes.cpp).
//
// The input is text: config.json's bytes, a line "----", then one tensor per line
//   NAME DTYPE DIMS [CONTENT]
// DIMS is "-" (a scalar) or sizes joined by commas, e.g. "16,8"; "=" makes the tensor a U8 vector of
// CONTENT's bytes (a bitsandbytes quant_state). Other tensors hold CONTENT's bytes, then zeros. A line
// "@quantize_config.json" writes the config under AutoGPTQ's name instead. Lines that name no valid
// tensor (unknown dtype, over 64 KiB or past 256 KiB in all, a repeated name or one that is not UTF-8) are skipped: what is fuzzed is the recognition, not
// the safetensors writer. The harness writes model.safetensors and the config into its scratch folder and
// opens the checkpoint; every logical tensor it recognises must have parts inside the file, and a
// descriptor that survives its own JSON round trip.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/openers/open_checkpoint.h"
#include "formats/safetensors.h"
#include "formats/safetensors_writer.h"
#include "fuzz_support.h"
#include "tensormorph/error.h"

namespace {

// Small files keep the harness fast (the writes dominate); shapes, not sizes, are what recognition reads.
constexpr uint64_t kMaxTensorBytes = uint64_t{64} << 10, kMaxFileBytes = uint64_t{256} << 10;

struct Tensor {
  std::string name, dtype;
  std::vector<uint64_t> shape;
  uint64_t bytes = 0;
  std::string content;
};

std::vector<std::string_view> split(std::string_view s, char sep, size_t max_parts) {
  std::vector<std::string_view> out;
  while (out.size() + 1 < max_parts) {
    const size_t at = s.find(sep);
    if (at == std::string_view::npos) break;
    out.push_back(s.substr(0, at));
    s.remove_prefix(at + 1);
  }
  out.push_back(s);
  return out;
}

bool parse_dims(std::string_view text, std::vector<uint64_t>& shape) {
  if (text == "-") return true;
  for (std::string_view d : split(text, ',', 9)) {
    if (d.empty() || d.size() > 7) return false;
    uint64_t v = 0;
    for (char ch : d) {
      if (ch < '0' || ch > '9') return false;
      v = v * 10 + static_cast<uint64_t>(ch - '0');
    }
    shape.push_back(v);
  }
  return shape.size() <= 8;
}

// One tensor line, or false when it names none the writer could write.
bool parse_tensor(std::string_view line, std::set<std::string>& names, Tensor& t) {
  const auto f = split(line, ' ', 4);
  if (f.size() < 3 || f[0].empty() || f[0] == "__metadata__" || !names.insert(std::string(f[0])).second) return false;
  t.name = f[0];
  try {
    (void)nlohmann::json(t.name).dump();  // a safetensors header is JSON: its names are UTF-8
  } catch (const nlohmann::json::exception&) {
    return false;
  }
  t.dtype = f[1];
  t.content = f.size() == 4 ? std::string(f[3]) : std::string();
  const uint32_t bits = tmorph::safetensors_dtype_bits(t.dtype);
  if (bits == 0) return false;
  if (f[2] == "=") {
    t.dtype = "U8";
    t.shape = {t.content.size()};
    t.bytes = t.content.size();
    return true;
  }
  if (!parse_dims(f[2], t.shape)) return false;
  uint64_t elements = 1;
  for (uint64_t d : t.shape) {
    if (d && elements > kMaxTensorBytes * 8 / d) return false;
    elements *= d;
  }
  if (elements * bits % 8 || elements * bits / 8 > kMaxTensorBytes) return false;
  t.bytes = elements * bits / 8;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t sep = input.find("\n----\n");
  const std::string_view config = input.substr(0, sep);
  std::string config_name = "config.json";
  std::vector<Tensor> tensors;
  std::set<std::string> names;
  if (sep != std::string_view::npos) {
    uint64_t total = 0;
    for (std::string_view line : split(input.substr(sep + 6), '\n', 64)) {
      if (line == "@quantize_config.json") config_name = "quantize_config.json";
      Tensor t;
      if (parse_tensor(line, names, t) && t.bytes <= kMaxFileBytes - total) total += t.bytes, tensors.push_back(std::move(t));
    }
  }
  if (tensors.empty()) return 0;

  const std::string dir = tmorph::fuzz::scratch_dir();
  std::remove((dir + "/config.json").c_str());
  std::remove((dir + "/quantize_config.json").c_str());
  tmorph::fuzz::write_file(dir + "/" + config_name, config.data(), config.size());
  const std::string path = dir + "/model.safetensors";
  {
    tmorph::SafetensorsWriter w(path, size_t{64} << 10);  // not the default 8 MiB buffer: allocated per run
    for (const auto& t : tensors) w.add_tensor(t.name, t.dtype, t.shape);
    w.write_header();
    for (const auto& t : tensors) {
      std::string bytes = t.content.substr(0, t.bytes);
      bytes.resize(t.bytes, '\0');
      w.begin_tensor(t.name);
      w.append(bytes.data(), bytes.size());
      w.end_tensor();
    }
    w.finish();
  }

  try {
    const tmorph::Checkpoint c = tmorph::open_checkpoint(path);
    TM_FUZZ_CHECK(c.files.size() == 1);
    const uint64_t file_size = c.files[0]->size();
    for (const auto& t : c.tensors) {
      TM_FUZZ_CHECK(t.file_offset <= file_size);
      if (!t.packed()) {
        TM_FUZZ_CHECK(t.bytes <= file_size - t.file_offset);
        continue;
      }
      TM_FUZZ_CHECK(!t.packed()->parts.empty() && t.packed()->rows * t.packed()->cols == t.elements);
      for (const auto& part : t.packed()->parts)
        TM_FUZZ_CHECK(part.file_index == 0 && part.file_offset <= file_size && part.bytes <= file_size - part.file_offset);
      const nlohmann::json j = tmorph::packed_to_json(*t.packed());
      tmorph::PackedTensor back;
      try {
        back = tmorph::packed_from_json(nlohmann::json::parse(j.dump()));
      } catch (const tmorph::Error& e) {
        std::fprintf(stderr, "packed descriptor of '%s' does not read back: %s\n%s\n", t.name.c_str(), e.what(), j.dump().c_str());
        TM_FUZZ_CHECK(false);
      }
      TM_FUZZ_CHECK(back.variant == t.packed()->variant && back.parts.size() == t.packed()->parts.size() &&
                    back.rows == t.packed()->rows && back.cols == t.packed()->cols);
    }
    if (tmorph::fuzz::verbose())
      for (const auto& t : c.tensors)
        std::fprintf(stderr, "tensor %s: %s%s%s\n", t.name.c_str(), t.stored_type.c_str(),
                     t.packed() ? (" " + tmorph::packed_to_json(*t.packed()).dump()).c_str() : "",
                     t.unavailable_reason.empty() ? "" : (" (" + t.unavailable_reason + ")").c_str());
  } catch (const tmorph::Error& e) {
    if (tmorph::fuzz::verbose()) std::fprintf(stderr, "refused: %s\n", e.what());
  }
  return 0;
}
