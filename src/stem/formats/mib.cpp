#include "stem/formats/mib.h"

#include <algorithm>
#include <charconv>
#include <string_view>

#include "tensormorph/error.h"

namespace tmorph {

namespace {

std::string_view trim_spaces(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

std::optional<uint64_t> parse_unsigned(std::string_view s) {
  s = trim_spaces(s);
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<double> parse_double(std::string_view s) {
  s = trim_spaces(s);
  double v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

// Printable ASCII of a field for an error message (at most 24 characters).
std::string shown(std::string_view s) {
  std::string out = "'";
  for (char c : s.substr(0, 24)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  return out + (s.size() > 24 ? "…'" : "'");
}

struct Field {
  std::string_view text;
  size_t begin = 0;  // byte offset in the header
};

std::vector<Field> split_fields(std::string_view text) {
  std::vector<Field> out;
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i)
    if (i == text.size() || text[i] == ',') {
      out.push_back({text.substr(start, i - start), start});
      start = i + 1;
    }
  return out;
}

}  // namespace

MibFrameHeader parse_mib_frame_header(const uint8_t* bytes, size_t n, const std::string& file, uint64_t offset) {
  const std::string where = file + ": frame header at byte " + std::to_string(offset);
  auto bad = [&](const std::string& what) { return Error(ErrorKind::BadInput, where + ": " + what); };
  if (n < 4 || std::string_view(reinterpret_cast<const char*>(bytes), 4) != "MQ1,")
    throw bad(n < 4 ? "only " + std::to_string(n) + " bytes, expected a header starting 'MQ1,' (truncated file)"
                    : "expected 'MQ1,' (a Merlin frame header), found " +
                          shown(std::string_view(reinterpret_cast<const char*>(bytes), std::min<size_t>(n, 4))));
  // The text ends at the first NUL (the padding) or at the header's own length.
  const size_t limit = std::min<size_t>(n, kMibMaxHeaderBytes);
  size_t text_end = 0;
  while (text_end < limit && bytes[text_end] != 0) ++text_end;
  std::string_view text(reinterpret_cast<const char*>(bytes), text_end);
  auto fields = split_fields(text);
  if (fields.size() < 3) throw bad("expected the header length in field 2, found only " + std::to_string(fields.size()) + " fields");
  MibFrameHeader h;
  const auto header_bytes = parse_unsigned(fields[2].text);
  if (!header_bytes) throw bad("field 2 (header bytes) is " + shown(fields[2].text) + ", expected a number");
  if (*header_bytes < 16 || *header_bytes > kMibMaxHeaderBytes)
    throw bad("header length " + std::to_string(*header_bytes) + " bytes, expected 16 to " + std::to_string(kMibMaxHeaderBytes));
  if (*header_bytes > n)
    throw bad("the header says it is " + std::to_string(*header_bytes) + " bytes, only " + std::to_string(n) +
              " bytes are there (truncated file)");
  h.header_bytes = *header_bytes;
  if (text.size() > h.header_bytes) {
    text = text.substr(0, h.header_bytes);
    fields = split_fields(text);
  }
  // A trailing comma leaves one empty field before the padding.
  if (!fields.empty() && trim_spaces(fields.back().text).empty()) fields.pop_back();
  if (fields.size() < 8) throw bad("expected at least 8 comma-separated fields, found " + std::to_string(fields.size()));

  auto number = [&](size_t i, const char* name) {
    const auto v = parse_unsigned(fields[i].text);
    if (!v) throw bad("field " + std::to_string(i) + " (" + name + ") is " + shown(fields[i].text) + ", expected a number");
    return *v;
  };
  h.sequence = number(1, "sequence number");
  const uint64_t chips = number(3, "chips");
  if (chips < 1 || chips > 64) throw bad(std::to_string(chips) + " chips, expected 1 to 64");
  h.chips = static_cast<uint32_t>(chips);
  h.width = number(4, "width");
  h.height = number(5, "height");
  if (h.width < 1 || h.height < 1 || h.width > kMibMaxSide || h.height > kMibMaxSide || h.width * h.height > kMibMaxPixels)
    throw bad("frame of " + std::to_string(h.width) + " x " + std::to_string(h.height) + " pixels, expected 1 to " +
              std::to_string(kMibMaxSide) + " a side and at most " + std::to_string(kMibMaxPixels) + " pixels");
  h.pixel_type = std::string(trim_spaces(fields[6].text));
  h.chip_layout = std::string(trim_spaces(fields[7].text));
  h.layout_begin = fields[2].begin;
  h.layout_end = fields[7].begin + fields[7].text.size();

  // Optional fields: kept when they parse, left out when they do not (they change nothing that is read).
  auto optional_unsigned = [&](size_t i) -> std::optional<uint32_t> {
    if (i >= fields.size()) return std::nullopt;
    const auto v = parse_unsigned(fields[i].text);
    return v && *v <= UINT32_MAX ? std::optional<uint32_t>(static_cast<uint32_t>(*v)) : std::nullopt;
  };
  if (fields.size() > 8) h.chip_select = std::string(trim_spaces(fields[8].text));
  if (fields.size() > 9) h.timestamp = std::string(trim_spaces(fields[9].text));
  if (fields.size() > 10) h.shutter_s = parse_double(fields[10].text);
  h.counter = optional_unsigned(11);
  h.colour_mode = optional_unsigned(12);
  h.gain_mode = optional_unsigned(13);
  for (size_t i = 14; i < std::min<size_t>(fields.size(), 22); ++i) {
    const auto t = parse_double(fields[i].text);
    if (!t) break;
    h.thresholds_kev.push_back(*t);
  }
  // The extended header: the depth a raw frame needs is its last field.
  for (size_t i = 8; i < fields.size(); ++i) {
    if (trim_spaces(fields[i].text) != "MQ1A") continue;
    if (i + 1 < fields.size()) h.timestamp_ext = std::string(trim_spaces(fields[i + 1].text));
    if (i + 2 < fields.size()) {
      std::string_view ns = trim_spaces(fields[i + 2].text);
      if (ns.ends_with("ns")) ns.remove_suffix(2);
      h.shutter_ns = parse_double(ns);
    }
    if (i + 3 < fields.size()) {
      const auto depth = parse_unsigned(fields[i + 3].text);
      if (!depth || *depth > 64) throw bad("counter depth (field " + std::to_string(i + 3) + ") is " + shown(fields[i + 3].text) + ", expected bits");
      h.counter_depth = static_cast<uint32_t>(*depth);
    }
    break;
  }
  return h;
}

MibAcquisitionHeader parse_mib_acquisition_header(const std::string& text, const std::string& file) {
  if (!text.starts_with("HDR")) throw Error(ErrorKind::BadInput, file + ": expected a Merlin acquisition header starting 'HDR'");
  MibAcquisitionHeader h;
  size_t line_no = 0;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string_view line = trim_spaces(std::string_view(text).substr(start, end - start));
    start = end + 1;
    ++line_no;
    if (line.empty() || line.starts_with("HDR") || line == "End" || line.starts_with("End\t")) continue;
    size_t cut = line.find('\t');
    if (cut == std::string_view::npos) cut = line.find(':');
    if (cut == std::string_view::npos) continue;  // not a "key: value" line: kept out
    std::string_view key = trim_spaces(line.substr(0, cut));
    while (!key.empty() && key.back() == ':') key.remove_suffix(1);
    const std::string_view value = trim_spaces(line.substr(cut + 1));
    h.fields.emplace_back(std::string(key), std::string(value));
    auto number = [&]() {
      const auto v = parse_unsigned(value);
      if (!v) throw Error(ErrorKind::BadInput, file + ": line " + std::to_string(line_no) + ": " + std::string(key) + " is " + shown(value) +
                                                   ", expected a number");
      return *v;
    };
    if (key == "Frames in Acquisition (Number)") h.frames_in_acquisition = number();
    else if (key == "Frames per Trigger (Number)") h.frames_per_trigger = number();
    else if (key == "Counter Depth (number)") {
      const uint64_t d = number();
      if (d > 64) throw Error(ErrorKind::BadInput, file + ": line " + std::to_string(line_no) + ": counter depth " + std::to_string(d) + ", expected bits");
      h.counter_depth = static_cast<uint32_t>(d);
    } else if (key == "ScanX") h.scan_x = number();
    else if (key == "ScanY") h.scan_y = number();
    else if (key.starts_with("Assembly Size")) h.assembly_size = std::string(value);
    else if (key.starts_with("Chip Type")) h.chip_type = std::string(value);
  }
  return h;
}

}  // namespace tmorph
