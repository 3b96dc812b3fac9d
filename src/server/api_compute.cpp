// The Compute panel's endpoints: every backend and device (unavailable ones with the reason), the
// user's prefer / never constraints, saved in the same settings file as `tensormorph config`
// (compute.prefer, compute.never) and applied by rebuilding the runtime, as a new CLI run would, and the
// session's approximation consent (never saved; applied to the indexing jobs and the preview).
#include <algorithm>
#include <bit>
#include <optional>
#include <regex>
#include <set>

#include "app/backends_json.h"
#include "core/page_adapter.h"
#include "compute/self_test_json.h"
#include "ops/placement_json.h"
#include "stem/resident/resident_store.h"
#include "tensormorph/op_contracts.h"
#include "server/http_util.h"
#include "server/routes.h"
#include "tensormorph/error.h"
#include "tensormorph/settings.h"

namespace tmorph::server {

namespace {

std::string join(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ",") + n;
  return s;
}

// Where each op would run under the current constraints, as the planner decides it for a representative
// request: 64 MiB of input on the host, float32 (else the first dtype, or stored format, some backend's
// kernel takes), under the runtime's memory budget and the session's approximation consent. A request
// no backend can serve carries the planner's message instead of a placement, and, when approximations
// could serve it, the ladder (what consent would allow).
nlohmann::json placement_preview(const app::Runtime& rt, const std::set<std::string>& consent) {
  const Planner planner = rt.planner();
  nlohmann::json out = nlohmann::json::array();
  for (int i = 1; i < TM_OP_COUNT_; ++i) {
    const auto op = static_cast<tm_op>(i);
    uint64_t mask = 0;
    for (const auto& b : rt.registry.backends())
      for (const auto& k : b.kernels)
        if (k.op == op && k.approx_step.empty()) mask |= k.dtype_mask;
    if (!mask) continue;  // no backend here has this op at all
    OpRequest r;
    r.op = op;
    r.bytes = uint64_t{64} << 20;
    r.memory_budget_bytes = rt.memory_budget;
    r.allowed_approx_steps = consent;
    nlohmann::json request = {{"bytes", r.bytes}, {"on_host", true}};
    if (tm_op_takes_format(op)) {
      KernelInfo one;
      one.op = op, one.dtype_mask = uint64_t{1} << std::countr_zero(mask);
      r.dtype = DType::F32, r.format_id = static_cast<uint32_t>(std::countr_zero(mask)), r.format_name = app::kernel_inputs(one).at(0);
      r.elements = r.bytes / 4;
      request["format"] = r.format_name;
    } else {
      r.dtype = mask & dtype_bit(DType::F32) ? DType::F32 : static_cast<DType>(std::countr_zero(mask));
      r.elements = r.bytes / dtype_size(r.dtype);
      request["dtype"] = dtype_name(r.dtype);
    }
    nlohmann::json entry = {{"op", op_name(op)}, {"request", request}};
    try {
      entry["placement"] = placement_json(planner.place(r));
    } catch (const Error& e) {
      entry["placement"] = nullptr;
      entry["error"] = e.what();
      if (e.kind() == ErrorKind::PrecisionRefused) {
        nlohmann::json ladder = nlohmann::json::array();
        for (const auto& s : planner.ladder(r))
          ladder.push_back({{"step", s.step}, {"backend", s.backend}, {"precision", s.precision}, {"description", s.description}});
        entry["needs_consent"] = true;
        entry["ladder"] = ladder;
      }
    }
    out.push_back(entry);
  }
  return out;
}

// The kernel self-test verdicts reached so far in this server (self_test.h).
nlohmann::json self_tests_json(const app::Runtime& rt) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& v : rt.registry.self_tests().verdicts()) out.push_back(self_test_verdict_json(v));
  return out;
}

