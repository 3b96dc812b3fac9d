#include "checkpoint/openers/zero_checkpoint.h"
#include "checkpoint/openers/opener.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include "checkpoint/openers/torch_tensor.h"
#include "core/utf8.h"
#include "formats/deepspeed_zero.h"
#include "tensormorph/error.h"

namespace tmorph {

namespace fs = std::filesystem;

namespace {

[[noreturn]] void bad(const std::string& path, const std::string& what) {
  throw Error(ErrorKind::BadInput, escape_invalid_utf8(path + ": " + what));
}

// The number after `tag` in a file name ("zero_pp_rank_3_mp_rank_00_optim_states.pt", "zero_pp_rank_") or none.
std::optional<uint64_t> number_after(const std::string& name, const std::string& tag) {
  const size_t at = name.find(tag);
  if (at == std::string::npos) return std::nullopt;
  size_t i = at + tag.size();
  if (i >= name.size() || !std::isdigit(static_cast<unsigned char>(name[i]))) return std::nullopt;
  uint64_t n = 0;
  for (; i < name.size() && std::isdigit(static_cast<unsigned char>(name[i])) && n < (1ull << 40); ++i) n = n * 10 + (name[i] - '0');
  return n;
}

struct ZeroFiles {
  std::vector<std::string> model, optim;  // file names, sorted
};

ZeroFiles list_zero_files(const std::string& dir) {
  ZeroFiles z;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.ends_with("model_states.pt")) z.model.push_back(name);
    else if (name.ends_with("optim_states.pt")) z.optim.push_back(name);
  }
  std::sort(z.model.begin(), z.model.end());
  std::sort(z.optim.begin(), z.optim.end());
  return z;
}

// Where a run of fp32 elements of a flat partition lies: its file, the file offset of its first element,
// and how many of its elements belong to the partition.
struct Segment {
  size_t file_index = 0;
  uint64_t file_offset = 0, elements = 0;
};
// Segments taken in order as one flat vector: one rank's groups (stage 3 concatenates them),
// or one group's partitions across the ranks (stages 1-2).
using Flat = std::vector<Segment>;

uint64_t total(const Flat& f) {
  uint64_t n = 0;
  for (const auto& s : f) n += s.elements;
  return n;
}

// Appends the chunks that hold elements [pos, pos + n) of f as elements [dst, dst + n) of a parameter.
void add_range(const Flat& f, uint64_t pos, uint64_t n, uint64_t dst, std::vector<TensorChunk>& out) {
  for (const auto& s : f) {
    if (n == 0) return;
    if (pos >= s.elements) {
      pos -= s.elements;
      continue;
    }
    const uint64_t take = std::min(n, s.elements - pos);
    out.push_back(TensorChunk{s.file_index, s.file_offset + pos * 4, {dst}, {take}});
    dst += take, n -= take, pos = 0;
  }
}

class Assembler {
 public:
  Assembler(const std::string& dir, Checkpoint& c) : dir_(dir), c_(c) {}

  ZeroOptimStates open_optim(const std::string& name) {
    auto f = std::make_shared<MappedFile>((fs::path(dir_) / name).string());
    ZeroOptimStates o = parse_zero_optim_states(f->data(), f->size(), f->path(), name.rfind("bf16_", 0) == 0);
    c_.header_bytes.push_back(o.file.header_bytes);
    c_.files.push_back(std::move(f));
    return o;
  }

  ZeroModelStates open_model(const std::string& name) {
    auto f = std::make_shared<MappedFile>((fs::path(dir_) / name).string());
    ZeroModelStates m = parse_zero_model_states(f->data(), f->size(), f->path());
    c_.header_bytes.push_back(m.file.header_bytes);
    c_.files.push_back(std::move(f));
    return m;
  }

