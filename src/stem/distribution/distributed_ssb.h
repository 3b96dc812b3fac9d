// The frames of an SSB reconstruction, read in this process or across the ranks of an MPI job
// (mpirun -np N tensormorph stem ssb).
//
// SSB keeps B bright-field values of every scan position (SsbFrames, ssb.h) and needs all of them in one place
// for its 2-D FFTs over the scan. Across ranks:
// - Rank 0 splits the request's output scan rows into bands (rank_bands.h). When SsbProblem asks for its first
//   batch (after its memory admission, so a refused request costs the ranks nothing), rank 0 sends every other
//   rank its band and the bright-field pixel list.
// - Each rank reads and decodes only its band's chunks, keeps the bright-field values as float32 with
//   ssb_extract_bright_field (the conversion one process makes), holds them until rank 0 takes them, and sends
//   them in messages of whole positions (at most 64 MiB each, at least four per band), then a summary.
// - Rank 0 reads its own band meanwhile, then takes the other bands' values in band order. G, and so the
//   phase, amplitude and loss, are bit-identical to one process's; the FFTs, the evaluations and any fit then
//   run on rank 0 (its planner places stem.ssb_overlap).
// - A rank's failure (an unreadable file, other files than rank 0's, over its memory budget) is thrown on
//   rank 0 naming the rank and its host; whatever the other ranks still send is taken and dropped first, so
//   no rank is left waiting.
// Memory: a rank other than 0 holds its band's values (positions × B × 4 bytes), admitted against its own
// budget; rank 0 holds one message (≤ 64 MiB) beyond what SsbProblem's admission counts.
//
// Messages (protocol "SSB bands", tags 40..43, distributed/rank_services.h; sent and taken through
// distributed/rank_exchange.h): rank 0 -> r: band request (40); r -> 0: values (41, repeated), summary (42), or
// failure (43).
#pragma once

#include <memory>

#include <nlohmann/json.hpp>

#include "distributed/rank_services.h"
#include "distributed/world.h"
#include "stem/ssb/ssb.h"

namespace tmorph {

class SsbFrameSource {
 public:
  // `load` is the whole request (its threads and budget are this rank's). Across ranks when this process is
  // rank 0 of a job with several ranks, else a StemLoader here. Throws as StemLoader does.
  SsbFrameSource(const Acquisition& acq, const LoadRequest& load);
  ~SsbFrameSource();  // across ranks: takes what the ranks still send when the problem stopped early
  SsbFrameSource(const SsbFrameSource&) = delete;
  SsbFrameSource& operator=(const SsbFrameSource&) = delete;

  // The frames for SsbProblem (excluded_pixels empty); valid while this source lives. Read once.
  SsbFrames frames();
  // The provenance of the whole request (after the frames were read).
  nlohmann::json provenance() const;
  // Across ranks, after the frames were read: per rank {rank, host, output_scan_rows, positions, seconds,
  // decoded_bytes, stored_bytes_read, bright_field_bytes, decode {backend, device, decoder}}; null here.
  nlohmann::json ranks() const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

// The service ranks > 0 give: each request reads its band with this rank's threads and memory budget and sends its
// bright-field values, then the summary, or the failure, to rank 0.
RankService ssb_band_rank_service(unsigned threads, uint64_t memory_budget);

}  // namespace tmorph
