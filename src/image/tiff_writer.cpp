#include "image/tiff_writer.h"

#include <cstdarg>
#include <cstdio>
#include <filesystem>
#include <mutex>

#include <tiffio.h>

#include "tensormorph/error.h"

namespace tmorph {

namespace {

// libtiff reports through process-wide handlers; the message of the failing call is kept per thread and becomes
// the Error's text (nothing is printed to stderr).
thread_local std::string tiff_message;

void keep_message(const char* module, const char* fmt, va_list ap) {
  char text[512];
  std::vsnprintf(text, sizeof text, fmt, ap);
  tiff_message = (module ? std::string(module) + ": " : std::string()) + text;
}

void install_handlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    TIFFSetErrorHandler(keep_message);
    TIFFSetWarningHandler(nullptr);
  });
}

struct Closer {
  TIFF* t;
  ~Closer() {
    if (t) TIFFClose(t);
  }
};

}  // namespace

void write_tiff(const std::string& path, const TiffRaster& r, const TiffTags& tags) {
  const bool float_bits = r.bits == 32 || r.bits == 64;
  const bool int_bits = r.bits == 8 || r.bits == 16 || float_bits;
  if (r.pages == 0 || r.rows == 0 || r.cols == 0 || !r.data ||
      (r.sample == TiffRaster::Sample::ieee_float ? !float_bits : !int_bits))
    throw Error(ErrorKind::Internal, path + ": a TIFF raster needs pages, rows, cols > 0, data, and 8/16/32/64-bit "
                                            "integers or 32/64-bit floats");
  install_handlers();
  const uint64_t row_bytes = uint64_t{r.cols} * (r.bits / 8);
  const uint64_t bytes = row_bytes * r.rows * r.pages;
  tiff_message.clear();
  const auto fail = [&](const std::string& what) {
    std::error_code ignored;
    std::filesystem::remove(path, ignored);
    return Error(ErrorKind::Io, path + ": " + what + (tiff_message.empty() ? "" : " (" + tiff_message + ")"));
  };
  Closer c{TIFFOpen(path.c_str(), bytes > (uint64_t{2} << 30) ? "w8" : "w")};
  if (!c.t) throw fail("cannot create the TIFF file");
  const auto* p = static_cast<const unsigned char*>(r.data);
  for (uint32_t page = 0; page < r.pages; ++page) {
    bool ok = TIFFSetField(c.t, TIFFTAG_IMAGEWIDTH, r.cols) && TIFFSetField(c.t, TIFFTAG_IMAGELENGTH, r.rows) &&
              TIFFSetField(c.t, TIFFTAG_SAMPLESPERPIXEL, 1) && TIFFSetField(c.t, TIFFTAG_BITSPERSAMPLE, r.bits) &&
              TIFFSetField(c.t, TIFFTAG_SAMPLEFORMAT,
                           r.sample == TiffRaster::Sample::ieee_float ? SAMPLEFORMAT_IEEEFP : SAMPLEFORMAT_UINT) &&
              TIFFSetField(c.t, TIFFTAG_PHOTOMETRIC, PHOTOMETRIC_MINISBLACK) &&
              TIFFSetField(c.t, TIFFTAG_PLANARCONFIG, PLANARCONFIG_CONTIG) &&
              TIFFSetField(c.t, TIFFTAG_COMPRESSION, COMPRESSION_NONE) &&
              TIFFSetField(c.t, TIFFTAG_ROWSPERSTRIP, TIFFDefaultStripSize(c.t, 0)) &&
              TIFFSetField(c.t, TIFFTAG_SOFTWARE, "tensormorph");
    if (ok && r.pages > 1)
      ok = TIFFSetField(c.t, TIFFTAG_SUBFILETYPE, FILETYPE_PAGE) && TIFFSetField(c.t, TIFFTAG_PAGENUMBER, page, r.pages);
    if (ok && !tags.description.empty()) ok = TIFFSetField(c.t, TIFFTAG_IMAGEDESCRIPTION, tags.description.c_str());
    if (ok && tags.pixels_per_cm)
      ok = TIFFSetField(c.t, TIFFTAG_XRESOLUTION, static_cast<float>(*tags.pixels_per_cm)) &&
           TIFFSetField(c.t, TIFFTAG_YRESOLUTION, static_cast<float>(*tags.pixels_per_cm)) &&
           TIFFSetField(c.t, TIFFTAG_RESOLUTIONUNIT, RESUNIT_CENTIMETER);
    if (!ok) throw fail("cannot set the TIFF tags of page " + std::to_string(page));
    for (uint32_t row = 0; row < r.rows; ++row, p += row_bytes)
      // libtiff's buffer argument is not const but it does not write to an uncompressed strip's source.
      if (TIFFWriteScanline(c.t, const_cast<unsigned char*>(p), row, 0) < 0)
        throw fail("cannot write row " + std::to_string(row) + " of page " + std::to_string(page));
    if (r.pages > 1 && !TIFFWriteDirectory(c.t)) throw fail("cannot write page " + std::to_string(page));
  }
  TIFF* t = c.t;
  c.t = nullptr;
  TIFFClose(t);  // writes the last directory
  if (!tiff_message.empty()) throw fail("cannot finish the TIFF file");
}

}  // namespace tmorph
