// NumPy arrays as a checkpoint: a .npy file is one tensor (named by the file's stem), a .npz archive
// (numpy.savez) one tensor per entry (named by the entry without its .npy suffix). Values are read in place;
// Fortran-ordered arrays are strided views (gathered on first use, as torch.save views are). Object arrays
// are listed and never unpickled; big-endian and other kinds without a kernel are listed with the reason;
// numpy.savez_compressed's deflated entries are listed unreadable (nothing here inflates).
#include <filesystem>

#include "checkpoint/openers/opener.h"
#include "formats/npy_header.h"
#include "formats/zip_archive.h"

namespace tmorph {

namespace {

// The tensor the .npy at bytes [offset, offset + size) of file file_index holds.
CheckpointTensor npy_tensor(const std::string& name, const uint8_t* bytes, uint64_t offset, uint64_t size, size_t file_index,
                            const std::string& where) {
  const NpyHeader h = parse_npy_header(bytes + offset, size, where);
  CheckpointTensor t;
  t.name = name;
  t.stored_type = h.descr;
  t.dtype = h.dtype;
  t.unavailable_reason = h.unavailable_reason;
  t.shape = h.shape;
  t.elements = h.elements;
  t.bytes = h.data_bytes;
  t.file_index = file_index;
  t.file_offset = offset + h.data_offset;
  if (h.fortran_order && h.shape.size() > 1 && h.elements > 0) {
    // Column-major: the first dimension is the fastest.
    std::vector<uint64_t> strides(h.shape.size());
    uint64_t step = 1;
    for (size_t d = 0; d < h.shape.size(); ++d) {
      strides[d] = step;
      step *= h.shape[d];
    }
    t.storage = StridedStorage{std::move(strides)};
  }
  return t;
}

bool is_npy_file(const CheckpointProbe& p) {
  return !p.directory() && looks_like_npy(p.file()->data(), p.file()->size());
}

Checkpoint open_npy_file(const CheckpointProbe& p) {
  const auto& file = p.file();
  Checkpoint c;
  c.format = "npy";
  c.tensors.push_back(npy_tensor(std::filesystem::path(p.path()).stem().string(), file->data(), 0, file->size(), 0, p.path()));
  c.files.push_back(file);
  c.header_bytes.push_back(c.tensors[0].file_offset);
  return c;
}

// A zip archive whose entries are all .npy files (numpy.savez, numpy.savez_compressed).
bool is_npz_file(const CheckpointProbe& p) {
  if (p.directory()) return false;
  const auto& f = p.file();
  if (!looks_like_zip(f->data(), f->size())) return false;
  try {
    const ZipDirectory zip = read_zip_directory(f->data(), f->size(), p.path());
    for (const ZipEntry& e : zip.entries)
      if (!name_ends_with(e.name, ".npy")) return false;
    return true;
  } catch (const std::exception&) {
    return false;  // not a readable archive: the torch.save row reports what is wrong with it
  }
}

Checkpoint open_npz_file(const CheckpointProbe& p) {
  const auto& file = p.file();
  const ZipDirectory zip = read_zip_directory(file->data(), file->size(), p.path());
  Checkpoint c;
  c.format = "npz";
  uint64_t identity_bytes = 0;
  for (const ZipEntry& e : zip.entries) {
    const std::string name = e.name.substr(0, e.name.size() - 4);
    const std::string where = p.path() + ": entry " + e.name;
    if (e.method != 0) {
      CheckpointTensor t;
      t.name = name;
      t.stored_type = "deflated .npy";
      t.unavailable_reason = "a compressed entry (numpy.savez_compressed, zip method " + std::to_string(e.method) +
                             "): not read in place; numpy.savez stores entries uncompressed";
      t.file_offset = e.data_offset;
      c.tensors.push_back(std::move(t));
      continue;
    }
    if (e.size != e.compressed_size) bad_checkpoint(where, "a stored entry whose sizes differ (" + std::to_string(e.size) + " and " +
                                                               std::to_string(e.compressed_size) + ")");
    c.tensors.push_back(npy_tensor(name, file->data(), e.data_offset, e.size, 0, where));
    if (identity_bytes == 0) identity_bytes = c.tensors.back().file_offset;
  }
  c.files.push_back(file);
  // The file's identity covers the first entry's headers (size and mtime cover the rest).
  c.header_bytes.push_back(identity_bytes ? identity_bytes : std::min<uint64_t>(file->size(), 4096));
  check_unique_names(c);
  return c;
}

}  // namespace

extern const CheckpointOpener kNpyFileOpener{"NumPy .npy (magic \\x93NUMPY)", is_npy_file, open_npy_file};
extern const CheckpointOpener kNpzFileOpener{"NumPy .npz (a zip of .npy entries)", is_npz_file, open_npz_file};

}  // namespace tmorph
