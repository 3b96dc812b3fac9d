// The process's resident acquisitions: one compact copy (compact_frames.h) per acquisition and scan shape, shared by
// every request of a server, a Python session or one long CLI command, within a memory budget.
//
// Contract:
// - The budget is 0 (off: nothing is kept, every product streams) until a face sets it (setting
//   stem.resident_memory, flag --resident-memory).
// - get_or_build returns the copy of `key`, building it with `build` when absent. One build per key at a time:
//   a caller asking for a key being built waits for that build and shares its copy. A build that throws leaves
//   nothing behind and the error reaches its caller (waiters then try their own build).
// - A copy of the same acquisition and scan shape under another signature (its files changed: more frames were
//   written) is handed to the build as `previous`: the build may extend it (CompactFrames::extended) when the frames
//   it holds are unchanged, and says how many positions it reused. The new copy replaces the previous one (recorded
//   as an eviction "superseded").
// - After a build the least recently used copies are evicted until the resident bytes fit the budget; a copy
//   that alone exceeds the budget is not kept (the build is told the budget and stops early). Requests holding
//   an evicted copy finish with it; its memory is freed with the last holder. Every eviction is recorded with its
//   reason, returned to the request that caused it, and listed by describe().
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "stem/resident/compact_frames.h"
#include "stem/resident/device_copy.h"

namespace tmorph {

struct ResidentKey {
  std::string master;     // the acquisition's file
  std::string signature;  // its identity (names, sizes, mtimes, header): a changed file is another key
  uint64_t scan_rows = 0, scan_cols = 0;
  std::string text() const;  // "master (rows x cols)"
  bool operator<(const ResidentKey& o) const;
};

struct ResidentCopyInfo {
  ResidentKey key;
  std::shared_ptr<const CompactFrames> frames;
  nlohmann::json load_provenance;  // the loader's provenance of the build (source, codecs, bad pixels zeroed)
  std::string where = "host";  // the memory that holds it
  std::string built_at;        // UTC, ISO 8601
  double build_seconds = 0;
  // Requests served (counted by the store under its lock; read by reports while other requests count).
  std::atomic<uint64_t> uses{0};
  // The build that made this copy: positions taken from the previous copy (not decoded again) and positions
  // decoded and appended; how many builds extended a previous copy so far in this copy's line.
  uint64_t positions_reused = 0, positions_appended = 0, extensions = 0;
  std::string frames_identity;  // the builder's identity of the frames held (compared when extending)
  // where, bytes, positions, nonzeros, bytes per frame, built_at, build_seconds, uses, order, device_copies
  nlohmann::json to_json() const;

  // "backend/device id" of every device holding a copy now (what the planner is told).
  std::set<std::string> device_locations() const;

 private:
  friend class ResidentStore;  // device_copy: uploads and evicts under the store's lock
  // The device copy at `location` when one is there (a copy whose backend's registry is gone is forgotten).
  std::shared_ptr<const DeviceCopy> device_copy_at(const Placement& placement) const;
  // Bytes of the device copy at `location` (0: none), and forgetting it (returns its bytes; its memory is freed with
  // the last request using it).
  uint64_t device_bytes(const std::string& location) const;
  uint64_t forget_device_copy(const std::string& location) const;
  mutable std::mutex device_mutex_;
  mutable std::map<std::string, std::shared_ptr<const DeviceCopy>> device_copies_;  // by location
};

class ResidentStore {
 public:
  static ResidentStore& process();

  void set_budget(uint64_t bytes);
  uint64_t budget() const;
  // The budget on each device that keeps device copies (device_copy): 0 (the default) means budget(). Lowered, the
  // device copies over it are evicted, least recently used copy first, and recorded.
  void set_device_budget(uint64_t bytes);

  // The builder gets the budget in bytes and returns the copy (throws to refuse: too big, a damaged frame, ...).
  struct Built {
    std::unique_ptr<CompactFrames> frames;
    nlohmann::json load_provenance;
    uint64_t positions_reused = 0;  // of `previous` (0: built from the start)
    std::string frames_identity;
  };
  // `previous`: a copy of the same acquisition and scan shape under another signature, or null.
  using Builder = std::function<Built(uint64_t budget, const ResidentCopyInfo* previous)>;
  struct Got {
    std::shared_ptr<const ResidentCopyInfo> copy;  // null when the budget is 0
    bool built_now = false;
    nlohmann::json evicted = nlohmann::json::array();  // what this call evicted
  };
  Got get_or_build(const ResidentKey& key, const Builder& build);

  // `copy`'s copy on the placement's device (device_copy.h), uploaded on the first call for that device and kept until
  // the copy is freed (evicted, dropped or superseded, and its last request done) or its device copy is evicted. The
  // budget holds on each device as on the host: before an upload, the device copies other copies keep on that device
  // are evicted, least recently used copy first, until this one fits (each recorded as an eviction with reason
  // "device budget: …" and its location, and returned in *evicted; the host copies stay). Null with *why when the
  // device cannot keep it (over the budget alone, no residency extension, a device reading host memory, half the
  // device's memory, out of memory); *built_now says whether this call uploaded it. Uploads happen under the store's
  // lock, one at a time.
  std::shared_ptr<const DeviceCopy> device_copy(const ResidentCopyInfo& copy, const Placement& placement, std::string* why,
                                                bool* built_now, nlohmann::json* evicted);

  // Drops one key (false when absent) or every copy; recorded as evictions with reason "dropped".
  bool drop(const ResidentKey& key);
  // Drops every copy of the acquisition whose file is `master` (any scan shape or signature); returns how many.
  size_t drop_acquisition(const std::string& master);
  void drop_all();
  // {budget, device_budget, resident_bytes, copies: [...], evictions: [last 64 ...]}.
  nlohmann::json describe() const;

 private:
  nlohmann::json evict_locked(std::list<std::shared_ptr<ResidentCopyInfo>>::iterator it, const std::string& reason);
  // Evicts the device copies at `location`, least recently used copy first (never `keep`'s), until `need` more bytes
  // fit `budget`; each recorded with `reason` and, when `evicted` is given, appended there.
  void fit_device_locked(const std::string& location, uint64_t need, uint64_t budget, const ResidentCopyInfo* keep,
                         const std::string& reason, nlohmann::json* evicted);
  nlohmann::json record_device_eviction_locked(const ResidentCopyInfo& copy, const std::string& location, uint64_t bytes,
                                               const std::string& reason);

  mutable std::mutex mutex_;
  std::condition_variable built_;
  uint64_t budget_ = 0;
  uint64_t device_budget_ = 0;  // 0: budget_
  std::list<std::shared_ptr<ResidentCopyInfo>> copies_;  // most recently used first
  std::set<ResidentKey> building_;
  std::vector<nlohmann::json> evictions_;
};

}  // namespace tmorph
