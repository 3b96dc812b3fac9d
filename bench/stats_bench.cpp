// Statistics throughput per dtype and thread count, beside memcpy on the same machine.
//
//   stats/<dtype>/moments/threads:N  min/max/abs max/sum/mean/std and the nan/inf/zero counts
//   stats/<dtype>/full/threads:N     the same plus the 256-bin histogram over [min, max] and the exact
//                                    quantiles 0.001, 0.01, 0.5, 0.99, 0.999
//   memcpy/threads:N                 memcpy of a buffer of the same size, split into N std::threads
//
// Byte convention: every benchmark counts the bytes it reads once, i.e. the raw input size (for memcpy,
// the source size; the copy also writes as many bytes). GB/s in reports are 1e9 bytes per second.
//
// Environment:
//   TM_BENCH_MIB      buffer size per dtype and for memcpy, in MiB (default 256)
//   TM_BENCH_THREADS  comma-separated thread counts (default "1,2")
// Extra flags (besides Google Benchmark's own):
//   --tm_dump_data=DIR   write the generated buffers to DIR/<dtype>.bin plus DIR/manifest.json and exit
//                        (the numpy peer reads exactly these bytes)
//   --tm_check_out=FILE  after the run, write every stats benchmark's results as JSON (for cross-checking)
#include <benchmark/benchmark.h>

#include "bench_support.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <new>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../backends/cpu/cpu_backend.h"
#include "tensormorph/backend_registry.h"
#include "tensormorph/cost_model.h"
#include "tensormorph/dtype.h"
#include "tensormorph/planner.h"
#include "tensormorph/stats.h"

