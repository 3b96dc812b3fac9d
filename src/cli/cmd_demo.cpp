// tensormorph demo: writes a deterministic, llama-shaped bf16 checkpoint so there is real-looking data
// to explore without any download: sharded safetensors (model-0000k-of-0000N.safetensors), the
// model.safetensors.index.json that names them, and a Hugging Face style config.json; then the same weights
// quantized to Q8_0 and to Q4_K as GGUF files in DIR/gguf/ (cli/demo_gguf.h).
//
// Values (fixed seed; identical bytes for any thread count):
//   - linear weights: N(0, 1/sqrt(fan_in)); embeddings: N(0, 0.02); RMSNorm weights: 1 + N(0, 0.05);
//   - two "hot" input columns (sigma x24 and x40) in o_proj of odd layers and down_proj of even layers,
//     as real LLM weights have outlier channels;
//   - model.layers.0.mlp.down_proj.weight also holds one large outlier (41.5), one NaN and one +Inf,
//     so damaged values can be seen being counted.
// "N(0, s)" is an approximately normal draw (see approx_normal), rounded to bf16 to nearest even.
// Tensors are generated a block of rows at a time and streamed out; no shard is held in memory.
#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/demo_gguf.h"
#include "cli/output.h"
#include "core/format.h"
#include "support/thread_pool.h"
#include "formats/safetensors_writer.h"
#include "tensormorph/error.h"

