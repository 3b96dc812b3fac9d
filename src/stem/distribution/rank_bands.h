// What the 4D-STEM protocols across MPI ranks share (distributed_products.h, distributed_ssb.h): the band of
// output scan rows each rank takes, a load request as message bytes, opening the same acquisition on
// another rank, and the provenance of the whole request from rank 0's band.
//
// Bands: the request's output scan rows split into min(ranks, rows) contiguous runs of whole scan bins,
// band k = output rows [rows·k/n, rows·(k+1)/n), so that binning is unchanged and each rank reads only the
// chunks of its band's frames.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "distributed/wire.h"
#include "stem/load.h"

namespace tmorph {

std::string rank_name(int rank, int size);

// How many bands a request of `output_rows` output scan rows gets on `world_size` ranks.
uint64_t band_count(uint64_t output_rows, int world_size);

struct ScanBand {
  LoadRequest load;                   // the request restricted to the band's scan rows
  std::array<uint64_t, 2> rows{};     // output scan rows [first, end)
};
// Band k of n (k < n = band_count(...)) of `load`, whose plan is `plan`.
ScanBand scan_band(const LoadPlan& plan, const LoadRequest& load, uint64_t k, uint64_t n);

// The acquisition (its master path and signature) and the load request, without threads, memory budget and
// cancel flag (each rank uses its own).
void put_load_request(WireWriter& w, const Acquisition& acq, const LoadRequest& load);
struct RankLoad {
  std::string master, signature;
  LoadRequest load;
};
RankLoad get_load_request(WireReader& in);

// Opens the acquisition rank 0 named; throws Error(BadInput) when this rank sees other files (the signature
// differs).
Acquisition open_rank0_acquisition(const RankLoad& r);

// Sentinel values a loader's provenance says it zeroed.
uint64_t zeroed_sentinels(const nlohmann::json& provenance);
// Rank 0's band provenance made the whole request's: the whole scan region and output shape, and the zeroed
// sentinel values summed over every band.
void describe_whole_request(nlohmann::json& provenance, const LoadPlan& plan, uint64_t zeroed);

}  // namespace tmorph
