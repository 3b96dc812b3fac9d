#include "formats/hdf5_frames.h"

#include <algorithm>
#include <string>

#include "formats/hdf5_util.h"

namespace tmorph {

namespace {

constexpr unsigned kBitshuffleFilter = 32008;
constexpr int kBitshuffleLz4 = 2;

std::string shape_text(uint64_t rows, uint64_t cols, DType t) {
  return std::to_string(rows) + "x" + std::to_string(cols) + " " + std::string(dtype_name(t));
}

}  // namespace

void describe_frames_dataset(hid_t ds, DataPart& part, FramePixels& pixels, bool first) {
  const std::string what = part.file + ":" + part.dataset;
  const auto dims = h5::shape(ds, what);
  if (dims.size() != 3 && dims.size() != 4) {
    part.problem = what + ": expected shape (frames, rows, cols) or (scan rows, scan cols, rows, cols), found rank " +
                   std::to_string(dims.size());
    return;
  }
  const size_t rank = dims.size();
  const uint64_t kr = dims[rank - 2], kc = dims[rank - 1];
  h5::Handle type(H5Dget_type(ds), H5Tclose);
  const size_t size = H5Tget_size(type.get());
  if (H5Tget_class(type.get()) != H5T_INTEGER || H5Tget_sign(type.get()) != H5T_SGN_NONE || (size != 1 && size != 2 && size != 4)) {
    part.problem = what + ": pixel type is not unsigned 8-, 16- or 32-bit integers (products sum counts; signed and "
                          "floating-point pixels are not read)";
    return;
  }
  const bool little_endian = size == 1 || H5Tget_order(type.get()) == H5T_ORDER_LE;
  const DType dtype = size == 1 ? DType::U8 : size == 2 ? DType::U16 : DType::U32;
  if (first) {
    pixels = {dtype, static_cast<uint32_t>(size), kr, kc};
  } else if (dtype != pixels.dtype || kr != pixels.rows || kc != pixels.cols) {
    part.problem = what + ": frames of " + shape_text(kr, kc, dtype) + " differ from the first data file's " +
                   shape_text(pixels.rows, pixels.cols, pixels.dtype);
    return;
  }
  part.frames = rank == 3 ? dims[0] : dims[0] * dims[1];
  part.scan_cols = rank == 4 ? dims[1] : 0;
  h5::Handle dcpl(H5Dget_create_plist(ds), H5Pclose);
  const H5D_layout_t layout = H5Pget_layout(dcpl.get());
  part.one_frame_chunks = false;
  if (layout == H5D_CHUNKED) {
    hsize_t chunk[4] = {0, 0, 0, 0};
    H5Pget_chunk(dcpl.get(), static_cast<int>(rank), chunk);
    part.one_frame_chunks = chunk[0] == 1 && (rank == 3 || chunk[1] == 1) && chunk[rank - 2] == kr && chunk[rank - 1] == kc;
  }
  const int nfilters = H5Pget_nfilters(dcpl.get());
  for (int i = 0; i < nfilters; ++i) {
    unsigned flags = 0, cd[16] = {};
    size_t ncd = 16;
    char name[128] = {};
    const H5Z_filter_t id = H5Pget_filter2(dcpl.get(), static_cast<unsigned>(i), &flags, &ncd, cd, sizeof name, name, nullptr);
    part.filter_ids.push_back(static_cast<unsigned>(id));
    if (id == kBitshuffleFilter) part.bitshuffle_options.assign(cd, cd + std::min<size_t>(ncd, 16));
  }
  // A contiguous dataset is read from its file offset: one that has none (compact, external, never written) is HDF5's.
  const bool contiguous = layout == H5D_CONTIGUOUS && H5Dget_offset(ds) != HADDR_UNDEF;
  if (little_endian && nfilters == 0 && (part.one_frame_chunks || contiguous)) {
    part.codec = ChunkCodec::Uncompressed;
  } else if (little_endian && nfilters == 1 && part.filter_ids[0] == kBitshuffleFilter && part.one_frame_chunks) {
    const auto& o = part.bitshuffle_options;
    part.codec = o.size() > 4 && o[4] == kBitshuffleLz4 ? ChunkCodec::BitshuffleLz4
                 : o.size() <= 4 || o[4] == 0      ? ChunkCodec::BitshufflePlain
                                                     : ChunkCodec::Hdf5Pipeline;  // e.g. zstd
  } else {
    part.codec = ChunkCodec::Hdf5Pipeline;
    for (unsigned id : part.filter_ids)
      if (H5Zfilter_avail(static_cast<H5Z_filter_t>(id)) <= 0) {
        part.problem = what + ": HDF5 filter " + std::to_string(id) + " is not available (no plugin installed for it)";
        return;
      }
  }
  part.image_nr_low = h5::read_int_attribute(ds, "image_nr_low");
  part.image_nr_high = h5::read_int_attribute(ds, "image_nr_high");
  part.present = true;
}

}  // namespace tmorph
