// tensormorph backends: every backend, its devices and kernels, and why an unavailable one is so.
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <optional>

#include "cli/commands.h"
#include "cli/output.h"
#include "app/backends_json.h"
#include "compute/self_test_json.h"
#include "cli/compute_flags.h"
#include "core/format.h"
#include "core/page_adapter.h"
#include "distributed/world.h"
#include "tensormorph/error.h"

namespace tmorph::cli {

namespace {

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : " ") + x;
  return s;
}

// Backends the parity matrix knows that are not installed here, with what each would provide. Test plugins
// (kind "test plugin": built for the tests only, never installed) are no user's backend and are left out; backends
// that run in the viewer's page (kind "browser") are listed by in_page() instead.
nlohmann::json not_installed(const Runtime& rt) {
  const nlohmann::json& matrix = app::parity_matrix();
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [name, info] : matrix.at("backends").items()) {
    if (rt.registry.find(name) || info.at("kind") == "test plugin" || info.at("kind") == "browser") continue;
    out.push_back({{"name", name}, {"kind", info.at("kind")}, {"issue", info.at("issue")},
                   {"description", info.at("description")}, {"capability_levels", app::parity_levels(name)}});
  }
  return out;
}

// Backends that run in the viewer's page (WebGPU): never in this process; with the adapter a page last reported
// (core/page_adapter.h; null when none was seen).
nlohmann::json in_page() {
  const nlohmann::json& matrix = app::parity_matrix();
  const auto adapter = load_page_adapter();
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [name, info] : matrix.at("backends").items())
    if (info.at("kind") == "browser")
      out.push_back({{"name", name}, {"issue", info.at("issue")}, {"description", info.at("description")},
                     {"capability_levels", app::parity_levels(name)},
                     {"last_reported_adapter", adapter ? *adapter : nlohmann::json(nullptr)},
                     {"record", page_adapter_path()}});
  return out;
}

// "3 compiled, 2 required, 40 not-implemented": how much of the matrix a backend covers, by level.
std::string level_summary(const nlohmann::json& levels) {
  std::map<std::string, int> counts;
  for (const auto& [cap, level] : levels.items()) ++counts[level.get<std::string>()];
  std::string out;
  for (const auto& [level, n] : counts) out += (out.empty() ? "" : ", ") + std::to_string(n) + " " + level;
  return out;
}

nlohmann::json backends_json(const Runtime& rt) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& b : rt.registry.backends()) {
    list.push_back(app::backend_json(b));
  }
  nlohmann::json tests = nlohmann::json::array();
  for (const auto& v : rt.registry.self_tests().verdicts()) tests.push_back(self_test_verdict_json(v));
  nlohmann::json failures = nlohmann::json::array();
  for (const auto& f : rt.registry.load_failures())
    failures.push_back({{"path", f.path}, {"reason", f.reason}, {"detail", f.detail}});
  return {{"backends", list},
          {"plugin_load_failures", failures},
          {"plugin_dir", rt.plugin_dir},
          {"plugin_dir_source", rt.plugin_dir_source},
          {"calibration_file", rt.calibration_path},
          {"calibrated_entries", rt.costs.size()},
          {"not_installed", not_installed(rt)},
          {"in_page", in_page()},
          {"self_tests", tests}};
}

