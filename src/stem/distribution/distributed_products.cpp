#include "stem/distribution/distributed_products.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "distributed/rank_exchange.h"
#include "distributed/wire.h"
#include "ops/placement_json.h"
#include "stem/distribution/rank_bands.h"
#include "tensormorph/error.h"

namespace tmorph {

namespace {

constexpr RankProtocol kProtocol{"4D-STEM products", 32, 34};
enum Tag : int { kRequest = kProtocol.tag(0), kResult = kProtocol.tag(1), kFail = kProtocol.tag(2) };

// The request for one band. Threads and memory budget are the serving rank's own.
std::vector<uint8_t> encode_request(const Acquisition& acq, const ProductRequest& req) {
  WireWriter w;
  put_load_request(w, acq, req.load);
  w.put<uint64_t>(req.detectors.size());
  for (const auto& d : req.detectors) w.put_vector(d);
  w.put_vector(req.com_pixels).put<uint8_t>(req.frame_sums).put<uint8_t>(req.com).put<uint8_t>(req.pattern).put(req.batch_bytes);
  return std::move(w.bytes());
}

struct BandRequest {
  RankLoad source;
  ProductRequest req;
};

BandRequest decode_request(const std::vector<uint8_t>& bytes) {
  WireReader in(bytes, "4D-STEM product request from rank 0");
  BandRequest b;
  b.source = get_load_request(in);
  b.req.load = b.source.load;
  for (uint64_t k = 0, n = in.get<uint64_t>(); k < n; ++k) b.req.detectors.push_back(in.get_vector<uint32_t>());
  b.req.com_pixels = in.get_vector<uint32_t>();
  b.req.frame_sums = in.get<uint8_t>() != 0, b.req.com = in.get<uint8_t>() != 0, b.req.pattern = in.get<uint8_t>() != 0;
  b.req.batch_bytes = in.get<uint64_t>();
  in.expect_end();
  return b;
}

std::vector<uint8_t> encode_result(const ProductResult& r, const std::string& host) {
  WireWriter w;
  w.put(r.scan_shape[0]).put(r.scan_shape[1]).put(r.frame_shape[0]).put(r.frame_shape[1]);
  w.put_vector(r.totals).put_vector(r.com_weight).put_vector(r.com_row).put_vector(r.com_col);
  w.put<uint64_t>(r.images.size());
  for (const auto& image : r.images) w.put_vector(image);
  w.put<uint64_t>(r.evaluated_as.size());
  for (const auto& e : r.evaluated_as) w.put_string(e);
  w.put_vector(r.pattern_sum).put_vector(r.pattern_max).put(r.positions);
  w.put_string(placements_json(r.placements).dump()).put_string(r.load_provenance.dump());
  w.put(r.seconds).put(r.decoded_bytes).put_string(host);
  return std::move(w.bytes());
}

ProductResult decode_result(const std::vector<uint8_t>& bytes, const std::string& what, std::string& host) {
  WireReader in(bytes, what);
  ProductResult r;
  r.scan_shape[0] = in.get<uint64_t>(), r.scan_shape[1] = in.get<uint64_t>();
  r.frame_shape[0] = in.get<uint64_t>(), r.frame_shape[1] = in.get<uint64_t>();
  r.totals = in.get_vector<uint64_t>(), r.com_weight = in.get_vector<uint64_t>();
  r.com_row = in.get_vector<uint64_t>(), r.com_col = in.get_vector<uint64_t>();
  for (uint64_t k = 0, n = in.get<uint64_t>(); k < n; ++k) r.images.push_back(in.get_vector<uint64_t>());
  for (uint64_t k = 0, n = in.get<uint64_t>(); k < n; ++k) r.evaluated_as.push_back(in.get_string());
  r.pattern_sum = in.get_vector<uint64_t>(), r.pattern_max = in.get_vector<uint32_t>();
  r.positions = in.get<uint64_t>();
  const auto placement = nlohmann::json::parse(in.get_string(), nullptr, false);
  r.load_provenance = nlohmann::json::parse(in.get_string(), nullptr, false);
  if (placement.is_discarded() || r.load_provenance.is_discarded())
    throw Error(ErrorKind::BadInput, what + ": placement or provenance is not JSON");
  r.placements = placements_from_json(placement);
  r.seconds = in.get<double>(), r.decoded_bytes = in.get<uint64_t>();
  host = in.get_string();
  in.expect_end();
  return r;
}


template <class T>
void append(std::vector<T>& to, const std::vector<T>& from) {
  to.insert(to.end(), from.begin(), from.end());
}

// Adds one band (the next rows) to the merged result. Every band has the same frame shape and detectors.
void merge_band(ProductResult& into, const ProductResult& band, const std::string& what) {
  if (band.frame_shape != into.frame_shape || band.scan_shape[1] != into.scan_shape[1] ||
      band.images.size() != into.images.size() || band.evaluated_as != into.evaluated_as ||
      band.pattern_sum.size() != into.pattern_sum.size() || band.pattern_max.size() != into.pattern_max.size() ||
      band.totals.empty() != into.totals.empty())
    throw Error(ErrorKind::Internal, what + ": a band whose shape or detectors differ from rank 0's");
  into.scan_shape[0] += band.scan_shape[0];
  append(into.totals, band.totals), append(into.com_weight, band.com_weight);
  append(into.com_row, band.com_row), append(into.com_col, band.com_col);
  for (size_t d = 0; d < into.images.size(); ++d) append(into.images[d], band.images[d]);
  for (size_t p = 0; p < into.pattern_sum.size(); ++p) into.pattern_sum[p] += band.pattern_sum[p];
  for (size_t p = 0; p < into.pattern_max.size(); ++p) into.pattern_max[p] = std::max(into.pattern_max[p], band.pattern_max[p]);
  into.positions += band.positions;
  into.decoded_bytes += band.decoded_bytes;
}

// Ranks > 0: computes the band that message m (from rank 0) asks for with this rank's planner, threads and memory
// budget, and sends the result or the failure to rank 0.
void serve_product_request(const RankMessage& m, const Planner& planner, unsigned threads, uint64_t memory_budget, World& world) {
  const RankExchange exchange(world, kProtocol, kRequest, kFail);
  const std::string host = world.host();
  exchange.serve([&] {
    BandRequest b = decode_request(m.bytes);
    const Acquisition acq = open_rank0_acquisition(b.source);
    b.req.load.threads = threads;
    b.req.load.memory_budget = memory_budget;
    exchange.reply(kResult, encode_result(compute_products_here(acq, b.req, planner), host));
  });
}

}  // namespace

RankService product_rank_service(const Planner& planner, unsigned threads, uint64_t memory_budget) {
  return {kProtocol, kRequest, [&planner, threads, memory_budget](const RankMessage& m, World& world) {
            serve_product_request(m, planner, threads, memory_budget, world);
          }};
}

// Declared in products.h: defined here so that products.cpp (one rank's pass) never depends on the ranks' protocol.
ProductResult compute_products(const Acquisition& acq, const ProductRequest& req, const Planner& planner) {
  World& world = World::instance();
  // Float frames are summed in one fixed order (op_contracts.h); bands added across ranks would reorder the
  // pattern sums, so rank 0 computes them alone.
  const bool floating = acq.dtype == DType::F32 || acq.dtype == DType::F64;
  if (world.distributed() && world.rank() == 0 && !floating) return compute_products_across_ranks(acq, req, planner, world);
  return compute_products_here(acq, req, planner);
}

ProductResult compute_products_across_ranks(const Acquisition& acq, const ProductRequest& req, const Planner& planner,
                                            World& world) {
  const auto t0 = std::chrono::steady_clock::now();
  const LoadPlan plan = plan_load(acq, req.load);  // throws for a malformed request before any rank starts
  const uint64_t ranks = band_count(plan.output_shape[0], world.size());
  auto band_request = [&](uint64_t k) {
    ScanBand band = scan_band(plan, req.load, k, ranks);
    ProductRequest r = req;
    r.load = band.load;
    return std::pair{r, band.rows};
  };
  const RankExchange exchange(world, kProtocol, kRequest, kFail);
  exchange.scatter(static_cast<int>(ranks), [&](int k) { return encode_request(acq, band_request(static_cast<uint64_t>(k)).first); });

  // Rank 0's band, then the others' in rank order (each waits in its send until rank 0 receives it).
  std::vector<std::optional<ProductResult>> bands(ranks);
  std::vector<std::string> hosts(ranks, world.host());
  std::vector<std::optional<Error>> failures(ranks);
  try {
    bands[0] = compute_products_here(acq, band_request(0).first, planner);
  } catch (const Error& e) {
    failures[0] = e;
  }
  for (uint64_t k = 1; k < ranks; ++k) {
    const std::string what = "4D-STEM product result from " + rank_name(static_cast<int>(k), world.size());
    RankExchange::Reply reply = exchange.receive(static_cast<int>(k), what);
    if (reply.failure) {
      failures[k] = std::move(reply.failure->error), hosts[k] = std::move(reply.failure->host);
    } else if (reply.message.tag == kResult) {
      bands[k] = decode_result(reply.message.bytes, what, hosts[k]);
    } else {
      throw Error(ErrorKind::Internal, what + ": unexpected message tag " + std::to_string(reply.message.tag));
    }
  }
  for (uint64_t k = 0; k < ranks; ++k)
    if (failures[k])
      throw Error(failures[k]->kind(), rank_name(static_cast<int>(k), world.size()) + " on " + hosts[k] +
                                           " failed computing scan rows of its band: " + failures[k]->what());

  nlohmann::json per_rank = nlohmann::json::array();
  for (uint64_t k = 0; k < ranks; ++k) {
    const ProductResult& b = *bands[k];
    const auto [a, e] = band_request(k).second;
    per_rank.push_back({{"rank", k}, {"host", hosts[k]}, {"output_scan_rows", {a, e}}, {"positions", b.positions},
                       {"seconds", b.seconds}, {"decoded_bytes", b.decoded_bytes}, {"placement", placements_json(b.placements)}});
  }
  ProductResult r = std::move(*bands[0]);
  uint64_t zeroed = zeroed_sentinels(r.load_provenance);
  for (uint64_t k = 1; k < ranks; ++k) {
    merge_band(r, *bands[k], "4D-STEM product result from " + rank_name(static_cast<int>(k), world.size()));
    zeroed += zeroed_sentinels(bands[k]->load_provenance);
  }
  r.ranks = std::move(per_rank);
  describe_whole_request(r.load_provenance, plan, zeroed);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace tmorph
