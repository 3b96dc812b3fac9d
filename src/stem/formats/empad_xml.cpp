// The EMPAD sidecar parser (empad_xml.h): a small recursive-descent reader of the XML subset EMPAD writes, which
// fills the metadata map as it goes and then picks the raw file and the scan shape out of it.
#include "stem/formats/empad_xml.h"

#include <cstdio>
#include <cstring>
#include <string_view>
#include <utility>
#include <vector>

#include "core/utf8.h"
#include "tensormorph/error.h"

namespace tmorph {

namespace {

constexpr size_t kMaxDepth = 64;
constexpr size_t kMaxEntries = 4096;
constexpr size_t kMaxValueBytes = 4096;  // longer texts are kept cut, with "…" appended

class Parser {
 public:
  Parser(const uint8_t* d, size_t n, const std::string& path) : s_(reinterpret_cast<const char*>(d), n), path_(path) {}

  nlohmann::json parse(std::string* root_name) {
    skip_misc(true);
    if (at_end()) fail("expected the root element");
    parse_element("", 0, root_name);
    skip_misc(false);
    if (!at_end()) fail("expected nothing after the root element");
    return std::move(meta_);
  }

 private:
  std::string_view s_;
  size_t i_ = 0;
  const std::string& path_;
  nlohmann::json meta_ = nlohmann::json::object();

