#include "formats/frame_parts.h"

namespace tmorph {

const char* chunk_codec_name(ChunkCodec c) {
  switch (c) {
    case ChunkCodec::BitshuffleLz4: return "bitshuffle+lz4";
    case ChunkCodec::BitshufflePlain: return "bitshuffle";
    case ChunkCodec::Uncompressed: return "uncompressed";
    case ChunkCodec::Hdf5Pipeline: return "hdf5-filter-pipeline";
  }
  return "?";
}

}  // namespace tmorph
