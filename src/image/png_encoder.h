// The still-image encoder: RGBA8 images as PNG (Debian's libpng), encoded to bytes in memory or to a file (the same
// bytes), with text metadata (tEXt chunks) so that what an image shows (tensor, statistic, limits, colour map)
// travels with it. Movies are movie_writer.h's.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "image/byte_sink.h"
#include "image/rgba_image.h"

namespace tmorph {

using PngText = std::vector<std::pair<std::string, std::string>>;

// The PNG file's bytes, encoded in memory (what the server sends; no file is written). `name` names the image in
// errors. Throws InvalidArgument for an empty image, Io when libpng fails.
std::string encode_png(const RgbaImage& image, const PngText& text, const std::string& name = "PNG image");

// encode_png, written to path (through ByteSink::file: no partial file is left). Throws Error(Io) naming the path
// when the file cannot be created or written, InvalidArgument for an empty image.
void write_png(const std::string& path, const RgbaImage& image, const PngText& text);

}  // namespace tmorph
