#include "stem/formats/dectris_writer.h"

#include <cstdio>
#include <filesystem>

#include "formats/bitshuffle_lz4.h"
#include "formats/hdf5_util.h"
#include "tensormorph/error.h"

namespace tmorph {

namespace fs = std::filesystem;

namespace {

constexpr unsigned kBitshuffleFilter = 32008;

[[noreturn]] void fail(const std::string& what) {
  throw Error(ErrorKind::Io, what + ": " + h5::last_error());
}

hid_t file_type(DType t) { return t == DType::U8 ? H5T_STD_U8LE : t == DType::U16 ? H5T_STD_U16LE : H5T_STD_U32LE; }

// Creates the groups along `path` (all but the last component) below loc.
void make_parents(hid_t loc, const std::string& path) {
  for (size_t slash = path.find('/'); slash != std::string::npos; slash = path.find('/', slash + 1)) {
    const std::string g = path.substr(0, slash);
    if (H5Lexists(loc, g.c_str(), H5P_DEFAULT) > 0) continue;
    h5::Handle group(H5Gcreate2(loc, g.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
    if (!group.valid()) fail("cannot create group " + g);
  }
}

void write_string_attribute(hid_t obj, const char* name, const std::string& value) {
  h5::Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(type.get(), std::max<size_t>(value.size(), 1));
  h5::Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  h5::Handle attr(H5Acreate2(obj, name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  H5Awrite(attr.get(), type.get(), value.c_str());
}

void write_scalar(hid_t file, const std::string& path, const nlohmann::json& entry) {
  make_parents(file, path);
  const nlohmann::json& v = entry.contains("value") ? entry["value"] : entry;
  h5::Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  h5::Handle ds;
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    h5::Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(type.get(), std::max<size_t>(s.size(), 1));
    ds = h5::Handle(H5Dcreate2(file, path.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Dclose);
    if (ds.valid()) H5Dwrite(ds.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, s.c_str());
  } else if (v.is_number_unsigned()) {
    const uint32_t x = static_cast<uint32_t>(v.get<uint64_t>());
    ds = h5::Handle(H5Dcreate2(file, path.c_str(), H5T_STD_U32LE, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Dclose);
    if (ds.valid()) H5Dwrite(ds.get(), H5T_NATIVE_UINT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, &x);
  } else if (v.is_number_integer()) {
    const int64_t x = v.get<int64_t>();
    ds = h5::Handle(H5Dcreate2(file, path.c_str(), H5T_STD_I64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Dclose);
    if (ds.valid()) H5Dwrite(ds.get(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, &x);
  } else {
    const double x = v.get<double>();
    ds = h5::Handle(H5Dcreate2(file, path.c_str(), H5T_IEEE_F64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Dclose);
    if (ds.valid()) H5Dwrite(ds.get(), H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, &x);
  }
  if (!ds.valid()) fail("cannot write " + path);
  if (entry.is_object() && entry.contains("units")) write_string_attribute(ds.get(), "units", entry["units"].get<std::string>());
}

template <class T>
void write_2d(hid_t file, const std::string& path, hid_t file_type, hid_t mem_type, uint64_t rows, uint64_t cols, const T* values) {
  make_parents(file, path);
  const hsize_t dims[2] = {rows, cols};
  h5::Handle space(H5Screate_simple(2, dims, nullptr), H5Sclose);
  h5::Handle ds(H5Dcreate2(file, path.c_str(), file_type, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Dclose);
  if (!ds.valid() || H5Dwrite(ds.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values) < 0) fail("cannot write " + path);
}

}  // namespace

struct DectrisWriter::State {
  DectrisWriterOptions options;
  DType dtype;
  uint64_t rows, cols, frames, per_file;
  std::string master;
  h5::Handle master_file;
  struct DataFile {
    h5::Handle file, dataset;
    uint64_t first = 0;
  };
  std::vector<DataFile> files;
  bool finished = false;
};

DectrisWriter::DectrisWriter(const DectrisWriterOptions& options, DType dtype, uint64_t rows, uint64_t cols, uint64_t frames,
                             const DectrisMetadata& metadata)
    : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.options = options;
  s.dtype = dtype;
  s.rows = rows;
  s.cols = cols;
  s.frames = frames;
  s.per_file = options.frames_per_file ? options.frames_per_file : frames;
  if (dtype != DType::U8 && dtype != DType::U16 && dtype != DType::U32)
    throw Error(ErrorKind::InvalidArgument, "Dectris frames are uint8, uint16 or uint32");
  std::error_code ec;
  fs::create_directories(options.folder, ec);
  s.master = (fs::path(options.folder) / (options.prefix + "_master.h5")).string();
  auto guard = h5::lock();
  s.master_file = h5::Handle(H5Fcreate(s.master.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
  if (!s.master_file.valid()) fail("cannot create " + s.master);
  for (auto& [path, entry] : metadata.scalars.items()) write_scalar(s.master_file.get(), path, entry);
  if (!metadata.pixel_mask.empty())
    write_2d(s.master_file.get(), "entry/instrument/detector/detectorSpecific/pixel_mask", H5T_STD_U32LE, H5T_NATIVE_UINT32, rows, cols,
             metadata.pixel_mask.data());
  for (const auto& image : metadata.images)
    write_2d(s.master_file.get(), image.path, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, image.rows, image.cols, image.values.data());
  make_parents(s.master_file.get(), "entry/data/x");

  const auto create_dataset = [&](hid_t loc, const char* path, uint64_t n) {
    const hsize_t dims[3] = {n, rows, cols}, chunk[3] = {1, rows, cols};
    h5::Handle space(H5Screate_simple(3, dims, nullptr), H5Sclose);
    h5::Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
    H5Pset_chunk(dcpl.get(), 3, chunk);
    if (options.encoder != "none") {
      // The client options (block size, compression); the filter's set_local prepends version and element size.
      const unsigned cd[2] = {options.block_elements, 2};
      if (H5Pset_filter(dcpl.get(), kBitshuffleFilter, H5Z_FLAG_MANDATORY, 2, cd) < 0) fail("cannot add the bitshuffle filter");
    }
    h5::Handle ds(H5Dcreate2(loc, path, file_type(dtype), space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT), H5Dclose);
    if (!ds.valid()) fail(std::string("cannot create ") + path + " (is the bitshuffle HDF5 plugin installed?)");
    return ds;
  };
  if (options.inline_data) {
    State::DataFile f;
    f.dataset = create_dataset(s.master_file.get(), "entry/data/data", frames);
    s.files.push_back(std::move(f));
    return;
  }
  for (uint64_t first = 0, k = 1; first < frames; first += s.per_file, ++k) {
    const uint64_t n = std::min(s.per_file, frames - first);
    char name[64];
    std::snprintf(name, sizeof name, "%s_data_%06llu.h5", options.prefix.c_str(), static_cast<unsigned long long>(k));
    char link[32];
    std::snprintf(link, sizeof link, "entry/data/data_%06llu", static_cast<unsigned long long>(k));
    if (H5Lcreate_external(name, "/entry/data/data", s.master_file.get(), link, H5P_DEFAULT, H5P_DEFAULT) < 0) fail("cannot link " + std::string(link));
    State::DataFile f;
    f.first = first;
    const std::string path = (fs::path(options.folder) / name).string();
    f.file = h5::Handle(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
    if (!f.file.valid()) fail("cannot create " + path);
    make_parents(f.file.get(), "entry/data/data");
    f.dataset = create_dataset(f.file.get(), "entry/data/data", n);
    for (const char* attr : {"image_nr_low", "image_nr_high"}) {
      const int32_t v = static_cast<int32_t>(attr[9] == 'l' ? first + 1 : first + n);
      h5::Handle space(H5Screate(H5S_SCALAR), H5Sclose);
      h5::Handle a(H5Acreate2(f.dataset.get(), attr, H5T_STD_I32LE, space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
      H5Awrite(a.get(), H5T_NATIVE_INT32, &v);
    }
    s.files.push_back(std::move(f));
  }
  H5Fflush(s.master_file.get(), H5F_SCOPE_LOCAL);
}

DectrisWriter::~DectrisWriter() {
  try {
    finish();
  } catch (...) {
  }
}

std::string DectrisWriter::master_path() const { return state_->master; }

void DectrisWriter::write_frame(uint64_t index, const uint8_t* pixels) {
  State& s = *state_;
  const uint64_t elements = s.rows * s.cols;
  const uint32_t es = static_cast<uint32_t>(dtype_size(s.dtype));
  std::vector<uint8_t> chunk;
  if (s.options.encoder == "tensormorph") chunk = encode_bitshuffle_lz4_chunk(pixels, elements, es, s.options.block_elements);
  auto guard = h5::lock();
  const State::DataFile& f = s.files[s.options.inline_data ? 0 : index / s.per_file];
  const hsize_t offset[3] = {index - f.first, 0, 0};
  if (s.options.encoder == "tensormorph") {
    if (H5Dwrite_chunk(f.dataset.get(), H5P_DEFAULT, 0, offset, chunk.size(), chunk.data()) < 0) fail("cannot write frame " + std::to_string(index));
    return;
  }
  const hsize_t count[3] = {1, s.rows, s.cols};
  h5::Handle file_space(H5Dget_space(f.dataset.get()), H5Sclose);
  H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, offset, nullptr, count, nullptr);
  h5::Handle mem_space(H5Screate_simple(3, count, nullptr), H5Sclose);
  const hid_t mem = es == 1 ? H5T_NATIVE_UINT8 : es == 2 ? H5T_NATIVE_UINT16 : H5T_NATIVE_UINT32;
  if (H5Dwrite(f.dataset.get(), mem, mem_space.get(), file_space.get(), H5P_DEFAULT, pixels) < 0) fail("cannot write frame " + std::to_string(index));
}

void DectrisWriter::finish() {
  if (!state_ || state_->finished) return;
  auto guard = h5::lock();
  state_->files.clear();
  state_->master_file.reset();
  state_->finished = true;
}

}  // namespace tmorph
