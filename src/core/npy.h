// The .npy v1.0 file format (numpy's own): type strings and the preamble before the row-major payload.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tensormorph/dtype.h"

namespace tmorph {

// numpy's type string for a dtype; *widen is set when numpy has no such type and values are written
// widened exactly to float32 (bf16, f8).
std::string npy_descr(DType t, bool* widen);

// The preamble: magic, version, header length, then the header dict padded with spaces and a newline
// so the data starts at a multiple of 64 bytes. Throws InvalidArgument when the header would exceed
// the v1.0 limit.
std::string npy_preamble(const std::string& descr, const std::vector<uint64_t>& shape);

}  // namespace tmorph