  // Rank r's partition of every group (fp32), or of one moment; the reason when one is not a contiguous
  // fp32 tensor of at least the partition's length.
  std::string flat(const ZeroOptimStates& o, size_t file_index, const std::string& moment, const std::vector<uint64_t>& lengths, Flat& out) {
    const std::string& path = c_.files[file_index]->path();
    for (size_t g = 0; g < o.fp32_groups.size(); ++g) {
      size_t ti = o.fp32_groups[g];
      if (!moment.empty()) {
        auto it = o.moments[g].find(moment);
        if (it == o.moments[g].end()) return fs::path(path).filename().string() + " has no " + moment + " for group " + std::to_string(g);
        ti = it->second;
      }
      const TorchTensorView& v = o.file.tensors[ti];
      const TorchStorage& s = o.file.storages[v.storage];
      const std::string what = fs::path(path).filename().string() + " tensor '" + v.name + "'";
      if (s.stored_type != "F32") return what + " is " + s.stored_type + ", not fp32";
      if (!v.contiguous) return what + " is a strided view";
      const uint64_t length = lengths.empty() ? v.elements : lengths[g];
      if (v.elements < length) return what + " holds " + std::to_string(v.elements) + " elements, fewer than the partition's " + std::to_string(length);
      out.push_back({file_index, s.file_offset + v.storage_offset * 4, length});
    }
    return "";
  }

 private:
  const std::string& dir_;
  Checkpoint& c_;
};

// The parameters' pieces on each rank, as zero_to_fp32 cuts them: stages 1-2 concatenate the ranks'
// partitions of each group and cut it by param_shapes in order (padding to 2 x world size allowed at
// the end); stage 3 gives each parameter ceil(n / world) elements of every rank's concatenated groups.
// Returns per parameter (in param_shapes order, groups flattened) its chunks; the reason when the
// partitions do not hold the parameters.
std::string cut(int stage, const std::vector<std::vector<ZeroParamShape>>& shapes, const std::vector<Flat>& ranks,
                std::vector<std::vector<TensorChunk>>& out) {
  const uint64_t world = ranks.size();
  if (stage <= 2) {
    if (shapes.size() != ranks[0].size())
      return "param_shapes lists " + std::to_string(shapes.size()) + " groups, the optimizer states hold " + std::to_string(ranks[0].size());
    for (size_t g = 0; g < shapes.size(); ++g) {
      Flat group;  // the ranks' partitions of group g, in rank order
      for (uint64_t r = 0; r < world; ++r) group.push_back(ranks[r][g]);
      const uint64_t available = total(group);
      uint64_t offset = 0;
      for (const auto& p : shapes[g]) {
        if (p.elements > available - std::min(offset, available))
          return "group " + std::to_string(g) + ": '" + p.name + "' needs elements [" + std::to_string(offset) + ", " + std::to_string(offset + p.elements) +
                 ") of the group's " + std::to_string(available);
        std::vector<TensorChunk> chunks;
        add_range(group, offset, p.elements, 0, chunks);
        out.push_back(std::move(chunks));
        offset += p.elements;
      }
      const uint64_t align = 2 * world;
      auto aligned = [&](uint64_t x) { return (x + align - 1) / align * align; };
      if (aligned(offset) != aligned(available))
        return "group " + std::to_string(g) + ": param_shapes account for " + std::to_string(offset) + " of the partitions' " + std::to_string(available) +
               " elements";
    }
    return "";
  }
  const uint64_t per_rank = total(ranks[0]);
  for (uint64_t r = 1; r < world; ++r) {
    const uint64_t n = total(ranks[r]);
    if (n != per_rank) return "rank " + std::to_string(r) + " holds " + std::to_string(n) + " fp32 elements, rank 0 " + std::to_string(per_rank);
  }
  uint64_t offset = 0;
  for (const auto& group : shapes)
    for (const auto& p : group) {
      const uint64_t part = p.elements / world + (p.elements % world != 0);
      if (part > per_rank - std::min(offset, per_rank))
        return "'" + p.name + "' needs elements [" + std::to_string(offset) + ", " + std::to_string(offset + part) + ") of each rank's " +
               std::to_string(per_rank);
      std::vector<TensorChunk> chunks;
      for (uint64_t r = 0; r < world && r * part < p.elements; ++r)
        add_range(ranks[r], offset, std::min(part, p.elements - r * part), r * part, chunks);
      out.push_back(std::move(chunks));
      offset += part;
    }
  if (offset != per_rank)
    return "param_shapes account for " + std::to_string(offset) + " of each rank's " + std::to_string(per_rank) + " fp32 elements";
  return "";
}

}  // namespace

