// Quantum Detectors Merlin `.mib` acquisitions (mib.h parses the headers, mib_decode.h the pixels) as Acquisitions:
// one .mib file of fixed-size records, each a frame header and the frame's pixels, in scan order, with the `.hdr`
// of the same name beside it when the detector wrote one. A record cut short, or fewer frames than the .hdr
// expects, is readiness (the file is being written), never an error at open; headers that contradict each other or
// the file are Error(BadInput) naming the file and the byte offset.
#include <array>
#include <cstring>
#include <filesystem>
#include <functional>

#include "core/folder_walk.h"
#include "core/mapped_file.h"
#include "core/path_kind.h"
#include "core/utf8.h"
#include "stem/formats/acquisition_openers.h"
#include "stem/formats/mib.h"
#include "stem/formats/mib_decode.h"
#include "stem/formats/plain_files.h"
#include "tensormorph/error.h"

namespace tmorph {

namespace {

namespace fs = std::filesystem;

constexpr uint64_t kMaxHdrBytes = 1 << 20;


std::vector<std::string> discover_mib(const std::string& folder) { return find_files(folder, ".mib"); }

bool claims_mib(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return !discover_mib(path).empty();
  if (has_extension(path, ".mib")) return true;
  return has_extension(path, ".hdr") && fs::exists(fs::path(path).replace_extension(".mib"), ec);
}

// The .mib a path names: itself, the .mib beside a .hdr, or a folder's only .mib.
std::string mib_file_of(const std::string& path) {
  if (path_kind(path) == PathKind::Directory) return only_file_in(path, discover_mib(path), "*.mib");
  if (has_extension(path, ".hdr")) return fs::path(path).replace_extension(".mib").string();
  return path;
}

// The .hdr beside the .mib, parsed; nullopt when there is none. One that is not a regular file is a problem.
std::optional<MibAcquisitionHeader> read_hdr(const std::string& hdr_path, std::vector<std::string>& problems) {
  PathKind kind = PathKind::Missing;
  try {
    kind = path_kind(hdr_path);
  } catch (const Error& e) {
    problems.push_back(std::string(e.what()) + ": acquisition header not read");
    return std::nullopt;
  }
  if (kind == PathKind::Missing) return std::nullopt;
  if (kind != PathKind::Regular) {
    problems.push_back(hdr_path + ": not a regular file: acquisition header not read");
    return std::nullopt;
  }
  MappedFile f(hdr_path);
  if (f.size() > kMaxHdrBytes)
    throw Error(ErrorKind::BadInput, hdr_path + ": " + std::to_string(f.size()) + " bytes, expected a Merlin acquisition header of at most " +
                                         std::to_string(kMaxHdrBytes));
  std::string text(f.size(), '\0');
  f.read_at(0, text.data(), text.size());
  return parse_mib_acquisition_header(text, hdr_path);
}

// The header of the record at `offset`: at most kMibMaxHeaderBytes read.
std::vector<uint8_t> header_bytes_at(const MappedFile& f, uint64_t offset) {
  std::vector<uint8_t> bytes(offset < f.size() ? std::min<uint64_t>(f.size() - offset, kMibMaxHeaderBytes) : 0);
  f.read_at(offset, bytes.data(), bytes.size());
  return bytes;
}

std::string layout_fields(const std::vector<uint8_t>& bytes, const MibFrameHeader& h) {
  return std::string(reinterpret_cast<const char*>(bytes.data()) + h.layout_begin, h.layout_end - h.layout_begin);
}

// Frame `index`'s header (at `offset`) must repeat the first's fields 2-7 and carry the next sequence number.
void check_same_layout(const MappedFile& f, uint64_t index, uint64_t offset, const MibFrameHeader& first, const std::string& first_layout) {
  const auto bytes = header_bytes_at(f, offset);
  const MibFrameHeader h = parse_mib_frame_header(bytes.data(), bytes.size(), f.path(), offset);
  const std::string where = f.path() + ": frame header at byte " + std::to_string(offset) + " (frame " + std::to_string(index) + ")";
  if (h.layout_begin != first.layout_begin || h.layout_end != first.layout_end || layout_fields(bytes, h) != first_layout)
    throw Error(ErrorKind::BadInput, where + ": fields 2-7 are '" + layout_fields(bytes, h) + "', expected the first frame's '" + first_layout + "'");
  if (h.sequence != first.sequence + index)
    throw Error(ErrorKind::BadInput, where + ": sequence number " + std::to_string(h.sequence) + ", expected " +
                                         std::to_string(first.sequence + index) + " (frames missing or out of order)");
}

// Decodes a whole record (header and pixels): the header is checked against the first frame's on the way (the
// frame reader names the file, frame and record offset of a refusal).
std::function<void(const uint8_t*, uint8_t*)> record_unpacker(const MibFrameHeader& first, const std::string& first_layout,
                                                              const MibPixels& pixels) {
  return [begin = first.layout_begin, first_layout, header = first.header_bytes, pixels](const uint8_t* record, uint8_t* frame) {
    if (std::memcmp(record, "MQ1,", 4) != 0 || std::memcmp(record + begin, first_layout.data(), first_layout.size()) != 0) {
      std::string seen(reinterpret_cast<const char*>(record), std::min<uint64_t>(header, begin + first_layout.size()));
      for (char& c : seen) c = (c >= 0x20 && c < 0x7f) ? c : '?';
      throw Error(ErrorKind::BadInput, "a frame header reads '" + seen + "', expected 'MQ1,<sequence>," + first_layout +
                                           "' as in the first frame (inconsistent frame headers)");
    }
    mib_unpack(pixels, record + header, frame);
  };
}

// Header text is whatever bytes the file holds: every string that reaches metadata, a layout or a description is
// escaped where it is not UTF-8 (JSON documents carry it).
void put(nlohmann::json& m, const std::string& key, nlohmann::json value, const char* units = nullptr) {
  if (value.is_string()) value = escape_invalid_utf8(value.get<std::string>());
  nlohmann::json v = {{"value", std::move(value)}};
  if (units) v["units"] = units;
  m["mib/" + key] = std::move(v);
}

nlohmann::json header_metadata(const MibFrameHeader& h, const MibPixels& p, uint64_t record_bytes) {
  nlohmann::json m = nlohmann::json::object();
  put(m, "sequence_first", h.sequence);
  put(m, "header_bytes", h.header_bytes, "byte");
  put(m, "record_bytes", record_bytes, "byte");
  put(m, "chips", h.chips);
  put(m, "width", h.width, "pixel");
  put(m, "height", h.height, "pixel");
  put(m, "pixel_type", h.pixel_type);
  put(m, "raw", p.raw);
  put(m, "chip_layout", h.chip_layout);
  if (!h.chip_select.empty()) put(m, "chip_select", h.chip_select);
  if (!h.timestamp.empty()) put(m, "timestamp", h.timestamp);
  if (h.shutter_s) put(m, "shutter_time", *h.shutter_s, "s");
  if (h.counter) put(m, "counter", *h.counter);
  if (h.colour_mode) put(m, "colour_mode", *h.colour_mode);
  if (h.gain_mode) put(m, "gain_mode", *h.gain_mode);
  for (size_t i = 0; i < h.thresholds_kev.size(); ++i) put(m, "threshold_" + std::to_string(i), h.thresholds_kev[i], "keV");
  if (!h.timestamp_ext.empty()) put(m, "timestamp_ext", h.timestamp_ext);
  if (h.shutter_ns) put(m, "shutter_time_ext", *h.shutter_ns, "ns");
  if (p.depth) put(m, "counter_depth", p.depth, "bit");
  return m;
}

// The scan shape the .hdr records: ScanY x ScanX when given, else (frames / frames per trigger) x frames per trigger
// when a trigger starts each row (1 < frames per trigger < frames, dividing them).
void recorded_scan_shape(const MibAcquisitionHeader& hdr, const std::string& hdr_path, Acquisition& a) {
  if (hdr.scan_x && hdr.scan_y && *hdr.scan_x > 0 && *hdr.scan_y > 0) {
    a.scan_shape_recorded = std::array<uint64_t, 2>{*hdr.scan_y, *hdr.scan_x};
    a.scan_shape_path = hdr_path + ": ScanY, ScanX";
    return;
  }
  if (hdr.frames_in_acquisition && hdr.frames_per_trigger) {
    const uint64_t n = *hdr.frames_in_acquisition, per = *hdr.frames_per_trigger;
    if (per > 1 && per < n && n % per == 0) {
      a.scan_shape_recorded = std::array<uint64_t, 2>{n / per, per};
      a.scan_shape_path = hdr_path + ": Frames in Acquisition / Frames per Trigger";
    }
  }
}

Acquisition open_mib_acquisition(const std::string& given) {
  const std::string path = fs::absolute(mib_file_of(given)).lexically_normal().string();
  require_regular_file(path);
  Acquisition a;
  a.format = "mib";
  a.master = path;
  const std::string hdr_path = fs::path(path).replace_extension(".hdr").string();
  const auto hdr = read_hdr(hdr_path, a.problems);

  MappedFile f(path);
  const auto first_bytes = header_bytes_at(f, 0);
  const MibFrameHeader first = parse_mib_frame_header(first_bytes.data(), first_bytes.size(), path, 0);
  const MibPixels pixels = mib_pixels(first, hdr ? hdr->counter_depth : std::nullopt, path, 0);
  const std::string first_layout = layout_fields(first_bytes, first);
  const uint64_t record = first.header_bytes + pixels.stored_bytes;
  const uint64_t frames = f.size() / record, leftover = f.size() % record;
  if (frames > 1) check_same_layout(f, frames - 1, (frames - 1) * record, first, first_layout);
  if (hdr && hdr->counter_depth && first.counter_depth && *hdr->counter_depth != *first.counter_depth)
    throw Error(ErrorKind::BadInput, hdr_path + ": counter depth " + std::to_string(*hdr->counter_depth) + ", the frame headers of " + path +
                                         " say " + std::to_string(*first.counter_depth));

  a.layout = escape_invalid_utf8(first.chip_layout) + (pixels.raw ? " raw" : " processed");
  a.dtype = pixels.dtype;
  a.element_size = pixels.element_size;
  a.detector_rows = pixels.rows;
  a.detector_cols = pixels.cols;
  a.frames_present = a.frames_extent = frames;
  DataPart part;
  part.link = fs::path(path).filename().string();
  part.file = path;
  part.present = true;
  part.frames = frames;
  part.codec = ChunkCodec::FileRecords;
  // The whole record is the stored frame, so that each frame's header is checked as it is decoded.
  part.records = FileRecords{0, record, 0, record, pixels.encoding, record_unpacker(first, first_layout, pixels)};
  a.parts.push_back(std::move(part));

  a.metadata = header_metadata(first, pixels, record);
  if (pixels.depth) a.saturation_value = (uint64_t{1} << pixels.depth) - 1;
  a.description = escape_invalid_utf8(
      "Quantum Detectors Merlin" + (hdr && !hdr->chip_type.empty() ? " (" + hdr->chip_type + ")" : std::string()) + ", " +
      std::to_string(first.chips) + (first.chips == 1 ? " chip " : " chips ") + first.chip_layout + ", " + (pixels.raw ? "raw " : "processed ") +
      (pixels.depth ? std::to_string(pixels.depth) + "-bit counters" : first.pixel_type));
  if (hdr) {
    for (const auto& [key, value] : hdr->fields) a.metadata[escape_invalid_utf8("mib/hdr/" + key)] = {{"value", escape_invalid_utf8(value)}};
    a.frames_expected = hdr->frames_in_acquisition;
    recorded_scan_shape(*hdr, hdr_path, a);
  }
  if (leftover)
    a.problems.push_back(path + ": " + std::to_string(leftover) + " bytes after the last complete frame (frame " + std::to_string(frames) +
                         " at byte " + std::to_string(frames * record) + " needs " + std::to_string(record) +
                         "): being written or cut short");
  if (a.frames_expected && frames < *a.frames_expected)
    a.problems.push_back(std::to_string(frames) + " of " + std::to_string(*a.frames_expected) + " frames present");
  if (a.frames_expected && frames > *a.frames_expected) {
    a.problems.push_back(path + ": " + std::to_string(frames) + " frames, the .hdr expects " + std::to_string(*a.frames_expected) +
                         ": the frames after them are not used");
    a.value_problems.push_back(a.problems.back());
  }
  std::vector<std::string> files = {path};
  if (hdr) files.push_back(hdr_path);
  a.signature = acquisition_signature(files);
  return a;
}

}  // namespace

extern const AcquisitionOpener kMibOpener{"mib", claims_mib, open_mib_acquisition, discover_mib, ".mib .hdr"};

}  // namespace tmorph
