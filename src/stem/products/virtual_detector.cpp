#include "stem/products/virtual_detector.h"

#include <png.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

#include "core/path_kind.h"
#include "stem/products/product_kind.h"
#include "tensormorph/error.h"

namespace tmorph {

BrightFieldDisk detect_bright_field_disk(const std::vector<double>& mean_pattern, uint64_t rows, uint64_t cols) {
  const uint64_t n = rows * cols;
  double sum = 0;
  for (double v : mean_pattern) sum += v;
  const double mean = sum / static_cast<double>(n);
  double m2 = 0;
  for (double v : mean_pattern) m2 += (v - mean) * (v - mean);
  BrightFieldDisk d;
  d.threshold = mean + std::sqrt(m2 / static_cast<double>(n));
  double sr = 0, sc = 0;
  for (uint64_t i = 0; i < n; ++i)
    if (mean_pattern[i] > d.threshold) ++d.area, sr += static_cast<double>(i / cols), sc += static_cast<double>(i % cols);
  if (d.area == 0)
    throw Error(ErrorKind::BadInput, "bright-field disk: no pixel of the mean pattern lies above mean + std (a flat or empty pattern); "
                                     "give --center and --radius");
  d.row = sr / static_cast<double>(d.area);
  d.col = sc / static_cast<double>(d.area);
  d.radius = std::sqrt(static_cast<double>(d.area) / M_PI);
  return d;
}

std::vector<uint32_t> annulus_pixels(uint64_t rows, uint64_t cols, double center_row, double center_col, double inner, double outer) {
  if (!(inner >= 0) || !(outer > 0) || inner > outer)
    throw Error(ErrorKind::InvalidArgument, "virtual detector: radii inner " + std::to_string(inner) + ", outer " + std::to_string(outer) +
                                                " must satisfy 0 <= inner <= outer and outer > 0");
  const float cr = static_cast<float>(center_row), cc = static_cast<float>(center_col);
  const float lo = static_cast<float>(inner), hi = std::isinf(outer) ? std::numeric_limits<float>::infinity() : static_cast<float>(outer);
  std::vector<uint32_t> out;
  for (uint64_t k = 0; k < rows; ++k)
    for (uint64_t l = 0; l < cols; ++l) {
      const float dr = static_cast<float>(k) - cr, dc = static_cast<float>(l) - cc;
      const float d = std::sqrt(dr * dr + dc * dc);
      if (d >= lo && d <= hi) out.push_back(static_cast<uint32_t>(k * cols + l));
    }
  if (out.empty()) {
    std::ostringstream m;
    m << "virtual detector: no pixel of the " << rows << "x" << cols << " detector lies between radius " << inner << " and " << outer
      << " of (" << center_row << ", " << center_col << "): the mask is outside the detector";
    throw Error(ErrorKind::InvalidArgument, m.str());
  }
  return out;
}

std::vector<uint32_t> rectangle_pixels(uint64_t rows, uint64_t cols, const DetectorRect& rect) {
  const auto named = [&] {
    std::ostringstream m;
    m << "virtual detector: the rectangle rows [" << rect.r0 << ", " << rect.r1 << "), columns [" << rect.c0 << ", " << rect.c1
      << ") (R0,C0,R1,C1 = " << rect.r0 << "," << rect.c0 << "," << rect.r1 << "," << rect.c1 << ") ";
    return m.str();
  };
  if (rect.r0 >= rect.r1 || rect.c0 >= rect.c1)
    throw Error(ErrorKind::InvalidArgument, named() + "is empty: it needs R0 < R1 and C0 < C1 (half-open, on the " +
                                                std::to_string(rows) + "x" + std::to_string(cols) + " detector)");
  if (rect.r1 > rows || rect.c1 > cols)
    throw Error(ErrorKind::InvalidArgument, named() + "is outside the " + std::to_string(rows) + "x" + std::to_string(cols) +
                                                " detector (R1 <= " + std::to_string(rows) + " and C1 <= " + std::to_string(cols) +
                                                " needed)");
  std::vector<uint32_t> out;
  out.reserve((rect.r1 - rect.r0) * (rect.c1 - rect.c0));
  for (uint64_t k = rect.r0; k < rect.r1; ++k)
    for (uint64_t l = rect.c0; l < rect.c1; ++l) out.push_back(static_cast<uint32_t>(k * cols + l));
  return out;
}

std::optional<std::pair<double, double>> preset_radii(const std::string& name, double r) {
  const auto kind = product_kind_from_name(name);
  return kind ? preset_radii(*kind, r) : std::nullopt;
}

std::vector<uint32_t> complement_pixels(const std::vector<uint32_t>& pixels, uint64_t frame_pixels) {
  std::vector<uint32_t> out;
  out.reserve(frame_pixels - pixels.size());
  size_t j = 0;
  for (uint32_t i = 0; i < frame_pixels; ++i) {
    if (j < pixels.size() && pixels[j] == i) ++j;
    else out.push_back(i);
  }
  return out;
}

namespace {

std::vector<uint32_t> nonzero_pixels(const std::vector<double>& values) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < values.size(); ++i)
    if (values[i] != 0) out.push_back(static_cast<uint32_t>(i));
  return out;
}

