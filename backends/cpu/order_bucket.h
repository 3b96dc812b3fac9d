// The pyramid's histogram bucket of a float (pyramid.h): the top 8 bits of its order key, a function of
// the most significant byte of its stored pattern alone.
#pragma once

#include <cstdint>

namespace tmorph {

// The bucket of every float whose stored pattern's most significant byte is t: negative values
// (t >= 0x80) have the complement of their bits as key, the others their bits with the sign set.
constexpr uint32_t bucket_of_top_byte(uint32_t t) { return t & 0x80 ? 0xFFu - t : t | 0x80u; }

}  // namespace tmorph
