#include "checkpoint/packed_tensor.h"

#include <nlohmann/json.hpp>

#include "core/json_bounded.h"
#include "tensormorph/error.h"

namespace tmorph {

const char* packed_scheme_name(tm_packed_scheme s) {
  switch (s) {
    case TM_PACKED_FP8: return "fp8";
    case TM_PACKED_MXFP4: return "mxfp4";
    case TM_PACKED_BNB4: return "bnb4";
    case TM_PACKED_GPTQ: return "gptq";
    case TM_PACKED_AWQ: return "awq";
    default: return "unknown";
  }
}

nlohmann::json packed_to_json(const PackedTensor& p) {
  nlohmann::json parts = nlohmann::json::array();
  for (const auto& part : p.parts)
    parts.push_back({{"role", part.role}, {"name", part.name}, {"dtype", dtype_name(part.dtype)}, {"shape", part.shape},
                     {"file", part.file_index}, {"offset", part.file_offset}, {"bytes", part.bytes}});
  nlohmann::json j = {{"scheme", p.variant}, {"kernel_scheme", packed_scheme_name(p.scheme)}, {"bits", p.bits},
                      {"rows", p.rows}, {"cols", p.cols}, {"parts", parts}};
  if (!p.scale_layout.empty()) j["scale_layout"] = p.scale_layout;
  if (p.scheme == TM_PACKED_FP8) j["code_dtype"] = dtype_name(p.code_dtype);
  if (p.scheme == TM_PACKED_FP8) j["block"] = {p.block_rows, p.block_cols};
  if (p.scheme == TM_PACKED_BNB4 || p.scheme == TM_PACKED_AWQ) j["block_size"] = p.block_cols;
  if (p.scheme == TM_PACKED_GPTQ || p.scheme == TM_PACKED_AWQ) j["groups"] = p.groups;
  if (p.scheme == TM_PACKED_GPTQ) j["zero_offset"] = p.zero_offset, j["group_size"] = p.group_size;
  if (p.nested_block) j["nested_block_size"] = p.nested_block, j["nested_offset"] = p.nested_offset;
  return j;
}

PackedTensor packed_from_json(const nlohmann::json& j) {
  try {
    PackedTensor p;
    const std::string kernel = j.at("kernel_scheme").get<std::string>();
    bool known = false;
    for (int s = 0; s < TM_PACKED_COUNT_; ++s)
      if (kernel == packed_scheme_name(static_cast<tm_packed_scheme>(s))) p.scheme = static_cast<tm_packed_scheme>(s), known = true;
    if (!known) throw Error(ErrorKind::BadInput, "unknown packed scheme '" + kernel + "'");
    p.variant = j.at("scheme").get<std::string>();
    p.bits = j.at("bits").get<uint32_t>();
    p.rows = j.at("rows").get<uint64_t>();
    p.cols = j.at("cols").get<uint64_t>();
    p.scale_layout = j.value("scale_layout", "");
    if (j.contains("code_dtype")) p.code_dtype = parse_dtype(j["code_dtype"].get<std::string>()).value_or(DType::U8);
    if (j.contains("block")) p.block_rows = j["block"].at(0).get<uint64_t>(), p.block_cols = j["block"].at(1).get<uint64_t>();
    if (j.contains("block_size")) p.block_cols = j["block_size"].get<uint64_t>();
    p.groups = j.value("groups", uint64_t{0});
    p.zero_offset = j.value("zero_offset", 0);
    p.group_size = j.value("group_size", uint64_t{0});
    p.nested_block = j.value("nested_block_size", uint64_t{0});
    p.nested_offset = j.value("nested_offset", 0.0f);
    for (const auto& part : j.at("parts")) {
      const auto dt = parse_dtype(part.at("dtype").get<std::string>());
      if (!dt) throw Error(ErrorKind::BadInput, "unknown part dtype " + json_brief(part["dtype"]));
      p.parts.push_back({part.at("role").get<std::string>(), part.at("name").get<std::string>(), *dt,
                         part.at("shape").get<std::vector<uint64_t>>(), part.at("file").get<size_t>(),
                         part.at("offset").get<uint64_t>(), part.at("bytes").get<uint64_t>()});
    }
    return p;
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorKind::BadInput, std::string("packed tensor descriptor: ") + e.what());
  }
}

}  // namespace tmorph
