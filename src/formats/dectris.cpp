#include "formats/dectris.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>

#include "formats/hdf5_frames.h"
#include "formats/hdf5_util.h"
#include "core/file_identity.h"
#include "core/folder_walk.h"
#include "core/path_kind.h"
#include "tensormorph/error.h"

namespace tmorph {

namespace fs = std::filesystem;


namespace {

// Whether image numbers low..high (a data file's attributes: any int64 a file claims) number exactly `frames` frames,
// without overflowing for any values: high >= low and high - low + 1 == frames, the difference taken in uint64.
bool numbers_span(int64_t low, int64_t high, uint64_t frames) {
  if (high < low) return false;
  const uint64_t difference = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);  // exact: fits in uint64
  return difference != UINT64_MAX && difference + 1 == frames;
}

// The largest pixel mask read (uint32, 256 MiB): over 3x the largest Dectris detector (EIGER2 X 16M,
// 4148 x 4362). HDF5 declares extents without storing them, so a file of a few KB can claim any size.
constexpr uint64_t kMaxMaskPixels = uint64_t{1} << 26;

std::optional<nlohmann::json> meta_value(const nlohmann::json& meta, std::initializer_list<const char*> paths) {
  for (const char* p : paths)
    if (meta.contains(p)) return meta[p]["value"];
  return std::nullopt;
}

std::optional<uint64_t> meta_uint(const nlohmann::json& meta, std::initializer_list<const char*> paths) {
  auto v = meta_value(meta, paths);
  if (!v) return std::nullopt;
  if (v->is_number_unsigned()) return v->get<uint64_t>();
  if (v->is_number_integer() && v->get<int64_t>() >= 0) return static_cast<uint64_t>(v->get<int64_t>());
  if (v->is_number_float() && v->get<double>() >= 0 && v->get<double>() < 1.8e19 && std::floor(v->get<double>()) == v->get<double>())
    return static_cast<uint64_t>(v->get<double>());
  return std::nullopt;
}

std::optional<double> meta_double(const nlohmann::json& meta, std::initializer_list<const char*> paths) {
  auto v = meta_value(meta, paths);
  if (v && v->is_number()) return v->get<double>();
  return std::nullopt;
}

// Fills the dataset facts of `part` from an open dataset (formats/hdf5_frames.h); a Dectris dataset is 3-D.
void describe_dataset(hid_t ds, DataPart& part, DectrisFile& acq, bool first) {
  FramePixels pixels{acq.dtype, acq.element_size, acq.detector_rows, acq.detector_cols};
  describe_frames_dataset(ds, part, pixels, first);
  if (part.present && part.scan_cols != 0) {
    part.present = false, part.frames = 0, part.scan_cols = 0;
    part.problem = part.file + ":" + part.dataset + ": expected shape (frames, rows, cols), found rank 4";
    return;
  }
  if (first && part.present)
    acq.dtype = pixels.dtype, acq.element_size = pixels.element_size, acq.detector_rows = pixels.rows, acq.detector_cols = pixels.cols;
}

std::string compute_signature(const DectrisFile& acq) {
  std::vector<std::string> files = {acq.master};
  for (const auto& p : acq.parts) files.push_back(p.file);
  return acquisition_signature(files);
}

// Reads the pixel mask (uint32, Kr × Kc) when present; a mask of another shape, or of more than
// kMaxMaskPixels, is a problem (and not read).
void read_pixel_mask(hid_t master, DectrisFile& acq) {
  for (const char* p : {"entry/instrument/detector/pixel_mask", "entry/instrument/detector/detectorSpecific/pixel_mask"}) {
    h5::Handle ds = h5::open_dataset(master, p);
    if (!ds.valid()) continue;
    const auto dims = h5::shape(ds.get(), acq.master + ":" + p);
    if (dims.size() != 2 || dims[0] != acq.detector_rows || dims[1] != acq.detector_cols) {
      acq.problems.push_back(acq.master + ":" + p + ": pixel mask shape does not match the " + std::to_string(acq.detector_rows) +
                             "x" + std::to_string(acq.detector_cols) + " detector; not applied");
      acq.value_problems.push_back(acq.problems.back());  // its dead pixels count in every sum
      return;
    }
    if (dims[1] != 0 && dims[0] > kMaxMaskPixels / dims[1]) {
      acq.problems.push_back(acq.master + ":" + p + ": pixel mask of " + std::to_string(dims[0]) + "x" + std::to_string(dims[1]) +
                             " pixels is larger than any detector (at most " + std::to_string(kMaxMaskPixels) +
                             " pixels are read); not applied");
      acq.value_problems.push_back(acq.problems.back());
      return;
    }
    acq.pixel_mask.resize(dims[0] * dims[1]);
    if (H5Dread(ds.get(), H5T_NATIVE_UINT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, acq.pixel_mask.data()) < 0)
      throw Error(ErrorKind::BadInput, acq.master + ":" + p + ": cannot read the pixel mask: " + h5::last_error());
    acq.pixel_mask_path = p;
    return;
  }
}

}  // namespace