void print_backends(const Runtime& rt) {
  for (const auto& b : rt.registry.backends()) {
    std::printf("%s  [%s]  %s\n", b.name.c_str(), b.available ? "available" : ("unavailable: " + b.unavailable_reason).c_str(),
                b.description.c_str());
    if (!b.available && !b.unavailable_detail.empty()) std::printf("  why: %s\n", b.unavailable_detail.c_str());
    std::printf("  origin: %s\n", b.origin.c_str());
    if (const auto levels = app::parity_levels(b.name); !levels.empty())
      std::printf("  parity (tests/parity/backend_matrix.json): %s%s\n", level_summary(levels).c_str(),
                  levels.dump().find("\"compiled\"") != std::string::npos
                      ? "; compiled = built and tested on the host (emulated), never run on this hardware in CI"
                      : "");
    for (const auto& d : b.devices)
      std::printf("  device %u: %s (%s), memory %s, max allocation %s, max binding %s, features %s\n", d.index,
                  d.name.c_str(), device_kind_name(d.kind).c_str(), format_bytes(static_cast<double>(d.memory_bytes)).c_str(),
                  format_bytes(static_cast<double>(d.max_allocation_bytes)).c_str(),
                  format_bytes(static_cast<double>(d.max_buffer_binding_bytes)).c_str(), feature_names(d.features).c_str());
    for (const auto& k : b.kernels)
      std::printf("  kernel %-28s %-16s %s%s\n", op_name(k.op).c_str(), precision_name(k.precision, k.tolerance).c_str(),
                  join(app::kernel_inputs(k)).c_str(),
                  k.approx_step.empty() ? "" : ("  [approx step: " + k.approx_step + "]").c_str());
  }
  for (const auto& v : rt.registry.self_tests().verdicts())
    std::printf("self-test %s/%s %s on %s: %s (%.3f s)%s%s\n", v.backend.c_str(), v.device.c_str(), v.op.c_str(),
                v.input.c_str(), v.status.c_str(), v.seconds, v.status == "passed" ? "" : ": ",
                v.status == "passed" ? "" : v.detail.c_str());
  for (const auto& f : rt.registry.load_failures())
    std::printf("plugin %s  [not loaded: %s]  %s\n", f.path.c_str(), f.reason.c_str(), f.detail.c_str());
  for (const auto& b : not_installed(rt)) {
    std::string implemented;
    for (const auto& [cap, level] : b.at("capability_levels").items())
      if (level != "not-implemented") implemented += " " + cap;
    std::printf("%s  [not installed]  %s; capabilities in this project's matrix:%s\n",
                b.at("name").get<std::string>().c_str(), b.at("description").get<std::string>().c_str(),
                implemented.empty() ? " none implemented yet" : implemented.c_str());
  }
  for (const auto& b : in_page()) {
    const nlohmann::json& seen = b.at("last_reported_adapter");
    std::string implemented;
    for (const auto& [cap, level] : b.at("capability_levels").items())
      if (level != "not-implemented") implemented += " " + cap;
    std::printf("%s  [runs in the viewer's page]  %s, on the page's WebGPU adapter, not in this process; last adapter a "
                "page reported: %s; capabilities in this project's matrix:%s\n",
                b.at("name").get<std::string>().c_str(), b.at("description").get<std::string>().c_str(),
                page_adapter_text(seen.is_null() ? std::nullopt : std::optional<nlohmann::json>(seen)).c_str(), implemented.empty() ? " none implemented yet" : implemented.c_str());
  }
  std::printf("plugin directory: %s (%s)\n", rt.plugin_dir.c_str(), rt.plugin_dir_source.c_str());
  std::printf("calibration: %s (%zu entries%s)\n", rt.calibration_path.c_str(), rt.costs.size(),
              rt.costs.size() ? "" : "; uncalibrated kernels use one conservative default; run 'tensormorph calibrate'");
  std::printf("MPI: %s\n", World::built_with_mpi()
                               ? "built in: index, stats and the 4D-STEM products run across the ranks of "
                                 "'mpirun -np N tensormorph ...' (docs/scaling.md)"
                               : "not in this build: one process (install libopenmpi-dev and rebuild for mpirun)");
}

// Whether this build runs across MPI ranks ({"built": bool}), beside the backends.
nlohmann::json mpi_json() { return {{"built", World::built_with_mpi()}}; }

}  // namespace

void add_backends_command(CLI::App& app) {
  auto json = std::make_shared<bool>(false);
  auto flags = std::make_shared<ComputeFlags>();
  CLI::App* cmd = app.add_subcommand("backends", "list backends, devices, kernels with precision classes, and why an "
                                                 "unavailable backend is unavailable");
  cmd->add_flag("--json", *json, "print one JSON document");
  cmd->add_option("--never", flags->never, "show this backend as disabled by policy (repeatable)");
  auto self_test = std::make_shared<bool>(false);
  cmd->add_flag("--self-test", *self_test,
                "run every plugin kernel's known-answer self-test against the CPU now, for every dtype or format it "
                "declares, and list the verdicts (exit 1 when one fails)");
  cmd->callback([json, flags, self_test] {
    auto rt = command_runtime(flags.get());
    bool failed = false;
    if (*self_test)
      for (const auto& v : app::run_all_self_tests(rt->registry)) failed = failed || v.status == "failed";
    if (*json) {
      nlohmann::json doc = backends_json(*rt);
      doc["mpi"] = mpi_json();
      print_json(doc);
    }
    else print_backends(*rt);
    if (failed) throw Error(ErrorKind::Unavailable, "a kernel failed its self-test against the CPU reference: it will not serve calls");
  });
}

}  // namespace tmorph::cli
