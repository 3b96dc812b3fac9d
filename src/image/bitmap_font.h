// A 5 x 7 bitmap font for frame labels and scale bars (no font library): digits, upper-case letters
// (lower case is drawn as upper case) and a few signs: space ( ) , . - + : / = % # _. Any other character
// is drawn as a hollow box.
#pragma once

#include <cstdint>
#include <string_view>

#include "image/rgba_image.h"

namespace tmorph {

constexpr uint32_t kGlyphWidth = 5, kGlyphHeight = 7, kGlyphAdvance = 6;  // pixels; one column between glyphs

// Pixels text would take at this integer scale: advance x len - 1 wide, 7 x scale tall.
uint32_t text_width(std::string_view text, uint32_t scale = 1);

// Draws text's set pixels in `rgba` (opaque) with its top-left corner at (x, y); pixels outside the image
// are skipped.
void draw_text(RgbaImage& image, uint32_t x, uint32_t y, std::string_view text, const uint8_t rgba[4], uint32_t scale = 1);

}  // namespace tmorph