namespace {

using tmorph::DType;

constexpr DType kDTypes[] = {DType::F32, DType::BF16, DType::F16, DType::F8_E4M3FN};

constexpr const char* kTool = "stats_bench";

uint64_t size_mib() {
  static const uint64_t mib = bench::env_mib(kTool, "TM_BENCH_MIB", 256, (1ull << 20));
  return mib;
}

uint64_t size_bytes() { return size_mib() << 20; }

using bench::Buffer;
using bench::split_threads;

[[noreturn]] void die(const std::string& message) { bench::die(kTool, message); }

// ---- deterministic data --------------------------------------------------------------------------
//
// Values ~N(0,1): the top 16 bits of a splitmix64 draw pick one of 65536 equal-probability cells of the
// standard normal (boundaries = inverse CDF, tails clamped at p = 2^-18, i.e. |x| <= ~4.6), the next 32
// bits place the value uniformly inside the cell. Element i gets the same underlying value in every
// dtype (seeded per 2^20-element chunk, so generation threads do not change the bytes). Each value is
// rounded to nearest-even in the target dtype. 128 specials are planted at fixed positions:
// k % 4 == 0: +NaN, 1: +Inf, 2: -Inf, 3: -NaN (f8_e4m3fn has no Inf: +-NaN instead).

constexpr uint64_t kChunkElements = uint64_t{1} << 20;
constexpr uint64_t kSpecials = 128;

uint64_t splitmix64(uint64_t& s) {
  uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

const std::vector<double>& normal_cells() {
  static const std::vector<double> cells = [] {
    std::vector<double> b(65537);
    const double pmin = 1.0 / 262144.0;
    for (size_t i = 0; i < b.size(); ++i) {
      const double p = std::clamp(static_cast<double>(i) / 65536.0, pmin, 1.0 - pmin);
      double lo = -10, hi = 10;
      for (int it = 0; it < 80; ++it) {
        const double mid = (lo + hi) / 2;
        (0.5 * std::erfc(-mid / std::sqrt(2.0)) < p ? lo : hi) = mid;
      }
      b[i] = (lo + hi) / 2;
    }
    return b;
  }();
  return cells;
}

uint16_t to_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u += 0x7FFFu + ((u >> 16) & 1u);  // round to nearest even (inputs are finite)
  return static_cast<uint16_t>(u >> 16);
}

uint16_t to_f16(float x) {
  const _Float16 h = static_cast<_Float16>(x);  // IEEE round to nearest even, subnormals included
  uint16_t u;
  std::memcpy(&u, &h, 2);
  return u;
}

uint8_t to_f8_e4m3fn(float x) {
  static const std::vector<double> positive = [] {  // patterns 0x00..0x7E, ascending
    std::vector<double> v(127);
    for (int i = 0; i < 127; ++i) v[i] = tmorph::f8_e4m3fn_to_double(static_cast<uint8_t>(i));
    return v;
  }();
  const double a = std::fabs(static_cast<double>(x));
  const size_t up = std::upper_bound(positive.begin(), positive.end(), a) - positive.begin();
  size_t pick;
  if (up == 0) pick = 0;
  else if (up == positive.size()) pick = positive.size() - 1;  // saturate (never reached for |x| < 5)
  else {
    const double below = a - positive[up - 1], above = positive[up] - a;
    pick = below < above ? up - 1 : above < below ? up : ((up - 1) % 2 == 0 ? up - 1 : up);
  }
  return static_cast<uint8_t>(pick | (std::signbit(x) ? 0x80u : 0u));
}

void plant_special(DType dt, uint8_t* p, uint64_t i, int kind) {
  const bool negative = kind >= 2;
  const bool nan = kind == 0 || kind == 3;
  switch (dt) {
    case DType::F32: {
      const float v = nan ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
      const float s = negative ? -v : v;
      std::memcpy(p + 4 * i, &s, 4);
      break;
    }
    case DType::BF16: {
      const uint16_t v = static_cast<uint16_t>((nan ? 0x7FC0u : 0x7F80u) | (negative ? 0x8000u : 0u));
      std::memcpy(p + 2 * i, &v, 2);
      break;
    }
    case DType::F16: {
      const uint16_t v = static_cast<uint16_t>((nan ? 0x7E00u : 0x7C00u) | (negative ? 0x8000u : 0u));
      std::memcpy(p + 2 * i, &v, 2);
      break;
    }
    case DType::F8_E4M3FN:
      p[i] = negative ? 0xFF : 0x7F;
      break;
    default:
      break;
  }
}

Buffer generate(DType dt) {
  const size_t width = tmorph::dtype_size(dt);
  const uint64_t n = size_bytes() / width;
  Buffer buf(n * width);
  const auto& cells = normal_cells();
  uint8_t* p = buf.data();
  const uint64_t chunks = (n + kChunkElements - 1) / kChunkElements;
  const unsigned workers = std::max(1u, std::thread::hardware_concurrency());
  split_threads(chunks, workers, 1, [&](uint64_t c0, uint64_t c1) {
    for (uint64_t c = c0; c < c1; ++c) {
      uint64_t state = 0x5EED0000ull + c * 0x100000001B3ull;
      const uint64_t last = std::min(n, (c + 1) * kChunkElements);
      for (uint64_t i = c * kChunkElements; i < last; ++i) {
        const uint64_t r = splitmix64(state);
        const size_t cell = r >> 48;
        const double u = static_cast<double>((r >> 16) & 0xFFFFFFFFull) * 0x1p-32;
        const float x = static_cast<float>(cells[cell] + (cells[cell + 1] - cells[cell]) * u);
        switch (dt) {
          case DType::F32: std::memcpy(p + 4 * i, &x, 4); break;
          case DType::BF16: { const uint16_t v = to_bf16(x); std::memcpy(p + 2 * i, &v, 2); break; }
          case DType::F16: { const uint16_t v = to_f16(x); std::memcpy(p + 2 * i, &v, 2); break; }
          case DType::F8_E4M3FN: p[i] = to_f8_e4m3fn(x); break;
          default: break;
        }
      }
    }
  });
  if (n >= 2 * kSpecials)
    for (uint64_t k = 0; k < kSpecials; ++k) plant_special(dt, p, k * (n / kSpecials) + 7, static_cast<int>(k % 4));
  return buf;
}

const Buffer& data_for(DType dt) {
  static std::map<DType, Buffer> cache;
  auto it = cache.find(dt);
  if (it == cache.end()) it = cache.emplace(dt, generate(dt)).first;
  return it->second;
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

// ---- results kept for cross-checking against numpy ---------------------------------------------------

std::map<std::string, std::string>& check_results() {
  static std::map<std::string, std::string> results;
  return results;
}

std::string num(double v) {
  // NaN / Infinity are not strict JSON, but Python's json module (the only reader) accepts them.
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

std::string result_json(const std::string& name, DType dt, bool full, unsigned threads, uint64_t elements,
                        const tmorph::StatsResult& r) {
  const auto& m = r.moments;
  std::ostringstream o;
  o << "{\"name\": \"" << name << "\", \"dtype\": \"" << tmorph::dtype_name(dt) << "\", \"mode\": \""
    << (full ? "full" : "moments") << "\", \"threads\": " << threads << ", \"elements\": " << elements
    << ", \"count\": " << m.count << ", \"finite\": " << m.finite_count << ", \"nan\": " << m.nan_count
    << ", \"inf\": " << m.inf_count << ", \"zero\": " << m.zero_count << ", \"min\": " << num(m.min)
    << ", \"max\": " << num(m.max) << ", \"abs_max\": " << num(m.abs_max) << ", \"sum\": " << num(m.sum)
    << ", \"mean\": " << num(m.mean) << ", \"std\": " << num(m.std);
  if (r.histogram) {
    o << ", \"hist_edges_lo_hi\": [" << num(r.histogram->edges.front()) << ", " << num(r.histogram->edges.back())
      << "], \"hist\": [";
    for (size_t i = 0; i < r.histogram->counts.size(); ++i) o << (i ? ", " : "") << r.histogram->counts[i];
    o << "], \"hist_below\": " << r.histogram->below << ", \"hist_above\": " << r.histogram->above;
  }
  if (!r.quantiles.empty()) {
    o << ", \"quantile_method\": \"" << r.quantile_method << "\", \"quantiles\": [";
    for (size_t i = 0; i < r.quantiles.size(); ++i)
      o << (i ? ", " : "") << "[" << num(r.quantiles[i].p) << ", " << num(r.quantiles[i].value) << "]";
    o << "]";
  }
  o << ", \"placement\": [";
  for (size_t i = 0; i < r.placement.size(); ++i)
    o << (i ? ", " : "") << "\"" << r.placement[i].op << "@" << r.placement[i].backend << "\"";
  o << "]}";
  return o.str();
}

// ---- benchmarks ----------------------------------------------------------------------------------

void BM_stats(benchmark::State& state, std::string name, DType dt, bool full, unsigned threads) {
  const Buffer& buf = data_for(dt);
  const uint64_t elements = buf.size() / tmorph::dtype_size(dt);
  tmorph::StatsOptions options;
  options.threads = threads;
  options.histogram = full;
  options.bins = 256;
  options.quantiles = full;
  tmorph::StatsResult result;
  for (auto _ : state) {
    try {
      result = tmorph::compute_stats(buf.data(), dt, elements, planner(), options);
    } catch (const std::exception& e) {
      state.SkipWithError(e.what());
      return;
    }
    benchmark::DoNotOptimize(result);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(buf.size()));
  check_results()[name] = result_json(name, dt, full, threads, elements, result);
}

void BM_memcpy(benchmark::State& state, unsigned threads) { bench::memcpy_benchmark(state, threads, size_bytes()); }

// ---- data dump for the numpy peer ----------------------------------------------------------------

void dump_data(const std::string& dir) {
  std::ostringstream manifest;
  manifest << "{\n  \"size_mib\": " << size_mib() << ",\n  \"generator\": \"stats_bench: splitmix64 cells of N(0,1), "
           << kSpecials << " planted NaN/Inf\",\n  \"files\": {";
  bool first = true;
  for (DType dt : kDTypes) {
    const Buffer buf = generate(dt);
    const std::string file = std::string(tmorph::dtype_name(dt)) + ".bin";
    std::ofstream out(dir + "/" + file, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(buf.data()), static_cast<std::streamsize>(buf.size()));
    out.close();
    if (!out) die("cannot write " + dir + "/" + file);
    manifest << (first ? "" : ",") << "\n    \"" << tmorph::dtype_name(dt) << "\": {\"file\": \"" << file
             << "\", \"bytes\": " << buf.size() << ", \"elements\": " << buf.size() / tmorph::dtype_size(dt) << "}";
    first = false;
  }
  manifest << "\n  }\n}\n";
  std::ofstream out(dir + "/manifest.json", std::ios::trunc);
  out << manifest.str();
  out.close();
  if (!out) die("cannot write " + dir + "/manifest.json");
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  std::string dump_dir, check_out;
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--tm_dump_data=", 0) == 0) dump_dir = a.substr(15);
    else if (a.rfind("--tm_check_out=", 0) == 0) check_out = a.substr(15);
    else argv[kept++] = argv[i];
  }
  argc = kept;
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;

  if (!dump_dir.empty()) {
    dump_data(dump_dir);
    return 0;
  }

  benchmark::AddCustomContext("tm_size_mib", std::to_string(size_mib()));
  benchmark::AddCustomContext("tm_bytes_convention",
                              "bytes read once per iteration (raw input size; memcpy: source size)");
  const auto threads = bench::thread_counts(kTool);
  for (unsigned t : threads)
    benchmark::RegisterBenchmark(("memcpy/threads:" + std::to_string(t)).c_str(), BM_memcpy, t)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  for (DType dt : kDTypes)
    for (bool full : {false, true})
      for (unsigned t : threads) {
        const std::string name = "stats/" + std::string(tmorph::dtype_name(dt)) + (full ? "/full" : "/moments") +
                                 "/threads:" + std::to_string(t);
        benchmark::RegisterBenchmark(name.c_str(), BM_stats, name, dt, full, t)
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond);
      }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();

  if (!check_out.empty()) {
    std::ofstream out(check_out, std::ios::trunc);
    out << "[\n";
    bool first = true;
    for (const auto& [name, json] : check_results()) {
      out << (first ? "  " : ",\n  ") << json;
      first = false;
    }
    out << "\n]\n";
    out.close();
    if (!out) die("cannot write " + check_out);
  }
  return 0;
}
