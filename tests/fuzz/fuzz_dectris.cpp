// libFuzzer harness, structure-aware: the Dectris acquisition reader (src/formats/dectris.h) through
// open_acquisition (src/stem/acquisition.h, its first opener) on HDF5 files whose content the fuzz input chooses.
//
// The input is not a file: it drives a writer (libFuzzer's FuzzedDataProvider) that decides which groups,
// datasets, links and attributes exist, their types (integers of every width and both byte orders,
// floats, fixed and variable-length strings with bytes that are not UTF-8, compounds), ranks and extents
// (up to 2^31 per dimension: declared, never allocated), layouts and filter pipelines, and the values of
// the small ones. The harness writes a master (and up to two data files behind external links) through
// HDF5's in-memory core driver into its scratch folder, then reads them as `tensormorph stem inspect` does:
// open_acquisition on the master, the folder or a data file, then every JSON the CLI prints from it.
// libhdf5's own parser is never given mutated bytes: every file it opens was written by libhdf5. The input may
// also add an EMD / py4DSTEM array group, which the next row of the openers' table (hdf5-array) reads.
#include <fuzzer/FuzzedDataProvider.h>
#include <hdf5.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "stem/acquisition.h"
#include "fuzz_support.h"
#include "tensormorph/error.h"

namespace {

// Closes an HDF5 id at the end of a scope.
struct Id {
  hid_t id;
  herr_t (*close)(hid_t);
  Id(hid_t i, herr_t (*c)(hid_t)) : id(i), close(c) {}
  ~Id() {
    if (id >= 0) close(id);
  }
  Id(const Id&) = delete;
  Id& operator=(const Id&) = delete;
  operator hid_t() const { return id; }
  bool ok() const { return id >= 0; }
};

const char* const kMetadataPaths[] = {
    "entry/instrument/detector/detectorSpecific/ntrigger",
    "entry/instrument/detector/detectorSpecific/nimages",
    "entry/instrument/detector/detectorSpecific/x_pixels_in_detector",
    "entry/instrument/detector/detectorSpecific/y_pixels_in_detector",
    "entry/instrument/detector/detectorSpecific/saturation_value",
    "entry/instrument/detector/detectorSpecific/countrate_correction_count_cutoff",
    "entry/instrument/detector/saturation_value",
    "entry/instrument/detector/description",
    "entry/instrument/beam/incident_energy",
    "entry/instrument/beam/convergence_semi_angle",
    "entry/sample/simulation/scan_rows",
    "entry/sample/simulation/scan_cols",
    "entry/instrument/detector/pixel_mask",
    "entry/instrument/detector/detectorSpecific/pixel_mask",
    "entry/instrument/detector/x_pixel_size",
    "entry/data/notes",
    "other/deep/x",
};

const char* const kFrameLinks[] = {"data", "data_000001", "data_000002", "data_000003", "data_", "datum"};

const uint64_t kDims[] = {0, 1, 2, 3, 4, 5, 8, 16, 64, 4096, uint64_t{1} << 16, uint64_t{1} << 31};

class Writer {
 public:
  explicit Writer(FuzzedDataProvider& in) : in_(in) {}

  // A file type chosen by the input (the caller closes it).
  hid_t type() {
    switch (in_.ConsumeIntegralInRange(0, 15)) {
      case 0: return H5Tcopy(H5T_STD_U8LE);
      case 1: return H5Tcopy(H5T_STD_U16LE);
      case 2: return H5Tcopy(H5T_STD_U32LE);
      case 3: return H5Tcopy(H5T_STD_U64LE);
      case 4: return H5Tcopy(H5T_STD_I8LE);
      case 5: return H5Tcopy(H5T_STD_I16LE);
      case 6: return H5Tcopy(H5T_STD_I32LE);
      case 7: return H5Tcopy(H5T_STD_I64LE);
      case 8: return H5Tcopy(H5T_STD_U16BE);
      case 9: return H5Tcopy(H5T_IEEE_F32LE);
      case 10: return H5Tcopy(H5T_IEEE_F64LE);
      case 11: return H5Tcopy(H5T_IEEE_F64BE);
      case 12: case 13: {
        hid_t t = H5Tcopy(H5T_C_S1);
        H5Tset_size(t, in_.ConsumeIntegralInRange<size_t>(1, 48));
        H5Tset_strpad(t, in_.ConsumeBool() ? H5T_STR_NULLTERM : H5T_STR_NULLPAD);
        if (in_.ConsumeBool()) H5Tset_cset(t, H5T_CSET_UTF8);
        return t;
      }
      case 14: {
        hid_t t = H5Tcopy(H5T_C_S1);
        H5Tset_size(t, H5T_VARIABLE);
        if (in_.ConsumeBool()) H5Tset_cset(t, H5T_CSET_UTF8);
        return t;
      }
      default: {
        hid_t t = H5Tcreate(H5T_COMPOUND, 12);
        H5Tinsert(t, "a", 0, H5T_STD_I32LE);
        H5Tinsert(t, "b", 4, H5T_IEEE_F64LE);
        return t;
      }
    }
  }

