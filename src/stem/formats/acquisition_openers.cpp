// The acquisition openers' table (acquisition_openers.h) and open_acquisition, looks_like_acquisition and
// discover_acquisitions over it.
#include "stem/formats/acquisition_openers.h"

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "core/folder_walk.h"
#include "core/path_kind.h"
#include "tensormorph/error.h"

namespace tmorph {

extern const AcquisitionOpener kDectrisOpener;  // dectris_opener.cpp
extern const AcquisitionOpener kNpyOpener;      // npy_opener.cpp
extern const AcquisitionOpener kBlockfileOpener;  // blockfile_opener.cpp
extern const AcquisitionOpener kHdf5ArrayOpener;  // hdf5_array_opener.cpp
extern const AcquisitionOpener kMibOpener;       // mib_opener.cpp
extern const AcquisitionOpener kEmpadOpener;     // empad_opener.cpp

const std::vector<const AcquisitionOpener*>& acquisition_openers() {
  static const std::vector<const AcquisitionOpener*> rows = {&kDectrisOpener, &kHdf5ArrayOpener, &kNpyOpener, &kMibOpener, &kBlockfileOpener, &kEmpadOpener};
  return rows;
}

bool looks_like_acquisition(const std::string& path) {
  for (const AcquisitionOpener* row : acquisition_openers())
    if (row->claims(path)) return true;
  return false;
}

std::vector<std::string> discover_acquisitions(const std::string& folder) {
  std::error_code ec;
  if (!std::filesystem::is_directory(folder, ec)) throw Error(ErrorKind::InvalidArgument, folder + ": not a folder");
  std::vector<std::string> out;
  for (const AcquisitionOpener* row : acquisition_openers()) {
    const auto found = row->discover(folder);
    out.insert(out.end(), found.begin(), found.end());
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

namespace {

const AcquisitionOpener& row_by_extension(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const AcquisitionOpener* row : acquisition_openers()) {
    const std::string list = std::string(" ") + row->extensions + " ";
    if (!ext.empty() && list.find(" " + ext + " ") != std::string::npos) return *row;
  }
  return *acquisition_openers().front();
}

}  // namespace

// Several rows may claim one name (any .h5 may be a Dectris master or another writer's array): each is asked in
// order, and a row that finds the file is not its format (BadInput) passes it to the next; when none reads it, the
// error says what each found.
Acquisition open_acquisition(const std::string& path) {
  std::vector<const AcquisitionOpener*> claiming;
  for (const AcquisitionOpener* row : acquisition_openers())
    if (row->claims(path)) claiming.push_back(row);
  // A folder no row claims (rows such as .npy's and blockfile's claim files only): the one acquisition any row
  // discovers in it (searched recursively); several are refused naming each; none falls to the first row's message.
  std::error_code ec;
  if (claiming.empty() && std::filesystem::is_directory(path, ec)) {
    const std::vector<std::string> found = discover_acquisitions(path);
    if (!found.empty()) return open_acquisition(only_file_in(path, found, "acquisition"));
  }
  // No row claims it: the row whose extension it has (else the first) reads it and says why it is not one.
  if (claiming.empty()) return row_by_extension(path).open(path);
  std::string refusals;
  for (size_t i = 0; i < claiming.size(); ++i) {
    try {
      return claiming[i]->open(path);
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::BadInput) throw;
      if (claiming.size() == 1) throw;
      refusals += std::string(refusals.empty() ? "" : "; ") + "as " + claiming[i]->name + ": " + e.what();
    }
  }
  throw Error(ErrorKind::BadInput, path + ": not an acquisition any reader takes (" + refusals + ")");
}

}  // namespace tmorph
