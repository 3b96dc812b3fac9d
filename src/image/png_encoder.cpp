#include "image/png_encoder.h"

#include <png.h>

#include <memory>
#include <string>

#include "tensormorph/error.h"

namespace tmorph {

namespace {

// libpng's output: appended to a string.
void append_bytes(png_structp png, png_bytep data, png_size_t length) {
  static_cast<std::string*>(png_get_io_ptr(png))->append(reinterpret_cast<const char*>(data), length);
}

void no_flush(png_structp) {}

// libpng reports errors by longjmp; the message is kept for the exception thrown after it.
void on_error(png_structp png, png_const_charp message) {
  auto* what = static_cast<std::string*>(png_get_error_ptr(png));
  if (what) *what = message;
  png_longjmp(png, 1);
}

void on_warning(png_structp, png_const_charp) {}

}  // namespace

std::string encode_png(const RgbaImage& image, const PngText& text, const std::string& name) {
  if (image.width == 0 || image.height == 0) throw Error(ErrorKind::InvalidArgument, name + ": an empty image");
  std::string what;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &what, on_error, on_warning);
  png_infop info = png ? png_create_info_struct(png) : nullptr;
  if (!info) {
    png_destroy_write_struct(&png, nullptr);
    throw Error(ErrorKind::Io, name + ": libpng could not start");
  }
  // Everything touched after setjmp lives on the heap, so a longjmp leaves nothing indeterminate.
  struct State {
    std::vector<png_text> chunks;
    std::vector<png_bytep> rows;
    std::string out;  // the encoded bytes, appended by libpng's write callback
  };
  const auto st = std::make_unique<State>();
  st->chunks.resize(text.size());
  st->rows.resize(image.height);
  for (size_t k = 0; k < text.size(); ++k) {
    st->chunks[k].compression = PNG_TEXT_COMPRESSION_NONE;
    st->chunks[k].key = const_cast<char*>(text[k].first.c_str());
    st->chunks[k].text = const_cast<char*>(text[k].second.c_str());
    st->chunks[k].text_length = text[k].second.size();
  }
  for (uint32_t y = 0; y < image.height; ++y)
    st->rows[y] = const_cast<png_bytep>(image.pixels.data() + size_t{y} * image.width * 4);
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    throw Error(ErrorKind::Io, name + ": " + what);
  }
  png_set_write_fn(png, &st->out, append_bytes, no_flush);
  png_set_IHDR(png, info, image.width, image.height, 8, PNG_COLOR_TYPE_RGBA, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  // Fast over small: images are written interactively (tiles), and colour-mapped data compresses
  // well at level 1 with the Sub filter.
  png_set_compression_level(png, 1);
  png_set_filter(png, PNG_FILTER_TYPE_BASE, PNG_FILTER_SUB);
  if (!st->chunks.empty()) png_set_text(png, info, st->chunks.data(), static_cast<int>(st->chunks.size()));
  png_write_info(png, info);
  png_write_image(png, st->rows.data());
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return std::move(st->out);
}

void write_png(const std::string& path, const RgbaImage& image, const PngText& text) {
  const std::string bytes = encode_png(image, text, path);
  const std::unique_ptr<ByteSink> file = ByteSink::file(path);
  file->write(bytes.data(), bytes.size());
  file->commit();
}

}  // namespace tmorph
