#include "checkpoint/openers/torch_tensor.h"

#include <string>

#include "core/format.h"

namespace tmorph {

CheckpointTensor torch_checkpoint_tensor(const TorchSaveFile& f, const TorchTensorView& t, size_t file_index, uint64_t file_size) {
  const TorchStorage& s = f.storages[t.storage];
  CheckpointTensor ct;
  ct.name = t.name;
  ct.stored_type = s.stored_type;
  ct.shape = t.shape;
  ct.elements = t.elements;
  ct.bytes = t.elements * s.element_bytes;
  ct.file_index = file_index;
  ct.file_offset = s.file_offset + (t.elements ? t.storage_offset * s.element_bytes : 0);
  if (!t.contiguous) ct.storage = StridedStorage{t.strides};
  // A storage whose CRC-32 was not checked at open is checked after a full pass over a tensor that
  // covers it exactly (the usual state-dict entry); one read only through partial views is not.
  if (!s.crc_checked && t.contiguous && t.storage_offset == 0 && t.elements == s.elements) {
    ct.crc32 = s.crc32;
    ct.crc_entry = f.archive + "/data/" + s.key;
  }
  if (!s.dtype) {
    ct.unavailable_reason = "no kernel yet for torch " + s.type;
  } else if (!t.contiguous && ct.bytes > file_size) {
    ct.unavailable_reason = "a view that expands storage " + s.key + " (strides " + dims_text(t.strides) + " for shape " + dims_text(t.shape) +
                            ") to " + std::to_string(ct.bytes) + " bytes, more than its file holds (" + std::to_string(file_size) + ")";
  } else {
    ct.dtype = s.dtype;
  }
  return ct;
}

}  // namespace tmorph
