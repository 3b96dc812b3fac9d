// Cost model: estimated seconds = transfer bytes / link bandwidth + work bytes / kernel throughput.
// Throughputs come from a calibration run cached on disk (tensormorph calibrate) or, when a kernel
// was never calibrated, from one conservative default that is the same for every device.
#pragma once

#include <map>
#include <string>

#include "tensormorph/plugin_abi.h"

namespace tmorph {

struct Backend;
struct DeviceInfo;

class CostModel {
 public:
  // Conservative default throughput for any uncalibrated kernel (bytes/s).
  static constexpr double kDefaultThroughput = 1.0e9;

  // Loads a calibration file; a missing file leaves the model empty. A corrupt one throws BadInput.
  void load(const std::string& path);
  void save(const std::string& path) const;

  void set_throughput(const std::string& backend, const std::string& device_id, tm_op op,
                      double bytes_per_s);
  // Returns the calibrated throughput or kDefaultThroughput; *calibrated says which.
  double throughput(const std::string& backend, const std::string& device_id, tm_op op,
                    bool* calibrated = nullptr) const;

  // Whether any device of `backend` has a calibrated throughput for `op` (the planner opens such a plugin
  // for inputs of any size: the calibration may say it wins).
  bool calibrated_any(const std::string& backend, tm_op op) const;
  size_t size() const { return throughput_.size(); }

 private:
  static std::string key(const std::string& backend, const std::string& device_id, tm_op op);
  std::map<std::string, double> throughput_;
};

}  // namespace tmorph
