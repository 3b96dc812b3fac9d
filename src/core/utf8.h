// Text from files we did not write (HDF5 names and strings, GGUF strings) may hold bytes that are not
// UTF-8; JSON output cannot carry them. These functions say so and make such text printable.
#pragma once

#include <string>
#include <string_view>

namespace tmorph {

// Whether `s` is well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF).
bool is_valid_utf8(std::string_view s);

// `s` unchanged when it is valid UTF-8; otherwise each byte that is not part of a well-formed sequence
// becomes the four characters "\xNN" (NN: its value in upper-case hex), so no information is lost.
std::string escape_invalid_utf8(std::string_view s);

}  // namespace tmorph
