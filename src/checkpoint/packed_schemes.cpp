#include "checkpoint/packed_schemes.h"

#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "core/format.h"
#include "core/json_bounded.h"
#include "tensormorph/error.h"

namespace tmorph {

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() > suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}


uint64_t product(const std::vector<uint64_t>& shape, size_t first, size_t last) {
  uint64_t n = 1;
  for (size_t i = first; i < last; ++i) n *= shape[i];
  return n;
}

uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// The tensors of one checkpoint by name, and the groups found so far.
class Recogniser {
 public:
  Recogniser(Checkpoint& c, const nlohmann::json& config) : c_(c), config_(config.is_object() ? config : nlohmann::json::object()) {
    for (size_t i = 0; i < c.tensors.size(); ++i) by_name_[c.tensors[i].name] = i;
  }

  void run() {
    for (size_t i = 0; i < c_.tensors.size(); ++i) {
      if (consumed_.count(i)) continue;
      const std::string& name = c_.tensors[i].name;
      if (ends_with(name, ".qweight")) gptq_or_awq(i, name.substr(0, name.size() - 8));
      else if (name.find(".quant_state.bitsandbytes__") != std::string::npos) bnb(i);
      else if (ends_with(name, "_blocks")) mxfp4(i, name.substr(0, name.size() - 7));
    }
    // FP8 last: a scaled FP8 weight is any F8 tensor with a sibling scale that no other scheme took.
    for (size_t i = 0; i < c_.tensors.size(); ++i)
      if (!consumed_.count(i) && c_.tensors[i].dtype &&
          (*c_.tensors[i].dtype == DType::F8_E4M3FN || *c_.tensors[i].dtype == DType::F8_E5M2))
        fp8(i);
    if (logical_.empty()) return;
    std::vector<CheckpointTensor> out;
    for (size_t i = 0; i < c_.tensors.size(); ++i) {
      if (auto it = logical_.find(i); it != logical_.end()) out.push_back(std::move(it->second));
      else if (!consumed_.count(i)) out.push_back(std::move(c_.tensors[i]));
    }
    c_.tensors = std::move(out);
  }

 private:
  const CheckpointTensor* find(const std::string& name) const {
    auto it = by_name_.find(name);
    return it == by_name_.end() || consumed_.count(it->second) ? nullptr : &c_.tensors[it->second];
  }

  [[noreturn]] void bad(const CheckpointTensor& t, const std::string& what) const {
    throw Error(ErrorKind::BadInput, c_.files[t.file_index]->path() + ": tensor '" + t.name + "': " + what);
  }

  const CheckpointTensor& require(const CheckpointTensor& from, const std::string& name, const std::string& scheme) const {
    const CheckpointTensor* t = find(name);
    if (!t) bad(from, scheme + " needs its part '" + name + "', which the checkpoint does not hold");
    return *t;
  }

  // The part's dtype must be one of `allowed` and its rank `rank` (0: any).
  void expect(const CheckpointTensor& t, std::initializer_list<DType> allowed, size_t rank, const std::string& scheme) const {
    bool ok = false;
    std::string names;
    for (DType d : allowed) {
      ok = ok || (t.dtype && *t.dtype == d);
      names += (names.empty() ? "" : " or ") + std::string(dtype_name(d));
    }
    if (!ok) bad(t, scheme + " expects dtype " + names + ", found " + t.stored_type);
    if (rank && t.shape.size() != rank)
      bad(t, scheme + " expects a " + std::to_string(rank) + "-D tensor, found shape " + dims_text(t.shape));
    // A part with no elements (a zero dimension) could carry any other dimension: sizes derived from it
    // (GPTQ's inputs = rows * 32 / bits, MXFP4's groups * 32) might overflow. None is meaningful.
    if (t.elements == 0) bad(t, scheme + " part holds no elements (shape " + dims_text(t.shape) + ")");
  }

