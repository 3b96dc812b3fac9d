// Dequantization throughput per GGUF block format, beside memcpy on the same machine.
//
//   dequant/<TYPE>/threads:N     dequantize_range over the whole tiled buffer of <TYPE> into float32
//   stats/<TYPE>/full/threads:N  compute_quantized_stats (dequantize, then moments + 256-bin histogram +
//                                exact quantiles) for Q8_0 and Q4_0
//   memcpy/threads:N             memcpy of a buffer of the input size, split into N std::threads
//   packed/GPTQ<B>bit/threads:N  the CPU backend's dequantize.packed on a synthetic GPTQ matrix (random
//                                codes, zeros and scales, groups of 128; B = 3 and 4), 4,096 x 8,192
//
// Data: real, valid blocks. For every quantized tensor of the reference fixture
// <fixtures>/gguf/tiny-mixed.gguf (one per type; tiny-mixed.expected.json gives each tensor's ggml type,
// data_offset, n_bytes and n_elements) the tensor's bytes are repeated floor(size / n_bytes) times (at
// least once), so the buffer holds whole tensors, hence whole rows and whole blocks. bench/
// peer_numpy_dequant.py builds the same buffer (or a prefix of it, in whole copies) the same way.
//
// Counters: items_per_second = elements (dequantized values) per second; bytes_per_second = bytes of
// quantized input per second (memcpy: the source size; the copy also writes as many bytes). The float32
// output (4 bytes per element) is written to a buffer whose pages were touched before timing.
//
// Fixtures: --tm_fixtures=DIR, else $TM_FIXTURES, else <repo>/../shared/fixtures (set at build time).
// When tiny-mixed.gguf or its expected.json is missing, prints a "SKIPPED" line and exits 0.
//
// Environment:
//   TM_DEQUANT_MIB    input bytes per type and for memcpy, in MiB (default 64)
//   TM_BENCH_THREADS  comma-separated thread counts (default "1,2")
#include <benchmark/benchmark.h>

#include "bench_support.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <memory>
#include <new>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "../backends/cpu/cpu_backend.h"
#include "../backends/cpu/packed_kernel.h"
#include "tensormorph/op_contracts.h"
#include "checkpoint/ggml_quantized.h"
#include "tensormorph/backend_registry.h"
#include "tensormorph/cost_model.h"
#include "tensormorph/planner.h"
#include "tensormorph/stats.h"

#ifndef TM_BENCH_FIXTURES_DIR
#define TM_BENCH_FIXTURES_DIR "../shared/fixtures"
#endif

