// EMPAD (Electron Microscope Pixel Array Detector) acquisitions: an .xml sidecar (empad_xml.h) naming a .raw file of
// frames and the scan. The .raw holds one record per scan position in scan order, each 130 rows × 128 columns of
// float32 little-endian values: 128 rows of detector pixels, then 2 rows of per-frame metadata, which are skipped
// (128 × 128 pixels are read; the layout rosettasciio, LiberTEM and py4DSTEM read). Scan rows are root/pix_y and
// columns root/pix_x (x runs fastest, as LiberTEM reads it; rosettasciio's reshape agrees for square scans); a
// series (root/scan_parameters/series_count) records no 2-D shape: --scan-shape gives one. The sidecar's readings
// become calibration as empad_calibration.h says.
//
// Errors and readiness: an .xml that is not EMPAD's, or whose .raw is missing or not a regular file, is
// Error(BadInput)/Error(Io) naming the file and field; a .raw holding MORE whole frames than the XML's scan is
// Error(BadInput) (the XML does not describe it); FEWER is readiness (being written, or truncated): the frames
// present are read, and a product over a missing frame is an error naming the frame and its byte offset.
#include <filesystem>

#include "core/folder_walk.h"
#include "core/path_kind.h"
#include "stem/formats/acquisition_openers.h"
#include "stem/formats/empad_calibration.h"
#include "stem/formats/empad_xml.h"
#include "stem/formats/plain_files.h"
#include "tensormorph/error.h"

