// Kernel self-test admission: before a plugin's kernel serves its first real call in a process, it runs
// a small known-answer case of its op (src/compute/known_answer.h) and its output is compared with the
// reference backend's (the static CPU backend) under the op's contract. A mismatch, or a failing call,
// refuses that kernel for that input with the reason self_test_failed; the planner then places the op
// elsewhere and reports why. This is what lets a kernel that was compiled but never run on its hardware
// in CI reach a user without risking a wrong number. Verdicts are kept per backend, device, driver
// version, plugin file, kernel and input (dtype or format): once per process, and across processes in the
// cache file the runtime names (cache_dir()/self-tests.json).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "tensormorph/placement.h"

namespace tmorph {

class BackendRegistry;
struct Backend;
struct DeviceInfo;
struct KernelInfo;

struct SelfTestVerdict {
  std::string backend;
  std::string device;
  std::string driver_version;
  std::string op;
  std::string input;    // the dtype, or the format of a format op
  std::string status;   // "passed", "failed", or "not_tested" (no known-answer case for it yet)
  std::string detail;   // what differed, or why it was not tested
  double seconds = 0;   // the test's wall time (both runs)
  bool cached = false;  // read from the verdict cache file, not run in this process
};

class SelfTests {
 public:
  // Whether kernel k of backend b may serve request on device d. The reference backend's kernels, and
  // kernels with no known-answer case, are admitted (the latter recorded as not_tested); any other is
  // admitted only after its test passes. Runs the test the first time (thread-safe). On refusal, why
  // says what differed.
  bool admit(const BackendRegistry& registry, const Backend& b, const DeviceInfo& d, const KernelInfo& k,
             const OpRequest& request, std::string* why) const;

  // Every verdict so far, in the order they were reached.
  std::vector<SelfTestVerdict> verdicts() const;

  // Keeps passed and failed verdicts in this JSON file across processes (empty: this process only), keyed
  // also by the plugin file's size and modification time, so a rebuilt plugin or another driver is tested
  // again. A damaged file is ignored (tests run again and rewrite it). Set before the first admit.
  void set_cache_file(const std::string& path) { cache_file_ = path; }

 private:
  void load_cache() const;
  void save_cache() const;

  std::string cache_file_;
  mutable bool cache_loaded_ = false;
  mutable std::map<std::string, SelfTestVerdict> cached_;  // from the file, by key
  mutable std::map<std::string, std::string> plugin_identities_;  // plugin file -> its path, size and mtime
  mutable std::mutex mutex_;
  mutable std::map<std::string, size_t> index_;  // key -> position in verdicts_
  mutable std::vector<SelfTestVerdict> verdicts_;
};

}  // namespace tmorph
