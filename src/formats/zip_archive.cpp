#include "formats/zip_archive.h"

#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <set>

#include "core/utf8.h"
#include "tensormorph/error.h"

namespace tmorph {

namespace {

constexpr uint32_t kLocalSig = 0x04034b50, kCentralSig = 0x02014b50, kEndSig = 0x06054b50;
constexpr uint32_t kZip64EndSig = 0x06064b50, kZip64LocatorSig = 0x07064b50;
constexpr uint64_t kEndBytes = 22, kZip64LocatorBytes = 20, kZip64EndBytes = 56, kCentralBytes = 46, kLocalBytes = 30;

[[noreturn]] void bad(const std::string& path, uint64_t offset, const std::string& what) {
  // Entry names come from the file and may not be UTF-8.
  throw Error(ErrorKind::BadInput, escape_invalid_utf8(path + ": zip, byte " + std::to_string(offset) + ": " + what));
}

uint64_t le(const uint8_t* p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

// The end records: where the central directory is and how many entries it holds.
struct End {
  uint64_t at = 0;            // offset of the 32-bit end record
  uint64_t entries = 0, cd_size = 0, cd_offset = 0;
  uint64_t limit = 0;         // the central directory must end at or before this offset
};

End read_end(const uint8_t* b, uint64_t size, const std::string& path) {
  if (size < kEndBytes) bad(path, 0, "file of " + std::to_string(size) + " bytes is too short for a zip end record (22 bytes)");
  // The end record is the last 22 bytes unless a comment (at most 65535 bytes) follows it.
  const uint64_t lowest = size - kEndBytes > 65535 ? size - kEndBytes - 65535 : 0;
  End e;
  bool found = false;
  for (uint64_t at = size - kEndBytes + 1; at-- > lowest;) {
    if (le(b + at, 4) == kEndSig && at + kEndBytes + le(b + at + 20, 2) == size) {
      e.at = at;
      found = true;
      break;
    }
  }
  if (!found) bad(path, size, "no end of central directory record in the last 65557 bytes (not a zip, or truncated)");
  const uint8_t* r = b + e.at;
  const uint64_t disk = le(r + 4, 2), cd_disk = le(r + 6, 2), here = le(r + 8, 2);
  e.entries = le(r + 10, 2);
  e.cd_size = le(r + 12, 4);
  e.cd_offset = le(r + 16, 4);
  e.limit = e.at;
  const bool wants64 = e.entries == 0xFFFF || e.cd_size == 0xFFFFFFFF || e.cd_offset == 0xFFFFFFFF;
  const bool has_locator = e.at >= kZip64LocatorBytes && le(b + e.at - kZip64LocatorBytes, 4) == kZip64LocatorSig;
  if (wants64 && !has_locator) bad(path, e.at, "end record holds 0xFFFF.. (zip64) values but no zip64 locator precedes it");
  if (!has_locator) {
    if (disk != 0 || cd_disk != 0 || here != e.entries) bad(path, e.at, "multi-disk archives are not supported");
    return e;
  }
  const uint64_t loc = e.at - kZip64LocatorBytes;
  const uint64_t end64 = le(b + loc + 8, 8);
  if (le(b + loc + 4, 4) != 0 || le(b + loc + 16, 4) > 1) bad(path, loc, "multi-disk archives are not supported");
  if (end64 > loc || loc - end64 < kZip64EndBytes)
    bad(path, loc, "zip64 locator points at " + std::to_string(end64) + ", which leaves no room for the 56-byte zip64 end record before it");
  const uint8_t* z = b + end64;
  if (le(z, 4) != kZip64EndSig) bad(path, end64, "expected the zip64 end record signature (locator points here)");
  const uint64_t record = le(z + 4, 8);
  if (record < kZip64EndBytes - 12 || record > loc - end64 - 12)
    bad(path, end64, "zip64 end record says it is " + std::to_string(record) + " bytes long, which does not fit before its locator");
  if (le(z + 16, 4) != 0 || le(z + 20, 4) != 0 || le(z + 24, 8) != le(z + 32, 8)) bad(path, end64, "multi-disk archives are not supported");
  const uint64_t entries = le(z + 32, 8), cd_size = le(z + 40, 8), cd_offset = le(z + 48, 8);
  // Where the 32-bit record holds a real value, the zip64 one must agree with it.
  auto agree = [&](uint64_t v32, uint64_t sentinel, uint64_t v64, const char* what) {
    if (v32 != sentinel && v32 != v64)
      bad(path, end64, std::string("zip64 end record's ") + what + " " + std::to_string(v64) + " disagrees with the end record's " + std::to_string(v32));
  };
  agree(e.entries, 0xFFFF, entries, "entry count");
  agree(e.cd_size, 0xFFFFFFFF, cd_size, "central directory size");
  agree(e.cd_offset, 0xFFFFFFFF, cd_offset, "central directory offset");
  e.entries = entries;
  e.cd_size = cd_size;
  e.cd_offset = cd_offset;
  e.limit = end64;
  return e;
}

// Replaces the 32-bit fields that say 0xFFFFFFFF by the values of the zip64 extra field (id 1), in the
// order the specification gives: size, compressed size, local header offset.
void apply_zip64(const uint8_t* extra, uint64_t n, uint64_t at, ZipEntry& z, const std::string& path) {
  const bool need[3] = {z.size == 0xFFFFFFFF, z.compressed_size == 0xFFFFFFFF, z.header_offset == 0xFFFFFFFF};
  uint64_t* field[3] = {&z.size, &z.compressed_size, &z.header_offset};
  bool seen = false;
  for (uint64_t i = 0; i < n;) {
    if (n - i < 4) bad(path, at + i, "entry '" + z.name + "': extra field ends inside a record header");
    const uint64_t id = le(extra + i, 2), len = le(extra + i + 2, 2);
    if (len > n - i - 4) bad(path, at + i, "entry '" + z.name + "': extra record of " + std::to_string(len) + " bytes runs past the extra field");
    if (id == 1) {
      seen = true;
      uint64_t k = 0;
      for (int f = 0; f < 3; ++f) {
        if (!need[f]) continue;
        if (len - k < 8) bad(path, at + i, "entry '" + z.name + "': zip64 extra record is too short for the values the entry marks 0xFFFFFFFF");
        *field[f] = le(extra + i + 4 + k, 8);
        k += 8;
      }
    }
    i += 4 + len;
  }
  if ((need[0] || need[1] || need[2]) && !seen)
    bad(path, at, "entry '" + z.name + "' marks a size or offset 0xFFFFFFFF (zip64) but has no zip64 extra record");
}

}  // namespace

const ZipEntry* ZipDirectory::find(const std::string& name) const {
  for (const auto& e : entries)
    if (e.name == name) return &e;
  return nullptr;
}

bool looks_like_zip(const uint8_t* bytes, uint64_t size) {
  return size >= 4 && (le(bytes, 4) == kLocalSig || le(bytes, 4) == kEndSig);
}

ZipSpan locate_zip_central_directory(const uint8_t* b, uint64_t size, const std::string& path) {
  const End e = read_end(b, size, path);
  return {e.cd_offset, e.cd_size};
}

ZipDirectory read_zip_central_directory(const uint8_t* b, uint64_t size, const std::string& path) {
  const End e = read_end(b, size, path);
  if (e.cd_offset > e.limit || e.cd_size > e.limit - e.cd_offset)
    bad(path, e.at, "central directory (offset " + std::to_string(e.cd_offset) + ", " + std::to_string(e.cd_size) +
                        " bytes) runs past the end records at " + std::to_string(e.limit));
  if (e.entries > e.cd_size / kCentralBytes)
    bad(path, e.at, "end record claims " + std::to_string(e.entries) + " entries; a central directory of " + std::to_string(e.cd_size) +
                        " bytes holds at most " + std::to_string(e.cd_size / kCentralBytes));
  ZipDirectory d;
  d.central_directory_offset = e.cd_offset;
  d.central_directory_bytes = e.cd_size;
  std::set<std::string> names;
  const uint64_t cd_end = e.cd_offset + e.cd_size;
  uint64_t at = e.cd_offset;
  for (uint64_t i = 0; i < e.entries; ++i) {
    if (cd_end - at < kCentralBytes) bad(path, at, "central directory entry " + std::to_string(i) + " runs past the directory's end");
    const uint8_t* c = b + at;
    if (le(c, 4) != kCentralSig) bad(path, at, "expected central directory entry " + std::to_string(i) + " (signature PK\\1\\2)");
    ZipEntry z;
    const uint64_t flags = le(c + 8, 2);
    z.method = static_cast<uint16_t>(le(c + 10, 2));
    z.crc32 = static_cast<uint32_t>(le(c + 16, 4));
    z.compressed_size = le(c + 20, 4);
    z.size = le(c + 24, 4);
    const uint64_t n = le(c + 28, 2), m = le(c + 30, 2), k = le(c + 32, 2);
    if (le(c + 34, 2) != 0) bad(path, at, "multi-disk archives are not supported");
    z.header_offset = le(c + 42, 4);
    if (n + m + k > cd_end - at - kCentralBytes) bad(path, at, "central directory entry " + std::to_string(i) + "'s name, extra field and comment run past the directory's end");
    z.name.assign(reinterpret_cast<const char*>(c + kCentralBytes), n);
    if (flags & 1) bad(path, at, "entry '" + z.name + "' is encrypted (refused)");
    apply_zip64(c + kCentralBytes + n, m, at + kCentralBytes + n, z, path);
    if (!names.insert(z.name).second) bad(path, at, "entry '" + z.name + "' appears twice");
    if (z.header_offset > e.cd_offset || e.cd_offset - z.header_offset < kLocalBytes)
      bad(path, at, "entry '" + z.name + "': local header offset " + std::to_string(z.header_offset) + " is not before the central directory");
    if (z.method == 0 && z.compressed_size != z.size)
      bad(path, at, "stored entry '" + z.name + "' has compressed size " + std::to_string(z.compressed_size) + " but size " + std::to_string(z.size));
    d.entries.push_back(std::move(z));
    at += kCentralBytes + n + m + k;
  }
  if (at != cd_end) bad(path, at, std::to_string(cd_end - at) + " bytes of the central directory follow its last entry");
  return d;
}

ZipDirectory read_zip_directory(const uint8_t* b, uint64_t size, const std::string& path) {
  ZipDirectory d = read_zip_central_directory(b, size, path);
  const uint64_t cd_offset = d.central_directory_offset;
  for (ZipEntry& z : d.entries) {
    // The local header: same name, data right after its name and extra field, before the directory.
    const uint64_t n = z.name.size();
    const uint8_t* l = b + z.header_offset;
    if (le(l, 4) != kLocalSig) bad(path, z.header_offset, "expected the local header of entry '" + z.name + "' (signature PK\\3\\4)");
    if (le(l + 8, 2) != z.method) bad(path, z.header_offset, "entry '" + z.name + "': local header's method disagrees with the central directory's");
    const uint64_t ln = le(l + 26, 2), lm = le(l + 28, 2);
    if (ln + lm > cd_offset - z.header_offset - kLocalBytes) bad(path, z.header_offset, "entry '" + z.name + "': local header runs into the central directory");
    if (ln != n || std::string(reinterpret_cast<const char*>(l + kLocalBytes), ln) != z.name)
      bad(path, z.header_offset, "entry '" + z.name + "': local header names another entry");
    z.data_offset = z.header_offset + kLocalBytes + ln + lm;
    if (z.compressed_size > cd_offset - z.data_offset)
      bad(path, z.data_offset, "entry '" + z.name + "': " + std::to_string(z.compressed_size) + " bytes of data run past the central directory at " + std::to_string(cd_offset));
  }
  // No two entries may share bytes: sorted by header offset, each ends before the next begins.
  std::vector<const ZipEntry*> order;
  for (const auto& z : d.entries) order.push_back(&z);
  std::sort(order.begin(), order.end(), [](auto* x, auto* y) { return x->header_offset < y->header_offset; });
  for (size_t i = 1; i < order.size(); ++i) {
    const ZipEntry& prev = *order[i - 1];
    if (prev.data_offset + prev.compressed_size > order[i]->header_offset)
      bad(path, order[i]->header_offset, "entry '" + order[i]->name + "' overlaps entry '" + prev.name + "' (which ends at " +
                                             std::to_string(prev.data_offset + prev.compressed_size) + ")");
  }
  return d;
}

uint32_t zip_crc32(const uint8_t* bytes, uint64_t size, uint32_t crc) {
  return static_cast<uint32_t>(crc32_z(crc, bytes, static_cast<z_size_t>(size)));
}

void check_zip_crc(uint32_t recorded, uint32_t computed, const std::string& entry, uint64_t offset, uint64_t size, const std::string& path) {
  if (computed == recorded) return;
  char values[64];
  std::snprintf(values, sizeof values, "0x%08x, its bytes' is 0x%08x", recorded, computed);
  bad(path, offset, "entry '" + entry + "' (" + std::to_string(size) + " bytes): CRC-32 recorded in the central directory is " + values +
                        " (damaged)");
}

void check_zip_crc(const uint8_t* archive, const ZipEntry& e, const std::string& path) {
  check_zip_crc(e.crc32, zip_crc32(archive + e.data_offset, e.size), e.name, e.data_offset, e.size, path);
}

}  // namespace tmorph
