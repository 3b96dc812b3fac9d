#include "app/backends_json.h"

#include "app/parity_matrix.h"

#include "checkpoint/packed_tensor.h"
#include "formats/gguf.h"
#include "tensormorph/op_contracts.h"
#include "tensormorph/settings.h"

namespace tmorph::app {

nlohmann::json device_json(const DeviceInfo& d) {
  return {{"index", d.index},
          {"name", d.name},
          {"id", d.id},
          {"kind", device_kind_name(d.kind)},
          {"software_adapter", d.kind == TM_DEVICE_SOFTWARE_ADAPTER},
          {"memory_bytes", d.memory_bytes},
          {"max_allocation_bytes", d.max_allocation_bytes},
          {"max_buffer_binding_bytes", d.max_buffer_binding_bytes},
          {"features", split_list(feature_names(d.features))},
          {"host_link_bytes_per_s", d.host_link_bytes_per_s},
          {"driver_version", d.driver_version.empty() ? nlohmann::json(nullptr) : nlohmann::json(d.driver_version)}};
}

std::vector<SelfTestVerdict> run_all_self_tests(const BackendRegistry& registry) {
  for (const Backend& b : registry.backends()) {
    if (!b.available || b.origin == "static") continue;
    for (const DeviceInfo& d : b.devices)
      for (const KernelInfo& k : b.kernels)
        for (uint32_t id = 0; id < 64; ++id) {
          if (!(k.dtype_mask & (uint64_t{1} << id))) continue;
          OpRequest r;
          r.op = k.op;
          r.elements = 1024, r.bytes = 4096;
          if (tm_op_takes_format(k.op)) {
            r.dtype = DType::F32, r.format_id = id;
            KernelInfo one = k;
            one.dtype_mask = uint64_t{1} << id;
            r.format_name = kernel_inputs(one).at(0);
            if (k.op == TM_OP_DEQUANTIZE_GGML || k.op == TM_OP_QUANT_MOMENTS || k.op == TM_OP_GGML_BLOCK_STATS)
              if (const GgmlType* g = ggml_type(id)) r.format_block_elements = g->block_size, r.format_block_bytes = g->type_size;
          } else {
            r.dtype = static_cast<DType>(id);
          }
          std::string why;
          registry.self_tests().admit(registry, b, d, k, r, &why);
        }
  }
  return registry.self_tests().verdicts();
}

std::vector<std::string> kernel_inputs(const KernelInfo& k) {
  std::vector<std::string> out;
  if (!tm_op_takes_format(k.op)) {
    for (DType t : kAllDTypes)
      if (k.dtype_mask & dtype_bit(t)) out.emplace_back(dtype_name(t));
    return out;
  }
  if (k.op == TM_OP_DEQUANTIZE_PACKED) {
    for (uint32_t s = 0; s < TM_PACKED_COUNT_; ++s)
      if (k.dtype_mask & (uint64_t{1} << s)) out.emplace_back(packed_scheme_name(static_cast<tm_packed_scheme>(s)));
    return out;
  }
  if (k.op == TM_OP_STEM_SSB_OVERLAP) {  // the aberration-function variants
    if (k.dtype_mask & (uint64_t{1} << TM_SSB_QUADRATIC)) out.emplace_back("quadratic");
    if (k.dtype_mask & (uint64_t{1} << TM_SSB_DIRECT)) out.emplace_back("direct");
    return out;
  }
  for (uint32_t id = 0; id < 64; ++id)
    if (k.dtype_mask & (uint64_t{1} << id)) {
      const GgmlType* g = ggml_type(id);
      out.emplace_back(g ? g->name : "ggml:" + std::to_string(id));
    }
  return out;
}

nlohmann::json kernel_json(const KernelInfo& k) {
  return {{"op", op_name(k.op)},
          {"dtypes", kernel_inputs(k)},
          {"precision", precision_name(k.precision, k.tolerance)},
          {"max_elements", k.max_elements},
          {"required_features", split_list(feature_names(k.required_features))},
          {"workspace_fixed_bytes", k.workspace_fixed_bytes},
          {"workspace_bytes_per_element", k.workspace_bytes_per_element},
          {"approx_step", k.approx_step.empty() ? nlohmann::json(nullptr) : nlohmann::json(k.approx_step)},
          {"approx_description", k.approx_description}};
}

const nlohmann::json& parity_matrix() {
  static const nlohmann::json matrix = nlohmann::json::parse(kParityMatrixJson);
  return matrix;
}

nlohmann::json parity_levels(const std::string& name) {
  const nlohmann::json& matrix = parity_matrix();
  nlohmann::json levels = nlohmann::json::object();
  if (!matrix.at("backends").contains(name)) return levels;
  for (const auto& cap : matrix.at("capabilities"))
    if (cap.at("backends").contains(name)) levels[cap.at("id").get<std::string>()] = cap.at("backends").at(name).at("level");
  return levels;
}

nlohmann::json backend_json(const Backend& b) {
  nlohmann::json devices = nlohmann::json::array(), kernels = nlohmann::json::array();
  for (const auto& d : b.devices) devices.push_back(device_json(d));
  for (const auto& k : b.kernels) kernels.push_back(kernel_json(k));
  return {{"name", b.name},
          {"description", b.description},
          {"origin", b.origin},
          {"available", b.available},
          {"reason", b.available ? nlohmann::json(nullptr) : nlohmann::json(b.unavailable_reason)},
          {"detail", b.unavailable_detail},
          {"devices", devices},
          {"kernels", kernels},
          {"parity_levels", parity_levels(b.name)}};
}

}  // namespace tmorph::app
