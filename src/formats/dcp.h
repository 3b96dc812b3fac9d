// PyTorch Distributed Checkpoint (DCP) directories, as torch.distributed.checkpoint (and torch 1.13's
// torch.distributed._shard.checkpoint) writes them with FileSystemWriter: DIR/.metadata, a pickle of
// Metadata {state_dict_metadata: name -> TensorStorageMetadata (dtype, global size, chunks with offsets
// and sizes) or BytesStorageMetadata; storage_data: MetadataIndex(name, chunk offsets) -> _StorageInfo
// (relative file, offset, length)}, and the files it names (__RANK_N.distcp), in which each chunk's
// bytes [offset, offset + length) are a whole torch.save archive of that chunk (and each bytes entry a
// torch.save of the object). Read without executing anything (pickle_reader.h, an allow-list of the DCP
// classes of both module paths). Errors are tmorph::Error(BadInput) naming the file, the byte offset and
// the entry.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "formats/torch_save.h"

namespace tmorph {

struct DcpStorage {
  std::string relative_path;  // a file name inside the checkpoint's directory
  uint64_t offset = 0, length = 0;
};

struct DcpChunk {
  std::vector<uint64_t> offsets, sizes;  // where the chunk lies in the tensor, per dimension
  DcpStorage storage;
};

struct DcpTensor {
  std::string name;
  const TorchElementType* type = nullptr;
  std::vector<uint64_t> size;   // the logical (global) shape
  std::vector<DcpChunk> chunks; // in the metadata's order
};

struct DcpMetadata {
  std::vector<DcpTensor> tensors;                                // in the metadata's order
  std::vector<std::pair<std::string, DcpStorage>> byte_entries;  // non-tensor entries (step counters, ...)
};

// The globals .metadata may name; anything else is refused. Documented in docs/formats.md.
const std::vector<std::string>& dcp_allowed_globals();

// Reads DIR/.metadata held in bytes[0, size). Every chunk must name its storage; counts and sizes are
// checked against the pickle's limits.
DcpMetadata parse_dcp_metadata(const uint8_t* bytes, uint64_t size, const std::string& path);

}  // namespace tmorph