  [[noreturn]] void fail(const std::string& what) const {
    throw Error(ErrorKind::BadInput, path_ + ": not well-formed XML at byte " + std::to_string(i_) + ": " + what);
  }
  bool at_end() const { return i_ >= s_.size(); }
  bool starts(std::string_view p) const { return s_.substr(i_, p.size()) == p; }
  void skip_space() {
    while (!at_end() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  // Skips past `end`, failing with `what` when the text ends first.
  void skip_past(std::string_view end, const char* what) {
    const size_t at = s_.find(end, i_);
    if (at == std::string_view::npos) fail(std::string("unterminated ") + what);
    i_ = at + end.size();
  }
  // Whitespace, comments, processing instructions (the XML declaration) and, before the root, one DOCTYPE.
  void skip_misc(bool prolog) {
    for (;;) {
      skip_space();
      if (starts("<!--")) skip_past("-->", "comment");
      else if (starts("<?")) skip_past("?>", "processing instruction");
      else if (prolog && starts("<!DOCTYPE")) {
        const size_t gt = s_.find('>', i_), bracket = s_.find('[', i_);
        if (bracket != std::string_view::npos && (gt == std::string_view::npos || bracket < gt))
          fail("a DOCTYPE with an internal subset is not read");
        skip_past(">", "DOCTYPE");
      } else return;
    }
  }
  static bool name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.' ||
           c == ':' || static_cast<unsigned char>(c) >= 0x80;
  }
  std::string name(const char* what) {
    const size_t b = i_;
    while (!at_end() && name_char(s_[i_])) ++i_;
    if (i_ == b || (s_[b] >= '0' && s_[b] <= '9') || s_[b] == '-' || s_[b] == '.') fail(std::string("expected ") + what);
    return std::string(s_.substr(b, i_ - b));
  }
  // Decodes character references in raw text (up to `end`), appending to out.
  void decode(std::string_view raw, size_t raw_at, std::string& out) {
    for (size_t k = 0; k < raw.size(); ++k) {
      if (raw[k] != '&') {
        out += raw[k];
        continue;
      }
      const size_t semi = raw.find(';', k);
      if (semi == std::string_view::npos || semi - k > 12) i_ = raw_at + k, fail("expected a character reference ending in ';'");
      const std::string_view ref = raw.substr(k + 1, semi - k - 1);
      if (ref == "lt") out += '<';
      else if (ref == "gt") out += '>';
      else if (ref == "amp") out += '&';
      else if (ref == "quot") out += '"';
      else if (ref == "apos") out += '\'';
      else if (ref.size() > 1 && ref[0] == '#') {
        const bool hex = ref[1] == 'x';
        uint32_t cp = 0;
        const std::string_view digits = ref.substr(hex ? 2 : 1);
        for (char c : digits) {
          const int v = c >= '0' && c <= '9' ? c - '0' : hex && c >= 'a' && c <= 'f' ? c - 'a' + 10 : hex && c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
          if (v < 0 || cp > 0x10FFFF) i_ = raw_at + k, fail("expected a decimal or hexadecimal character reference");
          cp = cp * (hex ? 16 : 10) + static_cast<uint32_t>(v);
        }
        if (digits.empty() || cp == 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
          i_ = raw_at + k, fail("expected a character reference to a Unicode scalar value");
        if (cp < 0x80) out += static_cast<char>(cp);
        else if (cp < 0x800) out += static_cast<char>(0xC0 | cp >> 6), out += static_cast<char>(0x80 | (cp & 0x3F));
        else if (cp < 0x10000)
          out += static_cast<char>(0xE0 | cp >> 12), out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F)), out += static_cast<char>(0x80 | (cp & 0x3F));
        else
          out += static_cast<char>(0xF0 | cp >> 18), out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F)),
              out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F)), out += static_cast<char>(0x80 | (cp & 0x3F));
      } else {
        i_ = raw_at + k, fail("unknown entity '&" + std::string(ref) + ";'");
      }
      k = semi;
    }
  }
  // Keeps a value (first occurrence of a path wins), at most kMaxValueBytes of it; control characters and bytes
  // that are not UTF-8 become \xNN (a strict JSON dump would throw on them).
  void keep(const std::string& raw_key, const std::string& value) {
    const std::string key = escape_invalid_utf8(raw_key);
    if (meta_.contains(key)) return;
    if (meta_.size() >= kMaxEntries) fail("more than " + std::to_string(kMaxEntries) + " elements and attributes");
    std::string v;
    for (unsigned char c : value.substr(0, kMaxValueBytes)) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02X", c);
      v += c < 0x20 && c != '\t' && c != '\n' && c != '\r' ? std::string(hex) : std::string(1, static_cast<char>(c));
    }
    meta_[key] = {{"value", escape_invalid_utf8(v) + (value.size() > kMaxValueBytes ? "…" : "")}};
  }
  void parse_element(const std::string& parent, size_t depth, std::string* root_name) {
    if (depth >= kMaxDepth) fail("elements nested more than " + std::to_string(kMaxDepth) + " deep");
    if (!starts("<")) fail("expected '<'");
    ++i_;
    const std::string tag = name("an element name");
    if (root_name) *root_name = tag;
    std::vector<std::pair<std::string, std::string>> attributes;
    std::string here;
    // The element's path, once its attributes are read: "parent/tag"; a <scan_parameters> whose mode is not
    // "acquire" (EMPAD writes one per mode: search, acquire) is "parent/scan_parameters[mode=search]", so that
    // root/scan_parameters/... are always the acquisition's own.
    const auto place = [&] {
      std::string segment = tag;
      for (const auto& [attr, value] : attributes)
        if (tag == "scan_parameters" && attr == "mode" && value != "acquire")  // at most 64 bytes of it in every path below
          segment += "[mode=" + value.substr(0, 64) + (value.size() > 64 ? "…" : "") + "]";
      here = parent.empty() ? segment : parent + "/" + segment;
      for (const auto& [attr, value] : attributes) keep(here + "@" + attr, value);
    };
    for (;;) {  // attributes
      const size_t before = i_;
      skip_space();
      if (at_end()) fail("unterminated start tag <" + tag + ">");
      if (starts("/>")) {
        i_ += 2;
        place();
        return;
      }
      if (s_[i_] == '>') {
        ++i_;
        place();
        break;
      }
      if (i_ == before) fail("expected whitespace before an attribute of <" + tag + ">");
      const std::string attr = name("an attribute name");
      skip_space();
      if (at_end() || s_[i_] != '=') fail("expected '=' after attribute " + attr);
      ++i_;
      skip_space();
      if (at_end() || (s_[i_] != '"' && s_[i_] != '\'')) fail("expected a quoted value for attribute " + attr);
      const char q = s_[i_++];
      const size_t end = s_.find(q, i_);
      if (end == std::string_view::npos) fail("unterminated value of attribute " + attr);
      const std::string_view raw = s_.substr(i_, end - i_);
      if (raw.find('<') != std::string_view::npos) fail("'<' inside the value of attribute " + attr);
      std::string value;
      decode(raw, i_, value);
      i_ = end + 1;
      attributes.emplace_back(attr, std::move(value));
    }
    std::string text;
    for (;;) {  // content
      if (at_end()) fail("expected </" + tag + ">");
      if (starts("</")) {
        const size_t end_tag = i_;
        i_ += 2;
        const std::string closing = name("an end tag name");
        if (closing != tag) i_ = end_tag, fail("expected </" + tag + ">, found </" + closing + ">");
        skip_space();
        if (at_end() || s_[i_] != '>') fail("expected '>' ending </" + tag + ">");
        ++i_;
        break;
      }
      if (starts("<!--")) {
        skip_past("-->", "comment");
      } else if (starts("<![CDATA[")) {
        i_ += 9;
        const size_t end = s_.find("]]>", i_);
        if (end == std::string_view::npos) fail("unterminated CDATA section");
        text.append(s_.substr(i_, end - i_));
        i_ = end + 3;
      } else if (starts("<?")) {
        skip_past("?>", "processing instruction");
      } else if (s_[i_] == '<') {
        parse_element(here, depth + 1, nullptr);
      } else {
        const size_t end = std::min(s_.find('<', i_), s_.size());
        decode(s_.substr(i_, end - i_), i_, text);
        i_ = end;
      }
    }
    // Leading and trailing whitespace is layout, not value.
    const size_t b = text.find_first_not_of(" \t\r\n"), e = text.find_last_not_of(" \t\r\n");
    if (b != std::string::npos) keep(here, text.substr(b, e - b + 1));
  }
};

