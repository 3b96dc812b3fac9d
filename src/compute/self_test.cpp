#include "tensormorph/self_test.h"

#include <chrono>

#include "compute/known_answer.h"
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
  for (const Backend& b : registry.backends())
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

}  // namespace

bool SelfTests::admit(const BackendRegistry& registry, const Backend& b, const DeviceInfo& d, const KernelInfo& k,
                      const OpRequest& req, std::string* why) const {
  const Backend* ref = reference_backend(registry);
  if (!ref || &b == ref) return true;  // the reference is what the others are judged against
  const std::string input = input_name(req);
  const std::string key = b.name + "\x1f" + d.id + "\x1f" + d.driver_version + "\x1f" + std::to_string(k.index) + "\x1f" + input;
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = index_.find(key); it != index_.end()) {
    const SelfTestVerdict& v = verdicts_[it->second];
    if (why) *why = v.detail;
    return v.status != "failed";
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
      v.detail = ka->description() + ": equal to the CPU reference";
    }
  }
  v.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  index_[key] = verdicts_.size();
  verdicts_.push_back(v);
  if (why) *why = v.detail;
  return v.status != "failed";
}

std::vector<SelfTestVerdict> SelfTests::verdicts() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return verdicts_;
}

}  // namespace tmorph
