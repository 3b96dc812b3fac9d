// Prepared 4D-STEM products: what a microscopist looks at first (per-position totals, the BF, ABF, ADF,
// HAADF and DF images around the detected bright-field disk, the centre-of-mass sums, the mean and max
// patterns), computed once — a pattern pass (for the disk) then one frame-sums pass for all detectors and
// the centre of mass together — and kept in a SQLite cache, so that reopening a prepared acquisition
// answers in milliseconds.
//
// Key: the acquisition's source signature (every file's name, size, mtime and first bytes; a changed or
// growing acquisition gets a new key), the load request that shapes the frames (scan shape, scan and
// detector regions, bins, bad-pixel masking) and the product contract version. Threads, memory budget,
// output dtype and backend do not change any value, so they are not part of the key.
//
// Where: --cache PATH, else $XDG_CACHE_HOME/tensormorph/stem/products.sqlite (~/.cache when unset).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "stem/products/detector_geometry.h"
#include "stem/products/product_kind.h"
#include "stem/products/products.h"
#include "stem/products/virtual_detector.h"

namespace tmorph {

class SqliteDb;

// The presets prepared, in image order.
inline constexpr const char* kPreparedPresets[] = {"bf", "abf", "adf", "haadf", "df"};

struct PreparedProducts {
  BrightFieldDisk disk;
  // frame sums: totals, com_*, images (one per kPreparedPresets), evaluated_as; pattern_sum / pattern_max.
  ProductResult sums;
  nlohmann::json detectors = nlohmann::json::array();  // per preset: inner_px, outer_px, pixels
  double prepare_seconds = 0;
};

// Whether prepared products answer this request: the presets around the detected disk, com, dpc, idpc and
// mean_dp (`kind` is the product itself, or what fft transforms); a given disk (centre or radius) or a custom
// detector (radii, mask file) is always computed. Calibration overrides change only read-outs, not values.
bool served_by_prepared(ProductKind kind, const DiskRequest& disk, const DetectorRequest& detector);

// A prepared preset image described as the computed path describes it: the prepared disk (source "detected
// (prepared)"), the preset's detector report (annulus_json, with "name"; mrad read-outs through the same
// angular-pixel-size rule, from the prepared disk's radius) and its index in kPreparedPresets.
// Throws InvalidArgument for a kind that is not a preset.
struct PreparedImage {
  ResolvedDisk disk;
  nlohmann::json detector;
  size_t index = 0;
};
PreparedImage prepared_image(const PreparedProducts& p, ProductKind kind, const Acquisition& acq, const LoadRequest& load,
                             const Override& semiangle_mrad, const Override& mrad_per_px);

std::string product_cache_key(const Acquisition& acq, const LoadRequest& req);
std::string default_product_cache_path();

// Runs both passes. Throws what compute_products and detect_bright_field_disk throw.
PreparedProducts prepare_products(const Acquisition& acq, const LoadRequest& load, const Planner& planner);

class ProductCache {
 public:
  // Opens or creates the cache database. Throws Error(Io) when it cannot be opened, BadInput when the
  // file is not a product cache.
  explicit ProductCache(const std::string& path);
  ~ProductCache();
  ProductCache(const ProductCache&) = delete;
  ProductCache& operator=(const ProductCache&) = delete;

  const std::string& path() const { return path_; }
  // nullopt when nothing is stored under key. Throws BadInput naming the database for a damaged entry.
  std::optional<PreparedProducts> load(const std::string& key) const;
  // Every entry's key, report (null when it is not JSON) and creation time (Unix seconds), in key order.
  struct Entry {
    std::string key;
    nlohmann::json report;
    int64_t created_at = 0;
  };
  std::vector<Entry> entries() const;
  void store(const std::string& key, const PreparedProducts& p);

 private:
  std::string path_;
  std::unique_ptr<SqliteDb> db_;
};

// What every face does with the cache (cache_path empty: default_product_cache_path()).
// lookup_prepared: the prepared products of this acquisition and request when the cache holds them, with
// report["cache"] = {hit, database[, prepare_seconds][, warning]}. A default cache that does not exist yet is
// a miss; a cache that cannot be opened is a miss with a warning (the product is then computed); a damaged
// entry throws BadInput.
std::optional<PreparedProducts> lookup_prepared(const std::string& cache_path, const Acquisition& acq, const LoadRequest& load,
                                                nlohmann::json& report);
// find_prepared: the cache as a page shows it for this acquisition and load request — never created, never a throw.
// status: {database, exists, hit, why (when no entry answers), entry {key, created_at (Unix s), created (UTC,
// ISO 8601), prepare_seconds, master, signature, scan_shape, frame_shape, positions, disk, detectors, products
// (the names the entry answers: bf abf adf haadf df com dpc idpc mean-dp, the max pattern as mean-dp max)} when
// one does, others [{key, created_at, created, why}]: the entries prepared from the same master file under
// another key, each with why it is not used (the files changed since: stale; another contract; another load
// request)}. products: the entry when it answers. A damaged entry, or a cache that cannot be opened, answers no
// hit with the error as why.
struct PreparedLookup {
  nlohmann::json status;
  std::optional<PreparedProducts> products;
};
PreparedLookup find_prepared(const std::string& cache_path, const Acquisition& acq, const LoadRequest& load);
// prepare_and_store: prepare_products, stored under the acquisition's key; returns the report `stem prepare
// --json` prints: {database, key, scan_shape, frame_shape, disk, detectors, seconds, placement}.
nlohmann::json prepare_and_store(const std::string& cache_path, const Acquisition& acq, const LoadRequest& load,
                                 const Planner& planner);

}  // namespace tmorph
