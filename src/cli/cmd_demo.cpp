// tensormorph demo: writes a deterministic demo tensor (a bf16 weight-like matrix with a few
// outliers, NaNs and an infinity) so `make run` has data without any download.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <random>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "tensormorph/error.h"

namespace tmorph::cli {

namespace {

uint16_t to_bf16(float f) {  // round to nearest even; NaN stays NaN
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if (std::isnan(f)) return 0x7FC0;
  u += 0x7FFF + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}

struct DemoArgs {
  std::string out = "build/demo";
  uint64_t rows = 2048, cols = 4096;
  bool json = false;
};

void run_demo(const DemoArgs& a) {
  std::filesystem::create_directories(a.out);
  const std::string path = a.out + "/demo-weight.bf16";
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw Error(ErrorKind::Io, path + ": cannot write");
  std::mt19937_64 rng(20261129);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<uint16_t> row(a.cols);
  for (uint64_t r = 0; r < a.rows; ++r) {
    const float row_scale = (r % 512 == 7) ? 8.0f : 1.0f;  // a few "hot" rows, as attention weights have
    for (uint64_t c = 0; c < a.cols; ++c) row[c] = to_bf16(normal(rng) * row_scale);
    if (r == 100) row[17] = to_bf16(41.5f);     // a single outlier
    if (r == 1000) row[3] = to_bf16(NAN);       // damaged values must be counted, not hidden
    if (r == 1001) row[9] = to_bf16(INFINITY);
    f.write(reinterpret_cast<const char*>(row.data()), static_cast<std::streamsize>(row.size() * 2));
  }
  if (!f) throw Error(ErrorKind::Io, path + ": write failed");
  if (a.json) {
    std::cout << nlohmann::json{{"file", path}, {"dtype", "bf16"}, {"shape", {a.rows, a.cols}}}.dump(2) << "\n";
  } else {
    std::printf("wrote %s: bf16 [%llu, %llu]\n", path.c_str(), static_cast<unsigned long long>(a.rows),
                static_cast<unsigned long long>(a.cols));
  }
}

}  // namespace

void add_demo_command(CLI::App& app) {
  auto args = std::make_shared<DemoArgs>();
  CLI::App* cmd = app.add_subcommand("demo", "write the built-in demo tensor (bf16 weight matrix) for trying things out");
  cmd->add_option("--out", args->out, "directory to write into (default build/demo)");
  cmd->add_option("--rows", args->rows, "rows (default 2048)")->check(CLI::Range(uint64_t{1}, uint64_t{1} << 20));
  cmd->add_option("--cols", args->cols, "columns (default 4096)")->check(CLI::Range(uint64_t{1}, uint64_t{1} << 20));
  cmd->add_flag("--json", args->json, "print one JSON document");
  cmd->callback([args] { run_demo(*args); });
}

}  // namespace tmorph::cli
