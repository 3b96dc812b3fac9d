#include "stem/resident/resident_store.h"

#include <algorithm>
#include <chrono>
#include <tuple>

#include "core/json_number.h"
#include "core/utc_time.h"

namespace tmorph {

namespace {

constexpr size_t kEvictionsKept = 64;

uint64_t resident_bytes(const std::list<std::shared_ptr<ResidentCopyInfo>>& copies) {
  uint64_t b = 0;
  for (const auto& c : copies) b += c->frames->bytes();
  return b;
}

}  // namespace

std::string ResidentKey::text() const {
  return master + " (" + std::to_string(scan_rows) + " x " + std::to_string(scan_cols) + ")";
}

bool ResidentKey::operator<(const ResidentKey& o) const {
  return std::tie(master, signature, scan_rows, scan_cols) < std::tie(o.master, o.signature, o.scan_rows, o.scan_cols);
}

nlohmann::json ResidentCopyInfo::to_json() const {
  const CompactFrames& f = *frames;
  nlohmann::json j = {{"acquisition", key.master},
                      {"scan_shape", {key.scan_rows, key.scan_cols}},
                      {"where", where},
                      {"bytes", f.bytes()},
                      {"positions", f.appended()},
                      {"nonzeros", f.nonzeros()},
                      {"bytes_per_frame", json_number(static_cast<double>(f.bytes()) / static_cast<double>(std::max<uint64_t>(1, f.appended())))},
                      {"dense_bytes_per_frame", f.dense_frame_bytes()},
                      {"built_at", built_at},
                      {"build_seconds", build_seconds},
                      {"uses", uses.load()},
                      {"order", f.radial_center() ? "radial" : "pixel"},
                      {"complete", f.complete()},
                      {"positions_reused", positions_reused},
                      {"positions_appended", positions_appended},
                      {"extensions", extensions}};
  if (const auto c = f.radial_center()) j["radial_center"] = {(*c)[0], (*c)[1]};
  j["device_copies"] = nlohmann::json::array();
  std::lock_guard<std::mutex> lock(device_mutex_);
  for (const auto& [location, copy] : device_copies_) j["device_copies"].push_back(copy->to_json());
  return j;
}

std::shared_ptr<const DeviceCopy> ResidentCopyInfo::device_copy_at(const Placement& placement) const {
  std::lock_guard<std::mutex> lock(device_mutex_);
  for (auto it = device_copies_.begin(); it != device_copies_.end();) {
    if (it->second->serves(placement)) return it->second;
    // A copy whose backend's registry is gone holds nothing any more.
    if (it->second->memory->handle() == 0) it = device_copies_.erase(it);
    else ++it;
  }
  return nullptr;
}

uint64_t ResidentCopyInfo::device_bytes(const std::string& location) const {
  std::lock_guard<std::mutex> lock(device_mutex_);
  const auto it = device_copies_.find(location);
  return it == device_copies_.end() || it->second->memory->handle() == 0 ? 0 : it->second->bytes;
}

uint64_t ResidentCopyInfo::forget_device_copy(const std::string& location) const {
  std::lock_guard<std::mutex> lock(device_mutex_);
  const auto it = device_copies_.find(location);
  if (it == device_copies_.end()) return 0;
  const uint64_t bytes = it->second->memory->handle() == 0 ? 0 : it->second->bytes;
  device_copies_.erase(it);
  return bytes;
}

std::set<std::string> ResidentCopyInfo::device_locations() const {
  std::lock_guard<std::mutex> lock(device_mutex_);
  std::set<std::string> out;
  for (const auto& [location, copy] : device_copies_)
    if (copy->memory->handle() != 0) out.insert(location);
  return out;
}

ResidentStore& ResidentStore::process() {
  static ResidentStore store;
  return store;
}

void ResidentStore::set_budget(uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  budget_ = bytes;
  while (!copies_.empty() && resident_bytes(copies_) > budget_) evict_locked(std::prev(copies_.end()), "budget lowered");
}

void ResidentStore::set_device_budget(uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  device_budget_ = bytes;
  const uint64_t budget = device_budget_ ? device_budget_ : budget_;
  std::set<std::string> locations;
  for (const auto& c : copies_)
    for (const std::string& l : c->device_locations()) locations.insert(l);
  for (const std::string& location : locations) fit_device_locked(location, 0, budget, nullptr, "device budget lowered", nullptr);
}

void ResidentStore::fit_device_locked(const std::string& location, uint64_t need, uint64_t budget, const ResidentCopyInfo* keep,
                                      const std::string& reason, nlohmann::json* evicted) {
  uint64_t held = 0;
  for (const auto& c : copies_)
    if (c.get() != keep) held += c->device_bytes(location);
  for (auto it = copies_.rbegin(); held + need > budget && it != copies_.rend(); ++it) {
    if (it->get() == keep) continue;
    const uint64_t freed = (*it)->forget_device_copy(location);
    if (!freed) continue;
    held -= freed;
    nlohmann::json e = record_device_eviction_locked(**it, location, freed, reason);
    if (evicted) evicted->push_back(std::move(e));
  }
}

nlohmann::json ResidentStore::record_device_eviction_locked(const ResidentCopyInfo& copy, const std::string& location, uint64_t bytes,
                                                            const std::string& reason) {
  nlohmann::json e = {{"acquisition", copy.key.master},
                      {"scan_shape", {copy.key.scan_rows, copy.key.scan_cols}},
                      {"bytes", bytes},
                      {"location", location},
                      {"evicted_at", utc_now_iso8601()},
                      {"reason", reason}};
  evictions_.push_back(e);
  if (evictions_.size() > kEvictionsKept) evictions_.erase(evictions_.begin());
  return e;
}

uint64_t ResidentStore::budget() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return budget_;
}