namespace tmorph::cli {

namespace {

namespace fs = std::filesystem;

constexpr uint64_t kSeed = 20261129;
constexpr uint64_t kChunkElements = uint64_t{4} << 20;  // rows generated per step: about 8 MiB of bf16
constexpr const char* kDamagedTensor = "model.layers.0.mlp.down_proj.weight";

struct DemoArgs {
  std::string out = "build/demo";
  uint64_t hidden = 512, intermediate = 1376, layers = 4, heads = 8, kv_heads = 4, vocab = 8000, shards = 2;
  uint64_t threads = 0;  // 0: all cores
  bool json = false;
  bool no_gguf = false;  // --no-gguf: the safetensors checkpoint only
};

// ---- Deterministic values -------------------------------------------------------------------------

// splitmix64's output function, a bijective 64-bit mix. Element (r, c) of tensor t draws
// mix64(row_key(t, r) + c * kGamma): every element is computable on its own, so rows can be generated
// in any order, on any thread, with the same result.
constexpr uint64_t kGamma = 0x9E3779B97F4A7C15ull;

inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

inline uint64_t row_key(uint64_t tensor, uint64_t row) { return mix64(mix64(kSeed + tensor) + row); }

// An approximately standard normal value from 64 random bits: the sum of four 16-bit uniforms
// (Irwin-Hall, n = 4; kurtosis 2.7), standardised, then stretched by z(1 + k z^2) with k chosen so the
// kurtosis is 3 like a normal's, and rescaled to unit variance. |value| <= 4.0: tails beyond that come
// only from the planted outliers. kNormA = 1/sqrt(1 + 2k E[z^4] + k^2 E[z^6]), E[z^4] = 2.7,
// E[z^6] = 10.93 for Irwin-Hall n = 4.
constexpr float kIrwinHallMean = 2.0f * 65535.0f;
constexpr float kIrwinHallInvStd = 1.0f / 37837.23f;  // 1 / sqrt(4 (65536^2 - 1) / 12)
constexpr float kStretch = 0.0196f;
constexpr float kNormA = 0.949142f;
constexpr float kNormB = kNormA * kStretch;

inline float approx_normal(uint64_t x) {
  const uint32_t sum = static_cast<uint32_t>((x & 0xFFFF) + ((x >> 16) & 0xFFFF) + ((x >> 32) & 0xFFFF) + (x >> 48));
  const float z = (static_cast<float>(static_cast<int32_t>(sum)) - kIrwinHallMean) * kIrwinHallInvStd;  // sum < 2^18
  return z * (kNormA + kNormB * z * z);
}

// bf16 bits of a non-NaN f, rounded to nearest even (values beyond bf16's range round to infinity).
inline uint16_t bf16_bits_not_nan(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

// bf16 bits of any f; a NaN stays a (quiet) NaN.
inline uint16_t bf16_bits(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  return bf16_bits_not_nan(f);
}

// ---- The model's tensors --------------------------------------------------------------------------

struct Patch {
  uint64_t row, col;
  float value;  // written after the row is drawn
};

// How one tensor is drawn: element (r, c) = mean + sigma * column_scale(c) * approx_normal(...).
struct TensorPlan {
  std::string name;
  std::vector<uint64_t> shape;  // [out_features, in_features] for linears (HF order); [hidden] for norms
  float mean = 0.0f, sigma = 0.0f;
  std::vector<std::pair<uint64_t, float>> hot_columns;  // (column, multiplier of sigma)
  std::vector<Patch> patches;

  uint64_t rows() const { return shape.size() == 2 ? shape[0] : 1; }
  uint64_t cols() const { return shape.back(); }
  uint64_t bytes() const { return rows() * cols() * 2; }
};

TensorPlan linear(std::string name, uint64_t out_features, uint64_t in_features) {
  return {std::move(name), {out_features, in_features}, 0.0f, 1.0f / std::sqrt(static_cast<float>(in_features)), {}, {}};
}

TensorPlan rms_norm(std::string name, uint64_t hidden) { return {std::move(name), {hidden}, 1.0f, 0.05f, {}, {}}; }

// Two distinct hot input columns, placed by the seed.
void add_hot_columns(TensorPlan& t, uint64_t salt) {
  const uint64_t a = mix64(kSeed ^ salt) % t.cols();
  const uint64_t b = (a + 1 + mix64(kSeed ^ ~salt) % (t.cols() - 1)) % t.cols();
  t.hot_columns = {{a, 24.0f}, {b, 40.0f}};
}

void add_damage(TensorPlan& t) {
  t.patches = {{t.rows() / 4, t.cols() / 2, 41.5f},
               {t.rows() * 3 / 4, 1, std::nanf("")},
               {t.rows() * 3 / 4, 2, INFINITY}};
}

void add_layer(std::vector<TensorPlan>& plan, const DemoArgs& a, uint64_t i) {
  const uint64_t head_dim = a.hidden / a.heads;
  const std::string p = "model.layers." + std::to_string(i) + ".";
  plan.push_back(linear(p + "self_attn.q_proj.weight", a.heads * head_dim, a.hidden));
  plan.push_back(linear(p + "self_attn.k_proj.weight", a.kv_heads * head_dim, a.hidden));
  plan.push_back(linear(p + "self_attn.v_proj.weight", a.kv_heads * head_dim, a.hidden));
  plan.push_back(linear(p + "self_attn.o_proj.weight", a.hidden, a.heads * head_dim));
  if (i % 2 == 1) add_hot_columns(plan.back(), 2 * i);
  plan.push_back(linear(p + "mlp.gate_proj.weight", a.intermediate, a.hidden));
  plan.push_back(linear(p + "mlp.up_proj.weight", a.intermediate, a.hidden));
  plan.push_back(linear(p + "mlp.down_proj.weight", a.hidden, a.intermediate));
  if (i % 2 == 0) add_hot_columns(plan.back(), 2 * i + 1);
  if (i == 0) add_damage(plan.back());
  plan.push_back(rms_norm(p + "input_layernorm.weight", a.hidden));
  plan.push_back(rms_norm(p + "post_attention_layernorm.weight", a.hidden));
}

// Every tensor of the model, in the order it is written (layer order, as HF shards it).
std::vector<TensorPlan> plan_model(const DemoArgs& a) {
  std::vector<TensorPlan> plan;
  plan.push_back({"model.embed_tokens.weight", {a.vocab, a.hidden}, 0.0f, 0.02f, {}, {}});
  for (uint64_t i = 0; i < a.layers; ++i) add_layer(plan, a, i);
  plan.push_back(rms_norm("model.norm.weight", a.hidden));
  plan.push_back(linear("lm_head.weight", a.vocab, a.hidden));
  return plan;
}

// Splits the tensors, in order, into `shards` contiguous non-empty runs of roughly equal bytes.
// Returns the index of each run's first tensor, then plan.size().
std::vector<size_t> shard_bounds(const std::vector<TensorPlan>& plan, size_t shards) {
  uint64_t left = 0;
  for (const auto& t : plan) left += t.bytes();
  std::vector<size_t> bounds{0};
  size_t next = 0;
  for (size_t s = 0; s + 1 < shards; ++s) {
    const uint64_t target = left / (shards - s);
    uint64_t acc = plan[next].bytes();
    size_t end = next + 1;
    // Take the next tensor while at least half of it fits under the target and later shards keep one each.
    while (end + (shards - s - 1) < plan.size() && acc + plan[end].bytes() / 2 <= target) acc += plan[end++].bytes();
    left -= acc;
    bounds.push_back(next = end);
  }
  bounds.push_back(plan.size());
  return bounds;
}

// ---- Writing ---------------------------------------------------------------------------------------

// Draws one row: out[c] = bf16(mean + col_sigma[c] * approx_normal(mix64(key + c * kGamma))). The AVX2
// clone vectorises this loop; it does the same integer work and the same float operations in the same
// order as the baseline clone, so both write the same bits (no FMA target: a fused multiply-add would
// round differently, and the build keeps -ffp-contract=off).
__attribute__((target_clones("avx2", "default")))
void draw_row(uint64_t key, float mean, const float* col_sigma, uint64_t cols, uint16_t* out) {
  for (uint64_t c = 0; c < cols; ++c) out[c] = bf16_bits_not_nan(mean + col_sigma[c] * approx_normal(mix64(key + c * kGamma)));
}

// Draws rows [r0, r0 + n) of t (tensor number `index`) into out, row-major.
void draw_rows(const TensorPlan& t, uint64_t index, const std::vector<float>& col_sigma, uint64_t r0, uint64_t n,
               uint16_t* out) {
  for (uint64_t r = r0; r < r0 + n; ++r, out += t.cols()) draw_row(row_key(index, r), t.mean, col_sigma.data(), t.cols(), out);
}

// Hands chunks to a SafetensorsWriter on a helper thread, so the next chunk is drawn while the last one
// is written. Two buffers alternate: buffer() is always the one not being written. Every writer call
// (begin_tensor, append, end_tensor) runs on the helper, in submission order; finish() the writer only
// after wait(), which also rethrows a failed write.
class ChunkPipe {
 public:
  explicit ChunkPipe(SafetensorsWriter& w) : w_(w) {}
  ~ChunkPipe() {
    if (pending_.valid()) pending_.wait();  // an error here is already being unwound or reported
  }
  ChunkPipe(const ChunkPipe&) = delete;
  ChunkPipe& operator=(const ChunkPipe&) = delete;

  std::vector<uint16_t>& buffer() { return buffers_[current_]; }
  // Writes the first `elements` of buffer() as the next bytes of `tensor` (first/last: its first and
  // last chunk) and switches buffer() to the other one. `tensor` must outlive the write.
  void submit(const std::string& tensor, uint64_t elements, bool first, bool last) {
    wait();
    const uint16_t* data = buffers_[current_].data();
    pending_ = std::async(std::launch::async, [this, &tensor, data, elements, first, last] {
      if (first) w_.begin_tensor(tensor);
      w_.append(data, elements * 2);
      if (last) w_.end_tensor();
    });
    current_ ^= 1;
  }
  void wait() {
    if (pending_.valid()) pending_.get();
  }

 private:
  SafetensorsWriter& w_;
  std::vector<uint16_t> buffers_[2];
  unsigned current_ = 0;
  std::future<void> pending_;
};

// Draws t (tensor number `index`) a block of rows at a time and submits each block to the pipe.
void write_tensor(ChunkPipe& pipe, const TensorPlan& t, uint64_t index, ThreadPool& pool) {
  const uint64_t rows = t.rows(), cols = t.cols();
  std::vector<float> col_sigma(cols, t.sigma);
  for (const auto& [c, scale] : t.hot_columns) col_sigma[c] *= scale;
  const uint64_t step = std::max<uint64_t>(1, kChunkElements / cols);
  for (uint64_t r0 = 0; r0 < rows; r0 += step) {
    const uint64_t n = std::min(step, rows - r0);
    std::vector<uint16_t>& buf = pipe.buffer();
    if (buf.size() < n * cols) buf.resize(n * cols);
    pool.parallel_for(n, [&](uint64_t b, uint64_t e, unsigned) { draw_rows(t, index, col_sigma, r0 + b, e - b, buf.data() + b * cols); });
    for (const auto& p : t.patches)
      if (p.row >= r0 && p.row < r0 + n) buf[(p.row - r0) * cols + p.col] = bf16_bits(p.value);
    pipe.submit(t.name, n * cols, r0 == 0, r0 + n == rows);
  }
}

std::string shard_name(size_t k, size_t n) {
  char name[64];
  std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", k + 1, n);
  return name;
}

// Writes tensors [begin, end) of the plan as one safetensors file.
void write_shard(const std::string& path, const std::vector<TensorPlan>& plan, size_t begin, size_t end, ThreadPool& pool) {
  SafetensorsWriter w(path, size_t{1} << 20);  // chunks of rows (up to 8 MiB) bypass its 1 MiB buffer
  w.set_metadata("format", "pt");
  for (size_t i = begin; i < end; ++i) w.add_tensor(plan[i].name, "BF16", plan[i].shape);
  w.write_header();
  ChunkPipe pipe(w);
  for (size_t i = begin; i < end; ++i) write_tensor(pipe, plan[i], i, pool);
  pipe.wait();
  w.finish();
}

// Writes text to path through path.partial, so path is never half-written.
void write_text(const std::string& path, const std::string& text) {
  const std::string partial = path + ".partial";
  {
    std::ofstream f(partial, std::ios::binary | std::ios::trunc);
    if (!f) throw Error(ErrorKind::Io, partial + ": cannot create");
    f << text << "\n";
    if (!f.flush()) throw Error(ErrorKind::Io, partial + ": write failed");
  }
  std::error_code ec;
  fs::rename(partial, path, ec);
  if (ec) throw Error(ErrorKind::Io, path + ": cannot rename " + partial + " to it: " + ec.message());
}

// A Hugging Face LlamaConfig for the demo's shape.
nlohmann::json llama_config(const DemoArgs& a) {
  return {{"architectures", {"LlamaForCausalLM"}},
          {"attention_bias", false},
          {"attention_dropout", 0.0},
          {"bos_token_id", 1},
          {"eos_token_id", 2},
          {"head_dim", a.hidden / a.heads},
          {"hidden_act", "silu"},
          {"hidden_size", a.hidden},
          {"initializer_range", 0.02},
          {"intermediate_size", a.intermediate},
          {"max_position_embeddings", 2048},
          {"mlp_bias", false},
          {"model_type", "llama"},
          {"num_attention_heads", a.heads},
          {"num_hidden_layers", a.layers},
          {"num_key_value_heads", a.kv_heads},
          {"rms_norm_eps", 1e-05},
          {"rope_scaling", nullptr},
          {"rope_theta", 10000.0},
          {"tie_word_embeddings", false},
          {"torch_dtype", "bfloat16"},
          {"use_cache", true},
          {"vocab_size", a.vocab}};
}

// Range and consistency checks; a violation is a usage error (exit 2) naming the flag.
void check_args(const DemoArgs& a) {
  struct Limit {
    const char* flag;
    uint64_t value, lo, hi;
  };
  const Limit limits[] = {{"--hidden", a.hidden, 8, 65536},   {"--intermediate", a.intermediate, 8, 262144},
                          {"--layers", a.layers, 1, 1024},    {"--heads", a.heads, 1, 1024},
                          {"--kv-heads", a.kv_heads, 1, 1024}, {"--vocab", a.vocab, 8, uint64_t{1} << 21},
                          {"--shards", a.shards, 1, 99999},   {"--threads", a.threads, 0, 4096}};
  for (const Limit& l : limits)
    if (l.value < l.lo || l.value > l.hi)
      throw Error(ErrorKind::InvalidArgument, std::string(l.flag) + " " + std::to_string(l.value) + " is outside [" +
                                                  std::to_string(l.lo) + ", " + std::to_string(l.hi) + "]");
  if (a.hidden % a.heads)
    throw Error(ErrorKind::InvalidArgument, "--hidden " + std::to_string(a.hidden) + " is not a multiple of --heads " + std::to_string(a.heads));
  if (a.heads % a.kv_heads)
    throw Error(ErrorKind::InvalidArgument, "--heads " + std::to_string(a.heads) + " is not a multiple of --kv-heads " + std::to_string(a.kv_heads));
  const uint64_t tensors = 9 * a.layers + 3;
  if (a.shards > tensors)
    throw Error(ErrorKind::InvalidArgument, "--shards " + std::to_string(a.shards) + " exceeds the model's " + std::to_string(tensors) + " tensors");
}

void create_out_dir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir)) throw Error(ErrorKind::Io, dir + ": cannot create the output directory" + (ec ? ": " + ec.message() : ""));
}

