// torch.save files. The zip format (torch >= 1.6): ARCHIVE/data.pkl, a pickle of the saved object whose
// tensors refer to storages by persistent id, and ARCHIVE/data/KEY, each storage's raw little-endian
// bytes, stored uncompressed. The legacy format (before 1.6, or _use_new_zipfile_serialization=False):
// pickles of a magic number, a protocol version, sys_info, the same object tree and the storage keys,
// then each storage's element count and bytes. Read without executing anything
// (formats/pickle_reader.h) and without copying a storage: each tensor is a view (storage offset,
// shape, strides, in elements) on a storage that lies in place in the file. Errors are
// tmorph::Error(BadInput) naming the file and the offset or tensor.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "formats/pickle_reader.h"
#include "tensormorph/dtype.h"

namespace tmorph {

struct TorchStorage {
  std::string key;                 // ARCHIVE/data/KEY (zip), or the key the legacy format lists
  std::string type;                // "FloatStorage", "BFloat16Storage", ...
  std::string stored_type;         // as other formats name it: "F32", "BF16", "C64", ...
  std::optional<DType> dtype;      // empty for element types without a kernel (complex)
  uint32_t element_bytes = 0;
  uint64_t elements = 0;           // as the persistent id says; the entry holds exactly these bytes
  uint64_t file_offset = 0;        // the entry's first data byte
  // Zip format: the CRC-32 its entry records, and whether parse_torch_save checked it (small entries,
  // up to a budget; the others are checked by whoever reads all of their bytes: check_storage_crc). The legacy format
  // records no CRC: crc_checked is true.
  uint32_t crc32 = 0;
  bool crc_checked = true;
};

struct TorchTensorView {
  std::string name;                // dict keys joined by '.', list positions as numbers
  size_t storage = 0;              // into TorchSaveFile::storages
  uint64_t storage_offset = 0;     // in elements
  std::vector<uint64_t> shape;     // row-major
  std::vector<uint64_t> strides;   // in elements
  uint64_t elements = 0;
  bool contiguous = false;         // row-major and dense: elements [storage_offset, +elements) in order
};

struct TorchSaveFile {
  std::string archive;             // the archive's top folder ("archive" for torch.save(f) with f a file); empty in the legacy format
  uint64_t header_bytes = 0;       // the file's bytes up to the end of data.pkl, or of the legacy format's key list (what identifies its contents)
  std::vector<TorchStorage> storages;
  std::vector<TorchTensorView> tensors;       // in the pickle's order
  std::map<std::string, std::string> metadata;// scalar values beside the tensors (epoch counters, ...), as text
  std::optional<std::string> scalar;          // the saved object itself when it is a scalar (torch.save(7, f)), as text
  PickleRef root;                             // the saved object as read (for readers of a writer's own structure)
};

// What a torch.save file may hold beside tensors when a writer's own layout is read (DeepSpeed's loss
// scaler and enums, Megatron's argparse.Namespace): more allowed globals, and NEWOBJ (as nodes; nothing
// is instantiated). The default is the plain torch.save allow-list.
struct TorchSaveOptions {
  std::vector<std::string> extra_globals;
  std::string extra_what;  // names them in the refusal message
  bool allow_newobj = false;
};

// A torch element type: its storage class (torch.STORAGE, as torch.save names it), its dtype object
// (torch.DTYPE, as DCP metadata names it), how other formats name it, its size, and the dtype a kernel
// reads (none for complex types).
struct TorchElementType {
  const char* storage;
  const char* dtype;
  const char* stored_type;
  uint32_t bytes;
  std::optional<DType> kernel_dtype;
};
const std::vector<TorchElementType>& torch_element_types();
// The element type whose dtype object is `global` ("torch.float32", "torch.bfloat16", ...), or null.
const TorchElementType* torch_element_type_of_dtype(const std::string& global);

// The globals data.pkl may name; anything else is refused. Documented in docs/formats.md.
const std::vector<std::string>& torch_allowed_globals();

// True when bytes are a zip archive (torch.save's format since 1.6).
bool looks_like_torch_zip(const uint8_t* bytes, uint64_t size);
// True when bytes start as the legacy torch.save format (before 1.6: a pickled magic number).
bool looks_like_legacy_torch(const uint8_t* bytes, uint64_t size);
// True when bytes are a tar archive whose first member is one torch <= 0.3's torch.save wrote
// (sys_info, pickle, storages, tensors): parse_torch_save refuses that format by name.
bool looks_like_torch_tar(const uint8_t* bytes, uint64_t size);

// Reads the torch.save file in bytes[0, size), zip or legacy. Refuses the tar format of torch <= 0.3,
// TorchScript archives, big-endian files, compressed storages, storages whose entry (or legacy element
// count) is not exactly their size, views that reach past their storage, data.pkl and small zip entries
// (1 MiB or less each, 16 MiB in all) whose CRC-32 does not match, a legacy key list that does not
// name exactly the storages the object uses, and tensor names that are empty or given twice.
TorchSaveFile parse_torch_save(const uint8_t* bytes, uint64_t size, const std::string& path, const TorchSaveOptions& options = {});

// Checks the CRC-32 of storage s of a file read from `bytes` (the same mapping), unless it is checked
// already: BadInput naming the entry and both values when they differ. Reads every byte of the storage.
void check_storage_crc(const TorchSaveFile& f, const TorchStorage& s, const uint8_t* bytes, const std::string& path);

}  // namespace tmorph