namespace tmorph {

namespace {

namespace fs = std::filesystem;

constexpr uint64_t kRows = 128, kCols = 128, kRecordRows = 130;  // detector rows read, and rows per record
constexpr uint64_t kRecordBytes = kRecordRows * kCols * 4, kFrameBytes = kRows * kCols * 4;
constexpr uint64_t kClaimHeadBytes = 64 << 10;  // the first bytes an .xml must show <raw_file in to be claimed

bool claims_empad_file(const std::string& path) {
  if (!has_extension(path, ".xml")) return false;
  try {
    const FileHead head = read_file_head(path, kClaimHeadBytes);
    return looks_like_empad_xml(head.bytes.data(), head.bytes.size());
  } catch (const Error&) {
    return false;  // not readable as a regular file: not claimed (open() by extension says why)
  }
}

std::vector<std::string> discover_empad(const std::string& folder) { return find_files(folder, ".xml", claims_empad_file); }

bool claims_empad(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return !discover_empad(path).empty();
  return claims_empad_file(path);
}

Acquisition open_empad(const std::string& path_in) {
  std::string path = fs::absolute(path_in).lexically_normal().string();
  if (path_kind(path) == PathKind::Directory) path = only_file_in(path, discover_empad(path), "EMPAD *.xml");
  const FileHead head = read_file_head(path, kEmpadXmlMaxBytes + 1);  // Io unless a regular file
  const EmpadXml x = parse_empad_xml(head.bytes.data(), head.bytes.size(), path);

  // The .raw: the basename of root/raw_file@filename (written as the acquiring machine's path), beside the .xml.
  std::string base = x.raw_filename;
  if (const size_t slash = base.find_last_of("/\\"); slash != std::string::npos) base = base.substr(slash + 1);
  if (base.empty() || base == "." || base == "..")
    throw Error(ErrorKind::BadInput, path + ": root/raw_file@filename '" + x.raw_filename + "' names no file");
  const std::string raw = (fs::path(path).parent_path() / base).string();
  const PathKind kind = path_kind(raw);
  if (kind == PathKind::Missing)
    throw Error(ErrorKind::BadInput, path + ": root/raw_file@filename names '" + x.raw_filename + "', but " + raw +
                                         " does not exist (the .raw is looked up beside the .xml)");
  if (kind != PathKind::Regular) throw Error(ErrorKind::Io, raw + ": not a regular file (the frames of " + path + ")");
  const uint64_t raw_size = read_file_head(raw, 0).size;

  Acquisition a;
  a.format = "empad";
  a.master = path;
  a.dtype = DType::F32;
  a.element_size = 4;
  a.detector_rows = kRows;
  a.detector_cols = kCols;
  a.metadata = x.metadata;
  a.metadata["empad/raw_file"] = {{"value", raw}};
  a.metadata["empad/record_bytes"] = {{"value", kRecordBytes}, {"units", "bytes"}};
  add_empad_calibration(a, x);  // beam energy, detector angle per pixel, camera length, scan step (with their paths)
  uint64_t expected = 0;
  std::string expected_from;
  if (x.scan_x) {
    a.layout = "empad-scan";
    a.scan_shape_recorded = std::array<uint64_t, 2>{*x.scan_y, *x.scan_x};
    a.scan_shape_path = x.scan_y_path + " × " + x.scan_x_path;
    expected = *x.scan_y * *x.scan_x;
    expected_from = x.scan_y_path + " × " + x.scan_x_path + " = " + std::to_string(*x.scan_y) + " × " + std::to_string(*x.scan_x);
  } else {
    a.layout = "empad-series";
    expected = *x.series_count;
    expected_from = "root/scan_parameters/series_count = " + std::to_string(expected);
  }
  if (expected > (uint64_t{1} << 40))  // keeps every byte offset below 2^64
    throw Error(ErrorKind::BadInput, path + ": " + expected_from + " frames: more than 2^40, more than any .raw holds");
  a.description = "EMPAD " + std::to_string(kRows) + " × " + std::to_string(kCols) + " float32 frames (" + std::to_string(kRecordRows) +
                  "-row records) in " + raw;

  const uint64_t whole = raw_size / kRecordBytes;
  if (whole > expected)
    throw Error(ErrorKind::BadInput, raw + ": " + std::to_string(raw_size) + " bytes hold " + std::to_string(whole) + " frames of " +
                                         std::to_string(kRecordBytes) + " bytes, but " + path + " says " + expected_from +
                                         " frames: the .xml does not describe this .raw (frame " + std::to_string(expected) +
                                         " would start at byte offset " + std::to_string(expected * kRecordBytes) + ")");
  if (whole == expected && raw_size % kRecordBytes != 0)
    throw Error(ErrorKind::BadInput, raw + ": " + std::to_string(raw_size % kRecordBytes) + " bytes after the last frame (byte offset " +
                                         std::to_string(expected * kRecordBytes) + "), which " + path + " (" + expected_from +
                                         ") does not describe");
  a.frames_expected = expected;
  a.frames_present = a.frames_extent = whole;

  DataPart part;
  part.link = "raw";
  part.file = raw;
  part.codec = ChunkCodec::FileRecords;
  part.frames = whole;
  part.present = whole > 0;
  if (!part.present) part.problem = raw + ": no whole frame written yet (" + std::to_string(raw_size) + " bytes)";
  part.records = FileRecords{0, kRecordBytes, 0, kFrameBytes, "empad float32 little-endian (rows 128-129 of each record skipped)", {}};
  a.parts.push_back(std::move(part));
  if (whole < expected) {  // the frames not written yet, as a part that did not open: a read of one says why
    DataPart missing;
    missing.link = "raw (frames not written)";
    missing.file = raw;
    missing.codec = ChunkCodec::FileRecords;
    missing.first_frame = whole;
    missing.frames = expected - whole;
    missing.problem = raw + " ends at byte " + std::to_string(raw_size) + ": frames " + std::to_string(whole) + " to " +
                      std::to_string(expected - 1) + " are not written (frame " + std::to_string(whole) + " would start at byte offset " +
                      std::to_string(whole * kRecordBytes) + ")";
    a.parts.push_back(std::move(missing));
  }
  if (whole < expected)
    a.problems.push_back(raw + ": " + std::to_string(whole) + " of " + std::to_string(expected) + " frames present (" +
                         std::to_string(raw_size) + " bytes; " + expected_from + " needs " + std::to_string(expected * kRecordBytes) +
                         "; frame " + std::to_string(whole) + " would start at byte offset " + std::to_string(whole * kRecordBytes) +
                         "): still being written, or truncated");
  a.signature = acquisition_signature({path, raw});
  return a;
}

}  // namespace

extern const AcquisitionOpener kEmpadOpener{"empad", claims_empad, open_empad, discover_empad, ".xml"};

}  // namespace tmorph