  // A dataspace: null, scalar, or simple of rank 0-4 (`rank` forces the rank of a simple one).
  hid_t space(std::optional<int> rank = std::nullopt, bool chunked = false) {
    const int kind = rank ? 2 : in_.ConsumeIntegralInRange(0, 5);
    if (kind == 0) return H5Screate(H5S_NULL);
    if (kind == 1) return H5Screate(H5S_SCALAR);
    const int r = rank ? *rank : in_.ConsumeIntegralInRange(1, 4);
    std::vector<hsize_t> dims(static_cast<size_t>(r)), max(static_cast<size_t>(r));
    for (int i = 0; i < r; ++i) {
      dims[i] = in_.ConsumeBool() ? in_.ConsumeIntegralInRange<hsize_t>(0, 6) : in_.PickValueInArray(kDims);
      max[i] = chunked && in_.ConsumeBool() ? H5S_UNLIMITED : dims[i];
    }
    return H5Screate_simple(r, dims.data(), max.data());
  }

  // Writes raw input bytes (or strings, for variable-length strings) into a small dataset or attribute.
  void fill(hid_t obj, hid_t type, hid_t space, bool attribute) {
    const hssize_t n = H5Sget_select_npoints(space);
    if (n <= 0 || n > 4096 || H5Sget_simple_extent_type(space) == H5S_NULL) return;
    const auto count = static_cast<size_t>(n);
    if (H5Tis_variable_str(type) > 0) {
      std::vector<std::string> text(count);
      std::vector<const char*> ptrs(count);
      for (size_t i = 0; i < count; ++i) text[i] = in_.ConsumeRandomLengthString(64), ptrs[i] = text[i].c_str();
      attribute ? H5Awrite(obj, type, ptrs.data()) : H5Dwrite(obj, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, ptrs.data());
      return;
    }
    std::vector<uint8_t> bytes = in_.ConsumeBytes<uint8_t>(count * H5Tget_size(type));
    bytes.resize(count * H5Tget_size(type));
    attribute ? H5Awrite(obj, type, bytes.data()) : H5Dwrite(obj, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes.data());
  }

