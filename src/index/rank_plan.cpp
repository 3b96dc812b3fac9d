#include "index/rank_plan.h"

#include <algorithm>
#include <numeric>

namespace tmorph {

namespace {

// How many contiguous runs of at most `capacity` bytes cover `bytes` (each item fits alone).
size_t runs_needed(const std::vector<uint64_t>& bytes, uint64_t capacity) {
  size_t runs = 0;
  uint64_t load = capacity;  // forces a first run
  for (uint64_t b : bytes) {
    if (load > capacity - b) ++runs, load = 0;
    load += b;
  }
  return runs;
}

}  // namespace

std::vector<std::vector<size_t>> plan_ranks(const std::vector<uint64_t>& bytes, int ranks) {
  const size_t n = static_cast<size_t>(std::max(ranks, 1));
  std::vector<std::vector<size_t>> plan(n);
  if (bytes.empty()) return plan;
  // The smallest capacity that n runs can meet: binary search between the largest item and the total
  // (a zero-byte tensor weighs 1 so that capacity 0 never arises and empty tensors spread too).
  std::vector<uint64_t> w(bytes.size());
  for (size_t i = 0; i < bytes.size(); ++i) w[i] = std::max<uint64_t>(bytes[i], 1);
  uint64_t lo = *std::max_element(w.begin(), w.end());
  uint64_t hi = std::accumulate(w.begin(), w.end(), uint64_t{0});
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo) / 2;
    if (runs_needed(w, mid) <= n) hi = mid;
    else lo = mid + 1;
  }
  // Fill rank by rank up to that capacity, but leave at least one tensor for each later rank while
  // tensors remain, so that every rank works when there are enough tensors.
  size_t rank = 0;
  uint64_t load = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    const size_t left = w.size() - i, later_ranks = n - 1 - rank;
    const bool full = load > 0 && (load > lo - w[i] || left <= later_ranks);
    if (full && rank + 1 < n) ++rank, load = 0;
    plan[rank].push_back(i);
    load += w[i];
  }
  return plan;
}

}  // namespace tmorph
