#include "diff/lora_adapter.h"

#include <cmath>
#include <filesystem>
#include <map>

#include "checkpoint/openers/open_checkpoint.h"
#include "checkpoint/value_reader.h"
#include "core/json_file.h"
#include "tensormorph/error.h"

namespace tmorph {

namespace {

namespace fs = std::filesystem;

std::string lora_shape_text(const std::vector<uint64_t>& s) {
  std::string t;
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return "[" + t + "]";
}

// A tensor of the adapter read whole as float64, row-major.
std::vector<double> read_all(const Checkpoint& c, const CheckpointTensor& t, const Planner& planner) {
  const View2D view = default_view(t.shape);
  ValueReader r(c, t, planner, view);
  std::vector<double> out(t.elements);
  for (uint64_t row = 0; row < view.rows; ++row) r.read(0, row, 0, view.cols, out.data() + row * view.cols);
  return out;
}

// "base_model.model.X.lora_A.weight" (or "...lora_A.default.weight") -> {X, "A"}.
std::optional<std::pair<std::string, char>> module_of(const std::string& name) {
  for (const char which : {'A', 'B'})
    for (const std::string& tail : {std::string(".lora_") + which + ".weight", std::string(".lora_") + which + ".default.weight"})
      if (name.size() > tail.size() && name.compare(name.size() - tail.size(), tail.size(), tail) == 0) {
        std::string module = name.substr(0, name.size() - tail.size());
        if (module.rfind("base_model.model.", 0) == 0) module = module.substr(17);
        return std::make_pair(module, which);
      }
  return std::nullopt;
}

}  // namespace

bool is_lora_adapter(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) && fs::is_regular_file(fs::path(path) / "adapter_config.json", ec);
}

