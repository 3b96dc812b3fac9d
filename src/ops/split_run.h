// Running one split op (Placement::split, docs/backends.md "Split placement"): each call's units (canonical blocks,
// tiles) divided among the shares that have not failed, each share keeping to its planned fraction of all units so
// far; the shares' runs at once, a thread each; a share that fails hands its units to the next share that has not
// and gets none afterwards. The caller's runner computes units [u0, u1) on one share, writing where unit u belongs,
// so the results land in unit order whoever computed them and the caller merges them as one backend's.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tensormorph/placement.h"

namespace tmorph {

// Computes units [u0, u1) of the current call on share `share` (its placement says where); returns "" or the
// error it met, and sets *bytes to the input bytes it read. Called on several threads at once, one range each.
using ShareRunner = std::function<std::string(size_t share, uint64_t u0, uint64_t u1, uint64_t* bytes)>;

class SplitRun {
 public:
  // Runs one call of `units` units over `shares` (their units, bytes, seconds, failed and handed_to are updated).
  // Throws Error(Unavailable) naming `op` when every share has failed.
  void call(std::vector<SplitShare>& shares, uint64_t units, const ShareRunner& run, const std::string& op);

 private:
  std::vector<uint64_t> assigned_;  // units the schedule gave each share so far
  uint64_t planned_ = 0;            // units scheduled so far
};

}  // namespace tmorph