  PackedPart part(const CheckpointTensor& t, const std::string& role) {
    consumed_.insert(by_name_.at(t.name));
    return {role, t.name, *t.dtype, t.shape, t.file_index, t.file_offset, t.bytes};
  }

  // Adds the logical tensor `name` in place of the code part (index `at`).
  void add(size_t at, const std::string& name, std::vector<uint64_t> shape, PackedTensor p, const std::string& stored_type,
           std::string unavailable = {}) {
    const CheckpointTensor& codes = c_.tensors[at];
    if (const CheckpointTensor* clash = find(name); clash && by_name_.at(name) != at)
      bad(*clash, "is also the name of the tensor that " + p.variant + " parts " + codes.name + "… hold");
    CheckpointTensor t;
    t.name = name;
    t.stored_type = stored_type;
    t.shape = std::move(shape);
    t.elements = product(t.shape, 0, t.shape.size());
    for (const auto& part : p.parts) t.bytes += part.bytes;
    t.file_index = codes.file_index;
    t.file_offset = codes.file_offset;
    t.unavailable_reason = std::move(unavailable);
    t.storage = PackedStorage{std::move(p)};
    consumed_.insert(at);
    logical_.emplace(at, std::move(t));
  }

  std::string method() const {
    auto it = config_.find("quant_method");
    return it != config_.end() && it->is_string() ? it->get<std::string>() : "";
  }
  int64_t config_int(const char* key, int64_t fallback) const {
    auto it = config_.find(key);
    return it != config_.end() && it->is_number_integer() ? it->get<int64_t>() : fallback;
  }
  std::string config_string(const char* key) const {
    auto it = config_.find(key);
    return it != config_.end() && it->is_string() ? it->get<std::string>() : "";
  }