void report(const DemoArgs& a, const std::vector<TensorPlan>& plan, const std::vector<std::string>& files,
            const std::string& index, const std::string& config, const std::vector<DemoGgufCopy>& ggufs, double seconds) {
  uint64_t bytes = 0;
  for (const auto& t : plan) bytes += t.bytes();
  if (a.json) {
    nlohmann::json gguf = nlohmann::json::array();
    for (const auto& g : ggufs) {
      nlohmann::json types = nlohmann::json::object();
      for (const auto& [type, n] : g.types) types[type] = n;
      gguf.push_back({{"path", g.path}, {"target", g.target}, {"tensor_types", types}, {"bytes", g.bytes}});
    }
    print_json(nlohmann::json{{"path", index},       {"files", files},       {"config", config},
                                {"tensors", plan.size()}, {"bytes", bytes},     {"parameters", bytes / 2},
                                {"damaged_tensor", kDamagedTensor}, {"gguf", gguf}});
    return;
  }
  std::printf("wrote %s in %.1f s: llama-shaped bf16 demo, %zu tensors, %llu parameters, %s in %zu shard(s)\n", a.out.c_str(),
              seconds, plan.size(), static_cast<unsigned long long>(bytes / 2), format_bytes(static_cast<double>(bytes)).c_str(),
              files.size());
  std::printf("  hidden %llu, intermediate %llu, %llu layers, %llu heads (%llu kv), vocab %llu\n",
              static_cast<unsigned long long>(a.hidden), static_cast<unsigned long long>(a.intermediate),
              static_cast<unsigned long long>(a.layers), static_cast<unsigned long long>(a.heads),
              static_cast<unsigned long long>(a.kv_heads), static_cast<unsigned long long>(a.vocab));
  for (const auto& f : files) std::printf("  %s\n", f.c_str());
  std::printf("  %s\n  %s\n", index.c_str(), config.c_str());
  std::printf("  outliers: 2 hot columns in o_proj (odd layers) and down_proj (even layers); 41.5, one NaN and one +Inf in %s\n",
              kDamagedTensor);
  for (const auto& g : ggufs)
    std::printf("  %s: %s, %s (the same weights, read back)\n", g.path.c_str(), g.types_text().c_str(),
                format_bytes(static_cast<double>(g.bytes)).c_str());
}

