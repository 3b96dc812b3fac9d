// A device copy of host data, made once through a backend's upload entry point (the residency
// extension of plugin_abi.h) so that several ops over one tensor move it to the device once.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "tensormorph/placement.h"

namespace tmorph {

class ResidentCopy {
 public:
  // Copies [data, data + bytes) to the placement's device when that device needs a transfer, its
  // backend can keep a copy, and the copy fits: within memory_budget (0: unlimited) and half the
  // device's memory. Null otherwise, and when the device runs out of memory: the ops then stream the
  // tensor chunk by chunk, as without residency. Throws tmorph::Error when the upload fails otherwise.
  static std::unique_ptr<ResidentCopy> make(const Placement& placement, const void* data, uint64_t bytes,
                                            uint64_t memory_budget);
  // Reserves `bytes` on the placement's device (the device-output extension) for ops to write and later ops
  // to read there; no host copy exists. Null when the backend cannot (no allocate, a device reading host
  // memory), when it would not fit (memory_budget, 0: unlimited; half the device's memory) or the device
  // runs out of memory, with *why saying which. Throws tmorph::Error when the allocation fails otherwise.
  static std::unique_ptr<ResidentCopy> allocate(const Placement& placement, uint64_t bytes, uint64_t memory_budget,
                                                std::string* why);
  ~ResidentCopy();
  // Lets go of every live copy on `backend` without calling it (its registry is being destroyed: the backend's
  // shutdown frees the device memory). Such a copy then has handle() 0, serves nothing and is on no placement.
  static void forget_backend(const Backend* backend);
  ResidentCopy(const ResidentCopy&) = delete;
  ResidentCopy& operator=(const ResidentCopy&) = delete;

  // "backend/device id", as Residency::devices names it.
  const std::string& location() const { return location_; }
  // True when a call placed by `placement` over [p, p + bytes) can read this copy instead: same backend
  // and device, inside the copied range, at an offset the ABI allows (a multiple of 65,536 bytes).
  bool serves(const Placement& placement, const void* p, uint64_t bytes) const;
  uint64_t handle() const { return handle_; }
  uint64_t bytes() const { return bytes_; }
  // True when this is device memory ops write (allocate), and it is on the placement's backend and device.
  bool on(const Placement& placement) const {
    return placement.backend_ref == backend_ && placement.device_index == device_index_;
  }
  uint64_t offset_of(const void* p) const { return static_cast<uint64_t>(static_cast<const uint8_t*>(p) - data_); }

 private:
  ResidentCopy() = default;
  const Backend* backend_ = nullptr;
  uint32_t device_index_ = 0;
  uint64_t handle_ = 0;
  const uint8_t* data_ = nullptr;
  uint64_t bytes_ = 0;
  std::string location_;
};

}  // namespace tmorph
