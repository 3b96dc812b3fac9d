#include "display/placed_colorize.h"

#include <algorithm>
#include <cstring>

#include "display/thresholds.h"
#include "ops/kernel_call.h"
#include "tensormorph/error.h"

namespace tmorph {

tm_display_colorize_params_v1 colorize_params(const DisplayParams& p) {
  if (p.colormap == nullptr || p.colormap->rgba == nullptr)
    throw Error(ErrorKind::InvalidArgument, "colorize: no colour map given");
  const ColorThresholds th = color_thresholds(p);
  tm_display_colorize_params_v1 params{};
  params.key_mode = th.key == ThresholdKey::Magnitude ? TM_DISPLAY_KEY_MAGNITUDE : TM_DISPLAY_KEY_VALUE;
  params.reserved = 0;
  std::copy(th.t.begin(), th.t.end(), params.thresholds);
  std::memcpy(params.table, p.colormap->rgba, sizeof params.table);
  return params;
}

ColorizeResult colorize_placed(const Planner& planner, const double* v, size_t n, const DisplayParams& p, unsigned threads) {
  const tm_display_colorize_params_v1 params = colorize_params(p);
  ColorizeResult r;
  OpRequest op;
  op.op = TM_OP_DISPLAY_COLORIZE;
  op.dtype = DType::F64;
  op.elements = n;
  op.bytes = n * sizeof(double);
  r.placement = planner.place(op);

  constexpr size_t kCountBytes = TM_DISPLAY_COLORIZE_COUNTS * sizeof(uint64_t);
  std::vector<uint8_t> out(kCountBytes + 4 * n, 0);  // counts are added: they start at zero
  run_placed_kernel(r.placement, TM_OP_DISPLAY_COLORIZE,
                    {DType::F64, v, n, &params, sizeof params, out.data(), out.size(), std::max(1u, threads)});
  uint64_t counts[TM_DISPLAY_COLORIZE_COUNTS];
  std::memcpy(counts, out.data(), kCountBytes);
  std::copy(counts, counts + 256, r.histogram.counts.begin());
  r.histogram.nan = counts[256];
  r.histogram.pos_inf = counts[257];
  r.histogram.neg_inf = counts[258];
  r.rgba.assign(out.begin() + kCountBytes, out.end());
  return r;
}

}  // namespace tmorph