  // GPTQ (AutoGPTQ / GPTQModel) and AWQ (AutoAWQ GEMM): qweight, qzeros, scales (and GPTQ's g_idx).
  void gptq_or_awq(size_t at, const std::string& prefix) {
    const CheckpointTensor& qweight = c_.tensors[at];
    const CheckpointTensor* g_idx = find(prefix + ".g_idx");
    const std::string m = method();
    const CheckpointTensor& scales = require(qweight, prefix + ".scales", "GPTQ/AWQ qweight");
    const CheckpointTensor& qzeros = require(qweight, prefix + ".qzeros", "GPTQ/AWQ qweight");
    expect(qweight, {DType::I32, DType::U32}, 2, "GPTQ/AWQ qweight");
    expect(qzeros, {DType::I32, DType::U32}, 2, "GPTQ/AWQ qzeros");
    expect(scales, {DType::F16, DType::BF16, DType::F32}, 2, "GPTQ/AWQ scales");
    const bool awq = m == "awq" || (m != "gptq" && !g_idx && scales.shape[1] == qweight.shape[1] * 8 && scales.shape[1] != qweight.shape[1]);
    const int64_t bits = config_int(awq ? "w_bit" : "bits", config_int("bits", 4));
    PackedTensor p;
    p.bits = static_cast<uint32_t>(bits);
    p.groups = scales.shape[0];
    if (p.groups == 0) bad(scales, "has no groups (shape " + dims_text(scales.shape) + ")");
    std::string unavailable;
    if (awq) {
      p.scheme = TM_PACKED_AWQ;
      p.variant = "awq";
      const uint64_t in = qweight.shape[0], out = qweight.shape[1] * 8;
      p.rows = out, p.cols = in;
      if (bits != 4) unavailable = "AWQ with " + std::to_string(bits) + "-bit codes has no kernel (AWQ packs 4-bit codes)";
      const std::string version = config_string("version");
      if (!version.empty() && version != "gemm" && version != "GEMM")
        unavailable = "AWQ version '" + version + "' packs its codes differently from GEMM; no kernel decodes it yet";
      if (scales.shape[1] != out)
        bad(scales, "AWQ expects shape [groups, " + std::to_string(out) + "] (8 outputs per qweight word), found " + dims_text(scales.shape));
      if (qzeros.shape != std::vector<uint64_t>{p.groups, out / 8})
        bad(qzeros, "AWQ expects shape " + dims_text({p.groups, out / 8}) + ", found " + dims_text(qzeros.shape));
      const int64_t gs = config_int("group_size", config_int("q_group_size", 0));
      p.block_cols = gs > 0 ? static_cast<uint64_t>(gs) : in / p.groups;
      if (!p.block_cols || ceil_div(in, p.block_cols) != p.groups)
        bad(scales, "AWQ: " + std::to_string(p.groups) + " groups do not cover " + std::to_string(in) + " inputs in groups of " +
                        std::to_string(p.block_cols));
      p.parts = {part(qweight, "qweight"), part(qzeros, "qzeros"), part(scales, "scales")};
      add(at, prefix + ".weight", {out, in}, std::move(p), "AWQ-INT4", unavailable);
      return;
    }
    p.scheme = TM_PACKED_GPTQ;
    const bool v2 = config_string("checkpoint_format") == "gptq_v2";
    p.variant = v2 ? "gptq-v2" : "gptq";
    p.zero_offset = v2 ? 0 : 1;
    if (bits != 2 && bits != 3 && bits != 4 && bits != 8) bad(qweight, "GPTQ bits must be 2, 3, 4 or 8 (quantization_config.bits), found " + std::to_string(bits));
    if (bits == 3 && (qweight.shape[0] % 3 || qweight.shape[1] % 32))
      bad(qweight, "GPTQ 3-bit packs 32 inputs in 3 words of whole 32-output groups; expected [3k, 32m], found " + dims_text(qweight.shape));
    if (qweight.shape[0] * 32 % bits) bad(qweight, "GPTQ: " + std::to_string(qweight.shape[0]) + " rows of words do not hold whole " + std::to_string(bits) + "-bit codes");
    const uint64_t in = qweight.shape[0] * 32 / static_cast<uint64_t>(bits), out = qweight.shape[1];
    p.rows = out, p.cols = in;
    if (scales.shape[1] != out) bad(scales, "GPTQ expects shape [groups, " + std::to_string(out) + "], found " + dims_text(scales.shape));
    if (out * static_cast<uint64_t>(bits) % 32 || qzeros.shape != std::vector<uint64_t>{p.groups, out * bits / 32})
      bad(qzeros, "GPTQ expects shape " + dims_text({p.groups, out * static_cast<uint64_t>(bits) / 32}) + " (" + std::to_string(bits) +
                      "-bit zeros of " + std::to_string(out) + " outputs), found " + dims_text(qzeros.shape));
    p.parts = {part(qweight, "qweight"), part(qzeros, "qzeros"), part(scales, "scales")};
    if (g_idx) {
      expect(*g_idx, {DType::I32}, 1, "GPTQ g_idx");
      if (g_idx->shape[0] != in) bad(*g_idx, "GPTQ expects one group index per input (" + std::to_string(in) + "), found " + dims_text(g_idx->shape));
      p.parts.push_back(part(*g_idx, "g_idx"));
    } else {
      const int64_t gs = config_int("group_size", 0);
      p.group_size = gs > 0 ? static_cast<uint64_t>(gs) : gs < 0 ? in : in / p.groups;
      if (!p.group_size || ceil_div(in, p.group_size) != p.groups)
        bad(scales, "GPTQ without g_idx: " + std::to_string(p.groups) + " groups do not cover " + std::to_string(in) +
                        " inputs in groups of " + std::to_string(p.group_size) + " (quantization_config.group_size)");
    }
    add(at, prefix + ".weight", {out, in}, std::move(p), (v2 ? "GPTQ-V2-INT" : "GPTQ-INT") + std::to_string(bits), unavailable);
  }