void run_demo(const DemoArgs& a) {
  check_args(a);
  const auto start = std::chrono::steady_clock::now();
  create_out_dir(a.out);
  const std::vector<TensorPlan> plan = plan_model(a);
  const std::vector<size_t> bounds = shard_bounds(plan, a.shards);
  ThreadPool& pool = ThreadPool::shared(a.threads ? static_cast<unsigned>(a.threads) : default_thread_count());
  std::vector<std::string> files;
  nlohmann::json weight_map = nlohmann::json::object();
  uint64_t total = 0;
  for (size_t s = 0; s < a.shards; ++s) {
    const std::string name = shard_name(s, a.shards);
    files.push_back((fs::path(a.out) / name).string());
    write_shard(files.back(), plan, bounds[s], bounds[s + 1], pool);
    for (size_t i = bounds[s]; i < bounds[s + 1]; ++i) weight_map[plan[i].name] = name, total += plan[i].bytes();
  }
  const std::string config = (fs::path(a.out) / "config.json").string();
  write_text(config, llama_config(a).dump(2));
  // The index goes last: once it names the new shards, every one of them is complete.
  const std::string index = (fs::path(a.out) / "model.safetensors.index.json").string();
  write_text(index, nlohmann::json{{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}}.dump(2));
  const std::vector<DemoGgufCopy> ggufs =
      a.no_gguf ? std::vector<DemoGgufCopy>{} : write_demo_gguf_copies(a.out, index, {a.hidden, a.intermediate, a.layers, a.heads, a.kv_heads, a.vocab}, pool);
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  report(a, plan, files, index, config, ggufs, took.count());
}

}  // namespace

