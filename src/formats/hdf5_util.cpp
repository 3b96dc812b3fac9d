#include "formats/hdf5_util.h"

#include "core/utf8.h"
#include "core/path_kind.h"
#include "tensormorph/error.h"

namespace tmorph::h5 {

namespace {
std::recursive_mutex& hdf5_mutex() {
  static std::recursive_mutex mutex;
  return mutex;
}
}  // namespace

Lock::Lock() : lock_(hdf5_mutex()) {
  std::fegetenv(&env_);
  static const bool quiet = [] {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    return true;
  }();
  (void)quiet;
}

Lock::~Lock() { std::fesetenv(&env_); }

Lock lock() { return Lock(); }

void Handle::reset() {
  if (id_ >= 0 && close_) close_(id_);
  id_ = H5I_INVALID_HID;
}

namespace {
herr_t innermost(unsigned n, const H5E_error2_t* err, void* data) {
  if (n == 0 && err->desc) *static_cast<std::string*>(data) = err->desc;
  return 0;
}
}  // namespace

std::string last_error() {
  std::string text;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, innermost, &text);
  return text;
}

Handle open_file(const std::string& path) {
  require_regular_file(path);  // H5Fopen would wait forever on a FIFO
  Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  H5Pset_file_locking(fapl.get(), false, true);
  Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get()), H5Fclose);
  if (!file.valid()) {
    const std::string why = last_error();
    throw Error(ErrorKind::Io, path + ": cannot open as HDF5" + (why.empty() ? std::string() : ": " + why));
  }
  return file;
}

