// The openers' table (opener.h): the order in which rows are asked. Rows that look at names come before rows
// that look at contents; within a directory, the rows follow the precedence documented in docs/formats.md.
#include "checkpoint/openers/opener.h"

namespace tmorph {

// Files.
extern const CheckpointOpener kShardIndexFileOpener;      // safetensors_opener.cpp
extern const CheckpointOpener kGgufSplitOpener;           // gguf_opener.cpp
extern const CheckpointOpener kGgufFileOpener;            // gguf_opener.cpp
extern const CheckpointOpener kOnnxFileOpener;            // onnx_opener.cpp (by name: *.onnx)
extern const CheckpointOpener kSafetensorsFileOpener;     // safetensors_opener.cpp
extern const CheckpointOpener kNpyFileOpener;             // npy_opener.cpp
extern const CheckpointOpener kNpzFileOpener;             // npy_opener.cpp (before torch: both are zip archives)
extern const CheckpointOpener kTorchFileOpener;           // torch_opener.cpp
// Directories.
extern const CheckpointOpener kShardIndexDirectoryOpener;  // safetensors_opener.cpp
extern const CheckpointOpener kSafetensorsDirectoryOpener; // safetensors_opener.cpp
extern const CheckpointOpener kMegatronDirectoryOpener;    // megatron_checkpoint.cpp (before DCP: it is one)
extern const CheckpointOpener kDcpDirectoryOpener;         // dcp_checkpoint.cpp
extern const CheckpointOpener kZeroDirectoryOpener;        // zero_checkpoint.cpp
extern const CheckpointOpener kLatestDirectoryOpener;      // latest_opener.cpp
extern const CheckpointOpener kTorchIndexDirectoryOpener;  // safetensors_opener.cpp
extern const CheckpointOpener kTorchDirectoryOpener;       // torch_opener.cpp

const std::vector<const CheckpointOpener*>& checkpoint_openers() {
  static const std::vector<const CheckpointOpener*> rows = {
      &kShardIndexFileOpener,        &kGgufSplitOpener,             &kGgufFileOpener,              &kOnnxFileOpener,
      &kSafetensorsFileOpener,       &kNpyFileOpener,               &kNpzFileOpener,               &kTorchFileOpener,
      &kShardIndexDirectoryOpener,   &kSafetensorsDirectoryOpener,  &kMegatronDirectoryOpener,     &kDcpDirectoryOpener,
      &kZeroDirectoryOpener,         &kLatestDirectoryOpener,       &kTorchIndexDirectoryOpener,   &kTorchDirectoryOpener,
  };
  return rows;
}

}  // namespace tmorph
