// The schedule of a rate-limited read (IndexingOptions::max_bytes_per_s), shared by several workers.
#pragma once

#include <cstdint>
#include <mutex>

namespace tmorph {

// Bytes read since the schedule's origin may not run ahead of rate x seconds since then. A reader that
// fell more than one second behind (a stall elsewhere) moves the origin up, so it never catches up in a
// burst of more than one second's worth of bytes. Thread-safe.
class ReadPacer {
 public:
  explicit ReadPacer(uint64_t bytes_per_s) : rate_(static_cast<double>(bytes_per_s)) {}

  // Seconds to wait before reading more (<= 0: none), at `now` seconds into the run with `bytes` read so
  // far (non-decreasing across calls). Only for a rate > 0.
  double wait(double now, uint64_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    double due = origin_s_ + static_cast<double>(bytes - origin_bytes_) / rate_;
    if (now - due > kMaxBehind_s) origin_s_ = now - kMaxBehind_s, origin_bytes_ = bytes, due = origin_s_;
    return due - now;
  }

 private:
  static constexpr double kMaxBehind_s = 1.0;
  std::mutex mu_;
  double rate_;
  double origin_s_ = 0;
  uint64_t origin_bytes_ = 0;
};

}  // namespace tmorph
