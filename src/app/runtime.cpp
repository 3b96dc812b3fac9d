#include "app/runtime.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "app/backends_json.h"
#include "core/byte_size.h"
#include "cpu/cpu_backend.h"
#include "stem/resident/resident_store.h"
#include "stem/runs/ssb_run.h"
#include "support/thread_pool.h"
#include "tensormorph/error.h"

namespace tmorph::app {

std::string executable_dir() {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : exe.parent_path().string();
}

std::unique_ptr<Runtime> make_runtime(const ComputeRequest* flags) {
  auto rt = std::make_unique<Runtime>();
  rt->settings = Settings::load();

  // Plugin directory: environment beats the setting, which beats the default beside the binary.
  if (const char* env = std::getenv("TENSORMORPH_PLUGIN_DIR"); env && *env) {
    rt->plugin_dir = env, rt->plugin_dir_source = "TENSORMORPH_PLUGIN_DIR";
  } else if (auto s = rt->settings.get("compute.plugin_dir")) {
    rt->plugin_dir = *s, rt->plugin_dir_source = "compute.plugin_dir";
  } else {
    rt->plugin_dir = flags && !flags->default_plugin_dir.empty() ? flags->default_plugin_dir : executable_dir() + "/plugins";
    rt->plugin_dir_source = "default";
  }
  rt->registry.register_table(tmorph::cpu::cpu_backend_table(), "static");
  rt->registry.load_plugins_from(rt->plugin_dir);
  // Kernel self-test verdicts persist per device, driver and plugin build (include/tensormorph/self_test.h).
  rt->registry.set_self_test_cache_file(cache_dir() + "/self-tests.json");

  rt->calibration_path = config_dir() + "/calibration.json";
  rt->costs.load(rt->calibration_path);

  // Constraints: flags add to (and a strict --backend overrides) what the settings say. A name no backend has
  // is refused, never ignored (a typo in --never would otherwise leave the backend in use).
  const std::set<std::string> known_backends = known_backend_names(rt.get());
  const auto checked_setting = [&](const char* key) {
    std::vector<std::string> names;
    if (auto s = rt->settings.get(key)) names = split_list(*s);
    check_backend_names(names, known_backends, std::string("setting ") + key + " (change it with tensormorph config set or unset)");
    return names;
  };
  rt->constraints.prefer = checked_setting("compute.prefer");
  const auto split_mode = [](const std::string& v, const std::string& what) {
    if (v == "auto") return SplitMode::Auto;
    if (v == "on") return SplitMode::On;
    if (v == "off") return SplitMode::Off;
    throw Error(ErrorKind::InvalidArgument, what + ": expected auto, on or off, got '" + v + "'");
  };
  if (auto s = rt->settings.get("compute.split")) rt->constraints.split = split_mode(*s, "setting compute.split");
  for (const auto& n : checked_setting("compute.never")) rt->constraints.never.insert(n);
  rt->threads = default_thread_count();
  if (auto s = rt->settings.get("compute.threads")) rt->threads = parse_thread_count(*s, "setting compute.threads");
  const uint64_t ram = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  rt->memory_budget = ram / 2;
  if (auto s = rt->settings.get("compute.memory_budget")) {
    rt->memory_budget = parse_memory_budget(*s, "setting compute.memory_budget");
    rt->memory_budget_set = true;
  }

  if (auto s = rt->settings.get("stem.resident_memory")) rt->resident_memory = parse_bytes(*s, "setting stem.resident_memory");
  if (auto s = rt->settings.get("stem.resident_device_memory"))
    rt->resident_device_memory = parse_bytes(*s, "setting stem.resident_device_memory");

  if (flags) {
    const bool cli = flags->face == Face::Cli;
    check_backend_names(flags->prefer, known_backends, cli ? "--prefer" : "prefer");
    check_backend_names(flags->never, known_backends, cli ? "--never" : "never");
    if (!flags->backend.empty()) check_backend_names({flags->backend}, known_backends, cli ? "--backend" : "backend");
    if (!flags->resident_memory.empty()) rt->resident_memory = parse_bytes(flags->resident_memory, "--resident-memory");
    if (!flags->prefer.empty()) rt->constraints.prefer = flags->prefer;
    if (!flags->split.empty()) rt->constraints.split = split_mode(flags->split, cli ? "--split" : "split");
    for (const auto& n : flags->never) rt->constraints.never.insert(n);
    rt->constraints.strict_backend = flags->backend;
    if (!flags->backend.empty() && rt->constraints.never.count(flags->backend))
      throw Error(ErrorKind::InvalidArgument, "--backend " + flags->backend + " is also excluded by --never/compute.never");
    if (flags->threads) {  // 0: not given
      if (flags->threads > kMaxThreads)
        throw Error(ErrorKind::InvalidArgument, "--threads must be 1.." + std::to_string(kMaxThreads) + ", got " + std::to_string(flags->threads));
      rt->threads = flags->threads;
    }
    if (!flags->memory_budget.empty()) {
      rt->memory_budget = parse_memory_budget(flags->memory_budget, "--memory-budget");
      rt->memory_budget_set = true;
    }
  }
  for (const auto& n : rt->constraints.never) rt->registry.disable(n);
  if (flags && !flags->allow_approx.empty()) {
    const std::set<std::string> known = known_approximation_steps(*rt);
    std::string listed;
    for (const auto& s : known) listed += (listed.empty() ? "" : ", ") + s;
    for (const auto& step : flags->allow_approx)
      if (!known.count(step))
        throw Error(ErrorKind::InvalidArgument, std::string(flags->face == Face::Cli ? "--allow-approx" : "allow_approx") +
                                                    ": unknown approximation step '" + step + "' (known: " + listed + ")");
  }
  return rt;
}

uint64_t quarter_of_ram() {
  return static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<uint64_t>(sysconf(_SC_PAGESIZE)) / 4;
}

uint64_t apply_resident_memory(const Runtime& rt, uint64_t face_default) {
  const uint64_t bytes = rt.resident_memory.value_or(face_default);
  ResidentStore::process().set_budget(bytes);
  ResidentStore::process().set_device_budget(rt.resident_device_memory);
  return bytes;
}

std::set<std::string> known_backend_names(const Runtime* rt) {
  const nlohmann::json& matrix = parity_matrix();
  std::set<std::string> names;
  for (const auto& [name, info] : matrix.at("backends").items()) names.insert(name);
  if (rt)
    for (const auto& b : rt->registry.backends()) names.insert(b.name);
  return names;
}

void check_backend_names(const std::vector<std::string>& names, const std::set<std::string>& known, const std::string& what) {
  for (const auto& n : names) {
    if (known.count(n)) continue;
    std::string listed;
    for (const auto& k : known) listed += (listed.empty() ? "" : ", ") + k;
    throw Error(ErrorKind::InvalidArgument, what + ": unknown backend '" + n + "' (known: " + listed + ")");
  }
}

std::set<std::string> known_approximation_steps(const Runtime& rt) {
  std::set<std::string> steps{kSsbBinDetectorStep};
  for (const auto& b : rt.registry.backends())
    for (const auto& k : b.kernels)
      if (!k.approx_step.empty()) steps.insert(k.approx_step);
  return steps;
}

}  // namespace tmorph::app
