#include "formats/frame_parts.h"

#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "core/file_identity.h"
#include "tensormorph/error.h"

namespace tmorph {

const char* chunk_codec_name(ChunkCodec c) {
  switch (c) {
    case ChunkCodec::BitshuffleLz4: return "bitshuffle+lz4";
    case ChunkCodec::BitshufflePlain: return "bitshuffle";
    case ChunkCodec::Uncompressed: return "uncompressed";
    case ChunkCodec::Hdf5Pipeline: return "hdf5-filter-pipeline";
    case ChunkCodec::FileRecords: return "file-records";
  }
  return "?";
}

std::string acquisition_signature(std::vector<std::string> files) {
  namespace fs = std::filesystem;
  std::sort(files.begin(), files.end());
  files.erase(std::unique(files.begin(), files.end()), files.end());
  std::string text;
  for (const auto& f : files) {
    std::error_code ec;
    const uint64_t size = fs::exists(f, ec) ? fs::file_size(f, ec) : 0;
    std::optional<FileIdentity> id;
    std::string unreadable = "absent";
    try {
      id = file_identity(f, std::min<uint64_t>(size, 4096));
    } catch (const Error&) {  // a FIFO or a file we may not read: its part already names the problem
      unreadable = "unreadable";
    }
    text += fs::path(f).filename().string() + "|";
    text += id ? std::to_string(id->size) + "|" + std::to_string(id->mtime_ns) + "|" + id->header_hash : unreadable;
    text += "\n";
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(XXH3_64bits(text.data(), text.size())));
  return hex;
}

}  // namespace tmorph
