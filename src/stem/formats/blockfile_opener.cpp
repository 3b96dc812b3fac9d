// NanoMegas ASTAR blockfiles (.blo, blockfile.h) as Acquisitions: the scan (NY rows × NX columns) and the square
// detector from the header, frames as FileRecords (a 6-byte frame header skipped, uint8 pixels as stored), the beam
// energy and scan step as calibration, every header field and the stored virtual image's place as metadata.
#include <algorithm>
#include <filesystem>

#include "core/mapped_file.h"
#include "stem/formats/acquisition_openers.h"
#include "stem/formats/blockfile.h"
#include "stem/formats/plain_files.h"

namespace tmorph {

namespace {

namespace fs = std::filesystem;

bool claims_blockfile(const std::string& path) { return has_extension(path, ".blo"); }

// Latin-1 bytes as UTF-8 (the note's encoding as published).
std::string latin1_to_utf8(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c < 0x80) out += static_cast<char>(c);
    else out += static_cast<char>(0xC0 | c >> 6), out += static_cast<char>(0x80 | (c & 0x3F));
  }
  return out;
}

void put(Acquisition& a, const std::string& key, const nlohmann::json& value, const char* units = nullptr) {
  nlohmann::json v = {{"value", value}};
  if (units) v["units"] = units;
  a.metadata["blockfile/" + key] = std::move(v);
}

void describe_header(Acquisition& a, const BlockfileHeader& h) {
  put(a, "MAGIC", h.magic);
  put(a, "byte_order", h.big_endian ? "big-endian" : "little-endian");
  put(a, "Data_offset_1", h.image_offset, "bytes");
  put(a, "Data_offset_2", h.data_offset, "bytes");
  put(a, "UNKNOWN1", h.flags);
  put(a, "DP_SZ", h.detector_side);
  put(a, "DP_rotation", h.dp_rotation, "centidegrees");
  put(a, "NX", h.scan_cols);
  put(a, "NY", h.scan_rows);
  put(a, "Scan_rotation", h.scan_rotation, "centidegrees");
  put(a, "SX", h.scan_step_x_nm, "nm");
  put(a, "SY", h.scan_step_y_nm, "nm");
  put(a, "Beam_energy", h.beam_energy_v, "V");
  put(a, "SDP", h.diffraction_scale, "100 pixels per cm");
  put(a, "Camera_length", h.camera_length, "0.1 mm");
  put(a, "Acquisition_time", h.acquisition_time, "days since 1899-12-30");
  for (unsigned i = 0; i < h.centering.size(); ++i) put(a, "Centering_N" + std::to_string(i), h.centering[i]);
  for (unsigned i = 0; i < h.distortion.size(); ++i)
    put(a, std::string("Distortion_N") + (i < 10 ? "0" : "") + std::to_string(i), h.distortion[i]);
  if (!h.note.empty()) put(a, "Note", latin1_to_utf8(h.note));
  // The scan step, when both axes agree: the calibration rule's "…/scan_step" (docs/stem.md, "Calibration").
  if (h.scan_step_x_nm > 0 && h.scan_step_x_nm == h.scan_step_y_nm) put(a, "scan_step", h.scan_step_x_nm, "nm");
  const std::string image = blockfile_image_problem(h);
  if (image.empty())
    put(a, "virtual_image", {{"offset", h.image_offset}, {"shape", {h.scan_rows, h.scan_cols}}, {"dtype", "u1"}});
  else
    put(a, "virtual_image_problem", image);
}

