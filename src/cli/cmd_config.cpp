// tensormorph config get|set|unset|list: the persisted settings (constraints, plugin dir, threads).
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "app/runtime.h"
#include "cli/commands.h"
#include "cli/output.h"
#include "tensormorph/error.h"
#include "tensormorph/settings.h"

namespace tmorph::cli {

void add_config_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("config", "read and change persisted settings (" + config_dir() + "/settings.json)");
  cmd->require_subcommand(1);
  auto key = std::make_shared<std::string>();
  auto value = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);

  CLI::App* get = cmd->add_subcommand("get", "print one setting (exit 2 when unset)");
  get->add_option("key", *key, "setting key, e.g. compute.prefer")->required();
  get->add_flag("--json", *json, "print one JSON document");
  get->callback([key, json] {
    const auto v = Settings::load().get(*key);
    if (!v) throw Error(ErrorKind::InvalidArgument, "setting '" + *key + "' is not set");
    if (*json) print_json(nlohmann::json{{"key", *key}, {"value", *v}});
    else std::cout << *v << "\n";
  });

  CLI::App* set = cmd->add_subcommand("set", "set a setting");
  set->add_option("key", *key, "setting key")->required();
  set->add_option("value", *value, "value")->required();
  set->callback([key, value] {
    if (*key == "compute.prefer" || *key == "compute.never")  // the names a runtime would refuse, refused now
      app::check_backend_names(split_list(*value), app::known_backend_names(nullptr), *key);
    auto s = Settings::load();
    s.set(*key, *value);
    s.save();
  });

  CLI::App* unset = cmd->add_subcommand("unset", "remove a setting");
  unset->add_option("key", *key, "setting key")->required();
  unset->callback([key] {
    auto s = Settings::load();
    s.unset(*key);
    s.save();
  });

  CLI::App* list = cmd->add_subcommand("list", "every known key, its value and what it means");
  list->add_flag("--json", *json, "print one JSON document");
  list->callback([json] {
    const auto s = Settings::load();
    nlohmann::json doc = {{"path", s.path()}, {"settings", nlohmann::json::array()}};
    for (const auto& k : known_settings()) {
      const auto v = s.get(k.key);
      doc["settings"].push_back({{"key", k.key}, {"value", v ? nlohmann::json(*v) : nlohmann::json(nullptr)},
                                 {"description", k.description}});
      if (!*json) std::cout << k.key << " = " << (v ? *v : "(unset)") << "    # " << k.description << "\n";
    }
    if (*json) print_json(doc);
  });
}

}  // namespace tmorph::cli
