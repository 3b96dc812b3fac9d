// 4D-STEM products on a RESIDENT acquisition: the whole acquisition is loaded into memory once
// (load_stem), then each product's stem.frame_sums / stem.pattern_reduce call runs over it through the
// planner-placed CPU kernel, best of RUNS. What a user gets after `stem load`, beside numpy on the same
// resident array (bench/stem_bench.py) and the bandwidth floor (resident bytes / memcpy bandwidth).
//   stem_products_bench MASTER THREADS RUNS  ->  one JSON object: seconds per product, resident bytes
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "cpu/cpu_backend.h"
#include "ops/kernel_call.h"
#include "stem/products/dpc.h"
#include "stem/load.h"
#include "stem/products/virtual_detector.h"
#include "tensormorph/backend_registry.h"
#include "tensormorph/cost_model.h"
#include "tensormorph/op_contracts.h"
#include "tensormorph/planner.h"

using namespace tmorph;

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: stem_products_bench MASTER THREADS RUNS\n");
    return 2;
  }
  const Acquisition acq = open_acquisition(argv[1]);
  const unsigned threads = static_cast<unsigned>(std::atoi(argv[2]));
  const int runs = std::atoi(argv[3]);
  LoadRequest lr;
  lr.threads = threads;
  const StemArray data = load_stem(acq, lr);
  const uint64_t rows = data.shape[2], cols = data.shape[3], pixels = rows * cols, frames = data.shape[0] * data.shape[1];
  const double cr = static_cast<double>(rows) / 2, cc = static_cast<double>(cols) / 2, r = static_cast<double>(rows) / 8;

  BackendRegistry registry;
  registry.register_table(cpu::cpu_backend_table(), "static");
  const CostModel costs;
  const Constraints constraints;
  const Planner planner(registry, costs, constraints);
  const auto place = [&](tm_op op) {
    OpRequest req;
    req.op = op, req.dtype = data.dtype, req.elements = frames * pixels, req.bytes = data.bytes;
    return planner.place(req);
  };
  const Placement sums_at = place(TM_OP_STEM_FRAME_SUMS), pattern_at = place(TM_OP_STEM_PATTERN_REDUCE);

  // One frame_sums call over every frame with the given pixel lists.
  const auto frame_sums = [&](const std::vector<std::vector<uint32_t>>& lists, uint32_t flags = 0) {
    std::vector<uint64_t> offsets{0};
    std::vector<uint32_t> all;
    for (const auto& l : lists) all.insert(all.end(), l.begin(), l.end()), offsets.push_back(all.size());
    const tm_stem_frame_sums_params_v1 p{pixels, static_cast<uint32_t>(cols), static_cast<uint32_t>(lists.size()), offsets.data(), all.data(),
                                         TM_STEM_ALL_PIXELS, flags};
    std::vector<uint64_t> out(frames * (TM_STEM_FRAME_SUMS_FIXED + lists.size()));
    run_placed_kernel(sums_at, TM_OP_STEM_FRAME_SUMS, {data.dtype, data.data.get(), frames * pixels, &p, sizeof p, out.data(), out.size() * 8, threads});
    return out;
  };
  const auto best = [&](const std::function<void()>& f) {
    double b = std::numeric_limits<double>::infinity();
    for (int i = 0; i < runs; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      f();
      b = std::min(b, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return b;
  };
  const auto bf = annulus_pixels(rows, cols, cr, cc, 0, r);
  const auto adf = annulus_pixels(rows, cols, cr, cc, r, 2 * r);
  const auto df_complement = complement_pixels(annulus_pixels(rows, cols, cr, cc, r, INFINITY), pixels);  // total - complement
  // A virtual image of a sparse detector reads only its runs (as `tensormorph stem bf` does).
  const double t_bf = best([&] { frame_sums({bf}, TM_STEM_LISTS_ONLY); });
  const double t_adf = best([&] { frame_sums({adf}, TM_STEM_LISTS_ONLY); });
  const double t_df = best([&] { frame_sums({df_complement}); });
  const double t_com = best([&] { frame_sums({}); });
  const double t_all = best([&] { frame_sums({bf, adf, df_complement}); });
  const double t_pattern = best([&] {
    const tm_stem_pattern_params_v1 p{pixels};
    std::vector<uint8_t> out(pixels * 12, 0);
    run_placed_kernel(pattern_at, TM_OP_STEM_PATTERN_REDUCE, {data.dtype, data.data.get(), frames * pixels, &p, sizeof p, out.data(), out.size(), threads});
  });
  const double t_idpc = best([&] {
    const auto s = frame_sums({});
    ProductResult pr;
    pr.scan_shape = {data.shape[0], data.shape[1]};
    pr.positions = frames;
    pr.com_weight.resize(frames), pr.com_row.resize(frames), pr.com_col.resize(frames);
    for (uint64_t f = 0; f < frames; ++f) pr.com_weight[f] = s[f * 4 + 1], pr.com_row[f] = s[f * 4 + 2], pr.com_col[f] = s[f * 4 + 3];
    const ScanField com = center_of_mass(pr);
    const DpcRotation rot = find_dpc_rotation(com);
    (void)integrate_dpc(rotate_field(com, rot.angle, rot.transpose));
  });
  std::printf("{\"threads\": %u, \"resident_bytes\": %llu, \"bf\": %.6f, \"adf\": %.6f, \"df\": %.6f, \"com\": %.6f, "
              "\"bf_adf_df_com_one_pass\": %.6f, \"mean_max_pattern\": %.6f, \"com_dpc_idpc\": %.6f, \"bf_pixels\": %zu, "
              "\"adf_pixels\": %zu, \"df_complement_pixels\": %zu}\n",
              threads, static_cast<unsigned long long>(data.bytes), t_bf, t_adf, t_df, t_com, t_all, t_pattern, t_idpc, bf.size(), adf.size(),
              df_complement.size());
  return 0;
}
