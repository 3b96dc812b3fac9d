// How a GPU backend cuts one call into device-sized pieces (host-side, tested in CI): whole units (a
// canonical statistics block, a 4D-STEM frame, a ggml block), each piece at most max_bytes of input
// unless one unit alone is larger (then one unit per piece: the caller has checked it fits the device).
#pragma once

#include <cstdint>
#include <vector>

namespace tmorph::gpu {

struct Chunk {
  uint64_t first;  // first element of the piece
  uint64_t count;  // elements in it
};

// elements: the call's element count; unit: elements per indivisible unit (the last unit may be short);
// unit_bytes: input bytes per unit; max_bytes: the most input one piece may take.
inline std::vector<Chunk> plan_chunks(uint64_t elements, uint64_t unit, uint64_t unit_bytes, uint64_t max_bytes) {
  std::vector<Chunk> out;
  if (elements == 0 || unit == 0) return out;
  uint64_t units_per_chunk = unit_bytes ? max_bytes / unit_bytes : 0;
  if (units_per_chunk == 0) units_per_chunk = 1;
  const uint64_t step = units_per_chunk > UINT64_MAX / unit ? UINT64_MAX : units_per_chunk * unit;
  for (uint64_t first = 0; first < elements;) {
    const uint64_t count = elements - first < step ? elements - first : step;
    out.push_back({first, count});
    first += count;
  }
  return out;
}

}  // namespace tmorph::gpu