namespace {

constexpr const char* kTool = "dequant_bench";

uint64_t size_mib() {
  static const uint64_t mib = bench::env_mib(kTool, "TM_DEQUANT_MIB", 64, (1ull << 16));
  return mib;
}

uint64_t size_bytes() { return size_mib() << 20; }

using bench::Buffer;
using bench::split_threads;

[[noreturn]] void die(const std::string& message) { bench::die(kTool, message); }

// ---- the fixture's quantized tensors, tiled -------------------------------------------------------

struct Source {
  std::string type;        // ggml's name: "Q4_0", ...
  uint32_t type_id = 0;
  uint32_t block_elements = 0;
  uint32_t block_bytes = 0;
  std::string tensor;      // the fixture tensor the bytes come from
  uint64_t data_offset = 0;
  uint64_t n_bytes = 0;
  uint64_t n_elements = 0;
};

struct Tiled {
  Source source;
  uint64_t copies = 0;
  Buffer input;            // copies * n_bytes bytes
  uint64_t elements = 0;   // copies * n_elements
};

std::string& fixtures_dir() {
  static std::string dir;
  return dir;
}

std::string gguf_path() { return fixtures_dir() + "/gguf/tiny-mixed.gguf"; }
std::string expected_path() { return fixtures_dir() + "/gguf/tiny-mixed.expected.json"; }

// Every quantized tensor type of the fixture (first tensor of each type), by ggml type id.
std::vector<Source> read_sources() {
  std::ifstream in(expected_path());
  if (!in) die("cannot read " + expected_path());
  const nlohmann::json doc = nlohmann::json::parse(in);
  std::map<uint32_t, Source> by_id;
  for (const auto& t : doc.at("tensors")) {
    if (t.at("block_size").get<uint32_t>() <= 1) continue;  // F32 / F16 / BF16: not block formats
    Source s;
    s.type = t.at("ggml_type").get<std::string>();
    s.type_id = t.at("ggml_type_id").get<uint32_t>();
    s.block_elements = t.at("block_size").get<uint32_t>();
    s.block_bytes = t.at("type_size").get<uint32_t>();
    s.tensor = t.at("name").get<std::string>();
    s.data_offset = t.at("data_offset").get<uint64_t>();
    s.n_bytes = t.at("n_bytes").get<uint64_t>();
    s.n_elements = t.at("n_elements").get<uint64_t>();
    if (s.n_elements % s.block_elements || s.n_bytes != s.n_elements / s.block_elements * s.block_bytes)
      die("inconsistent geometry for " + s.tensor + " in " + expected_path());
    by_id.emplace(s.type_id, s);
  }
  std::vector<Source> out;
  for (auto& [id, s] : by_id) out.push_back(s);
  return out;
}

Tiled tile(const Source& s) {
  std::ifstream in(gguf_path(), std::ios::binary);
  if (!in) die("cannot read " + gguf_path());
  std::vector<char> raw(s.n_bytes);
  in.seekg(static_cast<std::streamoff>(s.data_offset));
  in.read(raw.data(), static_cast<std::streamsize>(raw.size()));
  if (!in) die("short read of " + s.tensor + " from " + gguf_path());
  Tiled t;
  t.source = s;
  t.copies = std::max<uint64_t>(1, size_bytes() / s.n_bytes);
  t.input = Buffer(t.copies * s.n_bytes);
  for (uint64_t c = 0; c < t.copies; ++c) std::memcpy(t.input.data() + c * s.n_bytes, raw.data(), s.n_bytes);
  t.elements = t.copies * s.n_elements;
  return t;
}

std::vector<Tiled>& tiled() {
  static std::vector<Tiled> all;
  return all;
}

// One float32 destination shared by every benchmark, sized for the largest output, pages touched once.
float* output(uint64_t elements) {
  static Buffer out;
  if (out.size() < elements * sizeof(float)) {
    out = Buffer(elements * sizeof(float));
    std::memset(out.data(), 0, out.size());
  }
  return reinterpret_cast<float*>(out.data());
}

// ---- the library -----------------------------------------------------------------------------------

struct Library {
  tmorph::BackendRegistry registry;
  tmorph::CostModel costs;
  std::unique_ptr<tmorph::Planner> planner;
  Library() {
    registry.register_table(tmorph::cpu::cpu_backend_table(), "static");
    planner = std::make_unique<tmorph::Planner>(registry, costs, tmorph::Constraints{});
  }
};

const tmorph::Planner& planner() {
  static Library lib;
  return *lib.planner;
}

// ---- benchmarks ----------------------------------------------------------------------------------

void set_counters(benchmark::State& state, const Tiled& t) {
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(t.elements));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(t.input.size()));
  state.counters["elements"] = static_cast<double>(t.elements);
  state.counters["input_bytes"] = static_cast<double>(t.input.size());
  state.counters["block_elements"] = t.source.block_elements;
  state.counters["block_bytes"] = t.source.block_bytes;
}

void BM_dequant(benchmark::State& state, const Tiled* t, unsigned threads) {
  float* dst = output(t->elements);
  try {
    const tmorph::QuantizedTensor q = tmorph::quantized_tensor(t->source.type_id, t->input.data(), t->elements);
    const tmorph::Placement placement = tmorph::place_dequantize(planner(), q);
    for (auto _ : state) {
      tmorph::dequantize_range(placement, q, 0, q.elements, dst, threads);
      benchmark::ClobberMemory();
    }
    state.SetLabel(placement.backend);
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  benchmark::DoNotOptimize(dst[t->elements / 2]);
  set_counters(state, *t);
}

// full: moments + 256-bin histogram + exact quantiles; moments only: what quant.moments answers alone.
void BM_stats(benchmark::State& state, const Tiled* t, unsigned threads, bool full) {
  tmorph::StatsOptions options;
  options.threads = threads;
  options.histogram = full;
  options.bins = 256;
  options.quantiles = full;
  tmorph::StatsResult result;
  try {
    const tmorph::QuantizedTensor q = tmorph::quantized_tensor(t->source.type_id, t->input.data(), t->elements);
    for (auto _ : state) {
      result = tmorph::compute_quantized_stats(q, planner(), options);
      benchmark::DoNotOptimize(result);
    }
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  std::string label;
  for (const auto& p : result.placement) label += (label.empty() ? "" : ",") + p.op + "@" + p.backend;
  state.SetLabel(label);
  state.counters["count"] = static_cast<double>(result.moments.count);
  state.counters["mean"] = result.moments.mean;
  set_counters(state, *t);
}

// A GPTQ layer of `bits` (4,096 outputs x 8,192 inputs, groups of 128, v1 zeros) decoded whole into
// float32 by the CPU kernel. bytes_per_second counts qweight's bytes.
void BM_packed_gptq(benchmark::State& state, uint32_t bits, unsigned threads) {
  constexpr uint64_t kRows = 4096, kCols = 8192, kGroup = 128, kGroups = kCols / kGroup;
  const uint64_t words_per_32 = bits == 3 ? 3 : bits;  // int32 words per 32 codes
  std::mt19937 rng(bits);
  std::vector<int32_t> qweight(kCols / 32 * words_per_32 * kRows), zeros(kGroups * kRows / 32 * words_per_32);
  for (auto& w : qweight) w = static_cast<int32_t>(rng());
  for (auto& w : zeros) w = static_cast<int32_t>(rng());
  std::vector<float> scales(kGroups * kRows);
  for (auto& x : scales) x = static_cast<float>(rng() % 1000 + 1) * 1e-5f;
  std::vector<int32_t> g_idx(kCols);
  for (uint64_t i = 0; i < kCols; ++i) g_idx[i] = static_cast<int32_t>(i / kGroup);
  tm_dequantize_packed_params_v1 p{};
  p.scheme = TM_PACKED_GPTQ, p.bits = bits, p.zero_offset = 1, p.rows = kRows, p.cols = kCols, p.groups = kGroups;
  p.scales = scales.data(), p.zeros = zeros.data(), p.group_index = g_idx.data();
  float* dst = output(kRows * kCols);
  tm_kernel_call_v1 call{};
  call.struct_size = sizeof call;
  call.op = TM_OP_DEQUANTIZE_PACKED;
  call.dtype = TM_DTYPE_F32;
  call.input = qweight.data();
  call.element_count = kRows * kCols;
  call.params = &p;
  call.params_size = sizeof p;
  call.output = dst;
  call.output_size = kRows * kCols * sizeof(float);
  call.threads = threads;
  std::string error;
  for (auto _ : state) {
    if (tmorph::cpu::run_dequantize_packed(call, &error) != TM_OK) {
      state.SkipWithError(error.c_str());
      return;
    }
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kRows * kCols));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * qweight.size() * 4));
}

