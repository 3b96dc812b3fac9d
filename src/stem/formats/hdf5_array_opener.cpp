// 4D-STEM arrays in HDF5 files other than Dectris's (docs/stem.md, "HDF5 arrays: py4DSTEM / EMD and any
// writer"): an EMD array group (EMD 1.0 `emd_group_type = "array"`, as emdfile and py4DSTEM >= 0.14 write it;
// EMD 0.2 `emd_group_type = 1`, as py4DSTEM 0.x and the Berkeley EMD writers do) holding a dataset `data` of
// shape (Rr, Rc, Kr, Kc), found by its attributes; or any dataset the user names as FILE:/path/to/dataset,
// (Rr, Rc, Kr, Kc) or (n, Kr, Kc). Frames are row-major over the scan: frame r·Rc + c is data[r, c].
#include <filesystem>
#include <optional>

#include "core/path_kind.h"
#include "formats/hdf5_frames.h"
#include "formats/hdf5_util.h"
#include "stem/formats/acquisition_openers.h"
#include "stem/formats/plain_files.h"
#include "tensormorph/error.h"

namespace tmorph {

namespace fs = std::filesystem;

namespace {

bool has_hdf5_extension(const std::string& name) {
  for (const char* ext : {".h5", ".hdf5", ".hdf", ".emd", ".nxs"})
    if (has_extension(name, ext)) return true;
  return false;
}

// FILE:/path/to/dataset, split at the first ":/" whose left side names an HDF5 file; nullopt when the path
// names no dataset.
std::optional<std::pair<std::string, std::string>> split_dataset_path(const std::string& path) {
  for (size_t at = path.find(":/"); at != std::string::npos; at = path.find(":/", at + 1))
    if (has_hdf5_extension(path.substr(0, at))) return std::make_pair(path.substr(0, at), path.substr(at + 1));
  return std::nullopt;
}

bool claims_hdf5_array(const std::string& path) {
  if (split_dataset_path(path)) return true;
  return has_hdf5_extension(path) && path_kind(path) != PathKind::Directory;
}

// Whether the group at `path` is an EMD array group (EMD 1.0 "array", or EMD 0.2's 1).
bool is_emd_array(hid_t file, const std::string& path) {
  h5::Handle group = h5::open_group(file, path);
  if (!group.valid()) return false;
  if (auto s = h5::read_string_attribute(group.get(), "emd_group_type")) return *s == "array";
  const auto n = h5::read_int_attribute(group.get(), "emd_group_type");
  return n && *n == 1;
}

struct Candidates {
  hid_t file;
  std::vector<std::string> arrays;  // "group/data" of every EMD array group with a 3-D or 4-D data dataset
};

herr_t visit_group(hid_t, const char* name, const H5O_info_t* info, void* data) {
  auto& c = *static_cast<Candidates*>(data);
  if (info->type != H5O_TYPE_GROUP || std::string(name) == "." || !is_emd_array(c.file, name)) return 0;
  const std::string dataset = std::string(name) + "/data";
  h5::Handle ds = h5::open_dataset(c.file, dataset);
  if (!ds.valid()) return 0;
  const auto dims = h5::shape(ds.get(), dataset);
  if (dims.size() == 4) c.arrays.push_back(dataset);
  return 0;
}

// The EMD dims of an array group as metadata: dimN/{name, units, step} for each axis, and a scan step (scan axes
// 1 and 2 with equal steps in a length unit) and a detector angle per pixel (axes 3 and 4 equal, in mrad) under
// the names the calibration reads (`…/scan_step`, `…/detector_angle_per_pixel`).
void read_emd_dims(hid_t file, const std::string& group, nlohmann::json& meta) {
  std::optional<double> step[5];
  std::string units[5];
  for (int axis = 1; axis <= 4; ++axis) {
    const std::string path = group + "/dim" + std::to_string(axis);
    h5::Handle ds = h5::open_dataset(file, path);
    if (!ds.valid()) continue;
    const auto dims = h5::shape(ds.get(), path);
    if (auto name = h5::read_string_attribute(ds.get(), "name")) meta[path + "/name"] = {{"value", *name}};
    if (auto u = h5::read_string_attribute(ds.get(), "units")) units[axis] = *u;
    if (dims.size() != 1 || dims[0] < 2) continue;
    double v[2] = {0, 0};
    h5::Handle space(H5Dget_space(ds.get()), H5Sclose);
    const hsize_t start[1] = {0}, count[1] = {2};
    H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, start, nullptr, count, nullptr);
    h5::Handle mem(H5Screate_simple(1, count, nullptr), H5Sclose);
    if (H5Dread(ds.get(), H5T_NATIVE_DOUBLE, mem.get(), space.get(), H5P_DEFAULT, v) < 0) continue;
    step[axis] = v[1] - v[0];
    meta[path + "/step"] = {{"value", *step[axis]}, {"units", units[axis]}};
  }
  if (step[1] && step[2] && *step[1] == *step[2] && units[1] == units[2] && !units[1].empty())
    meta[group + "/scan_step"] = {{"value", *step[1]}, {"units", units[1]}};
  if (step[3] && step[4] && *step[3] == *step[4] && units[3] == units[4] && !units[3].empty())
    meta[group + "/detector_angle_per_pixel"] = {{"value", *step[3]}, {"units", units[3]}};
}

Acquisition open_hdf5_array(const std::string& path) {
  std::string file_path = path, dataset;
  if (auto split = split_dataset_path(path)) file_path = split->first, dataset = split->second;
  require_regular_file(file_path);
  Acquisition a;
  a.format = "hdf5-array";
  a.master = fs::absolute(file_path).lexically_normal().string();
  auto guard = h5::lock();
  h5::Handle file = h5::open_file(a.master);
  std::string group;  // the EMD array group, when found by its attributes
  if (dataset.empty()) {
    Candidates c{file.get(), {}};
    H5Ovisit2(file.get(), H5_INDEX_NAME, H5_ITER_INC, visit_group, &c, H5O_INFO_BASIC);
    if (c.arrays.empty())
      throw Error(ErrorKind::BadInput, a.master + ": no EMD array group (emd_group_type \"array\" or 1) with a 4-D dataset `data`, "
                                                  "and no Dectris entry/data: name the frames' dataset as " + file_path + ":/path/to/dataset");
    if (c.arrays.size() > 1) {
      std::string list;
      for (const auto& d : c.arrays) list += "\n  " + file_path + ":/" + d;
      throw Error(ErrorKind::InvalidArgument, a.master + ": " + std::to_string(c.arrays.size()) + " 4-D EMD arrays here; name one:" + list);
    }
    dataset = "/" + c.arrays[0];
    group = dataset.substr(0, dataset.size() - std::string("/data").size());
    a.layout = "emd-array";
  } else {
    a.layout = "dataset";
  }
  DataPart part;
  part.link = dataset;
  part.file = a.master;
  part.dataset = dataset;
  h5::Handle ds = h5::open_dataset(file.get(), dataset);
  if (!ds.valid()) throw Error(ErrorKind::BadInput, a.master + ": no dataset " + dataset);
  FramePixels pixels;
  describe_frames_dataset(ds.get(), part, pixels, true);
  if (!part.present) throw Error(ErrorKind::BadInput, part.problem);
  a.dtype = pixels.dtype, a.element_size = pixels.element_size;
  a.detector_rows = pixels.rows, a.detector_cols = pixels.cols;
  a.frames_present = a.frames_extent = part.frames;
  a.frames_expected = part.frames;
  if (part.scan_cols) {
    a.scan_shape_recorded = std::array<uint64_t, 2>{part.frames / part.scan_cols, part.scan_cols};
    a.scan_shape_path = dataset + " shape";
  }
  h5::collect_scalars(file.get(), dataset.substr(1), a.metadata);
  if (!group.empty()) read_emd_dims(file.get(), group.substr(1), a.metadata);
  a.description = a.layout == "emd-array" ? "EMD array " + group : "HDF5 dataset " + dataset;
  a.parts.push_back(std::move(part));
  a.signature = acquisition_signature({a.master});
  return a;
}

// Every .emd file below the folder (an .h5 may be anything: only the name says EMD without opening each file).
std::vector<std::string> discover_emd(const std::string& folder) { return find_files(folder, ".emd"); }

}  // namespace

extern const AcquisitionOpener kHdf5ArrayOpener{"hdf5-array", claims_hdf5_array, open_hdf5_array, discover_emd, ".emd .hdf"};

}  // namespace tmorph
