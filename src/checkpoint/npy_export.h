// One checkpoint tensor as a .npy file (numpy's format, row-major): dense dtypes in their own numpy type, bf16
// and f8 widened exactly to float32, bool as 0/1; ggml block formats dequantized (bit-identical to ggml) and
// packed schemes (GPTQ, AWQ, bitsandbytes, FP8 with scales, MXFP4) decoded to float32, the decoding placed by
// the planner. Streams in pieces of about 2^20 values: memory stays bounded whatever the tensor's size.
#pragma once

#include <ostream>
#include <string>

#include "checkpoint/checkpoint.h"

namespace tmorph {

class Planner;

struct NpyExport {
  std::string descr;       // the file's numpy type string ("<f4", "|u1", ...)
  bool widened = false;    // dense bf16/f8 values widened exactly to float32
  bool decoded = false;    // values decoded from a quantized or packed encoding (stored_type says which)
  std::string how;         // what was done to the values, for people: "Q4_K dequantized to float32, ..."; empty
                           // when the values are written as stored
};

// Writes t as a whole .npy file (preamble and payload) to out. `planner` places the decoding and is needed only
// when t.dequantized() (dense tensors need no backend: callers may skip loading them); Internal error when it is
// missing then. Throws Unavailable (with the reason) when t is not readable here; the stream's own failures are
// the caller's to check.
NpyExport write_npy(const Checkpoint& c, const CheckpointTensor& t, const Planner* planner, unsigned threads,
                    std::ostream& out);

}  // namespace tmorph