void add_demo_command(CLI::App& app) {
  auto args = std::make_shared<DemoArgs>();
  CLI::App* cmd = app.add_subcommand("demo", "write a llama-shaped bf16 demo checkpoint (sharded safetensors) and its Q8_0 and Q4_K GGUF copies for trying things out");
  cmd->add_option("--out", args->out, "directory to write into (default build/demo)");
  cmd->add_option("--hidden", args->hidden, "hidden size, 8..65536 (default 512)");
  cmd->add_option("--intermediate", args->intermediate, "MLP intermediate size, 8..262144 (default 1376)");
  cmd->add_option("--layers", args->layers, "decoder layers, 1..1024 (default 4)");
  cmd->add_option("--heads", args->heads, "attention heads, dividing --hidden (default 8)");
  cmd->add_option("--kv-heads", args->kv_heads, "key/value heads, dividing --heads (default 4)");
  cmd->add_option("--vocab", args->vocab, "vocabulary size, 8..2097152 (default 8000)");
  cmd->add_option("--shards", args->shards, "safetensors files to split the tensors over, 1..99999 (default 2)");
  cmd->add_option("--threads", args->threads, "threads drawing values (default: all cores); the bytes do not depend on it");
  cmd->add_flag("--no-gguf", args->no_gguf, "skip the quantized copies (DIR/gguf/demo-Q8_0.gguf and demo-Q4_K.gguf)");
  cmd->add_flag("--json", args->json, "print one JSON document");
  cmd->callback([args] { run_demo(*args); });
}

}  // namespace tmorph::cli
