// Thin RAII and error helpers over the HDF5 C library (Debian's serial build, which is not
// thread-safe: every HDF5 call in Tensormorph holds hdf5_lock()). Compressed frame data is never read
// through HDF5 on the fast path, only located (chunk offsets), so the lock is not held while decoding.
#pragma once

#include <hdf5.h>

#include <cfenv>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tmorph::h5 {

// The process-wide HDF5 lock, which also guards the floating-point environment: HDF5 loads filter
// plugins (dlopen) inside its calls, and a plugin built with -ffast-math switches on flush-to-zero and
// denormals-are-zero for the whole process when it loads, which would silently change every later
// statistic of subnormal values. The environment seen when the lock is taken is restored when it is
// released. Also turns HDF5's automatic error printing off on first use.
class Lock {
 public:
  Lock();
  ~Lock();
  Lock(const Lock&) = delete;
  Lock& operator=(const Lock&) = delete;

 private:
  std::unique_lock<std::recursive_mutex> lock_;
  fenv_t env_;
};
Lock lock();

// Owns one hid_t and closes it with the matching H5?close.
class Handle {
 public:
  Handle() = default;
  Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  ~Handle() { reset(); }
  Handle(Handle&& o) noexcept : id_(o.id_), close_(o.close_) { o.id_ = H5I_INVALID_HID; }
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) reset(), id_ = o.id_, close_ = o.close_, o.id_ = H5I_INVALID_HID;
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  void reset();

 private:
  hid_t id_ = H5I_INVALID_HID;
  herr_t (*close_)(hid_t) = nullptr;
};

// The innermost message of HDF5's current error stack ("" when empty), for error texts.
std::string last_error();

// Opens a file read-only without HDF5 file locking (an acquisition may still be being written).
// Throws Error(Io) when it cannot be opened, naming the path and HDF5's reason.
Handle open_file(const std::string& path);

// Whether every component of `path` (e.g. "entry/data/data") exists below loc, without following
// a dangling external link into an error.
bool exists(hid_t loc, const std::string& path);

// Opens a dataset / group; nullopt-like invalid Handle when absent. chunk_cache_bytes (dataset): the size of
// its chunk cache when not 0 (HDF5's default is 1 MiB), so that a chunk holding many frames, read one frame at a
// time, is decompressed once.
Handle open_dataset(hid_t loc, const std::string& path, uint64_t chunk_cache_bytes = 0);
Handle open_group(hid_t loc, const std::string& path);

// The value of a dataset with at most one element (numeric or string), or nullopt for anything
// larger or of another class. Units come from its "units" attribute when it is one string. Strings are
// made UTF-8 (escape_invalid_utf8, core/utf8.h: a file may say ASCII and hold Latin-1, and JSON needs UTF-8).
struct Scalar {
  nlohmann::json value;
  std::string units;
};
std::optional<Scalar> read_scalar(hid_t dataset);

// A string attribute of an object (one string, fixed or variable length, under 4 KiB; invalid UTF-8 escaped), or
// nullopt when absent or of another kind.
std::optional<std::string> read_string_attribute(hid_t object, const std::string& name);
// An integer attribute of an object, or nullopt when absent or not an integer scalar.
std::optional<int64_t> read_int_attribute(hid_t object, const std::string& name);

// The dataset's extent (throws BadInput naming `what` when it is not a simple dataspace).
std::vector<hsize_t> shape(hid_t dataset, const std::string& what);

// Adds every dataset of one element in the file (hard links; none whose path starts with skip_prefix, when not
// empty) to `out` as path (relative to the root, invalid UTF-8 escaped) -> {"value", "units" when it has a units
// string attribute}.
void collect_scalars(hid_t file, const std::string& skip_prefix, nlohmann::json& out);

}  // namespace tmorph::h5
