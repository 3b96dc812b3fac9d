// tensormorph calibrate: time every exact kernel of every available device once, cache the
// throughputs for the cost model. Nothing here knows a device by name.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <random>

#include "cli/commands.h"
#include "cli/output.h"
#include "cli/compute_flags.h"
#include "ops/op_runner.h"

namespace tmorph::cli {

namespace {

struct CalibrateArgs {
  uint64_t size_mib = 64;
  int repeats = 3;
  bool json = false;
};

// The dtype a kernel is timed with: f32 when it takes it, else its first dtype.
DType calibration_dtype(uint64_t mask) {
  if (mask & dtype_bit(DType::F32)) return DType::F32;
  for (DType t : kAllDTypes)
    if (mask & dtype_bit(t)) return t;
  return DType::F32;
}

void run_calibrate(const CalibrateArgs& a) {
  auto rt = command_runtime(nullptr);
  const uint64_t bytes = a.size_mib << 20;
  std::vector<uint8_t> data(bytes);
  std::mt19937_64 rng(42);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (uint64_t i = 0; i + 4 <= bytes; i += 4) {
    const float f = normal(rng);
    std::memcpy(&data[i], &f, 4);
  }
  CostModel measured;  // fresh: stale entries from an earlier run must not survive
  nlohmann::json results = nlohmann::json::array();
  for (const auto& b : rt->registry.backends()) {
    if (!b.available) continue;
    for (const auto& d : b.devices) {
      for (const auto& k : b.kernels) {
        if (!k.approx_step.empty()) continue;
        const bool dequant = k.op == TM_OP_DEQUANTIZE_GGML || k.op == TM_OP_GGML_BLOCK_STATS || k.op == TM_OP_QUANT_MOMENTS;  // on Q8_0
        const bool packed = k.op == TM_OP_DEQUANTIZE_PACKED;                                   // timed on FP8 codes
        const bool ssb = k.op == TM_OP_STEM_SSB_OVERLAP;  // 64 pixels' spectra over a 16 x 16 scan (op_runner.cpp)
        const bool decode = k.op == TM_OP_DECODE_BITSHUFFLE_LZ4;  // uint16 frames of 64 KiB (op_runner.cpp)
        const DType dt = dequant || packed || ssb ? DType::F32 : decode ? DType::U16 : calibration_dtype(k.dtype_mask);
        const uint64_t elements = dequant ? bytes / 34 * 32 : packed ? bytes : ssb ? 2 * 64 * 144 : bytes / dtype_size(dt);
        Placement pl;
        pl.backend = b.name, pl.backend_ref = &b, pl.device_index = d.index, pl.kernel_index = k.index;
        double best = INFINITY;
        for (int r = 0; r <= a.repeats; ++r) {  // first run warms caches and pages
          const auto t0 = std::chrono::steady_clock::now();
          run_op_once(pl, k.op, dt, data.data(), elements, rt->threads);
          const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          if (r > 0) best = std::min(best, s);
        }
        const double bps = static_cast<double>(dequant ? elements / 32 * 34 : ssb ? elements * 4 : bytes) / best;  // input bytes per second
        // Several kernels may serve one op (e.g. by dtype width): keep the slowest as the op's figure.
        bool had = false;
        const double old = measured.throughput(b.name, d.id, k.op, &had);
        measured.set_throughput(b.name, d.id, k.op, had ? std::min(old, bps) : bps);
        results.push_back({{"backend", b.name}, {"device", d.name}, {"device_id", d.id}, {"op", op_name(k.op)},
                           {"dtype", dequant ? "Q8_0" : packed ? "FP8 (packed)" : std::string(dtype_name(dt))}, {"bytes", bytes}, {"seconds", best}, {"bytes_per_s", bps}});
        if (!a.json)
          std::printf("%-10s %-40s %-28s %-6s %8.2f GB/s\n", b.name.c_str(), d.name.substr(0, 40).c_str(),
                      op_name(k.op).c_str(), dequant ? "Q8_0" : std::string(dtype_name(dt)).c_str(), bps / 1e9);
      }
    }
  }
  measured.save(rt->calibration_path);
  if (a.json) print_json(nlohmann::json{{"calibration_file", rt->calibration_path}, {"results", results}});
  else std::printf("saved %s\n", rt->calibration_path.c_str());
}

}  // namespace

void add_calibrate_command(CLI::App& app) {
  auto args = std::make_shared<CalibrateArgs>();
  CLI::App* cmd = app.add_subcommand("calibrate", "measure every kernel's throughput once and cache it for the planner");
  cmd->add_option("--size-mib", args->size_mib, "bytes per timing run, in MiB (default 64)")->check(CLI::Range(1, 4096));
  cmd->add_option("--repeats", args->repeats, "timed runs per kernel, best kept (default 3)")->check(CLI::Range(1, 100));
  cmd->add_flag("--json", args->json, "print one JSON document");
  cmd->callback([args] { run_calibrate(*args); });
}

}  // namespace tmorph::cli
