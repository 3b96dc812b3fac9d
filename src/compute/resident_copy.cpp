#include "compute/resident_copy.h"

#include <mutex>
#include <set>

#include "tensormorph/backend_registry.h"
#include "tensormorph/error.h"

namespace tmorph {

namespace {

// Every copy alive, so that a registry being destroyed can detach the copies on its backends.
struct LiveCopies {
  std::mutex mutex;
  std::set<ResidentCopy*> copies;
};
LiveCopies& live() {
  static LiveCopies* l = new LiveCopies();  // never destroyed: copies in static caches may die after it would
  return *l;
}

// Why `bytes` of device memory are not kept on the placement's device ("" when they are): the backend lacks
// the extension (`capable`), the device reads host memory directly, or the bytes exceed memory_budget (0:
// unlimited) or half the device's memory.
std::string refusal(const Placement& placement, bool capable, const char* extension, uint64_t bytes, uint64_t memory_budget) {
  const Backend* b = placement.backend_ref;
  if (!b || !capable || placement.device_index >= b->devices.size() || bytes == 0)
    return (b ? b->name : placement.backend) + " cannot keep data on its device (no " + extension + ")";
  const DeviceInfo& device = b->devices[placement.device_index];
  if (device.host_link_bytes_per_s == 0) return device.name + " works on host memory";
  if (memory_budget && bytes > memory_budget) return std::to_string(bytes) + " bytes exceed the memory budget";
  if (bytes > device.memory_bytes / 2) return std::to_string(bytes) + " bytes exceed half of " + device.name + "'s memory";
  return {};
}

}  // namespace

std::unique_ptr<ResidentCopy> ResidentCopy::make(const Placement& placement, const void* data, uint64_t bytes,
                                                  uint64_t memory_budget) {
  const Backend* b = placement.backend_ref;
  if (!refusal(placement, b && b->can_upload, "upload", bytes, memory_budget).empty()) return nullptr;
  const DeviceInfo& device = b->devices[placement.device_index];
  std::unique_ptr<ResidentCopy> copy(new ResidentCopy());
  tm_message msg{};
  const tm_status st = b->table->upload(placement.device_index, data, bytes, &copy->handle_, &msg);
  msg.text[sizeof msg.text - 1] = 0;
  if (st == TM_ERR_OUT_OF_MEMORY) return nullptr;
  if (st != TM_OK || copy->handle_ == 0)
    throw Error(ErrorKind::Internal,
                b->name + " could not keep a copy of " + std::to_string(bytes) + " bytes on " + device.name + ": " +
                    msg.text);
  copy->backend_ = b;
  copy->device_index_ = placement.device_index;
  copy->data_ = static_cast<const uint8_t*>(data);
  copy->bytes_ = bytes;
  copy->location_ = b->name + "/" + device.id;
  std::lock_guard<std::mutex> lock(live().mutex);
  live().copies.insert(copy.get());
  return copy;
}

std::unique_ptr<ResidentCopy> ResidentCopy::allocate(const Placement& placement, uint64_t bytes, uint64_t memory_budget,
                                                      std::string* why) {
  const Backend* b = placement.backend_ref;
  *why = refusal(placement, b && b->can_allocate, "allocate", bytes, memory_budget);
  if (!why->empty()) return nullptr;
  const DeviceInfo& device = b->devices[placement.device_index];
  std::unique_ptr<ResidentCopy> space(new ResidentCopy());
  tm_message msg{};
  const tm_status st = b->table->allocate(placement.device_index, bytes, &space->handle_, &msg);
  msg.text[sizeof msg.text - 1] = 0;
  if (st == TM_ERR_OUT_OF_MEMORY) {
    *why = device.name + ": " + msg.text;
    return nullptr;
  }
  if (st != TM_OK || space->handle_ == 0)
    throw Error(ErrorKind::Internal, b->name + " could not reserve " + std::to_string(bytes) + " bytes on " + device.name + ": " + msg.text);
  space->backend_ = b;
  space->device_index_ = placement.device_index;
  space->bytes_ = bytes;
  space->location_ = b->name + "/" + device.id;
  std::lock_guard<std::mutex> lock(live().mutex);
  live().copies.insert(space.get());
  return space;
}

ResidentCopy::~ResidentCopy() {
  std::lock_guard<std::mutex> lock(live().mutex);
  live().copies.erase(this);
  if (handle_ && backend_) backend_->table->release(handle_);
}

void ResidentCopy::forget_backend(const Backend* backend) {
  std::lock_guard<std::mutex> lock(live().mutex);
  for (ResidentCopy* c : live().copies)
    if (c->backend_ == backend) c->handle_ = 0, c->backend_ = nullptr;
}

bool ResidentCopy::serves(const Placement& placement, const void* p, uint64_t bytes) const {
  const auto* q = static_cast<const uint8_t*>(p);
  return placement.backend_ref == backend_ && placement.device_index == device_index_ && q >= data_ &&
         bytes <= bytes_ && static_cast<uint64_t>(q - data_) <= bytes_ - bytes && (q - data_) % 65536 == 0;
}

}  // namespace tmorph
