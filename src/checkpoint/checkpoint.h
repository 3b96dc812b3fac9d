// The checkpoint data model: a checkpoint opened for reading, its tensors wherever they live, with the
// dtype a kernel can read or the reason none can yet. This header is the folder's lowest: the openers
// (checkpoint/openers/) fill it, everything above reads it. Opening is checkpoint/openers/open_checkpoint.h.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "checkpoint/packed_tensor.h"
#include "core/mapped_file.h"
#include "formats/protobuf_values.h"
#include "support/large_buffer.h"
#include "tensormorph/dtype.h"

namespace tmorph {

// One piece of a tensor stored in pieces: where it lies in the tensor and where its own row-major bytes
// lie. A box (a Distributed Checkpoint's chunk) has one offset and size per dimension; a flat range (a
// DeepSpeed ZeRO partition's piece of a parameter) of a tensor whose rank is not 1 has one offset and one
// size, counted in the tensor's row-major elements.
struct TensorChunk {
  size_t file_index = 0;
  uint64_t file_offset = 0;
  std::vector<uint64_t> offsets, sizes;
  bool flat_in(size_t rank) const { return rank != 1 && offsets.size() == 1; }
};

// The storage form of a checkpoint tensor: how its values lie in its file(s), one alternative per form. The
// openers choose it; the model's questions below (readable(), dequantized(), summary_dtype(), ...) and the
// checkpoint/, index/ and app/ readers answer from it, so no face branches on it.
//
// Dense row-major bytes in place: `bytes` at file_offset of file file_index (the default).
struct DenseStorage {};
// A torch.save (or Fortran-order .npy) view that is not dense row-major (a transpose, a column slice, an
// expanded dimension): its element strides, one per dimension of shape (file_offset is the view's first
// element's). Gathered into a row-major copy on first use (Checkpoint::data).
struct StridedStorage {
  std::vector<uint64_t> strides;
};
// A ggml block format (GGUF's quantized types): `bytes` of blocks at file_offset, dequantized to f32.
struct GgmlBlockStorage {
  uint32_t ggml_type = 0;  // the ggml type id (2 = Q4_0, 8 = Q8_0, ...)
};
// A safetensors-packed quantization scheme: built from its parts (each with its own file and offset), dequantized
// to f32. `bytes` is all parts together, file_offset the code part's.
struct PackedStorage {
  PackedTensor packed;
};
// A tensor stored in pieces (DCP chunks, DeepSpeed ZeRO partitions): its chunks, which tile it exactly, in
// row-major order of their offsets (file_index and file_offset are the first chunk's). Assembled into a row-major
// copy on first use unless there is one chunk.
struct ChunkedStorage {
  std::vector<TensorChunk> chunks;
};
// Values stored encoded rather than as the dtype's bytes (ONNX's typed fields: varints, or little-endian values in
// several records; formats/protobuf_values.h): byte runs of file file_index, in element order (file_offset is the
// first one's, `bytes` their total). Decoded, and checked again, into a row-major copy on first use (data(t)), kept
// while the checkpoint is open: elements × dtype size bytes, at most 8 × `bytes`.
struct EncodedStorage {
  EncodedValues encoded;
};
using StorageForm = std::variant<DenseStorage, StridedStorage, GgmlBlockStorage, PackedStorage, ChunkedStorage, EncodedStorage>;

struct CheckpointTensor {
  std::string name;
  std::string stored_type;          // as the file names it: "BF16", "Q4_K", "F8_E8M0", ...
  std::optional<DType> dtype;       // set when the values can be read as a dense dtype (never for ggml blocks or
                                    // a packed scheme, which are dequantized)
  StorageForm storage;              // how its values are stored (above); dense row-major in place by default
  std::string unavailable_reason;   // why no reader can give its values
  bool damaged = false;             // unavailable because its data is missing or damaged (a DCP storage file,
                                    // a ZeRO rank), not for want of a kernel: the command's result is incomplete
  std::vector<uint64_t> shape;      // row-major
  std::vector<uint64_t> ne;         // GGUF only: ggml order
  uint64_t elements = 0;
  uint64_t bytes = 0;                // packed: all parts together; encoded: the runs together
  uint64_t file_offset = 0;          // packed: the code part's; strided: the view's first element; chunked: the first chunk's
  size_t file_index = 0;            // into Checkpoint::files
  // A torch.save zip storage this tensor covers exactly, whose CRC-32 was not checked when the file was
  // opened (entries above 1 MiB, or past the 16 MiB checked at open): the CRC its entry records and the
  // entry's name. Checked after a full pass over the tensor's bytes (compute_tensor_stats, the indexer's
  // index_tensor); a mismatch is BadInput naming the entry and both values.
  std::optional<uint32_t> crc32;
  std::string crc_entry;