void check_shape(const std::string& path, uint64_t r, uint64_t c, uint64_t rows, uint64_t cols) {
  if (r != rows || c != cols)
    throw Error(ErrorKind::InvalidArgument, path + ": the mask is " + std::to_string(r) + "x" + std::to_string(c) + ", the detector (after any crop and bin) is " +
                                                std::to_string(rows) + "x" + std::to_string(cols));
}

std::vector<double> read_npy_2d(const std::string& path, uint64_t rows, uint64_t cols) {
  require_regular_file(path);  // a FIFO would block the read below
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorKind::Io, path + ": cannot open");
  char magic[8];
  in.read(magic, 8);
  if (!in || std::memcmp(magic, "\x93NUMPY", 6) != 0) throw Error(ErrorKind::BadInput, path + ": not a .npy file (magic)");
  uint32_t header_len = 0;
  unsigned char len[4] = {0, 0, 0, 0};
  in.read(reinterpret_cast<char*>(len), magic[6] == 1 ? 2 : 4);
  header_len = len[0] | (len[1] << 8) | (magic[6] == 1 ? 0u : (static_cast<uint32_t>(len[2]) << 16) | (static_cast<uint32_t>(len[3]) << 24));
  if (header_len > (1u << 20)) throw Error(ErrorKind::BadInput, path + ": .npy header length " + std::to_string(header_len) + " is implausible");
  std::string header(header_len, '\0');
  in.read(header.data(), header_len);
  if (!in) throw Error(ErrorKind::BadInput, path + ": .npy header truncated");
  const auto field = [&](const std::string& key) {
    const size_t k = header.find("'" + key + "'");
    if (k == std::string::npos) throw Error(ErrorKind::BadInput, path + ": .npy header has no '" + key + "'");
    return header.substr(header.find(':', k) + 1);
  };
  const std::string descr_field = field("descr");
  const size_t q1 = descr_field.find('\''), q2 = descr_field.find('\'', q1 + 1);
  const std::string descr = descr_field.substr(q1 + 1, q2 - q1 - 1);
  if (field("fortran_order").find("True") < field("fortran_order").find(','))
    throw Error(ErrorKind::BadInput, path + ": Fortran-ordered .npy masks are not supported");
  const std::string shape_field = field("shape");
  uint64_t r = 0, c = 0;
  if (std::sscanf(shape_field.c_str(), " (%llu, %llu)", reinterpret_cast<unsigned long long*>(&r), reinterpret_cast<unsigned long long*>(&c)) != 2)
    throw Error(ErrorKind::BadInput, path + ": the mask must be a 2-D array");
  check_shape(path, r, c, rows, cols);
  const char kind = descr.size() >= 2 ? descr[1] : '?';
  const size_t width = descr.size() >= 3 ? static_cast<size_t>(std::atoi(descr.c_str() + 2)) : 0;
  if ((descr[0] == '>' && width > 1) || !(kind == 'b' || kind == 'u' || kind == 'i' || kind == 'f') ||
      !(width == 1 || width == 2 || width == 4 || width == 8) || (kind == 'f' && width < 4))
    throw Error(ErrorKind::BadInput, path + ": mask dtype '" + descr + "' is not a little-endian bool, integer or float32/64");
  std::vector<uint8_t> raw(rows * cols * width);
  in.read(reinterpret_cast<char*>(raw.data()), static_cast<std::streamsize>(raw.size()));
  if (!in) throw Error(ErrorKind::BadInput, path + ": .npy data truncated (expected " + std::to_string(raw.size()) + " bytes)");
  std::vector<double> v(rows * cols);
  for (size_t i = 0; i < v.size(); ++i) {
    const uint8_t* p = raw.data() + i * width;
    if (kind == 'f' && width == 4) { float f; std::memcpy(&f, p, 4); v[i] = f; }
    else if (kind == 'f') { double f; std::memcpy(&f, p, 8); v[i] = f; }
    else { uint64_t u = 0; std::memcpy(&u, p, width); v[i] = u != 0 ? 1.0 : 0.0; }
  }
  return v;
}

std::vector<double> read_png_gray(const std::string& path, uint64_t rows, uint64_t cols) {
  png_image image;
  std::memset(&image, 0, sizeof image);
  image.version = PNG_IMAGE_VERSION;
  require_regular_file(path);  // a FIFO would block libpng's read
  if (!png_image_begin_read_from_file(&image, path.c_str()))
    throw Error(ErrorKind::BadInput, path + ": cannot read as PNG: " + image.message);
  check_shape(path, image.height, image.width, rows, cols);
  image.format = PNG_FORMAT_GRAY;
  std::vector<uint8_t> px(PNG_IMAGE_SIZE(image));
  if (!png_image_finish_read(&image, nullptr, px.data(), 0, nullptr)) {
    const std::string why = image.message;
    png_image_free(&image);
    throw Error(ErrorKind::BadInput, path + ": PNG decode failed: " + why);
  }
  return std::vector<double>(px.begin(), px.end());
}

}  // namespace

std::vector<uint32_t> mask_pixels_from_file(const std::string& path, uint64_t rows, uint64_t cols) {
  const bool png = path.size() >= 4 && path.compare(path.size() - 4, 4, ".png") == 0;
  const std::vector<uint32_t> out = nonzero_pixels(png ? read_png_gray(path, rows, cols) : read_npy_2d(path, rows, cols));
  if (out.empty()) throw Error(ErrorKind::InvalidArgument, path + ": the mask selects no pixel");
  return out;
}

}  // namespace tmorph
