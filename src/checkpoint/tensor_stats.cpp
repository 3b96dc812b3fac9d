#include "checkpoint/tensor_stats.h"

#include "checkpoint/ggml_quantized.h"
#include "checkpoint/packed_dequantize.h"
#include "formats/zip_archive.h"
#include "tensormorph/error.h"
#include "tensormorph/planner.h"

namespace tmorph {

std::optional<std::string> unreadable_reason(const CheckpointTensor& t, const Planner& planner) {
  if (t.dtype) return std::nullopt;
  if (t.packed()) {
    if (!t.unavailable_reason.empty()) return t.unavailable_reason;
    try {
      place_packed_dequantize(planner, *t.packed(), t.elements);
      return std::nullopt;
    } catch (const Error& e) {
      return std::string(e.what());
    }
  }
  if (!t.ggml_type()) return t.unavailable_reason.empty() ? "no kernel reads " + t.stored_type : t.unavailable_reason;
  try {
    place_dequantize(planner, quantized_tensor(*t.ggml_type(), nullptr, t.elements));
    return std::nullopt;
  } catch (const Error& e) {
    return std::string(e.what());
  }
}

StatsResult compute_tensor_stats(const Checkpoint& c, const CheckpointTensor& t, const Planner& planner,
                                 const StatsOptions& options) {
  if (t.dtype) {
    StatsResult r = compute_stats(c.data(t), *t.dtype, t.elements, planner, options);
    if (t.crc32)  // after the statistics pass, which brought its pages in
      check_zip_crc(*t.crc32, zip_crc32(c.data(t), t.bytes), t.crc_entry, t.file_offset, t.bytes, c.files[t.file_index]->path());
    return r;
  }
  if (t.packed()) return compute_packed_stats(c, t, planner, options);
  if (!t.ggml_type()) throw Error(ErrorKind::Unavailable, t.name + " (" + t.stored_type + "): " + t.unavailable_reason);
  return compute_quantized_stats(quantized_tensor(*t.ggml_type(), c.data(t), t.elements), planner, options);
}

}  // namespace tmorph