void BM_memcpy(benchmark::State& state, unsigned threads) { bench::memcpy_benchmark(state, threads, size_bytes()); }

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  std::string fixtures;
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--tm_fixtures=", 0) == 0) fixtures = a.substr(14);
    else argv[kept++] = argv[i];
  }
  argc = kept;
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;

  if (fixtures.empty()) {
    const char* env = std::getenv("TM_FIXTURES");
    fixtures = env && *env ? env : TM_BENCH_FIXTURES_DIR;
  }
  fixtures_dir() = fixtures;
  if (!std::filesystem::exists(gguf_path()) || !std::filesystem::exists(expected_path())) {
    const std::string line = "SKIPPED: dequant_bench needs " + gguf_path() + " and " + expected_path() +
                             " (set --tm_fixtures=DIR or TM_FIXTURES)";
    std::printf("%s\n", line.c_str());
    std::fprintf(stderr, "dequant_bench: %s\n", line.c_str());
    return 0;
  }

  uint64_t largest = 0;
  for (const Source& s : read_sources()) {
    tiled().push_back(tile(s));
    largest = std::max(largest, tiled().back().elements);
  }
  output(std::max<uint64_t>(largest, 4096 * 8192));  // allocate and fault in the destination before any timing

  benchmark::AddCustomContext("tm_size_mib", std::to_string(size_mib()));
  benchmark::AddCustomContext("tm_fixture", gguf_path());
  benchmark::AddCustomContext("tm_data", "each fixture tensor's bytes repeated floor(size / n_bytes) times");
  benchmark::AddCustomContext("tm_bytes_convention",
                              "bytes_per_second = quantized input bytes (memcpy: source size); items = elements");
  const auto threads = bench::thread_counts(kTool);
  for (unsigned n : threads)
    benchmark::RegisterBenchmark(("memcpy/threads:" + std::to_string(n)).c_str(), BM_memcpy, n)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  for (const Tiled& t : tiled())
    for (unsigned n : threads)
      benchmark::RegisterBenchmark(("dequant/" + t.source.type + "/threads:" + std::to_string(n)).c_str(), BM_dequant,
                                   &t, n)
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
  for (const Tiled& t : tiled()) {
    if (t.source.type != "Q8_0" && t.source.type != "Q4_0") continue;
    for (const bool full : {true, false})
      for (unsigned n : threads)
        benchmark::RegisterBenchmark(("stats/" + t.source.type + (full ? "/full" : "/moments") + "/threads:" + std::to_string(n)).c_str(),
                                     BM_stats, &t, n, full)
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond);
  }
  for (const uint32_t bits : {3u, 4u})
    for (unsigned n : threads)
      benchmark::RegisterBenchmark(("packed/GPTQ" + std::to_string(bits) + "bit/threads:" + std::to_string(n)).c_str(),
                                   BM_packed_gptq, bits, n)
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
