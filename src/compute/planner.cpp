#include "tensormorph/planner.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/format.h"
#include "tensormorph/error.h"
#include "tensormorph/op_contracts.h"

namespace tmorph {

namespace {

struct Candidate {
  const Backend* backend;
  const DeviceInfo* device;
  const KernelInfo* kernel;
  double transfer_seconds;
  double compute_seconds;
  uint64_t transfer_bytes;
  bool calibrated;
  double total() const { return transfer_seconds + compute_seconds; }
};

uint64_t workspace_bytes(const KernelInfo& k, uint64_t elements) {
  return k.workspace_fixed_bytes +
         static_cast<uint64_t>(std::ceil(k.workspace_bytes_per_element * static_cast<double>(elements)));
}

// Why kernel k on device d cannot serve req, ignoring consent; empty if it can.
std::pair<std::string, std::string> capability_gap(const KernelInfo& k, const DeviceInfo& d,
                                                   const OpRequest& req) {
  if (tm_op_takes_format(req.op)) {  // the mask holds formats, not dtypes
    if (req.format_id >= 64 || !(k.dtype_mask & (uint64_t{1} << req.format_id)))
      return {"dtype_unsupported", "no " + op_name(req.op) + " kernel for " + req.format_name};
  } else if (!(k.dtype_mask & dtype_bit(req.dtype))) {
    return {"dtype_unsupported", "no " + op_name(req.op) + " kernel for " + std::string(dtype_name(req.dtype))};
  }
  if (k.max_elements && req.elements > k.max_elements)
    return {"too_large", std::to_string(req.elements) + " elements exceed the kernel's limit of " +
                             std::to_string(k.max_elements)};
  if (k.required_features & ~d.features)
    return {"missing_feature", "device lacks " + feature_names(k.required_features & ~d.features)};
  const uint64_t ws = workspace_bytes(k, req.elements);
  if (req.memory_budget_bytes && ws > req.memory_budget_bytes)
    return {"over_memory_budget", "needs " + format_bytes(static_cast<double>(ws)) + " of workspace, budget is " +
                                      format_bytes(static_cast<double>(req.memory_budget_bytes))};
  return {};
}

// The ops whose partials merge exactly whatever backend computed which part (their kernels are bit-identical to
// the CPU's on every part, and the host merges the parts in the op's fixed order): those a split may serve.
bool splits_exactly(tm_op op) {
  return op == TM_OP_STATS_MOMENTS || op == TM_OP_LOD_TILE_STATS || op == TM_OP_STEM_FRAME_SUMS;
}

}  // namespace

// The fastest host link among the devices that hold the request's data (0 when none is known).
double Planner::holder_link_bytes_per_s(const OpRequest& req) const {
  double best = 0;
  const auto& listed = registry_.listed();
  for (size_t i = 0; i < listed.size(); ++i)  // a device holding data belongs to an open backend
    if (registry_.is_open(i))
      for (const DeviceInfo& d : listed[i].devices)
        if (req.residency.devices.count(listed[i].name + "/" + d.id)) best = std::max(best, d.host_link_bytes_per_s);
  return best;
}

namespace {

int gap_rank(const std::string& reason) {  // which rejection best explains a device's refusal
  static const char* order[] = {"needs_consent", "over_memory_budget", "too_large", "missing_feature",
                                "dtype_unsupported"};
  for (int i = 0; i < 5; ++i)
    if (reason == order[i]) return i;
  return 5;
}

}  // namespace

// Whether a plugin backend is considered for this request, whatever earlier requests opened: for an input of
// kOpenPluginsAtBytes or more, under a strict --backend, when the constraints prefer it, when a calibration
// measured it on this op, when one of its devices holds the data, or under --split on for an op a split may
// serve. Otherwise the request is placed among the linked backends (the CPU), so its placement does not depend on
// what the process did before.
bool Planner::considers(const Backend& b, const OpRequest& req, bool preferred) const {
  if (preferred || b.origin == "static" || req.bytes >= kOpenPluginsAtBytes || !constraints_.strict_backend.empty()) return true;
  if (constraints_.split == SplitMode::On && splits_exactly(req.op)) return true;  // asked to share it: any size
  if (costs_.calibrated_any(b.name, req.op)) return true;
  const std::string mine = b.name + "/";
  return std::any_of(req.residency.devices.begin(), req.residency.devices.end(),
                     [&](const std::string& d) { return d.compare(0, mine.size(), mine) == 0; });
}

Placement Planner::place(const OpRequest& req) const {
  Placement out = place_among(req, false);
  // A small input that only a plugin left out could serve is placed again among them all.
  if (out.backend.empty()) out = place_among(req, true);
  return out;
}

// Places among the backends considers() admits (every backend when `all`); a Placement with no backend when
// none of those can serve it but some were left out.
Placement Planner::place_among(const OpRequest& req, bool all) const {
  Placement out;
  out.op = op_name(req.op);
  std::vector<Candidate> candidates;
  bool any_preferred_present = false;
  bool some_left_out = false;
  const auto& listed = registry_.listed();

  for (size_t index = 0; index < listed.size(); ++index) {
    const Backend& b = listed[index];
    const bool preferred =
        std::find(constraints_.prefer.begin(), constraints_.prefer.end(), b.name) != constraints_.prefer.end();
    any_preferred_present = any_preferred_present || preferred;
    if (!constraints_.strict_backend.empty() && b.name != constraints_.strict_backend) {
      out.rejected.push_back({b.name, "", "not_requested", "--backend " + constraints_.strict_backend + " given"});
      continue;
    }
    if (constraints_.never.count(b.name)) {
      out.rejected.push_back({b.name, "", "disabled_by_policy", "excluded by --never or compute.never"});
      continue;
    }
    if (!all && !considers(b, req, preferred)) {
      some_left_out = true;
      out.rejected.push_back({b.name, "", "below_open_threshold",
                              "not considered for an input of " + format_bytes(static_cast<double>(req.bytes)) + ": under " +
                                  format_bytes(static_cast<double>(kOpenPluginsAtBytes)) +
                                  " the CPU serves it without opening plugins (--prefer, --backend or a calibration of the op "
                                  "considers it)"});
      continue;
    }
    registry_.open(index);
    if (!b.available) {
      out.rejected.push_back({b.name, "", "unavailable:" + b.unavailable_reason, b.unavailable_detail});
      continue;
    }
    const bool has_op = std::any_of(b.kernels.begin(), b.kernels.end(), [&](const KernelInfo& k) { return k.op == req.op; });
    if (!has_op) {
      out.rejected.push_back({b.name, "", "missing_kernel", "the backend has no " + out.op + " kernel"});
      continue;
    }
    for (const DeviceInfo& d : b.devices) {
      const Candidate* best = nullptr;
      Candidate chosen{};
      // Why this device refuses: an exact kernel's reason explains more than an approximate one's.
      std::pair<std::string, std::string> why_exact, why_approx;
      for (const KernelInfo& k : b.kernels) {
        if (k.op != req.op) continue;
        auto gap = capability_gap(k, d, req);
        if (gap.first.empty() && !k.approx_step.empty() && !req.allowed_approx_steps.count(k.approx_step))
          gap = {"needs_consent", "approximate (" + k.approx_step + "); requires --allow-approx " + k.approx_step};
        if (!gap.first.empty()) {
          auto& why = k.approx_step.empty() ? why_exact : why_approx;
          if (why.first.empty() || gap_rank(gap.first) < gap_rank(why.first)) why = gap;
          continue;
        }
        Candidate c{&b, &d, &k, 0, 0, 0, false};
        const bool resident = d.host_link_bytes_per_s == 0 ? req.residency.on_host
                                                            : req.residency.devices.count(b.name + "/" + d.id) > 0;
        if (!resident) {
          // To this device over its link; or, for a device on host memory when only devices hold the
          // data, back over the link of the device that holds it.
          const double link = d.host_link_bytes_per_s > 0 ? d.host_link_bytes_per_s : holder_link_bytes_per_s(req);
          c.transfer_bytes = req.bytes;
          c.transfer_seconds = link > 0 ? static_cast<double>(req.bytes) / link : 0;
        }
        c.compute_seconds = static_cast<double>(req.bytes) / costs_.throughput(b.name, d.id, req.op, &c.calibrated);
        const bool better = !best || (k.approx_step.empty() && !best->kernel->approx_step.empty()) ||
                            (k.approx_step.empty() == best->kernel->approx_step.empty() && c.total() < best->total());
        if (better) {
          chosen = c;
          best = &chosen;
        }
      }
      if (best) candidates.push_back(chosen);
      else {
        const auto& why = why_exact.first.empty() ? why_approx : why_exact;
        out.rejected.push_back({b.name, d.name, why.first, why.second});
      }
    }
  }

  if (candidates.empty() && some_left_out) return out;  // place() opens the rest and asks again
  if (candidates.empty()) {
    std::ostringstream msg;
    // Ops over ggml blocks name the block format; the others their dtype.
    msg << out.op << " on " << (req.format_name.empty() ? std::string(dtype_name(req.dtype)) : req.format_name) << " ("
        << req.elements << " elements): ";
    if (!constraints_.strict_backend.empty()) {
      if (!registry_.find(constraints_.strict_backend))
        msg << "backend '" << constraints_.strict_backend << "' is not installed (searched:";
      else
        msg << "--backend " << constraints_.strict_backend << " cannot serve it (";
      if (!registry_.find(constraints_.strict_backend)) {
        for (const auto& d : registry_.searched_dirs()) msg << " " << d;
        msg << ")";
      } else {
        bool first = true;
        for (const auto& r : out.rejected)
          if (r.backend == constraints_.strict_backend)
            msg << (first ? "" : "; ") << r.reason << (r.detail.empty() ? "" : ": " + r.detail), first = false;
        msg << ")";
      }
      msg << "; nothing was substituted";
      throw Error(ErrorKind::Unavailable, msg.str());
    }
    const auto steps = ladder(req);
    if (!steps.empty()) {
      msg << "only an approximation can serve this request, and exactness is never degraded silently.";
      for (const auto& r : out.rejected)
        if (r.reason != "needs_consent" && r.reason != "not_requested")
          msg << "\n  exact: " << r.backend << (r.device.empty() ? "" : "/" + r.device) << " rejected: " << r.reason
              << (r.detail.empty() ? "" : " (" + r.detail + ")");
      msg << "\nfallback ladder (consent with --allow-approx STEP):";
      for (const auto& s : steps)
        msg << "\n  " << s.step << " [" << s.backend << ", " << s.precision << "]: " << s.description;
      throw Error(ErrorKind::PrecisionRefused, msg.str());
    }
    msg << "no backend can run it:";
    for (const auto& r : out.rejected)
      msg << "\n  " << r.backend << (r.device.empty() ? "" : "/" + r.device) << ": " << r.reason
          << (r.detail.empty() ? "" : " (" + r.detail + ")");
    throw Error(ErrorKind::Unavailable, msg.str());
  }

  // Exact kernels always win over consented approximations.
  const bool have_exact = std::any_of(candidates.begin(), candidates.end(),
                                      [](const Candidate& c) { return c.kernel->approx_step.empty(); });
  std::vector<Candidate> pool;
  for (const auto& c : candidates)
    if (c.kernel->approx_step.empty() == have_exact) pool.push_back(c);
    else out.rejected.push_back({c.backend->name, c.device->name, "exact_available", "an exact kernel can serve it"});

  auto cheapest = [](const std::vector<Candidate>& cs) {
    return *std::min_element(cs.begin(), cs.end(), [](const Candidate& a, const Candidate& b) { return a.total() < b.total(); });
  };
  // Picks from pool by the constraints, then asks self-test admission (self_test.h): a plugin kernel
  // whose known-answer test fails is rejected with self_test_failed and the pick is made again without it.
  Candidate pick{};
  std::string reason;
  for (;;) {
    if (pool.empty()) {
      std::ostringstream msg;
      msg << out.op << " on " << (req.format_name.empty() ? std::string(dtype_name(req.dtype)) : req.format_name)
          << ": every kernel that could serve it failed its self-test against the CPU reference; nothing was substituted:";
      for (const auto& r : out.rejected)
        if (r.reason == "self_test_failed") msg << "\n  " << r.backend << "/" << r.device << ": " << r.detail;
      throw Error(ErrorKind::Unavailable, msg.str());
    }
    pick = cheapest(pool);
    if (!constraints_.strict_backend.empty()) {
      reason = "user_pinned";
    } else {
      bool honoured = false;
      for (const auto& name : constraints_.prefer) {
        std::vector<Candidate> mine;
        for (const auto& c : pool)
          if (c.backend->name == name) mine.push_back(c);
        if (!mine.empty()) {
          pick = cheapest(mine);
          reason = "user_preferred";
          honoured = true;
          break;
        }
      }
      if (!honoured && any_preferred_present) reason = "fallback_missing_kernel";
      else if (!honoured && pool.size() == 1 && !some_left_out) reason = "sole_supporter";
      else if (!honoured) {
        const bool others_compute_faster = std::any_of(pool.begin(), pool.end(), [&](const Candidate& c) {
          return c.compute_seconds < pick.compute_seconds;
        });
        reason = (pick.transfer_bytes == 0 && others_compute_faster) ? "resident_data" : "cheapest";
      }
    }
    std::string why;
    if (registry_.self_tests().admit(registry_, *pick.backend, *pick.device, *pick.kernel, req, &why)) break;
    out.rejected.push_back({pick.backend->name, pick.device->name, "self_test_failed", why});
    pool.erase(std::remove_if(pool.begin(), pool.end(), [&](const Candidate& c) {
      return c.backend == pick.backend && c.device == pick.device && c.kernel == pick.kernel;
    }), pool.end());
  }
  for (const auto& c : pool) {
    if (c.backend == pick.backend && c.device == pick.device) continue;
    char buf[128];
    std::snprintf(buf, sizeof buf, "estimated %.3g s vs %.3g s (transfer %.3g s)", c.total(), pick.total(),
                  c.transfer_seconds);
    out.rejected.push_back({c.backend->name, c.device->name, reason == "cheapest" || reason == "resident_data" || reason == "sole_supporter" ? "costlier" : "not_preferred", buf});
  }

  out.backend = pick.backend->name;
  out.device = pick.device->name;
  out.device_kind = device_kind_name(pick.device->kind);
  out.software_adapter = pick.device->kind == TM_DEVICE_SOFTWARE_ADAPTER;
  out.reason = reason;
  out.precision = precision_name(pick.kernel->precision, pick.kernel->tolerance);
  out.approx_step = pick.kernel->approx_step;
  if (!out.approx_step.empty()) out.consent = "--allow-approx " + out.approx_step;
  out.estimated_seconds = pick.total();
  out.bytes_transferred = pick.transfer_bytes;
  out.throughput_calibrated = pick.calibrated;
  out.backend_ref = pick.backend;
  out.device_index = pick.device->index;
  out.kernel_index = pick.kernel->index;

  // Split placement (docs/backends.md): the other exact kernels in the pool, each admitted by its self-test, take
  // shares in proportion to their throughput (transfer included), so the op ends when they all do. Only ops whose
  // partials merge exactly whatever the backend (splits_exactly), never under a strict --backend.
  if (splits_exactly(req.op) && constraints_.strict_backend.empty() && constraints_.split != SplitMode::Off &&
      pick.kernel->precision == TM_PRECISION_EXACT && (constraints_.split == SplitMode::On || req.bytes >= kSplitAtBytes)) {
    std::vector<Candidate> shares = {pick};
    for (const auto& c : pool) {
      const bool taken = std::any_of(shares.begin(), shares.end(), [&](const Candidate& x) {
        return x.backend == c.backend && (x.device == c.device || x.device->index == c.device->index);
      });
      if (taken || c.kernel->precision != TM_PRECISION_EXACT) continue;  // one share per device
      if (constraints_.split == SplitMode::Auto && c.device->kind == TM_DEVICE_SOFTWARE_ADAPTER) continue;
      std::string why;
      if (!registry_.self_tests().admit(registry_, *c.backend, *c.device, *c.kernel, req, &why)) {
        out.rejected.push_back({c.backend->name, c.device->name, "self_test_failed", why});
        continue;
      }
      shares.push_back(c);
    }
    // Shares by rate; a share under the mode's minimum is not worth its calls and is dropped.
    const double min_fraction = constraints_.split == SplitMode::On ? 0.01 : 0.1;
    for (bool dropped = true; dropped && shares.size() > 1;) {
      double rate = 0;
      for (const auto& c : shares) rate += 1 / std::max(c.total(), 1e-12);
      dropped = false;
      for (size_t i = 1; i < shares.size(); ++i)
        if ((1 / std::max(shares[i].total(), 1e-12)) / rate < min_fraction) {
          shares.erase(shares.begin() + static_cast<std::ptrdiff_t>(i));
          dropped = true;
          break;
        }
    }
    if (shares.size() > 1) {
      double rate = 0;
      for (const auto& c : shares) rate += 1 / std::max(c.total(), 1e-12);
      for (const auto& c : shares) {
        SplitShare share;
        share.fraction = (1 / std::max(c.total(), 1e-12)) / rate;
        Placement& p = share.placement;
        p.op = out.op;
        p.backend = c.backend->name;
        p.device = c.device->name;
        p.device_kind = device_kind_name(c.device->kind);
        p.software_adapter = c.device->kind == TM_DEVICE_SOFTWARE_ADAPTER;
        p.reason = "split_share";
        p.precision = precision_name(c.kernel->precision, c.kernel->tolerance);
        p.estimated_seconds = c.total() * share.fraction;
        p.bytes_transferred = static_cast<uint64_t>(static_cast<double>(c.transfer_bytes) * share.fraction);
        p.throughput_calibrated = c.calibrated;
        p.backend_ref = c.backend;
        p.device_index = c.device->index;
        p.kernel_index = c.kernel->index;
        out.split.push_back(std::move(share));
        // A backend that takes a share was not left out for being costlier.
        out.rejected.erase(std::remove_if(out.rejected.begin(), out.rejected.end(), [&](const Rejection& r) {
          return r.backend == c.backend->name && r.device == c.device->name && (r.reason == "costlier" || r.reason == "not_preferred");
        }), out.rejected.end());
      }
      char buf[160];
      std::snprintf(buf, sizeof buf, "estimated %.3g s split over %zu backends vs %.3g s on %s alone", 1 / rate, shares.size(),
                    pick.total(), pick.backend->name.c_str());
      out.split_why = buf;
      out.estimated_seconds = 1 / rate;
      uint64_t moved = 0;
      for (const auto& sh : out.split) moved += sh.placement.bytes_transferred;
      out.bytes_transferred = moved;
    }
  }
  return out;
}

std::vector<LadderStep> Planner::ladder(const OpRequest& req) const {
  std::vector<LadderStep> steps;
  for (const Backend& b : registry_.backends()) {
    if (!b.available || constraints_.never.count(b.name)) continue;
    if (!constraints_.strict_backend.empty() && b.name != constraints_.strict_backend) continue;
    for (const KernelInfo& k : b.kernels) {
      if (k.op != req.op || k.approx_step.empty()) continue;
      const bool fits = std::any_of(b.devices.begin(), b.devices.end(),
                                    [&](const DeviceInfo& d) { return capability_gap(k, d, req).first.empty(); });
      if (!fits) continue;
      auto same = std::find_if(steps.begin(), steps.end(), [&](const LadderStep& s) { return s.step == k.approx_step; });
      if (same != steps.end()) {
        same->backend += "," + b.name;
        continue;
      }
      steps.push_back({k.approx_step, b.name, precision_name(k.precision, k.tolerance), k.approx_description});
    }
  }
  return steps;
}

}  // namespace tmorph
