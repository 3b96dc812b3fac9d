#include "index/tensor_result_codec.h"

#include <nlohmann/json.hpp>

#include "distributed/wire.h"
#include "ops/placement_json.h"
#include "tensormorph/error.h"

namespace tmorph {

namespace {

constexpr uint32_t kMagic = 0x31525454;  // "TTR1"

void put_stats(WireWriter& w, const StatsResult& r) {
  const MomentsSummary& m = r.moments;
  w.put(m.count).put(m.finite_count).put(m.nan_count).put(m.inf_count).put(m.zero_count);
  w.put(m.min).put(m.max).put(m.abs_max).put(m.sum).put(m.mean).put(m.std).put<uint8_t>(m.is_integer);
  w.put_string(m.int_min).put_string(m.int_max).put_string(m.int_sum);
  w.put<uint8_t>(r.histogram.has_value());
  if (r.histogram) w.put_vector(r.histogram->edges).put_vector(r.histogram->counts).put(r.histogram->below).put(r.histogram->above);
  w.put<uint64_t>(r.quantiles.size());
  for (const auto& q : r.quantiles) w.put(q.p).put(q.value).put(q.lo).put(q.hi).put(q.sample_size);
  w.put_string(r.quantile_method).put<uint8_t>(r.quantiles_exact);
  w.put_string(placements_json(r.placement).dump());
}

StatsResult get_stats(WireReader& in) {
  StatsResult r;
  MomentsSummary& m = r.moments;
  m.count = in.get<uint64_t>(), m.finite_count = in.get<uint64_t>(), m.nan_count = in.get<uint64_t>();
  m.inf_count = in.get<uint64_t>(), m.zero_count = in.get<uint64_t>();
  m.min = in.get<double>(), m.max = in.get<double>(), m.abs_max = in.get<double>();
  m.sum = in.get<double>(), m.mean = in.get<double>(), m.std = in.get<double>();
  m.is_integer = in.get<uint8_t>() != 0;
  m.int_min = in.get_string(), m.int_max = in.get_string(), m.int_sum = in.get_string();
  if (in.get<uint8_t>()) {
    Histogram h;
    h.edges = in.get_vector<double>();
    h.counts = in.get_vector<uint64_t>();
    h.below = in.get<uint64_t>(), h.above = in.get<uint64_t>();
    if (!h.counts.empty() && h.edges.size() != h.counts.size() + 1)
      throw Error(ErrorKind::BadInput, in.what() + ": histogram of " + std::to_string(h.counts.size()) + " bins has " +
                                           std::to_string(h.edges.size()) + " edges");
    r.histogram = std::move(h);
  }
  const uint64_t quantiles = in.get<uint64_t>();
  for (uint64_t k = 0; k < quantiles; ++k) {
    QuantileValue q;
    q.p = in.get<double>(), q.value = in.get<double>(), q.lo = in.get<double>(), q.hi = in.get<double>();
    q.sample_size = in.get<uint64_t>();
    r.quantiles.push_back(q);
  }
  r.quantile_method = in.get_string();
  r.quantiles_exact = in.get<uint8_t>() != 0;
  const auto placement = nlohmann::json::parse(in.get_string(), nullptr, false);
  if (placement.is_discarded()) throw Error(ErrorKind::BadInput, in.what() + ": the placement record is not JSON");
  r.placement = placements_from_json(placement);
  return r;
}

}  // namespace

std::vector<uint8_t> encode_tensor_result(const TensorResult& r) {
  WireWriter w;
  w.put(kMagic).put<uint64_t>(r.tensor).put(r.seconds);
  put_stats(w, r.stats);
  w.put<uint8_t>(r.pyramid.has_value());
  if (r.pyramid) {
    const Pyramid& p = *r.pyramid;
    const View2D& v = p.layout.view;
    w.put(v.slices).put(v.rows).put(v.cols).put(v.slice_axes).put(v.row_axes);
    w.put_vector(p.edges).put<uint64_t>(p.tiles.size());
    for (const auto& t : p.tiles) {
      const std::vector<uint8_t> record = encode_tile(t);
      w.put<uint64_t>(t.hist.size()).put_vector(record);
    }
  }
  return std::move(w.bytes());
}

TensorResult decode_tensor_result(const std::vector<uint8_t>& bytes, const std::string& what) {
  WireReader in(bytes, what);
  if (in.get<uint32_t>() != kMagic) throw Error(ErrorKind::BadInput, what + ": not a tensor result record (magic)");
  TensorResult r;
  r.tensor = static_cast<size_t>(in.get<uint64_t>());
  r.seconds = in.get<double>();
  r.stats = get_stats(in);
  if (in.get<uint8_t>()) {
    Pyramid p;
    View2D v;
    v.slices = in.get<uint64_t>(), v.rows = in.get<uint64_t>(), v.cols = in.get<uint64_t>();
    v.slice_axes = in.get<unsigned>(), v.row_axes = in.get<unsigned>();
    p.layout = make_pyramid_layout(v);
    p.edges = in.get_vector<double>();
    const uint64_t tiles = in.get<uint64_t>();
    uint64_t expected = 0;
    for (const auto& level : p.layout.levels) expected += level.rows * level.cols * v.slices;
    if (tiles != expected)
      throw Error(ErrorKind::BadInput, what + ": " + std::to_string(tiles) + " pyramid tiles where the view's layout has " +
                                           std::to_string(expected));
    for (uint64_t k = 0; k < tiles; ++k) {
      const auto bins = in.get<uint64_t>();
      const auto record = in.get_vector<uint8_t>();
      p.tiles.push_back(decode_tile(record.data(), record.size(), static_cast<size_t>(bins), what.c_str()));
    }
    r.pyramid = std::move(p);
  }
  in.expect_end();
  return r;
}

}  // namespace tmorph
