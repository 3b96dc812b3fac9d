// One HDF5 dataset of detector frames as a DataPart (formats/frame_parts.h): shape (n, Kr, Kc) (a Dectris data
// file, a 3-D array) or (Rr, Rc, Kr, Kc) (a 4-D datacube: py4DSTEM/EMD, any writer's array), unsigned 8-, 16- or
// 32-bit pixels; its storage (chunking, filters) decides the codec the frame reader uses. Shared by the Dectris
// reader and the STEM domain's HDF5-array opener.
#pragma once

#include <cstdint>

#include <hdf5.h>

#include "formats/frame_parts.h"
#include "tensormorph/dtype.h"

namespace tmorph {

// The pixels of every frame of an acquisition: set from its first readable dataset, checked against the others.
struct FramePixels {
  DType dtype = DType::U16;
  uint32_t element_size = 2;
  uint64_t rows = 0, cols = 0;  // Kr, Kc
};

// Fills part.frames, part.scan_cols (rank 4), the codec, filters and image_nr attributes from the open dataset
// `ds` and sets part.present; when the dataset is unusable (another rank, a signed or floating-point pixel type,
// frames unlike the first dataset's, a filter HDF5 has no plugin for) sets part.problem instead, one line naming
// part.file and part.dataset. `first`: this dataset sets `pixels`; otherwise it is checked against them.
// Little-endian pixels in one-frame chunks with no filter or bitshuffle are read by Tensormorph; anything else
// (big-endian pixels, multi-frame chunks, other filters) goes through the HDF5 library (ChunkCodec::Hdf5Pipeline).
void describe_frames_dataset(hid_t ds, DataPart& part, FramePixels& pixels, bool first);

}  // namespace tmorph
