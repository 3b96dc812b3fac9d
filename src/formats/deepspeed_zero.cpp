#include "formats/deepspeed_zero.h"

#include <algorithm>
#include <optional>

#include "core/utf8.h"
#include "tensormorph/error.h"

namespace tmorph {

namespace {

[[noreturn]] void zero_bad(const std::string& path, const std::string& what) {
  throw Error(ErrorKind::BadInput, escape_invalid_utf8(path + ": " + what));
}

// The entries of a dict or an OrderedDict (a REDUCE of collections.OrderedDict with SETITEMS), or null.
const std::vector<std::pair<PickleRef, PickleRef>>* entries_of(const PickleValue& v) {
  if (v.kind == PickleKind::Dict) return &v.entries;
  if (v.kind == PickleKind::Reduce && v.items[0]->text == "collections.OrderedDict") return &v.entries;
  return nullptr;
}

// d[key] for a string key, or null when d is no dict or has no such key.
const PickleValue* get(const PickleValue* d, const std::string& key) {
  const auto* e = d ? entries_of(*d) : nullptr;
  if (!e) return nullptr;
  for (const auto& [k, v] : *e)
    if (k->kind == PickleKind::Str && k->text == key) return v.get();
  return nullptr;
}

// An int, or a member of DeepSpeed's ZeroStageEnum: Python pickles an Enum member as getattr(cls, name)
// (REDUCE of builtins.getattr, "__builtin__.getattr" under protocol 2), or by value as REDUCE(cls, (int,)).
std::optional<int64_t> int_value(const PickleValue* v) {
  if (!v) return std::nullopt;
  if (v->kind == PickleKind::Int) return v->integer;
  if (v->kind != PickleKind::Reduce) return std::nullopt;
  const auto& args = v->items[1]->items;
  if (args.size() == 1 && args[0]->kind == PickleKind::Int) return args[0]->integer;
  const std::string& callable = v->items[0]->text;
  if ((callable == "builtins.getattr" || callable == "__builtin__.getattr") && args.size() == 2 && args[0]->kind == PickleKind::Global &&
      args[0]->text == "deepspeed.runtime.zero.config.ZeroStageEnum" && args[1]->kind == PickleKind::Str) {
    static const char* const kStages[] = {"disabled", "optimizer_states", "gradients", "weights"};
    for (int64_t i = 0; i < 4; ++i)
      if (args[1]->text == kStages[i]) return i;
  }
  return std::nullopt;
}

// A shape: torch.Size((a, b)) (REDUCE of torch.Size with one tuple), a tuple or a list of ints.
std::optional<std::vector<uint64_t>> shape_value(const PickleValue& v) {
  const PickleValue* dims = &v;
  if (v.kind == PickleKind::Reduce && v.items[0]->text == "torch.Size" && v.items[1]->items.size() == 1) dims = v.items[1]->items[0].get();
  if (dims->kind != PickleKind::Tuple && dims->kind != PickleKind::List) return std::nullopt;
  std::vector<uint64_t> out;
  for (const auto& d : dims->items) {
    if (d->kind != PickleKind::Int || d->integer < 0) return std::nullopt;
    out.push_back(static_cast<uint64_t>(d->integer));
  }
  return out;
}

std::map<std::string, size_t> tensors_by_name(const TorchSaveFile& f) {
  std::map<std::string, size_t> m;
  for (size_t i = 0; i < f.tensors.size(); ++i) m.emplace(f.tensors[i].name, i);
  return m;
}

std::vector<ZeroParamShape> param_group(const PickleValue& g, const std::string& path, size_t index) {
  const auto* e = entries_of(g);
  if (!e) zero_bad(path, "param_shapes[" + std::to_string(index) + "] is a " + pickle_kind_name(g.kind) + ", not a dict of name -> shape");
  std::vector<ZeroParamShape> out;
  for (const auto& [k, v] : *e) {
    if (k->kind != PickleKind::Str) zero_bad(path, "param_shapes[" + std::to_string(index) + "] has a key that is not a name (byte " + std::to_string(k->offset) + ")");
    const auto shape = shape_value(*v);
    if (!shape) zero_bad(path, "param_shapes: '" + k->text + "' has no shape (expected torch.Size or a tuple of ints, byte " + std::to_string(v->offset) + ")");
    ZeroParamShape p{k->text, *shape, 1};
    for (uint64_t d : p.shape) {
      if (d != 0 && p.elements > UINT64_MAX / d) zero_bad(path, "param_shapes: '" + k->text + "': its element count overflows 64 bits");
      p.elements *= d;
    }
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace

const std::vector<std::string>& zero_allowed_globals() {
  static const std::vector<std::string> names = {
      "torch.Size",
      "deepspeed.runtime.fp16.loss_scaler.LossScaler",
      "deepspeed.runtime.fp16.loss_scaler.DynamicLossScaler",
      "deepspeed.runtime.zero.config.ZeroStageEnum",
      "deepspeed.utils.tensor_fragment.fragment_address",
      "builtins.set",
      "__builtin__.set",  // protocol 2 names builtins by their Python 2 module
      "builtins.getattr",  // how an Enum member pickles: getattr(cls, name); a name only, nothing is called
      "__builtin__.getattr",
  };
  return names;
}

TorchSaveOptions zero_torch_save_options() {
  TorchSaveOptions o;
  o.extra_globals = zero_allowed_globals();
  o.extra_what = "torch.Size, DeepSpeed's loss scalers, ZeroStageEnum and fragment_address, builtins.set, builtins.getattr";
  o.allow_newobj = true;
  return o;
}

ZeroModelStates parse_zero_model_states(const uint8_t* bytes, uint64_t size, const std::string& path) {
  ZeroModelStates m;
  m.file = parse_torch_save(bytes, size, path, zero_torch_save_options());
  const PickleValue* root = m.file.root.get();
  const PickleValue* shapes = get(root, "param_shapes");
  if (!shapes) zero_bad(path, "no param_shapes entry: not a DeepSpeed ZeRO model-states file");
  if (entries_of(*shapes)) {
    m.param_shapes.push_back(param_group(*shapes, path, 0));
  } else if (shapes->kind == PickleKind::List || shapes->kind == PickleKind::Tuple) {
    for (size_t i = 0; i < shapes->items.size(); ++i) m.param_shapes.push_back(param_group(*shapes->items[i], path, i));
  } else {
    zero_bad(path, std::string("param_shapes is a ") + pickle_kind_name(shapes->kind) + ", not a list of dicts");
  }
  if (const PickleValue* shared = get(root, "shared_params"); shared && entries_of(*shared))
    for (const auto& [k, v] : *entries_of(*shared))
      if (k->kind == PickleKind::Str && v->kind == PickleKind::Str) m.shared_params.emplace_back(k->text, v->text);
  return m;
}

ZeroOptimStates parse_zero_optim_states(const uint8_t* bytes, uint64_t size, const std::string& path, bool bf16_optimizer) {
  ZeroOptimStates o;
  o.file = parse_torch_save(bytes, size, path, zero_torch_save_options());
  const PickleValue* osd = get(o.file.root.get(), "optimizer_state_dict");
  if (!osd) zero_bad(path, "no optimizer_state_dict entry: not a DeepSpeed ZeRO optimizer-states file");
  const auto stage = int_value(get(osd, "zero_stage"));
  if (!stage && !bf16_optimizer) zero_bad(path, "optimizer_state_dict has no zero_stage: not a ZeRO checkpoint");
  o.stage = stage ? static_cast<int>(*stage) : 1;
  if (o.stage < 1 || o.stage > 3) zero_bad(path, "optimizer_state_dict.zero_stage is " + std::to_string(o.stage) + " (expected 1, 2 or 3)");
  const PickleValue* count = get(osd, "partition_count");
  if (const auto n = int_value(count)) {
    o.world_size = *n > 0 ? static_cast<uint64_t>(*n) : 0;
  } else if (count && count->kind == PickleKind::List) {
    for (const auto& x : count->items)  // one per group; zero_to_fp32 takes the largest
      if (x->kind == PickleKind::Int && x->integer > 0) o.world_size = std::max(o.world_size, static_cast<uint64_t>(x->integer));
  }
  if (o.world_size == 0) zero_bad(path, "optimizer_state_dict.partition_count is missing or not a positive int (or list of them)");
  const std::string groups_key = o.stage <= 2 ? "single_partition_of_fp32_groups" : "fp32_flat_groups";
  const PickleValue* groups = get(osd, groups_key);
  if (!groups || (groups->kind != PickleKind::List && groups->kind != PickleKind::Tuple))
    zero_bad(path, "optimizer_state_dict." + groups_key + " is missing or not a list (stage " + std::to_string(o.stage) + ")");
  const auto by_name = tensors_by_name(o.file);
  const std::string prefix = "optimizer_state_dict." + groups_key + ".";
  for (size_t g = 0; g < groups->items.size(); ++g) {
    auto it = by_name.find(prefix + std::to_string(g));
    if (it == by_name.end()) zero_bad(path, "optimizer_state_dict." + groups_key + "[" + std::to_string(g) + "] is not a tensor");
    o.fp32_groups.push_back(it->second);
  }
  // The optimizer's state of each group's flat partition: torch's state dict {state: {group: {...}}}
  // (stages 1-2 in base_optimizer_state, stage 3 in optimizer_state_dict), or DeepSpeed's elastic form,
  // a list with one dict per group.
  const std::vector<std::string> holders = {"optimizer_state_dict.base_optimizer_state.state.", "optimizer_state_dict.base_optimizer_state.",
                                            "optimizer_state_dict.optimizer_state_dict.state."};
  o.moments.resize(o.fp32_groups.size());
  for (size_t g = 0; g < o.fp32_groups.size(); ++g)
    for (const auto& h : holders) {
      const std::string at = h + std::to_string(g) + ".";
      for (auto it = by_name.lower_bound(at); it != by_name.end() && it->first.compare(0, at.size(), at) == 0; ++it)
        if (it->first.find('.', at.size()) == std::string::npos) o.moments[g].emplace(it->first.substr(at.size()), it->second);
    }
  return o;
}

}  // namespace tmorph