nlohmann::json ResidentStore::evict_locked(std::list<std::shared_ptr<ResidentCopyInfo>>::iterator it, const std::string& reason) {
  nlohmann::json e = {{"acquisition", (*it)->key.master},
                      {"scan_shape", {(*it)->key.scan_rows, (*it)->key.scan_cols}},
                      {"bytes", (*it)->frames->bytes()},
                      {"built_at", (*it)->built_at},
                      {"evicted_at", utc_now_iso8601()},
                      {"reason", reason}};
  copies_.erase(it);
  evictions_.push_back(e);
  if (evictions_.size() > kEvictionsKept) evictions_.erase(evictions_.begin());
  return e;
}

ResidentStore::Got ResidentStore::get_or_build(const ResidentKey& key, const Builder& build) {
  Got got;
  uint64_t budget;
  std::shared_ptr<const ResidentCopyInfo> previous;  // held for the build: it may share its entries
  {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      if (budget_ == 0) return got;
      auto it = std::find_if(copies_.begin(), copies_.end(), [&](const auto& c) {
        return !(c->key < key) && !(key < c->key);
      });
      if (it != copies_.end()) {
        copies_.splice(copies_.begin(), copies_, it);  // most recently used
        ++copies_.front()->uses;
        got.copy = copies_.front();
        return got;
      }
      if (!building_.count(key)) break;
      built_.wait(lock);
    }
    building_.insert(key);
    budget = budget_;
    const auto same_acquisition = [&](const auto& c) {
      return c->key.master == key.master && c->key.scan_rows == key.scan_rows && c->key.scan_cols == key.scan_cols;
    };
    if (auto it = std::find_if(copies_.begin(), copies_.end(), same_acquisition); it != copies_.end()) previous = *it;
  }
  const auto t0 = std::chrono::steady_clock::now();
  Built built;
  try {
    built = build(budget, previous.get());
  } catch (...) {
    std::lock_guard<std::mutex> lock(mutex_);
    building_.erase(key);
    built_.notify_all();
    throw;
  }
  auto info = std::make_shared<ResidentCopyInfo>();
  info->key = key;
  info->frames = std::move(built.frames);
  info->load_provenance = std::move(built.load_provenance);
  info->built_at = utc_now_iso8601();
  info->build_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  info->uses = 1;
  info->frames_identity = std::move(built.frames_identity);
  info->positions_reused = built.positions_reused;
  info->positions_appended = info->frames->appended() - built.positions_reused;
  info->extensions = built.positions_reused > 0 && previous ? previous->extensions + 1 : 0;
  std::lock_guard<std::mutex> lock(mutex_);
  building_.erase(key);
  built_.notify_all();
  got.copy = info;
  got.built_now = true;
  if (info->frames->bytes() > budget_) return got;  // used by this request, not kept (the builder's check raced a lower budget)
  if (previous)  // the acquisition's files changed: the copy of their former state goes (when still held)
    for (auto it = copies_.begin(); it != copies_.end(); ++it)
      if (*it == previous) {
        got.evicted.push_back(evict_locked(it, "superseded: " + key.text() + " changed (" +
                                                   (built.positions_reused ? std::to_string(built.positions_reused) + " positions reused"
                                                                           : std::string("built again from the start")) + ")"));
        break;
      }
  copies_.push_front(info);
  while (resident_bytes(copies_) > budget_)
    got.evicted.push_back(evict_locked(std::prev(copies_.end()), "budget: making room for " + key.text()));
  return got;
}