  // bitsandbytes 4-bit as transformers saves it: X (packed codes), X.absmax, X.quant_map,
  // X.quant_state.bitsandbytes__nf4|fp4 (JSON bytes), and for double quantization X.nested_absmax and
  // X.nested_quant_map.
  void bnb(size_t at) {
    const CheckpointTensor& state = c_.tensors[at];
    const std::string& name = state.name;
    const std::string base = name.substr(0, name.find(".quant_state.bitsandbytes__"));
    const std::string type = name.substr(name.find("__") + 2);
    if (type != "nf4" && type != "fp4") bad(state, "bitsandbytes quant_state names quant type '" + type + "'; expected nf4 or fp4");
    expect(state, {DType::U8}, 1, "bitsandbytes quant_state");
    if (state.bytes > (1u << 20)) bad(state, "bitsandbytes quant_state of " + std::to_string(state.bytes) + " bytes; at most 1 MiB of JSON expected");
    const auto* text = reinterpret_cast<const char*>(c_.data(state));
    nlohmann::json j;
    try {
      j = parse_json_bounded(std::string_view(text, state.bytes), "bitsandbytes quant_state");
    } catch (const Error& e) {
      bad(state, e.what());
    }
    if (!j.is_object()) bad(state, "bitsandbytes quant_state is not a JSON object");
    auto field = [&](const char* key) -> const nlohmann::json& {
      if (!j.contains(key)) bad(state, std::string("bitsandbytes quant_state lacks '") + key + "'");
      return j[key];
    };
    if (field("quant_type") != type) bad(state, "bitsandbytes quant_state's quant_type " + json_brief(j["quant_type"]) + " disagrees with its name (" + type + ")");
    const auto& bs = field("blocksize");
    if (!bs.is_number_unsigned() || bs.get<uint64_t>() == 0 || bs.get<uint64_t>() > (1u << 20))
      bad(state, "bitsandbytes blocksize " + json_brief(bs) + " is not a positive integer up to 2^20");
    const auto& shape_j = field("shape");
    std::vector<uint64_t> shape;
    if (!shape_j.is_array() || shape_j.empty() || shape_j.size() > 8) bad(state, "bitsandbytes shape " + json_brief(shape_j) + " is not a list of 1 to 8 sizes");
    uint64_t n = 1;
    for (const auto& d : shape_j) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() == 0 || d.get<uint64_t>() > (uint64_t{1} << 40) || n > (uint64_t{1} << 48) / d.get<uint64_t>())
        bad(state, "bitsandbytes shape " + json_brief(shape_j) + " holds a size that is not a positive integer or overflows");
      shape.push_back(d.get<uint64_t>());
      n *= shape.back();
    }
    const CheckpointTensor& codes = require(state, base, "bitsandbytes 4-bit");
    const CheckpointTensor& absmax = require(state, base + ".absmax", "bitsandbytes 4-bit");
    const CheckpointTensor& quant_map = require(state, base + ".quant_map", "bitsandbytes 4-bit");
    expect(codes, {DType::U8}, 0, "bitsandbytes 4-bit codes");
    if (codes.bytes != ceil_div(n, 2)) bad(codes, "bitsandbytes: " + std::to_string(n) + " values need " + std::to_string(ceil_div(n, 2)) + " bytes of codes, found " + std::to_string(codes.bytes));
    expect(quant_map, {DType::F32}, 0, "bitsandbytes quant_map");
    if (quant_map.elements != 16) bad(quant_map, "bitsandbytes 4-bit expects 16 quant_map values, found " + std::to_string(quant_map.elements));
    PackedTensor p;
    p.scheme = TM_PACKED_BNB4;
    p.variant = "bnb-" + type;
    p.bits = 4;
    p.block_cols = bs.get<uint64_t>();
    p.cols = shape.back();
    p.rows = n / p.cols;
    const uint64_t blocks = ceil_div(n, p.block_cols);
    p.parts = {part(codes, "weight"), part(absmax, "absmax"), part(quant_map, "quant_map"), part(state, "quant_state")};
    const CheckpointTensor* nested_absmax = find(base + ".nested_absmax");
    if (nested_absmax || j.contains("nested_blocksize")) {
      const CheckpointTensor& na = require(state, base + ".nested_absmax", "bitsandbytes double quantization");
      const CheckpointTensor& nq = require(state, base + ".nested_quant_map", "bitsandbytes double quantization");
      const auto& nbs = field("nested_blocksize");
      const auto& off = field("nested_offset");
      if (!nbs.is_number_unsigned() || nbs.get<uint64_t>() == 0 || nbs.get<uint64_t>() > (1u << 20))
        bad(state, "bitsandbytes nested_blocksize " + json_brief(nbs) + " is not a positive integer up to 2^20");
      // A float32 offset (bitsandbytes stores a float32 tensor's item()): a larger one would become ±inf.
      if (!off.is_number() || !(std::fabs(off.get<double>()) <= std::numeric_limits<float>::max()))
        bad(state, "bitsandbytes nested_offset " + json_brief(off) + " is not a finite float32 number");
      p.nested_block = nbs.get<uint64_t>();
      p.nested_offset = off.get<float>();
      expect(absmax, {DType::U8}, 0, "bitsandbytes double-quantized absmax");
      expect(na, {DType::F32}, 0, "bitsandbytes nested_absmax");
      expect(nq, {DType::F32}, 0, "bitsandbytes nested_quant_map");
      if (na.elements != ceil_div(blocks, p.nested_block))
        bad(na, "bitsandbytes expects " + std::to_string(ceil_div(blocks, p.nested_block)) + " nested_absmax values (" + std::to_string(blocks) +
                    " absmax codes in blocks of " + std::to_string(p.nested_block) + "), found " + std::to_string(na.elements));
      if (nq.elements != 256) bad(nq, "bitsandbytes expects 256 nested_quant_map values, found " + std::to_string(nq.elements));
      p.parts.push_back(part(na, "nested_absmax"));
      p.parts.push_back(part(nq, "nested_quant_map"));
    } else {
      expect(absmax, {DType::F32}, 0, "bitsandbytes absmax");
    }
    if (absmax.elements != blocks)
      bad(absmax, "bitsandbytes expects " + std::to_string(blocks) + " absmax values (" + std::to_string(n) + " values in blocks of " +
                      std::to_string(p.block_cols) + "), found " + std::to_string(absmax.elements));
    const size_t code_at = by_name_.at(codes.name);
    std::string label = type == "nf4" ? "BNB-NF4" : "BNB-FP4";
    add(code_at, base, shape, std::move(p), label);
  }

  // MXFP4 as gpt-oss stores it: X_blocks (u8 [..., G, 16]) and X_scales (u8 [..., G], E8M0).
  void mxfp4(size_t at, const std::string& logical) {
    const CheckpointTensor& blocks = c_.tensors[at];
    const CheckpointTensor* scales = find(logical + "_scales");
    if (!scales || !blocks.dtype || *blocks.dtype != DType::U8) return;  // an ordinary tensor that ends in _blocks
    expect(blocks, {DType::U8}, 0, "MXFP4 blocks");
    expect(*scales, {DType::U8}, 0, "MXFP4 scales");
    const auto& b = blocks.shape;
    if (b.size() < 2 || b.back() != 16) bad(blocks, "MXFP4 (gpt-oss) expects shape [..., groups, 16], found " + dims_text(b));
    const std::vector<uint64_t> want(b.begin(), b.end() - 1);
    if (scales->shape != want) bad(*scales, "MXFP4 (gpt-oss) expects one E8M0 scale per block of " + blocks.name + ": shape " + dims_text(want) + ", found " + dims_text(scales->shape));
    PackedTensor p;
    p.scheme = TM_PACKED_MXFP4;
    p.variant = "mxfp4";
    p.bits = 4;
    p.cols = b[b.size() - 2] * 32;
    p.rows = product(b, 0, b.size() - 2);
    p.parts = {part(blocks, "blocks"), part(*scales, "scales")};
    std::vector<uint64_t> shape(b.begin(), b.end() - 2);
    shape.push_back(p.cols);
    add(at, logical, shape, std::move(p), "MXFP4");
  }

  // FP8 weights with a scale: X_scale (compressed-tensors: per tensor or per output channel) or
  // X_scale_inv (DeepSeek-V3: one scale per weight_block_size block, 128 x 128 by default).
  void fp8(size_t at) {
    const CheckpointTensor& w = c_.tensors[at];
    const CheckpointTensor* s = find(w.name + "_scale_inv");
    if (!s) s = find(w.name + "_scale");
    if (!s) return;  // an unscaled FP8 tensor: read as its dtype
    expect(w, {DType::F8_E4M3FN, DType::F8_E5M2}, 0, "FP8 weight");
    expect(*s, {DType::F32, DType::BF16, DType::F16}, 0, "FP8 scale");
    PackedTensor p;
    p.scheme = TM_PACKED_FP8;
    p.variant = "fp8";
    p.code_dtype = *w.dtype;
    p.cols = w.shape.empty() ? 1 : w.shape.back();
    p.rows = w.shape.empty() ? 1 : product(w.shape, 0, w.shape.size() - 1);
    const bool matrix = w.shape.size() == 2;
    if (s->elements == 1) {
      p.scale_layout = "per-tensor", p.block_rows = std::max<uint64_t>(1, p.rows), p.block_cols = std::max<uint64_t>(1, p.cols);
    } else if (matrix && (s->shape == std::vector<uint64_t>{p.rows, 1} || s->shape == std::vector<uint64_t>{p.rows})) {
      p.scale_layout = "per-channel", p.block_rows = 1, p.block_cols = p.cols;
    } else {
      uint64_t br = 128, bc = 128;
      if (auto it = config_.find("weight_block_size"); it != config_.end()) {
        if (!it->is_array() || it->size() != 2 || !(*it)[0].is_number_unsigned() || !(*it)[1].is_number_unsigned() ||
            (*it)[0].get<uint64_t>() == 0 || (*it)[1].get<uint64_t>() == 0)
          bad(*s, "quantization_config.weight_block_size " + it->dump() + " is not two positive integers");
        br = (*it)[0].get<uint64_t>(), bc = (*it)[1].get<uint64_t>();
      }
      if (!matrix || s->shape != std::vector<uint64_t>{ceil_div(p.rows, br), ceil_div(p.cols, bc)})
        bad(*s, "shape " + dims_text(s->shape) + " fits no FP8 scale layout of " + w.name + " " + dims_text(w.shape) +
                    ": per tensor [] or [1], per channel [" + std::to_string(p.rows) + ",1], or " + std::to_string(br) + "x" +
                    std::to_string(bc) + " blocks " + dims_text({ceil_div(p.rows, br), ceil_div(p.cols, bc)}));
      p.scale_layout = "block", p.block_rows = br, p.block_cols = bc;
    }
    const std::string scale_role = ends_with(s->name, "_scale_inv") ? "weight_scale_inv" : "weight_scale";
    p.parts = {part(w, "weight"), part(*s, scale_role)};
    const std::string label = *w.dtype == DType::F8_E5M2 ? "FP8-E5M2" : "FP8-E4M3";
    add(at, w.name, w.shape, std::move(p), label);
  }

  Checkpoint& c_;
  nlohmann::json config_;
  std::map<std::string, size_t> by_name_;
  std::set<size_t> consumed_;
  std::map<size_t, CheckpointTensor> logical_;  // by the index of its code part
};

}  // namespace

void recognise_packed_tensors(Checkpoint& c, const nlohmann::json& quantization_config) {
  Recogniser(c, quantization_config).run();
}

}  // namespace tmorph