nlohmann::json compute_json(const app::Runtime& rt, const nlohmann::json& known_backends, const std::set<std::string>& consent) {
  nlohmann::json backends = nlohmann::json::array();
  for (const auto& b : rt.registry.backends()) {
    nlohmann::json entry = app::backend_json(b), ops = nlohmann::json::array();
    std::set<std::string> seen;  // one line per op (an op may have several kernels)
    for (const auto& k : b.kernels)
      if (seen.insert(op_name(k.op)).second)
        ops.push_back({{"op", op_name(k.op)}, {"precision", precision_name(k.precision, k.tolerance)}});
    entry["ops"] = ops;
    backends.push_back(entry);
  }
  nlohmann::json not_installed = nlohmann::json::array();
  for (const auto& [name, info] : known_backends.items())
    if (!rt.registry.find(name))
      not_installed.push_back({{"name", name}, {"kind", info.value("kind", "")}, {"description", info.value("description", "")}});
  nlohmann::json failures = nlohmann::json::array();
  for (const auto& f : rt.registry.load_failures())
    failures.push_back({{"path", f.path}, {"reason", f.reason}, {"detail", f.detail}});
  // The saved constraints are read from the file, so what the response shows is what was persisted.
  const Settings s = Settings::load();
  const auto saved = [&](const char* key) {
    const auto v = s.get(key);
    return v ? split_list(*v) : std::vector<std::string>{};
  };
  const std::vector<std::string> never(rt.constraints.never.begin(), rt.constraints.never.end());
  return {{"mode", rt.constraints.prefer.empty() && rt.constraints.never.empty() ? "auto" : "constrained"},
          {"backends", backends},
          {"not_installed", not_installed},
          {"plugin_load_failures", failures},
          {"constraints", {{"prefer", saved("compute.prefer")}, {"never", saved("compute.never")}}},
          {"effective", {{"prefer", rt.constraints.prefer}, {"never", never}}},
          {"placement_preview", placement_preview(rt, consent)},
          {"self_tests", self_tests_json(rt)},  // after the previews: braced lists evaluate in order
          {"consent", {{"allow_approx", consent}, {"scope", "session"}, {"known_steps", app::known_approximation_steps(rt)}}},
          {"resident", ResidentStore::process().describe()},  // acquisitions kept resident: where, size, when built
          {"settings_file", s.path()}};
}

// A body list of backend names: an array of known names, each once. Throws 400 naming the field.
std::vector<std::string> name_list(const nlohmann::json& body, const char* field, const app::Runtime& rt) {
  if (!body.contains(field)) return {};
  const nlohmann::json& v = body.at(field);
  if (!v.is_array()) throw HttpError(400, std::string("field '") + field + "': expected an array of backend names");
  if (v.size() > 64) throw HttpError(400, std::string("field '") + field + "': at most 64 names");
  std::vector<std::string> out;
  std::string known;
  for (const auto& b : rt.registry.backends()) known += (known.empty() ? "" : ", ") + b.name;
  static const std::regex name_re("[A-Za-z0-9_.-]{1,64}");
  for (const auto& e : v) {
    if (!e.is_string() || !std::regex_match(e.get<std::string>(), name_re))
      throw HttpError(400, std::string("field '") + field + "': expected backend names (letters, digits, _ . -)");
    const std::string name = e.get<std::string>();
    if (!rt.registry.find(name))
      throw HttpError(400, std::string("field '") + field + "': unknown backend '" + name + "' (known: " + known + ")");
    if (std::find(out.begin(), out.end(), name) != out.end())
      throw HttpError(400, std::string("field '") + field + "': '" + name + "' is listed twice");
    out.push_back(name);
  }
  return out;
}