bool is_zero_directory(const std::string& dir) {
  const ZeroFiles z = list_zero_files(dir);
  return !z.model.empty() && !z.optim.empty();
}

std::string zero_layout(const std::string& dir) {
  const ZeroFiles z = list_zero_files(dir);
  std::string layout;
  for (const auto* list : {&z.model, &z.optim})
    for (const auto& n : *list) layout += n + "\n";
  return layout;
}

Checkpoint open_zero(const std::string& dir) {
  const ZeroFiles z = list_zero_files(dir);
  for (const auto* list : {&z.model, &z.optim})
    for (const auto& n : *list)
      if (number_after(n, "mp_rank_").value_or(0) != 0)
        bad(dir + "/" + n, "a model-parallel ZeRO checkpoint (mp_rank other than 00): only data-parallel ranks of mp_rank_00 are read");
  // Optimizer states by data-parallel rank.
  std::map<uint64_t, std::string> by_rank;
  for (const auto& n : z.optim) {
    const auto r = number_after(n, "zero_pp_rank_");
    if (!r) bad(dir + "/" + n, "an optimizer-states file without zero_pp_rank_N in its name");
    if (!by_rank.emplace(*r, n).second) bad(dir + "/" + n, "data-parallel rank " + std::to_string(*r) + " also has " + by_rank[*r]);
  }
  Checkpoint c;
  c.format = "deepspeed";
  Assembler files(dir, c);
  std::vector<ZeroOptimStates> optim;
  std::vector<size_t> optim_file;
  for (const auto& [r, n] : by_rank) {
    optim_file.push_back(c.files.size());
    optim.push_back(files.open_optim(n));
  }
  const int stage = optim[0].stage;
  const uint64_t world = optim[0].world_size;
  std::string why;  // why the master weights and moments cannot be read
  for (size_t i = 0; i < optim.size() && why.empty(); ++i) {
    const std::string& name = c.files[optim_file[i]]->path();
    if (optim[i].stage != stage || optim[i].world_size != world || optim[i].fp32_groups.size() != optim[0].fp32_groups.size())
      bad(name, "zero_stage " + std::to_string(optim[i].stage) + ", partition_count " + std::to_string(optim[i].world_size) + ", " +
                    std::to_string(optim[i].fp32_groups.size()) + " groups; rank 0's file says " + std::to_string(stage) + ", " + std::to_string(world) + ", " +
                    std::to_string(optim[0].fp32_groups.size()));
  }
  if (by_rank.size() != world || by_rank.rbegin()->first != world - 1) {
    std::string missing;
    for (uint64_t r = 0; r < world && missing.size() < 200; ++r)
      if (!by_rank.count(r)) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    why = "partition_count says " + std::to_string(world) + " data-parallel ranks; " + std::to_string(by_rank.size()) +
          " optimizer-states files are here" + (missing.empty() ? "" : " (missing ranks: " + missing + ")");
  }
  // The model states: stages 1-2 write one (mp_rank_00_model_states.pt), stage 3 one per rank (rank 0's
  // param_shapes serve all).
  std::string model_name;
  for (const auto& n : z.model)
    if (stage <= 2 ? n.find("zero_pp_rank_") == std::string::npos : number_after(n, "zero_pp_rank_") == std::optional<uint64_t>(0)) model_name = n;
  if (model_name.empty()) bad(dir, std::string("no ") + (stage <= 2 ? "mp_rank_00_model_states.pt" : "zero_pp_rank_0_mp_rank_00_model_states.pt") +
                                   " for this stage " + std::to_string(stage) + " checkpoint");
  const size_t model_file = c.files.size();
  const ZeroModelStates model = files.open_model(model_name);
  std::set<std::string> params;
  for (const auto& g : model.param_shapes)
    for (const auto& p : g) params.insert(p.name);
  // The module's weights and buffers as the model holds them (stage 3: parameters are empty placeholders).
  const std::string module = "module.";
  for (const auto& t : model.file.tensors) {
    if (t.name.compare(0, module.size(), module) != 0) continue;
    CheckpointTensor ct = torch_checkpoint_tensor(model.file, t, model_file, c.files[model_file]->size());
    ct.name = t.name.substr(module.size());
    if (stage == 3 && ct.elements == 0 && params.count(ct.name)) continue;
    c.tensors.push_back(std::move(ct));
  }
  for (const auto& [k, v] : model.file.metadata) c.metadata.emplace(k, v);
  for (const auto& [k, v] : optim[0].file.metadata) c.metadata.emplace(k, v);
  c.metadata["zero.stage"] = std::to_string(stage);
  c.metadata["zero.world_size"] = std::to_string(world);

  // The master weights and every moment rank 0 holds for group 0 (a tensor at least as long as the
  // partition: exp_avg, exp_avg_sq; not Adam's step), cut the same way.
  std::vector<std::string> kinds = {""};
  if (!optim[0].moments.empty())
    for (const auto& [k, v] : optim[0].moments[0])
      if (optim[0].file.tensors[v].elements >= optim[0].file.tensors[optim[0].fp32_groups[0]].elements && optim[0].file.tensors[v].shape.size() == 1)
        kinds.push_back(k);
  std::vector<ZeroParamShape> flat_params;
  for (const auto& g : model.param_shapes) flat_params.insert(flat_params.end(), g.begin(), g.end());
  for (const auto& kind : kinds) {
    std::string reason = why;
    std::vector<std::vector<TensorChunk>> pieces;
    if (reason.empty()) {
      std::vector<Flat> ranks(optim.size());
      std::vector<std::vector<uint64_t>> lengths(optim.size());
      for (size_t r = 0; r < optim.size() && reason.empty(); ++r) {
        for (size_t ti : optim[r].fp32_groups) lengths[r].push_back(optim[r].file.tensors[ti].elements);
        reason = files.flat(optim[r], optim_file[r], kind, lengths[r], ranks[r]);
      }
      if (reason.empty()) reason = cut(stage, model.param_shapes, ranks, pieces);
    }
    const std::string prefix = "optimizer.state." + (kind.empty() ? std::string("fp32_param") : kind) + ".";
    std::map<std::string, size_t> added;
    for (size_t i = 0; i < flat_params.size(); ++i) {
      const ZeroParamShape& p = flat_params[i];
      CheckpointTensor t;
      t.name = prefix + p.name;
      t.stored_type = "F32";
      t.shape = p.shape;
      t.elements = p.elements;
      t.bytes = p.elements * 4;
      if (!reason.empty()) {
        t.unavailable_reason = reason;
        t.damaged = true;  // a rank's file missing or its flat partition not the size the shapes need
        t.file_index = optim_file[0];
      } else {
        t.dtype = DType::F32;
        if (!pieces[i].empty()) {
          t.file_index = pieces[i][0].file_index, t.file_offset = pieces[i][0].file_offset;
          t.storage = ChunkedStorage{std::move(pieces[i])};
        } else {
          t.file_index = optim_file[0];
        }
      }
      added[p.name] = c.tensors.size();
      c.tensors.push_back(std::move(t));
    }
    // Tied parameters: the alias reads what the parameter it shares holds.
    for (const auto& [alias, target] : model.shared_params) {
      auto it = added.find(target);
      if (it == added.end() || added.count(alias)) continue;
      CheckpointTensor t = c.tensors[it->second];
      t.name = prefix + alias;
      c.tensors.push_back(std::move(t));
    }
  }
  std::set<std::string> seen;
  for (const auto& t : c.tensors)
    if (!seen.insert(t.name).second) bad(dir, "tensor '" + t.name + "' is listed twice");
  return c;
}

namespace {
bool recognises_zero(const CheckpointProbe& p) { return p.directory() && p.listing().files.empty() && p.listing().torch_indexes.empty() && p.listing().torch_files.empty() && is_zero_directory(p.path()); }
Checkpoint open_zero_probe(const CheckpointProbe& p) { return open_zero(p.path()); }
}  // namespace

extern const CheckpointOpener kZeroDirectoryOpener{"a DeepSpeed ZeRO folder (*_model_states.pt + *_optim_states.pt)", recognises_zero, open_zero_probe};

}  // namespace tmorph
