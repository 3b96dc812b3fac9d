#include "cli/runtime.h"

#include <unistd.h>

#include <cctype>
#include <climits>
#include <cstdlib>
#include <filesystem>

#include "cpu/cpu_backend.h"
#include "core/thread_pool.h"
#include "tensormorph/error.h"

namespace tmorph::cli {

void ComputeFlags::add_to(CLI::App* cmd) {
  cmd->add_option("--backend", backend, "strict: run every op on this backend or fail with the reason");
  cmd->add_option("--prefer", prefer, "prefer this backend when it can serve an op (repeatable)");
  cmd->add_option("--never", never, "never use this backend (repeatable)");
  cmd->add_option("--allow-approx", allow_approx,
                  "consent to a named approximation step when no exact kernel can serve (repeatable)");
  cmd->add_option("--threads", threads, "host threads for CPU kernels (default: compute.threads or all cores)");
  cmd->add_option("--memory-budget", memory_budget,
                  "bytes one op may hold, e.g. 512M (default: compute.memory_budget or half of RAM)");
}

uint64_t parse_bytes(const std::string& text, const std::string& what) {
  size_t pos = 0;
  unsigned long long value = 0;
  try {
    value = std::stoull(text, &pos);
  } catch (const std::exception&) {
    throw Error(ErrorKind::InvalidArgument, what + ": expected a byte count like 1048576 or 512M, got '" + text + "'");
  }
  std::string suffix = text.substr(pos);
  int shift = 0;
  if (suffix == "K" || suffix == "k") shift = 10;
  else if (suffix == "M" || suffix == "m") shift = 20;
  else if (suffix == "G" || suffix == "g") shift = 30;
  else if (suffix == "T" || suffix == "t") shift = 40;
  else if (!suffix.empty())
    throw Error(ErrorKind::InvalidArgument, what + ": unknown size suffix '" + suffix + "' (use K, M, G or T)");
  if (shift && value > (ULLONG_MAX >> shift))
    throw Error(ErrorKind::InvalidArgument, what + ": '" + text + "' overflows 64 bits");
  return static_cast<uint64_t>(value) << shift;
}

std::string executable_dir() {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : exe.parent_path().string();
}

std::unique_ptr<Runtime> make_runtime(const ComputeFlags* flags) {
  auto rt = std::make_unique<Runtime>();
  rt->settings = Settings::load();

  // Plugin directory: environment beats the setting, which beats the default beside the binary.
  if (const char* env = std::getenv("TENSORMORPH_PLUGIN_DIR"); env && *env) {
    rt->plugin_dir = env, rt->plugin_dir_source = "TENSORMORPH_PLUGIN_DIR";
  } else if (auto s = rt->settings.get("compute.plugin_dir")) {
    rt->plugin_dir = *s, rt->plugin_dir_source = "compute.plugin_dir";
  } else {
    rt->plugin_dir = executable_dir() + "/plugins", rt->plugin_dir_source = "default";
  }
  rt->registry.register_table(tmorph::cpu::cpu_backend_table(), "static");
  rt->registry.load_plugins_from(rt->plugin_dir);

  rt->calibration_path = config_dir() + "/calibration.json";
  rt->costs.load(rt->calibration_path);

  // Constraints: flags add to (and a strict --backend overrides) what the settings say.
  if (auto s = rt->settings.get("compute.prefer")) rt->constraints.prefer = split_list(*s);
  if (auto s = rt->settings.get("compute.never"))
    for (const auto& n : split_list(*s)) rt->constraints.never.insert(n);
  rt->threads = default_thread_count();
  if (auto s = rt->settings.get("compute.threads")) {
    const bool digits = !s->empty() && s->size() <= 4 && s->find_first_not_of("0123456789") == std::string::npos;
    const unsigned long t = digits ? std::stoul(*s) : 0;
    if (t == 0 || t > 4096)
      throw Error(ErrorKind::InvalidArgument, "setting compute.threads must be an integer 1..4096, got '" + *s + "'");
    rt->threads = static_cast<unsigned>(t);
  }
  const uint64_t ram = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  rt->memory_budget = ram / 2;
  if (auto s = rt->settings.get("compute.memory_budget")) {
    rt->memory_budget = parse_bytes(*s, "setting compute.memory_budget");
    rt->memory_budget_set = true;
  }

  if (flags) {
    if (!flags->prefer.empty()) rt->constraints.prefer = flags->prefer;
    for (const auto& n : flags->never) rt->constraints.never.insert(n);
    rt->constraints.strict_backend = flags->backend;
    if (!flags->backend.empty() && rt->constraints.never.count(flags->backend))
      throw Error(ErrorKind::InvalidArgument, "--backend " + flags->backend + " is also excluded by --never/compute.never");
    if (flags->threads) rt->threads = flags->threads;
    if (!flags->memory_budget.empty()) {
      rt->memory_budget = parse_bytes(flags->memory_budget, "--memory-budget");
      rt->memory_budget_set = true;
    }
  }
  for (const auto& n : rt->constraints.never) rt->registry.disable(n);
  return rt;
}

}  // namespace tmorph::cli