bool exists(hid_t loc, const std::string& path_in) {
  const std::string path = path_in.substr(path_in.find_first_not_of('/') == std::string::npos ? path_in.size() : path_in.find_first_not_of('/'));
  if (path.empty()) return false;
  size_t start = 0;
  while (true) {
    const size_t slash = path.find('/', start);
    const std::string prefix = path.substr(0, slash);
    if (H5Lexists(loc, prefix.c_str(), H5P_DEFAULT) <= 0) return false;
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  return H5Oexists_by_name(loc, path.c_str(), H5P_DEFAULT) > 0;
}

Handle open_dataset(hid_t loc, const std::string& path, uint64_t chunk_cache_bytes) {
  if (!exists(loc, path)) return {};
  if (chunk_cache_bytes == 0) return Handle(H5Dopen2(loc, path.c_str(), H5P_DEFAULT), H5Dclose);
  Handle dapl(H5Pcreate(H5P_DATASET_ACCESS), H5Pclose);
  H5Pset_chunk_cache(dapl.get(), 12421, chunk_cache_bytes, 1.0);  // 12421: a prime, HDF5's advice for the slot count
  return Handle(H5Dopen2(loc, path.c_str(), dapl.get()), H5Dclose);
}

Handle open_group(hid_t loc, const std::string& path) {
  if (!exists(loc, path)) return {};
  return Handle(H5Gopen2(loc, path.c_str(), H5P_DEFAULT), H5Gclose);
}

std::optional<Scalar> read_scalar(hid_t dataset) {
  Handle space(H5Dget_space(dataset), H5Sclose);
  if (!space.valid() || H5Sget_simple_extent_npoints(space.get()) != 1) return std::nullopt;
  Handle type(H5Dget_type(dataset), H5Tclose);
  Scalar out;
  switch (H5Tget_class(type.get())) {
    case H5T_INTEGER: {
      if (H5Tget_sign(type.get()) == H5T_SGN_NONE) {
        unsigned long long v = 0;
        if (H5Dread(dataset, H5T_NATIVE_ULLONG, H5S_ALL, H5S_ALL, H5P_DEFAULT, &v) < 0) return std::nullopt;
        out.value = static_cast<uint64_t>(v);
      } else {
        long long v = 0;
        if (H5Dread(dataset, H5T_NATIVE_LLONG, H5S_ALL, H5S_ALL, H5P_DEFAULT, &v) < 0) return std::nullopt;
        out.value = static_cast<int64_t>(v);
      }
      break;
    }
    case H5T_FLOAT: {
      double v = 0;
      if (H5Dread(dataset, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, &v) < 0) return std::nullopt;
      out.value = v;
      break;
    }
    case H5T_STRING: {
      if (H5Tis_variable_str(type.get()) > 0) {
        Handle mem(H5Tcopy(H5T_C_S1), H5Tclose);
        H5Tset_size(mem.get(), H5T_VARIABLE);
        H5Tset_cset(mem.get(), H5Tget_cset(type.get()));
        char* s = nullptr;
        if (H5Dread(dataset, mem.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, &s) < 0 || !s) return std::nullopt;
        out.value = escape_invalid_utf8(s);
        H5free_memory(s);
      } else {
        const size_t n = H5Tget_size(type.get());
        if (n == 0 || n > (1 << 16)) return std::nullopt;
        // One byte more than the file's size: a NULLTERM memory type of size n keeps only n-1 characters,
        // and a NULLPAD or SPACEPAD string may use all n.
        std::string s(n + 1, '\0');
        Handle mem(H5Tcopy(H5T_C_S1), H5Tclose);
        H5Tset_size(mem.get(), n + 1);
        if (H5Dread(dataset, mem.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, s.data()) < 0) return std::nullopt;
        s.resize(s.find('\0') == std::string::npos ? s.size() : s.find('\0'));
        out.value = escape_invalid_utf8(s);
      }
      break;
    }
    default: return std::nullopt;
  }
  if (auto units = read_string_attribute(dataset, "units")) out.units = *units;
  return out;
}

std::optional<std::string> read_string_attribute(hid_t object, const std::string& name) {
  if (H5Aexists(object, name.c_str()) <= 0) return std::nullopt;
  Handle attr(H5Aopen(object, name.c_str(), H5P_DEFAULT), H5Aclose);
  Handle atype(H5Aget_type(attr.get()), H5Tclose);
  Handle aspace(H5Aget_space(attr.get()), H5Sclose);
  // One string only: H5Aread writes every element, and the buffers below hold one.
  if (H5Tget_class(atype.get()) != H5T_STRING || !aspace.valid() || H5Sget_simple_extent_npoints(aspace.get()) != 1) return std::nullopt;
  if (H5Tis_variable_str(atype.get()) > 0) {
    char* s = nullptr;
    Handle mem(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(mem.get(), H5T_VARIABLE);
    H5Tset_cset(mem.get(), H5Tget_cset(atype.get()));  // HDF5 converts no string between ASCII and UTF-8
    if (H5Aread(attr.get(), mem.get(), &s) < 0 || !s) return std::nullopt;
    std::string out = escape_invalid_utf8(s);
    H5free_memory(s);
    return out;
  }
  const size_t n = H5Tget_size(atype.get());
  std::string s(n, '\0');
  if (n == 0 || n >= (1 << 12) || H5Aread(attr.get(), atype.get(), s.data()) < 0) return std::nullopt;
  return escape_invalid_utf8(s.substr(0, s.find('\0')));
}

std::optional<int64_t> read_int_attribute(hid_t object, const std::string& name) {
  if (H5Aexists(object, name.c_str()) <= 0) return std::nullopt;
  Handle attr(H5Aopen(object, name.c_str(), H5P_DEFAULT), H5Aclose);
  Handle type(H5Aget_type(attr.get()), H5Tclose);
  Handle space(H5Aget_space(attr.get()), H5Sclose);
  if (H5Tget_class(type.get()) != H5T_INTEGER || H5Sget_simple_extent_npoints(space.get()) != 1) return std::nullopt;
  long long v = 0;
  if (H5Aread(attr.get(), H5T_NATIVE_LLONG, &v) < 0) return std::nullopt;
  return static_cast<int64_t>(v);
}

std::vector<hsize_t> shape(hid_t dataset, const std::string& what) {
  Handle space(H5Dget_space(dataset), H5Sclose);
  const int rank = space.valid() ? H5Sget_simple_extent_ndims(space.get()) : -1;
  if (rank < 0) throw Error(ErrorKind::BadInput, what + ": dataspace is not simple");
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  return dims;
}

namespace {

struct ScalarVisit {
  std::string skip_prefix;
  nlohmann::json* out;
};

// H5Lvisit callback: records every dataset with one element (hard links only; those under the skipped prefix
// are left out). `name` is the path relative to the file's root group.
herr_t collect_scalar(hid_t root, const char* name, const H5L_info_t* info, void* data) {
  const auto& visit = *static_cast<ScalarVisit*>(data);
  const std::string path = name;
  if (info->type != H5L_TYPE_HARD || (!visit.skip_prefix.empty() && path.rfind(visit.skip_prefix, 0) == 0)) return 0;
  H5O_info_t oinfo;
  if (H5Oget_info_by_name2(root, name, &oinfo, H5O_INFO_BASIC, H5P_DEFAULT) < 0 || oinfo.type != H5O_TYPE_DATASET) return 0;
  Handle ds(H5Dopen2(root, name, H5P_DEFAULT), H5Dclose);
  if (!ds.valid()) return 0;
  if (auto s = read_scalar(ds.get())) {
    nlohmann::json v = {{"value", s->value}};
    if (!s->units.empty()) v["units"] = s->units;
    (*visit.out)[escape_invalid_utf8(path)] = v;
  }
  return 0;
}

}  // namespace

void collect_scalars(hid_t file, const std::string& skip_prefix, nlohmann::json& out) {
  ScalarVisit visit{skip_prefix, &out};
  H5Lvisit(file, H5_INDEX_NAME, H5_ITER_INC, collect_scalar, &visit);
}

}  // namespace tmorph::h5
