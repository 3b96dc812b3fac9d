// The directory of a ZIP archive held in memory (a mapped file): entry names and where each entry's
// bytes lie, so stored (uncompressed) entries can be read in place. Nothing is decompressed.
//
// Read from the end of central directory record (and its zip64 form when present), then the central
// directory, then each entry's local header; every offset and length is checked against the file:
// entries must lie before the central directory, not overlap one another, agree with their local
// headers, and zip64 values must be present exactly where a 32-bit field says 0xFFFFFFFF (and agree
// with the 32-bit end record where both exist). Multi-disk archives and encrypted entries are refused.
// Errors are tmorph::Error(BadInput) naming the file, the byte offset and the field. Reading the
// directory checks no CRC (that would read every byte); check_zip_crc checks one stored entry's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tmorph {

struct ZipEntry {
  std::string name;
  uint16_t method = 0;          // 0 stored, 8 deflate, ...
  uint64_t header_offset = 0;   // the local header
  uint64_t data_offset = 0;     // first byte of the entry's (stored or compressed) data; 0 until the local header is read
  uint64_t compressed_size = 0;
  uint64_t size = 0;            // uncompressed
  uint32_t crc32 = 0;           // of the uncompressed bytes, as the central directory records it
};

struct ZipDirectory {
  std::vector<ZipEntry> entries;  // in central-directory order
  uint64_t central_directory_offset = 0;
  uint64_t central_directory_bytes = 0;
  // The entry called name, or null.
  const ZipEntry* find(const std::string& name) const;
};

// True when bytes start with a local file header ("PK\3\4") or an empty archive's end record.
bool looks_like_zip(const uint8_t* bytes, uint64_t size);

// Reads the directory of the archive in bytes[0, size). `path` names the file in errors.
ZipDirectory read_zip_directory(const uint8_t* bytes, uint64_t size, const std::string& path);

// The end records and the central directory only, every check of read_zip_directory on them; no local header is
// read, so every data_offset is 0. For a reader that has the archive's tail and directory but not yet its local
// headers (a remote archive fetched by ranges: the central directory says which local headers to fetch).
ZipDirectory read_zip_central_directory(const uint8_t* bytes, uint64_t size, const std::string& path);

// Where the central directory lies, from the end records alone (the last 65,557 bytes, and the zip64 end record
// its locator points at). The same errors as read_zip_directory's about the end records.
struct ZipSpan {
  uint64_t offset = 0, bytes = 0;
};
ZipSpan locate_zip_central_directory(const uint8_t* bytes, uint64_t size, const std::string& path);

// The CRC-32 (ISO 3309, as zip and zlib compute it) of bytes[0, size), continuing from `crc` (0 to start).
uint32_t zip_crc32(const uint8_t* bytes, uint64_t size, uint32_t crc = 0);

// Checks the CRC-32 of stored entry e, whose bytes are archive[e.data_offset, +e.size): BadInput naming
// the file, the entry and the recorded and computed values when they differ. Reads every byte of it.
void check_zip_crc(const uint8_t* archive, const ZipEntry& e, const std::string& path);
// The same check when the caller computed the CRC itself (zip_crc32 over pieces, as it streamed them):
// `entry` names the entry, `offset` its first data byte.
void check_zip_crc(uint32_t recorded, uint32_t computed, const std::string& entry, uint64_t offset, uint64_t size, const std::string& path);

}  // namespace tmorph