  void attribute(hid_t obj, const char* name) {
    Id t(type(), H5Tclose);
    Id s(space(), H5Sclose);
    Id a(H5Acreate2(obj, name, t, s, H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
    if (a.ok() && in_.ConsumeBool()) fill(a, t, s, true);
  }

  // A dataset at `path` (intermediate groups created). Frames datasets are mostly rank 3 and chunked.
  // `forced_rank`: a simple dataspace of that rank (an EMD array's 4-D data).
  void dataset(hid_t file, const std::string& path, bool frames, std::optional<int> forced_rank = std::nullopt) {
    const bool chunked = in_.ConsumeBool();
    Id t(frames && in_.ConsumeBool() ? H5Tcopy(in_.PickValueInArray({H5T_STD_U8LE, H5T_STD_U16LE, H5T_STD_U32LE})) : type(),
         H5Tclose);
    Id s(space(forced_rank ? forced_rank : frames && in_.ConsumeBool() ? std::optional<int>(3) : std::nullopt, chunked), H5Sclose);
    Id lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
    H5Pset_create_intermediate_group(lcpl, 1);
    Id dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
    const int rank = H5Sget_simple_extent_ndims(s);
    int filters = 0;
    if (chunked && rank > 0) {
      std::vector<hsize_t> dims(static_cast<size_t>(rank)), chunk(static_cast<size_t>(rank));
      H5Sget_simple_extent_dims(s, dims.data(), nullptr);
      const bool one_frame = in_.ConsumeBool();
      for (int i = 0; i < rank; ++i) {
        const hsize_t want = one_frame ? (i == 0 ? 1 : dims[i]) : in_.ConsumeIntegralInRange<hsize_t>(1, 8);
        chunk[i] = std::max<hsize_t>(1, std::min<hsize_t>(want, 1 << 12));
      }
      H5Pset_chunk(dcpl, rank, chunk.data());
      filters = in_.ConsumeIntegralInRange(0, 2);
      for (int f = 0; f < filters; ++f) {
        switch (in_.ConsumeIntegralInRange(0, 3)) {
          case 0: {  // bitshuffle (32008): its client values as the input gives them
            std::vector<unsigned> cd(in_.ConsumeIntegralInRange<size_t>(0, 6));
            for (auto& v : cd) v = in_.ConsumeBool() ? in_.ConsumeIntegralInRange(0u, 3u) : in_.ConsumeIntegral<unsigned>();
            H5Pset_filter(dcpl, 32008, H5Z_FLAG_OPTIONAL, cd.size(), cd.data());
            break;
          }
          case 1: H5Pset_deflate(dcpl, 1); break;
          case 2: H5Pset_shuffle(dcpl); break;
          default: {  // a filter no plugin provides
            const unsigned cd[1] = {in_.ConsumeIntegral<unsigned>()};
            H5Pset_filter(dcpl, 40000 + in_.ConsumeIntegralInRange(0u, 3u), H5Z_FLAG_OPTIONAL, 1, cd);
          }
        }
      }
    } else if (rank >= 0 && in_.ConsumeBool()) {
      H5Pset_layout(dcpl, H5D_COMPACT);
    }
    Id d(H5Dcreate2(file, path.c_str(), t, s, lcpl, dcpl, H5P_DEFAULT), H5Dclose);
    if (!d.ok()) return;
    // Values only where no filter runs: the reader never reads frame data, and the installed bitshuffle
    // plugin's encoder dies (SIGFPE) on some of the client values given above, which is not our code.
    if (filters == 0 && in_.ConsumeBool()) fill(d, t, s, false);
    const int attributes = in_.ConsumeIntegralInRange(0, 3);
    for (int i = 0; i < attributes; ++i)
      attribute(d, in_.PickValueInArray({"units", "image_nr_low", "image_nr_high", "image_nr_low"}));
  }

  // A data file behind an external link: absent, not HDF5, or HDF5 with or without entry/data/data.
  void data_file(const std::string& path) {
    switch (in_.ConsumeIntegralInRange(0, 5)) {
      case 0: return;
      case 1: tmorph::fuzz::write_file(path, "not an HDF5 file", 16); return;
      default: {
        Id f(create(path), H5Fclose);
        if (!f.ok()) return;
        dataset(f, in_.ConsumeIntegralInRange(0, 7) ? "entry/data/data" : "entry/data/other", true);
      }
    }
  }

  void master(const std::string& dir, const std::string& path) {
    Id f(create(path), H5Fclose);
    if (!f.ok()) return;
    Id lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
    H5Pset_create_intermediate_group(lcpl, 1);
    switch (in_.ConsumeIntegralInRange(0, 7)) {
      case 0: break;                                                         // no entry/data
      case 1: dataset(f, "entry/data", false); break;                        // a dataset, not a group
      case 2: H5Lcreate_soft("/entry/instrument", f, "entry/data", lcpl, H5P_DEFAULT); break;
      default: Id(H5Gcreate2(f, "entry/data", lcpl, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
    }
    const int links = in_.ConsumeIntegralInRange(0, 3);
    for (int i = 0; i < links; ++i) {
      const std::string link = std::string("entry/data/") + in_.PickValueInArray(kFrameLinks);
      if (H5Lexists(f, "entry", H5P_DEFAULT) > 0 && H5Lexists(f, link.c_str(), H5P_DEFAULT) > 0) continue;
      switch (in_.ConsumeIntegralInRange(0, 5)) {
        case 0: case 1: dataset(f, link, true); break;
        case 2: case 3: {
          const int k = in_.ConsumeIntegralInRange(1, 3);
          const std::string name = k == 3 ? std::string("fz_\xff\xfe_data.h5") : "fz_data_00000" + std::to_string(k) + ".h5";
          const char* target = in_.PickValueInArray({"/entry/data/data", "entry/data/data", "/nowhere", "/entry/data"});
          H5Lcreate_external(in_.ConsumeBool() ? name.c_str() : (dir + "/" + name).c_str(), target, f, link.c_str(), lcpl,
                             H5P_DEFAULT);
          if (k < 3) data_file(dir + "/" + name);
          break;
        }
        case 4: H5Lcreate_soft("/entry/instrument/detector/pixel_mask", f, link.c_str(), lcpl, H5P_DEFAULT); break;
        default: Id(H5Gcreate2(f, link.c_str(), lcpl, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
      }
    }
    const int metadata = in_.ConsumeIntegralInRange(0, 8);
    for (int i = 0; i < metadata; ++i) {
      const std::string path = in_.PickValueInArray(kMetadataPaths);
      if (H5Lexists(f, "entry", H5P_DEFAULT) > 0 && tmorph_exists(f, path)) continue;
      dataset(f, path, false);
    }
    if (in_.ConsumeBool()) emd_array(f);  // last, so that older seeds decode to the same Dectris files
  }

  // An EMD array group, as the hdf5-array row (src/stem/formats/hdf5_array_opener.cpp) finds it when no Dectris
  // layout is there: emd_group_type "array" (EMD 1.0) or 1 (EMD 0.2), or another value; a `data` dataset of the
  // input's rank, type and storage; dim1..dim4 with `name`/`units` attributes of the input's types.
  void emd_array(hid_t file) {
    Id lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
    H5Pset_create_intermediate_group(lcpl, 1);
    const std::string group = in_.PickValueInArray({"experiment/datacube", "4DSTEM_experiment/data/datacubes/dc", "entry/data"});
    if (!tmorph_exists(file, group)) Id(H5Gcreate2(file, group.c_str(), lcpl, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
    Id g(H5Oopen(file, group.c_str(), H5P_DEFAULT), H5Oclose);
    if (!g.ok()) return;
    switch (in_.ConsumeIntegralInRange(0, 3)) {
      case 0: {  // EMD 1.0: a string
        const std::string v = in_.ConsumeBool() ? "array" : in_.ConsumeRandomLengthString(8);
        Id t(H5Tcopy(H5T_C_S1), H5Tclose);
        H5Tset_size(t, std::max<size_t>(1, v.size()));
        Id s(H5Screate(H5S_SCALAR), H5Sclose);
        Id a(H5Acreate2(g, "emd_group_type", t, s, H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
        if (a.ok()) H5Awrite(a, t, v.c_str());
        break;
      }
      case 1: {  // EMD 0.2: an integer
        const int32_t v = in_.ConsumeBool() ? 1 : in_.ConsumeIntegral<int32_t>();
        Id s(H5Screate(H5S_SCALAR), H5Sclose);
        Id a(H5Acreate2(g, "emd_group_type", H5T_STD_I32LE, s, H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
        if (a.ok()) H5Awrite(a, H5T_NATIVE_INT32, &v);
        break;
      }
      case 2: attribute(g, "emd_group_type"); break;  // any type, any bytes
      default: break;
    }
    if (!tmorph_exists(file, group + "/data"))
      dataset(file, group + "/data", true, in_.ConsumeBool() ? std::optional<int>(4) : std::nullopt);
    const int dims = in_.ConsumeIntegralInRange(0, 4);
    for (int axis = 1; axis <= dims; ++axis) {
      const std::string dim = group + "/dim" + std::to_string(axis);
      if (tmorph_exists(file, dim)) continue;
      dataset(file, dim, false);
      Id d(H5Oopen(file, dim.c_str(), H5P_DEFAULT), H5Oclose);
      if (!d.ok()) continue;
      if (in_.ConsumeBool()) attribute(d, "name");
      if (in_.ConsumeBool()) attribute(d, "units");
    }
  }

 private:
  // Files are built in memory (core driver) and written out once when closed.
  static hid_t create(const std::string& path) {
    Id fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
    H5Pset_fapl_core(fapl, 1 << 16, 1);
    H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG);
    return H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
  }

  // Whether every component of path exists (H5Lexists needs its parents to).
  static bool tmorph_exists(hid_t f, const std::string& path) {
    for (size_t at = path.find('/'); ; at = path.find('/', at + 1)) {
      const std::string prefix = path.substr(0, at);
      if (H5Lexists(f, prefix.c_str(), H5P_DEFAULT) <= 0) return false;
      if (at == std::string::npos) return true;
    }
  }

  FuzzedDataProvider& in_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool quiet = [] {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);  // the harness's own writes may fail; that is input
    return true;
  }();
  (void)quiet;
  const std::string dir = tmorph::fuzz::scratch_dir();
  const std::string master = dir + "/fz_master.h5";
  for (const char* f : {"/fz_master.h5", "/fz_data_000001.h5", "/fz_data_000002.h5"}) std::remove((dir + f).c_str());

  FuzzedDataProvider in(data, size);
  const int open_as = in.ConsumeIntegralInRange(0, 3);
  Writer(in).master(dir, master);
  const std::string path = open_as == 0 ? dir : open_as == 1 ? dir + "/fz_data_000001.h5" : master;
  try {
    const tmorph::Acquisition acq = tmorph::open_acquisition(path);
    TM_FUZZ_CHECK(acq.pixel_mask.empty() || acq.pixel_mask.size() == acq.detector_rows * acq.detector_cols);
    TM_FUZZ_CHECK(acq.frames_present <= acq.frames_extent);
    (void)acq.complete();
    // What `tensormorph stem inspect --json` prints of it.
    (void)acq.readiness_json().dump();
    (void)acq.metadata.dump();
    if (tmorph::fuzz::verbose()) std::fprintf(stderr, "opened: %s\n", acq.readiness_json().dump().c_str());
    (void)tmorph::resolve_scan_shape(acq, std::nullopt);
  } catch (const tmorph::Error& e) {
    if (tmorph::fuzz::verbose()) std::fprintf(stderr, "refused: %s\n", e.what());
  }
  return 0;
}
