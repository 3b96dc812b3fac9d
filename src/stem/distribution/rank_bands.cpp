#include "stem/distribution/rank_bands.h"

#include <algorithm>
#include <optional>

#include "tensormorph/error.h"

namespace tmorph {

namespace {

void put_box(WireWriter& w, const std::optional<Box>& b) {
  w.put<uint8_t>(b.has_value());
  if (b) w.put(b->r0).put(b->r1).put(b->c0).put(b->c1);
}

std::optional<Box> get_box(WireReader& in) {
  if (!in.get<uint8_t>()) return std::nullopt;
  Box b;
  b.r0 = in.get<uint64_t>(), b.r1 = in.get<uint64_t>(), b.c0 = in.get<uint64_t>(), b.c1 = in.get<uint64_t>();
  return b;
}

}  // namespace

std::string rank_name(int rank, int size) { return "rank " + std::to_string(rank) + " of " + std::to_string(size); }

uint64_t band_count(uint64_t output_rows, int world_size) {
  return std::min<uint64_t>(static_cast<uint64_t>(std::max(world_size, 1)), std::max<uint64_t>(output_rows, 1));
}

ScanBand scan_band(const LoadPlan& plan, const LoadRequest& load, uint64_t k, uint64_t n) {
  const uint64_t rows = plan.output_shape[0], bin = load.scan_bin[0];
  const Box& region = plan.scan_region;
  const uint64_t a = rows * k / n, e = rows * (k + 1) / n;
  ScanBand band;
  band.load = load;
  band.load.scan_region = Box{region.r0 + a * bin, std::min(region.r0 + e * bin, region.r1), region.c0, region.c1};
  band.rows = {a, e};
  return band;
}

void put_load_request(WireWriter& w, const Acquisition& acq, const LoadRequest& l) {
  w.put_string(acq.master).put_string(acq.signature);
  w.put<uint8_t>(l.scan_shape.has_value());
  if (l.scan_shape) w.put((*l.scan_shape)[0]).put((*l.scan_shape)[1]);
  put_box(w, l.scan_region);
  put_box(w, l.detector_region);
  w.put(l.scan_bin[0]).put(l.scan_bin[1]).put(l.detector_bin[0]).put(l.detector_bin[1]);
  w.put_string(l.dtype).put<uint8_t>(l.mask_bad_pixels);
}

RankLoad get_load_request(WireReader& in) {
  RankLoad r;
  r.master = in.get_string(), r.signature = in.get_string();
  LoadRequest& l = r.load;
  if (in.get<uint8_t>()) {
    const uint64_t rows = in.get<uint64_t>(), cols = in.get<uint64_t>();
    l.scan_shape = std::array<uint64_t, 2>{rows, cols};
  }
  l.scan_region = get_box(in);
  l.detector_region = get_box(in);
  l.scan_bin[0] = in.get<uint64_t>(), l.scan_bin[1] = in.get<uint64_t>();
  l.detector_bin[0] = in.get<uint64_t>(), l.detector_bin[1] = in.get<uint64_t>();
  l.dtype = in.get_string();
  l.mask_bad_pixels = in.get<uint8_t>() != 0;
  return r;
}

Acquisition open_rank0_acquisition(const RankLoad& r) {
  Acquisition acq = open_acquisition(r.master);
  if (acq.signature != r.signature)
    throw Error(ErrorKind::BadInput, r.master + ": signature " + acq.signature + " here but " + r.signature +
                                         " on rank 0 (the files differ in name, size, time or header; every rank must see the same files)");
  return acq;
}

uint64_t zeroed_sentinels(const nlohmann::json& provenance) {
  const auto& b = provenance.value("bad_pixels", nlohmann::json::object());
  return b.value("sentinel_values_zeroed", uint64_t{0});
}

void describe_whole_request(nlohmann::json& prov, const LoadPlan& plan, uint64_t zeroed) {
  const Box& region = plan.scan_region;
  prov["scan_region"] = nlohmann::json::array({region.r0, region.r1, region.c0, region.c1});
  if (prov.contains("output")) prov["output"]["shape"] = plan.output_shape;
  if (prov.contains("bad_pixels")) prov["bad_pixels"]["sentinel_values_zeroed"] = zeroed;
}

}  // namespace tmorph