// PUT /api/compute {"prefer": [...], "never": [...]}: a field that is absent keeps its saved value; an
// empty list removes the setting (Auto).
void put_compute(ServerState& state, const httplib::Request& req, httplib::Response& res) {
  const std::string type = req.get_header_value("Content-Type");
  if (type.rfind("application/json", 0) != 0) throw HttpError(400, "the body must be JSON (Content-Type: application/json)");
  const nlohmann::json body = body_object(req);
  for (const auto& [key, value] : body.items())
    if (key != "prefer" && key != "never" && key != "allow_approx")
      throw HttpError(400, "field '" + key + "': unknown (expected prefer, never, allow_approx)");
  const auto rt = state.compute.current();
  const auto prefer = name_list(body, "prefer", *rt), never = name_list(body, "never", *rt);
  std::optional<std::set<std::string>> consent;
  if (body.contains("allow_approx")) {
    const nlohmann::json& v = body["allow_approx"];
    const auto steps = app::known_approximation_steps(*rt);
    std::string known;
    for (const auto& s : steps) known += (known.empty() ? "" : ", ") + s;
    if (!v.is_array() || v.size() > 64) throw HttpError(400, "field 'allow_approx': expected an array of approximation steps");
    consent.emplace();
    for (const auto& e : v) {
      if (!e.is_string() || !steps.count(e.get<std::string>()))
        throw HttpError(400, "field 'allow_approx': " + (e.is_string() ? "unknown step '" + e.get<std::string>() + "'" : std::string("expected strings")) +
                                 " (known: " + known + ")");
      consent->insert(e.get<std::string>());
    }
  }
  {
    std::lock_guard<std::mutex> lock(state.compute.settings_mutex());
    Settings s = Settings::load();
    const auto store = [&](const char* field, const char* key, const std::vector<std::string>& names) {
      if (!body.contains(field)) return;
      if (names.empty()) s.unset(key);
      else s.set(key, join(names));
    };
    store("prefer", "compute.prefer", prefer);
    store("never", "compute.never", never);
    // The lists that will be saved must not overlap, whichever of them this request changed.
    const auto final_list = [&](const char* key) {
      const auto v = s.get(key);
      return v ? split_list(*v) : std::vector<std::string>{};
    };
    const auto final_never = final_list("compute.never");
    for (const auto& n : final_list("compute.prefer"))
      if (std::find(final_never.begin(), final_never.end(), n) != final_never.end())
        throw HttpError(400, std::string("field '") + (body.contains("prefer") ? "prefer" : "never") + "': '" + n +
                                 "' would be both preferred and never used");
    if (body.contains("prefer") || body.contains("never")) {
      s.save();
      state.compute.reload();
    }
    if (consent) state.compute.set_allow_approx(std::move(*consent));
  }
  send_json(res, compute_json(*state.compute.current(), state.known_backends, state.compute.allow_approx()));
}

}  // namespace

void add_compute_routes(httplib::Server& svr, ServerState& state) {
  svr.Get("/api/compute", guarded([&state](const httplib::Request&, httplib::Response& res) {
            send_json(res, compute_json(*state.compute.current(), state.known_backends, state.compute.allow_approx()));
          }));
  svr.Put("/api/compute",
          guarded([&state](const httplib::Request& req, httplib::Response& res) { put_compute(state, req, res); }));
  // The WebGPU adapter the page found (or why it found none), kept for `tensormorph backends` (core/page_adapter.h).
  svr.Get("/api/compute/webgpu", guarded([](const httplib::Request&, httplib::Response& res) {
            const auto seen = load_page_adapter();
            send_json(res, {{"last_reported_adapter", seen ? *seen : nlohmann::json(nullptr)}});
          }));
  svr.Put("/api/compute/webgpu", guarded([](const httplib::Request& req, httplib::Response& res) {
            if (req.get_header_value("Content-Type").rfind("application/json", 0) != 0)
              throw HttpError(400, "the body must be JSON (Content-Type: application/json)");
            nlohmann::json report;
            try {
              report = validated_page_adapter(body_object(req));
            } catch (const Error& e) {
              throw HttpError(400, e.what());
            }
            send_json(res, {{"last_reported_adapter", save_page_adapter(report)}});
          }));
}

}  // namespace tmorph::server