// The frame headers of the first and last present frames: 0x55AA, and frame numbers that step by one per frame.
// A record that is not where the header's sizes put it means every frame's pixels are misplaced.
void check_frame_headers(Acquisition& a, const BlockfileHeader& h, uint64_t present) {
  if (present == 0) return;
  MappedFile file(a.master);
  uint8_t head[kBlockfileFrameHeaderBytes];
  uint32_t first_number = 0;
  for (uint64_t frame : {uint64_t{0}, present - 1}) {
    const uint64_t at = h.data_offset + frame * h.record_bytes();
    file.read_at(at, head, sizeof head);
    uint32_t number = 0;
    std::string why = blockfile_frame_header_problem(head, h.big_endian, &number);
    if (frame == 0) first_number = number;
    else if (why.empty() && uint64_t{number} - first_number != frame)
      why = "frame number " + std::to_string(number) + " where " + std::to_string(first_number + frame) + " follows frame 0's " +
            std::to_string(first_number);
    if (!why.empty()) {
      a.problems.push_back(a.master + ": frame " + std::to_string(frame) + " at byte " + std::to_string(at) + ": " + why +
                           ": the frames are not where the header's sizes put them");
      a.value_problems.push_back(a.problems.back());
      return;
    }
  }
  put(a, "first_frame_number", first_number);
}

Acquisition open_blockfile_acquisition(const std::string& path_in) {
  const std::string path = fs::absolute(path_in).lexically_normal().string();
  const FileHead head = read_file_head(path, kBlockfileHeaderBytes + kBlockfileNoteMaxBytes);  // Io unless a regular file
  const BlockfileHeader h = parse_blockfile_header(head.bytes.data(), head.bytes.size(), path);

  Acquisition a;
  a.format = "blockfile";
  a.master = path;
  a.layout = "blockfile";
  a.dtype = h.element_size == 1 ? DType::U8 : DType::U16;
  a.element_size = h.element_size;
  a.detector_rows = a.detector_cols = h.detector_side;
  a.description = "NanoMegas blockfile";
  a.scan_shape_recorded = std::array<uint64_t, 2>{h.scan_rows, h.scan_cols};
  a.scan_shape_path = "blockfile header: NY, NX";
  if (h.beam_energy_v > 0) a.beam_energy_ev = h.beam_energy_v;  // an electron through V volts gains V eV
  describe_header(a, h);

  const uint64_t frames = h.frames(), record = h.record_bytes();
  const uint64_t stored = head.size > h.data_offset ? head.size - h.data_offset : 0;
  const uint64_t present = std::min(frames, stored / record);
  a.frames_expected = frames;
  a.frames_present = a.frames_extent = present;

  DataPart part;
  part.link = "frames";
  part.file = path;
  part.codec = ChunkCodec::FileRecords;
  part.frames = present;
  part.present = present > 0;
  if (!part.present) part.problem = path + ": no whole frame written yet";
  FileRecords r;
  r.offset = h.data_offset;
  r.record_bytes = record;
  r.header_bytes = kBlockfileFrameHeaderBytes;
  r.pixel_bytes = h.pixel_bytes();
  r.encoding = h.element_size == 1 ? "blockfile uint8" : h.big_endian ? "blockfile uint16 big-endian (byte-swapped)" : "blockfile uint16 little-endian";
  if (h.element_size == 2 && h.big_endian) {
    const uint64_t pixels = h.detector_side * h.detector_side;
    r.unpack = [pixels](const uint8_t* s, uint8_t* f) { big_endian_to_host(s, f, pixels, 2); };
  }
  part.records = std::move(r);
  a.parts.push_back(std::move(part));

  if (present < frames)
    a.problems.push_back(path + ": " + std::to_string(present) + " of " + std::to_string(frames) + " frames present (the file holds " +
                         std::to_string(stored) + " of the " + std::to_string(frames * record) +
                         " bytes of frame records its header's sizes need: still being written, or truncated)");
  check_frame_headers(a, h, present);
  a.signature = acquisition_signature({path});
  return a;
}

std::vector<std::string> discover_blockfiles(const std::string& folder) {
  return find_files(folder, ".blo");
}

}  // namespace

extern const AcquisitionOpener kBlockfileOpener{"blockfile", claims_blockfile, open_blockfile_acquisition, discover_blockfiles, ".blo"};

}  // namespace tmorph
