// NumPy .npy arrays as 4D-STEM acquisitions: a C-order array (Rr, Rc, Kr, Kc) — the scan shape recorded by the
// array — or (N, Kr, Kc) with the scan shape given (--scan-shape), of unsigned counts u1, u2 or u4 in either byte
// order. The header is read by formats/npy_header.h; the frames stay in the file (one FileRecords run, read with
// pread by the frame reader), never loaded whole.
//
// .npy is also a checkpoint format, and `tensormorph serve` routes a path by looks_like_acquisition, so this row's
// claims() reads the header (at most 1 MiB + 12 bytes), not only the name: it claims a .npy holding a 4-D array of
// unsigned integers, or a 3-D one whose detector extents are both above 4 (a channel-last RGB/RGBA image stack
// stays a checkpoint). Anything else — a 2-D array, floats, signed integers — stays a checkpoint. A .npy whose header
// cannot be read (cut short, malformed, not a regular file) is claimed, so that its error is the .npy reader's.
#include <cstring>
#include <filesystem>

#include "formats/npy_header.h"
#include "stem/formats/acquisition_openers.h"
#include "stem/formats/plain_files.h"
#include "tensormorph/error.h"

namespace tmorph {

namespace {

namespace fs = std::filesystem;

// The magic, the version and a 4-byte length, then a header of at most 1 MiB (npy_header.cpp's limit).
constexpr uint64_t kHeadBytes = 12 + (uint64_t{1} << 20);
// A 3-D array whose last two extents are both above this is a stack of detector frames (not RGB(A) images).
constexpr uint64_t kMinDetectorExtent3d = 5;

// Parses the header in `head` without requiring its payload to be in the file yet: a file still being written,
// or cut short, holds fewer frames than its shape says, which open() reports as readiness, not as an error.
NpyHeader read_header(const FileHead& head, const std::string& path) {
  const auto& b = head.bytes;
  uint64_t header_end = 0;  // prefix + header length, when the bytes give them
  if (looks_like_npy(b.data(), b.size()) && b.size() >= 12) {
    if (b[6] == 1) header_end = 10 + (uint64_t{b[8]} | uint64_t{b[9]} << 8);
    else if (b[6] == 2 || b[6] == 3)
      header_end = 12 + (uint64_t{b[8]} | uint64_t{b[9]} << 8 | uint64_t{b[10]} << 16 | uint64_t{b[11]} << 24);
  }
  // parse_npy_header reads only [0, header_end) and checks the payload against the size it is given: with the whole
  // header in hand it gets an unbounded size (the frames are counted against the file below); otherwise the bytes'
  // own size, and it names what is short.
  const bool whole_header = header_end != 0 && header_end <= b.size();
  return parse_npy_header(b.data(), whole_header ? UINT64_MAX : b.size(), path);
}

bool is_unsigned_descr(const std::string& descr) { return descr.size() >= 2 && descr[1] == 'u'; }

bool claims_npy(const std::string& path) {
  if (!has_extension(path, ".npy")) return false;
  try {
    const NpyHeader h = read_header(read_file_head(path, kHeadBytes), path);
    if (!is_unsigned_descr(h.descr)) return false;
    if (h.shape.size() == 4) return true;
    return h.shape.size() == 3 && h.shape[1] >= kMinDetectorExtent3d && h.shape[2] >= kMinDetectorExtent3d;
  } catch (const Error&) {
    return true;  // a damaged .npy (or not a regular file): open() says why; a checkpoint opener would refuse it too
  }
}

std::string shape_text(const std::vector<uint64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

[[noreturn]] void refuse(const std::string& path, const std::string& why) { throw Error(ErrorKind::BadInput, path + ": " + why); }

Acquisition open_npy_acquisition(const std::string& path_in) {
  const std::string path = fs::absolute(path_in).lexically_normal().string();
  const FileHead head = read_file_head(path, kHeadBytes);  // Io unless a regular file
  const NpyHeader h = read_header(head, path);

  // The dtype: unsigned counts of 1, 2 or 4 bytes. Products are integer counts summed exactly in 64 bits; a float or
  // signed array is not counts (gain-corrected or background-subtracted data), and u8 would overflow those sums.
  const std::string& d = h.descr;
  const bool big = d.size() >= 2 && d[0] == '>';
  DType dtype = DType::U8;
  if (d == "|u1" || d == "<u1" || d == ">u1" || d == "=u1") dtype = DType::U8;
  else if (d.size() == 3 && d.substr(1) == "u2" && d[0] != '|') dtype = DType::U16;
  else if (d.size() == 3 && d.substr(1) == "u4" && d[0] != '|') dtype = DType::U32;
  else
    refuse(path, "descr '" + d + "': 4D-STEM frames must be unsigned integer counts stored as u1, u2 or u4 (either byte order); "
                 "convert with a.astype(np.uint16) or np.uint32 where the values are counts");
  if (h.fortran_order)
    refuse(path, "fortran_order is True: each frame's pixels are spread over the whole file; save a C-order copy "
                 "(np.save(path, np.ascontiguousarray(a)))");
  if (h.shape.size() != 3 && h.shape.size() != 4)
    refuse(path, "shape " + shape_text(h.shape) + ": expected (scan rows, scan cols, detector rows, detector cols), or "
                 "(frames, detector rows, detector cols) with --scan-shape");
  for (uint64_t e : h.shape)
    if (e == 0) refuse(path, "shape " + shape_text(h.shape) + " has an extent of 0: no frames to read");

  const size_t n = h.shape.size();
  const uint64_t element = dtype_size(dtype), rows = h.shape[n - 2], cols = h.shape[n - 1];
  const uint64_t frames = n == 4 ? h.shape[0] * h.shape[1] : h.shape[0];  // the parser bounded every product
  const uint64_t frame_bytes = rows * cols * element;

  Acquisition a;
  a.format = "npy";
  a.master = path;
  a.layout = n == 4 ? "npy-4d" : "npy-3d";
  a.dtype = dtype;
  a.element_size = static_cast<uint32_t>(element);
  a.detector_rows = rows;
  a.detector_cols = cols;
  a.description = "NumPy .npy array " + shape_text(h.shape) + " '" + d + "'";
  if (n == 4) {
    a.scan_shape_recorded = std::array<uint64_t, 2>{h.shape[0], h.shape[1]};
    a.scan_shape_path = "npy header: shape";
  }
  a.metadata["npy/descr"] = {{"value", d}};
  a.metadata["npy/fortran_order"] = {{"value", h.fortran_order}};
  a.metadata["npy/shape"] = {{"value", h.shape}};
  a.metadata["npy/format_version"] = {{"value", std::to_string(h.major_version) + ".0"}};
  a.metadata["npy/data_offset"] = {{"value", h.data_offset}, {"units", "bytes"}};

  // Frames present: the whole frames the file holds now (a file being written, or cut short, holds fewer).
  const uint64_t payload = head.size > h.data_offset ? head.size - h.data_offset : 0;
  const uint64_t present = std::min(frames, payload / frame_bytes);
  a.frames_expected = frames;
  a.frames_present = present;
  a.frames_extent = present;

  DataPart part;
  part.link = "array";
  part.file = path;
  part.codec = ChunkCodec::FileRecords;
  part.frames = present;
  part.first_frame = 0;
  part.present = present > 0;
  if (!part.present) part.problem = path + ": no whole frame written yet";
  FileRecords r;
  r.offset = h.data_offset;
  r.record_bytes = frame_bytes;
  r.header_bytes = 0;
  r.pixel_bytes = frame_bytes;
  const std::string type = std::string(dtype == DType::U8 ? "uint8" : dtype == DType::U16 ? "uint16" : "uint32");
  if (big && element > 1) {
    r.encoding = "npy " + type + " big-endian (byte-swapped)";
    const uint64_t pixels = rows * cols;
    const uint32_t size = static_cast<uint32_t>(element);
    r.unpack = [pixels, size](const uint8_t* s, uint8_t* f) { big_endian_to_host(s, f, pixels, size); };
  } else {
    r.encoding = "npy " + type + (element > 1 ? " little-endian" : "");
  }
  part.records = std::move(r);
  a.parts.push_back(std::move(part));

  if (present < frames)
    a.problems.push_back(path + ": " + std::to_string(present) + " of " + std::to_string(frames) + " frames present (the file holds " +
                         std::to_string(payload) + " of the " + std::to_string(frames * frame_bytes) +
                         " payload bytes its header's shape needs: still being written, or truncated)");
  else if (payload > frames * frame_bytes)
    a.problems.push_back(path + ": " + std::to_string(payload - frames * frame_bytes) +
                         " bytes after the last frame its header's shape describes (numpy writes none): the header may not "
                         "describe the data");
  a.signature = acquisition_signature({path});
  return a;
}

std::vector<std::string> discover_npy(const std::string& folder) { return find_files(folder, ".npy", claims_npy); }

}  // namespace

extern const AcquisitionOpener kNpyOpener{"npy", claims_npy, open_npy_acquisition, discover_npy, ".npy"};

}  // namespace tmorph