// A scan extent: a decimal integer in 1 .. 2^32 - 1, optionally in single quotes (as some EMPAD versions write).
std::optional<uint64_t> extent(const nlohmann::json& meta, const std::string& key, const std::string& path) {
  if (!meta.contains(key)) return std::nullopt;
  std::string v = meta[key]["value"].get<std::string>();
  if (v.size() >= 2 && v.front() == '\'' && v.back() == '\'') v = v.substr(1, v.size() - 2);
  uint64_t n = 0;
  bool ok = !v.empty() && v.size() <= 10;
  for (char c : v) ok = ok && c >= '0' && c <= '9', n = n * 10 + static_cast<uint64_t>(c - '0');
  if (!ok || n == 0 || n >= (uint64_t{1} << 32))
    throw Error(ErrorKind::BadInput, path + ": " + key + " is '" + meta[key]["value"].get<std::string>() +
                                         "': expected a positive whole number of scan positions below 2^32");
  return n;
}

}  // namespace

bool looks_like_empad_xml(const uint8_t* data, size_t size) {
  static constexpr char kTag[] = "<raw_file";
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  return text.find(kTag) != std::string_view::npos;
}

EmpadXml parse_empad_xml(const uint8_t* data, size_t size, const std::string& path) {
  if (size > kEmpadXmlMaxBytes)
    throw Error(ErrorKind::BadInput, path + ": " + std::to_string(size) + " bytes: an EMPAD .xml sidecar is expected below " +
                                         std::to_string(kEmpadXmlMaxBytes) + " bytes");
  std::string root;
  EmpadXml x;
  x.metadata = Parser(data, size, path).parse(&root);
  if (root != "root") throw Error(ErrorKind::BadInput, path + ": root element <" + root + ">: an EMPAD sidecar's is <root>");
  if (!x.metadata.contains("root/raw_file@filename") || x.metadata["root/raw_file@filename"]["value"].get<std::string>().empty())
    throw Error(ErrorKind::BadInput, path + ": root/raw_file@filename: expected the name of the .raw file holding the frames");
  x.raw_filename = x.metadata["root/raw_file@filename"]["value"].get<std::string>();
  const auto pair = [&](const std::string& kx, const std::string& ky) {
    const auto sx = extent(x.metadata, kx, path), sy = extent(x.metadata, ky, path);
    if (x.scan_x || !sx || !sy) return;
    x.scan_x = sx, x.scan_y = sy, x.scan_x_path = kx, x.scan_y_path = ky;
  };
  pair("root/pix_x", "root/pix_y");
  pair("root/scan_parameters/scan_resolution_x", "root/scan_parameters/scan_resolution_y");
  x.series_count = extent(x.metadata, "root/scan_parameters/series_count", path);
  if (!x.scan_x && !x.series_count)
    throw Error(ErrorKind::BadInput, path + ": no scan shape: expected root/pix_x and root/pix_y, "
                                            "root/scan_parameters/scan_resolution_x and _y, or root/scan_parameters/series_count");
  return x;
}

}  // namespace tmorph
