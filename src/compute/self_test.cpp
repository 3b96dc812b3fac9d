#include "tensormorph/self_test.h"

#include <chrono>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "compute/known_answer.h"
#include "compute/self_test_json.h"
#include "core/json_file.h"
#include "tensormorph/backend_registry.h"
#include "tensormorph/op_contracts.h"

namespace tmorph {

namespace {

std::string input_name(const OpRequest& req) {
  if (!tm_op_takes_format(req.op)) return std::string(dtype_name(req.dtype));
  return req.format_name.empty() ? "format " + std::to_string(req.format_id) : req.format_name;
}

bool kernel_takes(const KernelInfo& k, const OpRequest& req) {
  const uint32_t id = tm_op_takes_format(req.op) ? req.format_id : static_cast<uint32_t>(req.dtype);
  return k.op == req.op && id < 64 && (k.dtype_mask & (uint64_t{1} << id));
}

// The reference backend: the statically linked one (the CPU), when it is available.
const Backend* reference_backend(const BackendRegistry& registry) {
  for (const Backend& b : registry.listed())  // the static backend opens when it registers
    if (b.origin == "static" && b.available && !b.devices.empty()) return &b;
  return nullptr;
}

// Runs the case on one kernel; returns its status, with the output and the backend's message.
tm_status run_case(const Backend& b, uint32_t device, uint32_t kernel, const KnownAnswer& ka,
                   std::vector<uint8_t>* out, std::string* message) {
  *out = ka.initial_output();
  const tm_kernel_call_v1 call = ka.call(kernel, device, out->data());
  tm_message msg{};
  const tm_status st = b.table->run(&call, &msg);
  msg.text[sizeof msg.text - 1] = 0;
  *message = msg.text;
  return st;
}

// What identifies a plugin build: its file's size and modification time ("static" for the linked one).
std::string plugin_identity(const Backend& b) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(b.origin, ec);
  if (ec) return b.origin;
  const auto mtime = std::filesystem::last_write_time(b.origin, ec);
  return b.origin + "@" + std::to_string(size) + "@" + std::to_string(ec ? 0 : mtime.time_since_epoch().count());
}

}  // namespace

nlohmann::json self_test_verdict_json(const SelfTestVerdict& v) {
  return {{"backend", v.backend}, {"device", v.device}, {"driver_version", v.driver_version},
          {"op", v.op},           {"input", v.input},   {"status", v.status},
          {"detail", v.detail},   {"seconds", v.seconds}, {"cached", v.cached}};
}

SelfTestVerdict self_test_verdict_from_json(const nlohmann::json& j) {
  return {j.at("backend"), j.at("device"), j.at("driver_version"), j.at("op"),     j.at("input"),
          j.at("status"),  j.at("detail"), j.at("seconds"),        j.at("cached")};
}

void SelfTests::load_cache() const {
  cache_loaded_ = true;
  if (cache_file_.empty()) return;
  try {
    const auto doc = read_json_file(cache_file_);
    if (!doc || doc->value("version", 0) != 1) return;
    for (const auto& [key, v] : doc->at("verdicts").items()) {
      SelfTestVerdict out = self_test_verdict_from_json(v);
      out.cached = true;
      if (out.status == "passed" || out.status == "failed") cached_[key] = out;
    }
  } catch (const std::exception&) {
    cached_.clear();  // damaged: every kernel is tested again, and the file rewritten
  }
}

void SelfTests::save_cache() const {
  if (cache_file_.empty()) return;
  nlohmann::json verdicts = nlohmann::json::object();
  for (const auto& [key, v] : cached_) verdicts[key] = self_test_verdict_json(v);
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(cache_file_).parent_path(), ec);
  const std::string tmp = cache_file_ + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) return;  // a read-only cache costs a test per process, nothing else
    out << nlohmann::json{{"version", 1}, {"verdicts", verdicts}}.dump(1) << "\n";
    if (!out) return;
  }
  std::filesystem::rename(tmp, cache_file_, ec);  // atomic: concurrent processes never read half a file
  if (ec) std::filesystem::remove(tmp, ec);
}

bool SelfTests::admit(const BackendRegistry& registry, const Backend& b, const DeviceInfo& d, const KernelInfo& k,
                      const OpRequest& req, std::string* why) const {
  const Backend* ref = reference_backend(registry);
  if (!ref || &b == ref) return true;  // the reference is what the others are judged against
  const std::string input = input_name(req);
  std::lock_guard<std::mutex> lock(mutex_);
  // Every placement asks: the plugin file is looked at once per process, not once per call.
  auto identity = plugin_identities_.find(b.origin);
  if (identity == plugin_identities_.end()) identity = plugin_identities_.emplace(b.origin, plugin_identity(b)).first;
  const std::string key = b.name + "|" + d.id + "|" + d.driver_version + "|" + identity->second + "|" +
                          std::to_string(k.index) + "|" + input;
  if (auto it = index_.find(key); it != index_.end()) {
    const SelfTestVerdict& v = verdicts_[it->second];
    if (why) *why = v.detail;
    return v.status != "failed";
  }
  if (!cache_loaded_) load_cache();
  if (auto it = cached_.find(key); it != cached_.end()) {
    index_[key] = verdicts_.size();
    verdicts_.push_back(it->second);
    if (why) *why = it->second.detail;
    return it->second.status != "failed";
  }
  SelfTestVerdict v{b.name, d.name, d.driver_version, op_name(req.op), input, "not_tested", "", 0};
  const auto start = std::chrono::steady_clock::now();
  const KernelInfo* ref_kernel = nullptr;
  for (const KernelInfo& rk : ref->kernels)
    if (rk.approx_step.empty() && kernel_takes(rk, req)) {
      ref_kernel = &rk;
      break;
    }
  const auto ka = make_known_answer(req);
  if (!k.approx_step.empty()) {
    v.detail = "an approximate kernel (" + k.approx_step + "): judged by its stated bound, not by equality";
  } else if (!ka) {
    v.detail = "no known-answer case for " + op_name(req.op) + " on " + input + " yet";
  } else if (!ref_kernel) {
    v.detail = "the reference backend has no exact kernel for " + op_name(req.op) + " on " + input;
  } else {
    std::vector<uint8_t> expected, got;
    std::string ref_msg, msg;
    if (run_case(*ref, ref->devices.front().index, ref_kernel->index, *ka, &expected, &ref_msg) != TM_OK) {
      v.detail = "the reference failed on the known-answer case: " + ref_msg;
    } else if (const tm_status st = run_case(b, d.index, k.index, *ka, &got, &msg); st != TM_OK) {
      v.status = "failed";
      v.detail = ka->description() + ": the kernel failed (status " + std::to_string(st) + "): " + msg;
    } else if (const std::string diff = ka->compare(expected, got); !diff.empty()) {
      v.status = "failed";
      v.detail = ka->description() + ": " + diff;
    } else {
      v.status = "passed";
      v.detail = ka->description() + ": " + ka->agreement();
    }
  }
  v.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  index_[key] = verdicts_.size();
  verdicts_.push_back(v);
  if (v.status != "not_tested") {
    cached_[key] = v;
    cached_[key].cached = true;
    save_cache();
  }
  if (why) *why = v.detail;
  return v.status != "failed";
}

std::vector<SelfTestVerdict> SelfTests::verdicts() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return verdicts_;
}

}  // namespace tmorph
