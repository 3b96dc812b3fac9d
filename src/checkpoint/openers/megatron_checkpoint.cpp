#include "checkpoint/openers/megatron_checkpoint.h"
#include "checkpoint/openers/opener.h"

#include <filesystem>

#include "checkpoint/openers/dcp_checkpoint.h"
#include "checkpoint/openers/torch_tensor.h"
#include "core/json_file.h"
#include "formats/deepspeed_zero.h"
#include "formats/torch_save.h"
#include "tensormorph/error.h"

namespace tmorph {

namespace fs = std::filesystem;

namespace {

std::optional<nlohmann::json> megatron_metadata(const std::string& dir) {
  const std::string path = (fs::path(dir) / "metadata.json").string();
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return std::nullopt;
  try {
    auto doc = read_json_file(path);
    if (doc && doc->is_object() && doc->value("sharded_backend", nlohmann::json()).is_string() &&
        (*doc)["sharded_backend"].get<std::string>() == "torch_dist")
      return doc;
  } catch (const Error&) {
  }
  return std::nullopt;
}

// common.pt may hold the training arguments (argparse.Namespace, with dtypes) beside DeepSpeed-like scalars.
TorchSaveOptions common_options() {
  TorchSaveOptions o = zero_torch_save_options();
  o.extra_globals.push_back("argparse.Namespace");
  for (const auto& t : torch_element_types()) o.extra_globals.push_back(std::string("torch.") + t.dtype);
  o.extra_what += ", argparse.Namespace, the torch dtypes";
  return o;
}

}  // namespace

bool is_megatron_directory(const std::string& dir) { return is_dcp_directory(dir) && megatron_metadata(dir).has_value(); }

Checkpoint open_megatron(const std::string& dir) {
  Checkpoint c = open_dcp(dir);
  c.format = "megatron";
  const std::string meta_path = (fs::path(dir) / "metadata.json").string();
  c.sidecars.push_back(meta_path);
  if (const auto doc = megatron_metadata(dir))
    for (const auto& [k, v] : doc->items()) c.metadata["megatron." + k] = v.is_string() ? v.get<std::string>() : v.dump();
  const std::string common = (fs::path(dir) / "common.pt").string();
  std::error_code ec;
  if (!fs::is_regular_file(common, ec)) {
    c.metadata["megatron.common"] = "(absent: no common.pt)";
    return c;
  }
  try {
    auto file = std::make_shared<MappedFile>(common);
    const TorchSaveFile f = parse_torch_save(file->data(), file->size(), common, common_options());
    for (const auto& [k, v] : f.metadata) c.metadata.emplace(k, v);
    for (const auto& t : f.tensors) {
      CheckpointTensor ct = torch_checkpoint_tensor(f, t, c.files.size(), file->size());
      ct.name = "common." + ct.name;
      c.tensors.push_back(std::move(ct));
    }
    c.files.push_back(std::move(file));
    c.header_bytes.push_back(f.header_bytes);
  } catch (const Error& e) {
    c.metadata["megatron.common"] = std::string("(unreadable: ") + e.what() + ")";
  }
  return c;
}

namespace {
bool recognises_megatron(const CheckpointProbe& p) { return p.directory() && p.listing().files.empty() && is_megatron_directory(p.path()); }
Checkpoint open_megatron_probe(const CheckpointProbe& p) { return open_megatron(p.path()); }
}  // namespace

extern const CheckpointOpener kMegatronDirectoryOpener{"a Megatron torch_dist folder (metadata.json + DCP)", recognises_megatron, open_megatron_probe};

}  // namespace tmorph