std::shared_ptr<const DeviceCopy> ResidentStore::device_copy(const ResidentCopyInfo& copy, const Placement& placement,
                                                             std::string* why, bool* built_now, nlohmann::json* evicted) {
  *built_now = false;
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto there = copy.device_copy_at(placement)) return there;
  const Backend* backend = placement.backend_ref;
  if (!backend || placement.device_index >= backend->devices.size()) {
    *why = "no device to keep the copy on";
    return nullptr;
  }
  const std::string location = backend->name + "/" + backend->devices[placement.device_index].id;
  const uint64_t need = compact_image_bytes(*copy.frames), device_budget = device_budget_ ? device_budget_ : budget_;
  if (need > device_budget) {
    *why = "the " + std::to_string(need) + "-byte device copy alone is over the resident budget on " + location + " of " + std::to_string(device_budget) + " bytes";
    return nullptr;
  }
  fit_device_locked(location, need, device_budget, &copy, "device budget: making room on " + location + " for " + copy.key.text(), evicted);
  std::unique_ptr<DeviceCopy> made = make_device_copy(*copy.frames, placement, device_budget, why);
  if (!made) return nullptr;
  std::shared_ptr<const DeviceCopy> shared = std::move(made);
  std::lock_guard<std::mutex> device_lock(copy.device_mutex_);
  copy.device_copies_[shared->location] = shared;
  *built_now = true;
  return shared;
}

bool ResidentStore::drop(const ResidentKey& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = copies_.begin(); it != copies_.end(); ++it)
    if (!((*it)->key < key) && !(key < (*it)->key)) {
      evict_locked(it, "dropped");
      return true;
    }
  return false;
}

size_t ResidentStore::drop_acquisition(const std::string& master) {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t n = 0;
  for (auto it = copies_.begin(); it != copies_.end();) {
    if ((*it)->key.master != master) {
      ++it;
      continue;
    }
    auto next = std::next(it);
    evict_locked(it, "dropped");
    it = next, ++n;
  }
  return n;
}

void ResidentStore::drop_all() {
  std::lock_guard<std::mutex> lock(mutex_);
  while (!copies_.empty()) evict_locked(copies_.begin(), "dropped");
}

nlohmann::json ResidentStore::describe() const {
  std::lock_guard<std::mutex> lock(mutex_);
  nlohmann::json copies = nlohmann::json::array();
  for (const auto& c : copies_) copies.push_back(c->to_json());
  return {{"budget", budget_},
          {"device_budget", device_budget_ ? device_budget_ : budget_},
          {"resident_bytes", resident_bytes(copies_)},
          {"copies", copies},
          {"evictions", evictions_}};
}

}  // namespace tmorph