LoraAdapter open_lora_adapter(const std::string& folder, const Checkpoint& base, const Planner& planner) {
  LoraAdapter ad;
  ad.folder = folder;
  const std::string config_path = (fs::path(folder) / "adapter_config.json").string();
  const auto config = read_json_file(config_path);
  if (!config || !config->is_object()) throw Error(ErrorKind::BadInput, config_path + ": not a JSON object");
  ad.config_text = config->dump();
  const auto bad = [&](const std::string& field, const std::string& why) {
    return Error(ErrorKind::BadInput, config_path + ": " + field + ": " + why);
  };
  if (config->contains("peft_type") && (*config)["peft_type"] != "LORA")
    throw bad("peft_type", "expected \"LORA\", have " + (*config)["peft_type"].dump());
  const auto number = [&](const char* key) {
    if (!config->contains(key) || !(*config)[key].is_number()) throw bad(key, "missing or not a number");
    const double v = (*config)[key].get<double>();
    if (!(v > 0) || !std::isfinite(v)) throw bad(key, "expected a positive number, have " + (*config)[key].dump());
    return v;
  };
  const double r = number("r");
  if (r != std::floor(r) || r > 1e6) throw bad("r", "expected a whole rank, have " + (*config)["r"].dump());
  ad.rank = static_cast<uint64_t>(r);
  ad.alpha = number("lora_alpha");
  const auto flag = [&](const char* key) { return config->contains(key) && (*config)[key].is_boolean() && (*config)[key].get<bool>(); };
  ad.rslora = flag("use_rslora");
  ad.fan_in_fan_out = flag("fan_in_fan_out");
  if (flag("use_dora")) throw bad("use_dora", "DoRA adapters (a learned magnitude per column) are not read");
  for (const char* key : {"rank_pattern", "alpha_pattern"})
    if (config->contains(key) && (*config)[key].is_object() && !(*config)[key].empty())
      throw bad(key, "per-module ranks or alphas are not read yet");
  if (config->contains("target_modules") && (*config)["target_modules"].is_array())
    for (const auto& m : (*config)["target_modules"])
      if (m.is_string()) ad.target_modules.push_back(m.get<std::string>());
  ad.scale = ad.rslora ? ad.alpha / std::sqrt(static_cast<double>(ad.rank)) : ad.alpha / static_cast<double>(ad.rank);

  const std::string weights = (fs::path(folder) / "adapter_model.safetensors").string();
  std::error_code ec;
  if (!fs::exists(weights, ec))
    throw Error(ErrorKind::Io, weights + ": missing (a PEFT LoRA folder holds adapter_config.json and adapter_model.safetensors)");
  ad.weights = std::make_shared<Checkpoint>(open_checkpoint(weights));
  const Checkpoint& w = *ad.weights;
  std::map<std::string, std::pair<const CheckpointTensor*, const CheckpointTensor*>> modules;  // module -> (A, B)
  for (const auto& t : w.tensors) {
    const auto m = module_of(t.name);
    if (!m) {
      ad.unmatched.push_back(t.name);
      continue;
    }
    (m->second == 'A' ? modules[m->first].first : modules[m->first].second) = &t;
  }
  std::map<std::string, const CheckpointTensor*> in_base;
  for (const auto& t : base.tensors) in_base[t.name] = &t;
  for (const auto& entry : modules) {
    // Named copies, not structured bindings: clang 14 (the sanitizer and fuzz builds) cannot capture those.
    const std::string& module = entry.first;
    const auto& ab = entry.second;
    const auto skip = [&](const std::string& why) { ad.skipped.push_back({module, why}); };
    if (!ab.first || !ab.second) {
      skip(std::string("its lora_") + (ab.first ? "B" : "A") + " tensor is missing");
      continue;
    }
    const CheckpointTensor& ta = *ab.first;
    const CheckpointTensor& tb = *ab.second;
    auto it = in_base.find(module + ".weight");
    if (it == in_base.end()) {
      skip("the base has no tensor " + module + ".weight");
      continue;
    }
    const CheckpointTensor& base_t = *it->second;
    // A [r, in], B [out, r]; the base is [out, in] ([in, out] with fan_in_fan_out).
    if (ta.shape.size() != 2 || tb.shape.size() != 2 || ta.shape[0] != ad.rank || tb.shape[1] != ad.rank) {
      skip("lora_A " + lora_shape_text(ta.shape) + " and lora_B " + lora_shape_text(tb.shape) + " are not [r, in] and [out, r] with r = " +
           std::to_string(ad.rank));
      continue;
    }
    const std::vector<uint64_t> want = ad.fan_in_fan_out ? std::vector<uint64_t>{ta.shape[1], tb.shape[0]}
                                                         : std::vector<uint64_t>{tb.shape[0], ta.shape[1]};
    if (base_t.shape != want) {
      skip("the base tensor is " + lora_shape_text(base_t.shape) + "; lora_B · lora_A is " + lora_shape_text({tb.shape[0], ta.shape[1]}) +
           (ad.fan_in_fan_out ? " (transposed: fan_in_fan_out)" : ""));
      continue;
    }
    if (!ta.readable() || !tb.readable()) {
      skip("its lora tensors cannot be read (" + ta.stored_type + ", " + tb.stored_type + ")");
      continue;
    }
    LoraModule m;
    m.base_name = base_t.name, m.a_name = ta.name, m.b_name = tb.name;
    m.rows = want[0], m.cols = want[1];
    const std::vector<double> a = read_all(w, ta, planner), b = read_all(w, tb, planner);
    const uint64_t in = ta.shape[1], out = tb.shape[0], rk = ad.rank;
    if (!ad.fan_in_fan_out) {
      m.left = b, m.right = a;  // [out, r] and [r, in]
    } else {                    // left = Aᵀ [in, r], right = Bᵀ [r, out]
      m.left.resize(in * rk), m.right.resize(rk * out);
      for (uint64_t k = 0; k < rk; ++k)
        for (uint64_t i = 0; i < in; ++i) m.left[i * rk + k] = a[k * in + i];
      for (uint64_t o = 0; o < out; ++o)
        for (uint64_t k = 0; k < rk; ++k) m.right[k * out + o] = b[o * rk + k];
    }
    ad.modules.push_back(std::move(m));
  }
  return ad;
}

void add_lora_row(const LoraAdapter& ad, const LoraModule& m, uint64_t row, uint64_t c0, uint64_t c1, double* values) {
  // Per element the sum runs over k in order (the same as a dot product per element), but row-wise, so that
  // `right` is read along its rows.
  thread_local std::vector<double> sum;
  sum.assign(c1 - c0, 0.0);
  const double* l = m.left.data() + row * ad.rank;
  for (uint64_t k = 0; k < ad.rank; ++k) {
    const double lk = l[k];
    const double* r = m.right.data() + k * m.cols + c0;
    for (uint64_t c = 0; c < c1 - c0; ++c) sum[c] += lk * r[c];
  }
  for (uint64_t c = 0; c < c1 - c0; ++c) values[c] += ad.scale * sum[c];
}

}  // namespace tmorph
