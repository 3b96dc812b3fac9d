// The resident copy where a device computes from it: the compact frames (compact_frames.h) laid out as the image of
// op stem.compact_sums (op_contracts.h: pages of TM_STEM_COMPACT_PAGE_BYTES, each a run of positions with their entry
// offsets, keys and running totals), uploaded once through the ABI's residency extension (compute/resident_copy.h)
// and kept beside the host copy, so every later product placed on that device moves only its small tables.
//
// Contract:
// - compact_image is the same entries as the copy, byte for byte (keys and running totals), so stem.compact_sums over
//   it gives the integers CompactFrames::sums gives (tests hold every backend to it). A frame whose entries alone
//   exceed one page is refused (Error(InvalidArgument) naming the position): such copies are computed on the host.
// - compact_sums runs stem.compact_sums on `placement` over the image (a DeviceCopy on that device, or a host image for
//   a backend that reads host memory) and returns what CompactFrames::sums returns for the same request. A detector that
//   is a range of the copy's keys (an annulus about a radially ordered copy's centre) is passed as a key range: two
//   running totals per position ("rank range on BACKEND"); the others as key bits, entry by entry ("entry by entry on
//   BACKEND"). Detector pixels outside the frame or more than 64 detectors: Error(InvalidArgument).
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "compute/resident_copy.h"
#include "stem/resident/compact_frames.h"
#include "support/large_buffer.h"
#include "tensormorph/placement.h"

namespace tmorph {

struct CompactImage {
  LargeBuffer bytes;                // `size` bytes used
  uint64_t size = 0;
  std::vector<uint64_t> page_first;  // page i holds positions [page_first[i], page_first[i + 1])
  uint32_t key_bytes = 2;
};
CompactImage compact_image(const CompactFrames& frames);
// The image's bytes without building it (what the planner prices).
uint64_t compact_image_bytes(const CompactFrames& frames);

// A compact image kept on one device.
struct DeviceCopy {
  std::unique_ptr<ResidentCopy> memory;
  std::vector<uint64_t> page_first;
  uint32_t key_bytes = 2;
  uint64_t bytes = 0, positions = 0;
  std::string location;  // "backend/device id"
  std::string device;    // the device's name
  std::string built_at;  // UTC, ISO 8601
  double build_seconds = 0;
  // True while the memory is still on the placement's device (a registry destroyed lets it go).
  bool serves(const Placement& placement) const { return memory && memory->handle() != 0 && memory->on(placement); }
  nlohmann::json to_json() const;  // location, device, bytes, positions, built_at, build_seconds
};

// Uploads `frames`' image to the placement's device. Null with *why when the device cannot keep it (the backend has no
// residency extension, the device reads host memory, over memory_budget or half the device's memory, out of memory).
std::unique_ptr<DeviceCopy> make_device_copy(const CompactFrames& frames, const Placement& placement, uint64_t memory_budget,
                                             std::string* why);

// What the planner is asked for stem.compact_sums over `frames`, held on the host and on `devices` ("backend/device id").
OpRequest compact_sums_request(const CompactFrames& frames, const std::set<std::string>& devices);

// stem.compact_sums on `placement`, reading `device` (on the placement's device) or else `host_image`.
CompactFrames::Sums compact_sums(const Placement& placement, const CompactFrames& frames, const DeviceCopy* device,
                                 const CompactImage* host_image, const std::vector<std::vector<uint32_t>>& detectors,
                                 const std::vector<uint32_t>* com_pixels, bool fixed, const std::vector<uint64_t>& positions,
                                 unsigned threads);

}  // namespace tmorph