std::vector<std::string> discover_masters(const std::string& folder) {
  return find_regular_files(folder, [](const std::string& path) { return path.ends_with("_master.h5"); });
}

bool looks_like_dectris(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    try {
      return !discover_masters(path).empty();
    } catch (const Error&) {  // the folder vanished since it was asked about
      return false;
    }
  }
  std::string ext = fs::path(path).extension().string();
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext == ".h5" || ext == ".hdf5" || ext == ".nxs";
}

DectrisFile open_dectris(const std::string& path_in) {
  std::error_code ec;
  std::string path = path_in;
  if (path_kind(path) == PathKind::Directory) path = only_file_in(path, discover_masters(path), "*_master.h5");
  require_regular_file(path);
  DectrisFile acq;
  acq.master = fs::absolute(path).lexically_normal().string();
  // A data file given directly: use its master when it lies beside it.
  const std::string name = fs::path(acq.master).filename().string();
  const size_t data_pos = name.rfind("_data_");
  bool data_file = false;
  if (data_pos != std::string::npos && name.ends_with(".h5")) {
    const auto master = fs::path(acq.master).parent_path() / (name.substr(0, data_pos) + "_master.h5");
    if (fs::exists(master, ec)) acq.master = master.string();
    else data_file = true;
  }
  auto guard = h5::lock();
  h5::Handle file = h5::open_file(acq.master);
  h5::Handle data_group = h5::open_group(file.get(), "entry/data");
  if (!data_group.valid())
    throw Error(ErrorKind::BadInput, acq.master + ": no group entry/data: not a Dectris/NeXus acquisition");
  // The frame datasets: every link under entry/data named data or data_NNNNNN, in name order.
  std::vector<std::string> links;
  H5Literate(data_group.get(), H5_INDEX_NAME, H5_ITER_INC, nullptr,
             [](hid_t, const char* n, const H5L_info_t*, void* d) -> herr_t {
               const std::string s(n);
               if (s == "data" || s.rfind("data_", 0) == 0) static_cast<std::vector<std::string>*>(d)->push_back(s);
               return 0;
             },
             &links);
  if (links.empty()) throw Error(ErrorKind::BadInput, acq.master + ": entry/data holds no data or data_NNNNNN links");
  std::sort(links.begin(), links.end());
  acq.layout = data_file ? "data-file" : "inline";
  const fs::path dir = fs::path(acq.master).parent_path();
  bool first = true;
  for (const auto& link : links) {
    DataPart part;
    part.link = link;
    H5L_info_t info;
    if (H5Lget_info(data_group.get(), link.c_str(), &info, H5P_DEFAULT) < 0) continue;
    if (info.type == H5L_TYPE_EXTERNAL) {
      acq.layout = "external-links";
      std::vector<char> buf(info.u.val_size);
      const char* target_file = nullptr;
      const char* target_path = nullptr;
      unsigned flags = 0;
      if (H5Lget_val(data_group.get(), link.c_str(), buf.data(), buf.size(), H5P_DEFAULT) < 0 ||
          H5Lunpack_elink_val(buf.data(), buf.size(), &flags, &target_file, &target_path) < 0) {
        part.problem = "entry/data/" + link + ": unreadable external link";
        acq.parts.push_back(part);
        continue;
      }
      const fs::path target = fs::path(target_file).is_absolute() ? fs::path(target_file) : dir / target_file;
      part.file = target.lexically_normal().string();
      part.dataset = target_path;
      if (!fs::exists(part.file, ec)) {
        part.problem = "entry/data/" + link + " links to " + part.file + ", which does not exist";
      } else {
        try {
          h5::Handle df = h5::open_file(part.file);
          h5::Handle ds = h5::open_dataset(df.get(), part.dataset);
          if (!ds.valid()) part.problem = "entry/data/" + link + " points nowhere: " + part.file + " has no " + part.dataset;
          else describe_dataset(ds.get(), part, acq, first);
        } catch (const Error& e) {
          part.problem = e.what();
        }
      }
    } else if (info.type == H5L_TYPE_HARD) {
      part.file = acq.master;
      part.dataset = "entry/data/" + link;
      h5::Handle ds = h5::open_dataset(file.get(), part.dataset);
      if (!ds.valid()) part.problem = acq.master + ": " + part.dataset + " is not a dataset";
      else describe_dataset(ds.get(), part, acq, first);
    } else {
      part.problem = "entry/data/" + link + ": soft or user-defined links are not followed";
    }
    if (part.present) first = false;
    acq.parts.push_back(part);
  }
  // Frame numbering: a part's first frame is image_nr_low - 1 (1-based, the detector's own count) when
  // present, else the frames before it. After a missing part only image_nr_low can place later frames:
  // a part without it is then unusable rather than silently shifted onto the wrong scan positions.
  uint64_t next = 0, present_frames = 0;
  bool gap = false;
  for (auto& p : acq.parts) {
    if (!p.present) {
      acq.problems.push_back(p.problem);
      gap = true;
      continue;
    }
    uint64_t first_frame = next;
    if (p.image_nr_low && *p.image_nr_low >= 1) {
      first_frame = static_cast<uint64_t>(*p.image_nr_low - 1);
      if (!gap && first_frame != next)
        acq.problems.push_back(p.file + ": image_nr_low is " + std::to_string(*p.image_nr_low) + " but " + std::to_string(next) +
                               " frames precede it (a data file is missing or out of order)");
      if (first_frame < next) {
        p.present = false;
        p.problem = p.file + ": its frames (from image_nr_low " + std::to_string(*p.image_nr_low) + ") overlap the previous data file's";
        acq.problems.push_back(p.problem);
        acq.value_problems.push_back(p.problem);  // which of the two files holds the true frames is unknown
        continue;
      }
    } else if (gap) {
      p.present = false;
      p.problem = p.file + ": cannot place its frames: an earlier data file is missing and it has no image_nr_low";
      acq.problems.push_back(p.problem);
      continue;
    }
    p.first_frame = first_frame;
    if (p.image_nr_low && p.image_nr_high && !numbers_span(*p.image_nr_low, *p.image_nr_high, p.frames))
      acq.problems.push_back(p.file + ": image_nr_low..high (" + std::to_string(*p.image_nr_low) + ".." +
                             std::to_string(*p.image_nr_high) + ") disagrees with its " + std::to_string(p.frames) + " frames");
    next = first_frame + p.frames;
    present_frames += p.frames;
  }
  acq.frames_present = present_frames;
  acq.frames_extent = next;
  if (first) acq.problems.push_back(acq.master + ": no data file could be read");

  // Metadata: every small scalar outside entry/data, then the fields Tensormorph uses.
  h5::collect_scalars(file.get(), "entry/data", acq.metadata);
  const auto& m = acq.metadata;
  const auto ntrigger = meta_uint(m, {"entry/instrument/detector/detectorSpecific/ntrigger"});
  const auto nimages = meta_uint(m, {"entry/instrument/detector/detectorSpecific/nimages"});
  if (ntrigger && nimages) acq.frames_expected = *ntrigger * *nimages;
  acq.saturation_value = meta_uint(m, {"entry/instrument/detector/saturation_value",
                                       "entry/instrument/detector/detectorSpecific/saturation_value",
                                       "entry/instrument/detector/detectorSpecific/countrate_correction_count_cutoff"});
  acq.beam_energy_ev = meta_double(m, {"entry/instrument/beam/incident_energy"});
  acq.convergence_semi_angle_mrad = meta_double(m, {"entry/instrument/beam/convergence_semi_angle"});
  if (auto d = meta_value(m, {"entry/instrument/detector/description"}); d && d->is_string()) acq.description = *d;
  const auto scan_rows = meta_uint(m, {"entry/sample/simulation/scan_rows"});
  const auto scan_cols = meta_uint(m, {"entry/sample/simulation/scan_cols"});
  if (scan_rows && scan_cols) {
    acq.scan_shape_recorded = std::array<uint64_t, 2>{*scan_rows, *scan_cols};
    acq.scan_shape_path = "entry/sample/simulation/scan_rows, scan_cols";
  }
  const auto xpix = meta_uint(m, {"entry/instrument/detector/detectorSpecific/x_pixels_in_detector"});
  const auto ypix = meta_uint(m, {"entry/instrument/detector/detectorSpecific/y_pixels_in_detector"});
  if (!first && xpix && ypix && (*xpix != acq.detector_cols || *ypix != acq.detector_rows))
    acq.problems.push_back("detector metadata says " + std::to_string(*ypix) + " rows x " + std::to_string(*xpix) +
                           " cols, the frames are " + std::to_string(acq.detector_rows) + "x" + std::to_string(acq.detector_cols));
  if (acq.frames_expected && acq.frames_present < *acq.frames_expected)
    acq.problems.push_back(std::to_string(acq.frames_present) + " of " + std::to_string(*acq.frames_expected) +
                           " frames present (ntrigger x nimages): the acquisition is incomplete or still being written");
  if (acq.frames_expected && acq.frames_present > *acq.frames_expected)
    acq.problems.push_back(std::to_string(acq.frames_present) + " frames present, more than ntrigger x nimages = " +
                           std::to_string(*acq.frames_expected));
  if (!first) read_pixel_mask(file.get(), acq);
  acq.signature = compute_signature(acq);
  return acq;
}

}  // namespace tmorph