  // The storage form's parts, for the readers below the faces (checkpoint/, index/, app/):
  // the ggml type id when stored as ggml blocks;
  std::optional<uint32_t> ggml_type() const {
    if (const auto* g = std::get_if<GgmlBlockStorage>(&storage)) return g->ggml_type;
    return std::nullopt;
  }
  // the packed scheme when stored as one, else null;
  const PackedTensor* packed() const {
    const auto* p = std::get_if<PackedStorage>(&storage);
    return p ? &p->packed : nullptr;
  }
  // a strided view's element strides, one per dimension of shape; empty for every tensor stored in row-major order;
  const std::vector<uint64_t>& strides() const;
  bool strided() const { return !strides().empty(); }
  // a chunked tensor's chunks (ChunkedStorage); empty for a tensor stored in one piece;
  const std::vector<TensorChunk>& chunks() const;
  bool chunked() const { return !chunks().empty(); }
  // the encoded values' runs when stored encoded, else null.
  const EncodedValues* encoded() const {
    const auto* e = std::get_if<EncodedStorage>(&storage);
    return e ? &e->encoded : nullptr;
  }

  // The questions every face asks, answered once here (faces never decide them from the storage form):
  // whether a reader can give its values (a dense dtype, ggml blocks, or a packed scheme whose parts were all found);
  bool readable() const { return dtype.has_value() || ggml_type().has_value() || (packed() && unavailable_reason.empty()); }
  // whether its values are computed from a quantized encoding (ggml blocks or a packed scheme), and so read as f32;
  bool dequantized() const { return std::holds_alternative<GgmlBlockStorage>(storage) || std::holds_alternative<PackedStorage>(storage); }
  // the dtype its values are read and summarised in: its own, f32 when dequantized, none when no dtype applies.
  std::optional<DType> summary_dtype() const { return dtype ? dtype : dequantized() ? std::optional<DType>(DType::F32) : std::nullopt; }
  // True when every chunk is a run of consecutive elements in row-major order (flat ranges, or row
  // bands: chunks split only the first dimension that is not 1), so the chunks in order are the tensor's
  // bytes in order.
  bool chunks_in_order() const;
  // Throws why its values cannot be read, "NAME (STORED): reason": BadInput when its data is damaged, else
  // Unavailable (no kernel reads its type).
  [[noreturn]] void refuse_unreadable() const;
};

// Strided views gathered, and chunked tensors assembled, into row-major copies (by tensor name), shared
// by the copies of one Checkpoint.
struct GatheredViews {
  std::mutex mu;
  std::map<std::string, LargeBuffer> views;
};

struct Checkpoint {
  std::string format;               // the opener's name: "safetensors", "gguf", "torch", "dcp", "npy", "npz", ...
  std::vector<std::shared_ptr<MappedFile>> files;
  std::vector<uint64_t> header_bytes;           // per file: bytes before its data section
  std::vector<std::string> sidecars;            // read whole: *.safetensors.index.json, config.json
  std::map<std::string, std::string> metadata;  // scalar metadata as text
  std::vector<CheckpointTensor> tensors;
  // A tensor's bytes in row-major order: in place in its file's mapping, or for a strided view (or a
  // chunked tensor, or encoded values) a copy gathered (assembled, decoded) on first use and kept while this
  // checkpoint is open; a view's copy is at most its file's size (checked when the view is listed), a chunked
  // tensor's the size of its chunks, encoded values' elements × dtype size. Thread-safe; BadInput when encoded
  // values no longer decode (the file changed since it was opened).
  const uint8_t* data(const CheckpointTensor& t) const;
  std::shared_ptr<GatheredViews> gathered = std::make_shared<GatheredViews>();
  const uint8_t* data(const PackedPart& p) const { return files[p.file_index]->data() + p.file_offset; }
  // Where a dense tensor's values can be read without a copy of this call's making: `first`, its first byte,
  // and its element strides, one per dimension (a strided view's own, row-major ones otherwise). In file
  // `file`'s mapping; or, for a tensor assembled from several chunks or decoded from encoded values, in its
  // gathered copy (data(t); `file` empty), which lives as long as this checkpoint.
  struct InPlace {
    const uint8_t* first = nullptr;
    std::vector<uint64_t> element_strides;
    std::optional<size_t> file;
  };
  InPlace in_place(const CheckpointTensor& t) const;
  // When set, called with a tensor's position before a ValueReader reads its bytes: a face whose files are remote
  // fetches them there (app::RemoteCheckpoint::serve_reads). Mutable: attached to a checkpoint an index holds.
  mutable std::function<void(size_t tensor)> before_reading;
  // When set, a ValueReader of a dense tensor stored in one piece (spanned_reads(t)) calls this instead of
  // before_reading, with the bytes it is about to read ([offset, offset + bytes) from the tensor's first byte), so a
  // face reading part of a remote tensor fetches that part only. It returns the bytes now readable around them
  // (covered, a superset; the reader asks again only outside it) and a pin that keeps them until the reader goes.
  struct SpanRead {
    uint64_t covered_offset = 0, covered_bytes = 0;
    std::shared_ptr<void> pin;
  };
  mutable std::function<SpanRead(size_t tensor, uint64_t offset, uint64_t bytes)> before_reading_span;
  // True for a tensor whose values are its bytes in one piece of one file: a plain dtype, not strided, chunked,
  // encoded or packed (what before_reading_span serves).
  static bool spanned_reads(const CheckpointTensor& t) {
    return t.dtype.has_value() && !t.strided() && !t.chunked() && !t.encoded() && !t.packed();
  }
  // The position in `tensors` of the tensor called `name`; InvalidArgument naming `shown_path` (the path the user
  // gave) when there is none.
  size_t position(const std::string& name, const std::string& shown_path) const;
};

}  // namespace tmorph
