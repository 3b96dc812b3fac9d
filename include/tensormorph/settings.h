// Persistent user settings ($XDG_CONFIG_HOME/tensormorph/settings.json, else ~/.config/tensormorph).
// A flat map of known keys to string values; unknown keys are refused so typos do not go unnoticed.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tmorph {

struct SettingKey {
  const char* key;
  const char* description;
};

// Every key the project understands.
const std::vector<SettingKey>& known_settings();

// Directory of settings and calibration files (created on save, not on read).
std::string config_dir();

// Where Tensormorph keeps what it can rebuild (indexes, prepared products): $XDG_CACHE_HOME/tensormorph,
// else ~/.cache/tensormorph, else /tmp/tensormorph.
std::string cache_dir();

class Settings {
 public:
  // Reads path (default: config_dir()/settings.json). A missing file is an empty settings set;
  // unreadable JSON throws BadInput naming the file.
  static Settings load(const std::string& path = "");
  void save() const;

  std::optional<std::string> get(const std::string& key) const;
  // A numeric setting in [lo, hi]; nullopt when unset. InvalidArgument "setting KEY: expected a number from LO to HI,
  // got 'VALUE'" when it is not one.
  std::optional<double> number(const std::string& key, double lo, double hi) const;
  void set(const std::string& key, const std::string& value);  // throws InvalidArgument if unknown
  bool unset(const std::string& key);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::map<std::string, std::string> values_;
};

// The rules for compute.threads / --threads and compute.memory_budget / --memory-budget, shared by the
// settings (checked when set and when read) and the command-line flags. Both throw
// tmorph::Error(InvalidArgument) naming `what` ("setting compute.threads", "--threads").
inline constexpr unsigned kMaxThreads = 4096;
unsigned parse_thread_count(const std::string& text, const std::string& what);  // 1..kMaxThreads
uint64_t parse_memory_budget(const std::string& text, const std::string& what);  // > 0 bytes, K/M/G/T

// Comma-separated list helper ("vulkan, cuda" -> {"vulkan","cuda"}).
std::vector<std::string> split_list(const std::string& text);

}  // namespace tmorph
