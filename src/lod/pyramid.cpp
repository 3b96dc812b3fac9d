#include "lod/pyramid.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "lod/pattern_tiles.h"
#include "lod/tile_kernels.h"
#include "tensormorph/error.h"

namespace tmorph {

namespace {

constexpr uint64_t kTileElements = 65536;
constexpr size_t kBuckets = 256;
constexpr size_t kMaxBins = 32;

template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// float64 value of every 16-bit (F16) or 8-bit pattern, built once.
const std::vector<double>& f16_table() {
  static const std::vector<double> table = [] {
    std::vector<double> t(65536);
    for (uint32_t b = 0; b < 65536; ++b) t[b] = f16_to_double(static_cast<uint16_t>(b));
    return t;
  }();
  return table;
}

const std::vector<double>& f8_table(DType t) {
  static const auto make = [](double (*f)(uint8_t)) {
    std::vector<double> v(256);
    for (uint32_t b = 0; b < 256; ++b) v[b] = f(static_cast<uint8_t>(b));
    return v;
  };
  static const std::vector<double> e4m3 = make(f8_e4m3fn_to_double), e5m2 = make(f8_e5m2_to_double);
  return t == DType::F8_E4M3FN ? e4m3 : e5m2;
}

template <typename T>
void widen(const uint8_t* src, uint64_t n, double* dst) {
  for (uint64_t i = 0; i < n; ++i) dst[i] = static_cast<double>(load<T>(src + i * sizeof(T)));
}

// The top 8 bits of each element's order key (see pyramid.h).
template <typename U>
void float_buckets(const uint8_t* src, uint64_t n, uint8_t* dst) {
  constexpr unsigned bits = sizeof(U) * 8;
  constexpr U sign = U(1) << (bits - 1);
  for (uint64_t i = 0; i < n; ++i) {
    const U b = load<U>(src + i * sizeof(U));
    const U key = (b & sign) ? U(~b) : U(b | sign);
    dst[i] = static_cast<uint8_t>(key >> (bits - 8));
  }
}

template <typename U>
void int_buckets(const uint8_t* src, uint64_t n, bool is_signed, uint8_t* dst) {
  constexpr unsigned bits = sizeof(U) * 8;
  const U flip = is_signed ? U(U(1) << (bits - 1)) : U(0);
  for (uint64_t i = 0; i < n; ++i) dst[i] = static_cast<uint8_t>(U(load<U>(src + i * sizeof(U)) ^ flip) >> (bits - 8));
}


// The smallest value whose order key lies in bucket b.
double bucket_start(DType t, unsigned b) {
  const size_t width = dtype_size(t);
  const unsigned bits = static_cast<unsigned>(width * 8);
  const uint64_t key = uint64_t{b} << (bits - 8);
  const uint64_t sign = uint64_t{1} << (bits - 1);
  const uint64_t mask = bits == 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
  uint64_t pattern = key;
  if (dtype_is_float(t)) pattern = (key & sign) ? key ^ sign : ~key & mask;
  else if (dtype_is_signed_int(t)) pattern = key ^ sign;
  uint8_t element[8];
  std::memcpy(element, &pattern, width);  // little-endian host
  return element_to_double(t == DType::BOOL ? DType::U8 : t, element);
}

}  // namespace

void order_buckets(DType t, const uint8_t* src, uint64_t n, uint8_t* dst) {
  switch (t) {
    case DType::F64: return float_buckets<uint64_t>(src, n, dst);
    case DType::F32: return float_buckets<uint32_t>(src, n, dst);
    case DType::F16:
    case DType::BF16: return float_buckets<uint16_t>(src, n, dst);
    case DType::F8_E4M3FN:
    case DType::F8_E5M2: return float_buckets<uint8_t>(src, n, dst);
    case DType::I8: return int_buckets<uint8_t>(src, n, true, dst);
    case DType::I16: return int_buckets<uint16_t>(src, n, true, dst);
    case DType::I32: return int_buckets<uint32_t>(src, n, true, dst);
    case DType::I64: return int_buckets<uint64_t>(src, n, true, dst);
    case DType::U8:
    case DType::BOOL: return int_buckets<uint8_t>(src, n, false, dst);
    case DType::U16: return int_buckets<uint16_t>(src, n, false, dst);
    case DType::U32: return int_buckets<uint32_t>(src, n, false, dst);
    case DType::U64: return int_buckets<uint64_t>(src, n, false, dst);
  }
}

void decode_to_double(DType t, const uint8_t* src, uint64_t n, double* dst) {
  switch (t) {
    case DType::F64: return widen<double>(src, n, dst);
    case DType::F32: return widen<float>(src, n, dst);
    case DType::F16: {
      const double* table = f16_table().data();
      for (uint64_t i = 0; i < n; ++i) dst[i] = table[load<uint16_t>(src + 2 * i)];
      return;
    }
    case DType::BF16:
      for (uint64_t i = 0; i < n; ++i) dst[i] = std::bit_cast<float>(uint32_t{load<uint16_t>(src + 2 * i)} << 16);
      return;
    case DType::F8_E4M3FN:
    case DType::F8_E5M2: {
      const double* table = f8_table(t).data();
      for (uint64_t i = 0; i < n; ++i) dst[i] = table[src[i]];
      return;
    }
    case DType::I8: return widen<int8_t>(src, n, dst);
    case DType::I16: return widen<int16_t>(src, n, dst);
    case DType::I32: return widen<int32_t>(src, n, dst);
    case DType::I64: return widen<int64_t>(src, n, dst);
    case DType::U8: return widen<uint8_t>(src, n, dst);
    case DType::U16: return widen<uint16_t>(src, n, dst);
    case DType::U32: return widen<uint32_t>(src, n, dst);
    case DType::U64: return widen<uint64_t>(src, n, dst);
    case DType::BOOL:
      for (uint64_t i = 0; i < n; ++i) dst[i] = src[i] ? 1.0 : 0.0;
      return;
  }
}

TileRange PyramidLayout::range(unsigned level, uint64_t ty, uint64_t tx) const {
  const uint64_t h = uint64_t{tile_rows} << level, w = uint64_t{tile_cols} << level;
  return {std::min(view.rows, ty * h), std::min(view.rows, (ty + 1) * h), std::min(view.cols, tx * w),
          std::min(view.cols, (tx + 1) * w)};
}

PyramidLayout make_pyramid_layout(const View2D& view) {
  PyramidLayout l;
  l.view = view;
  l.tile_rows = static_cast<uint32_t>(std::min<uint64_t>(256, std::bit_ceil(std::max<uint64_t>(view.rows, 1))));
  l.tile_cols = static_cast<uint32_t>(kTileElements / l.tile_rows);
  PyramidLayout::Grid g{std::max<uint64_t>(1, (view.rows + l.tile_rows - 1) / l.tile_rows),
                        std::max<uint64_t>(1, (view.cols + l.tile_cols - 1) / l.tile_cols)};
  l.levels.push_back(g);
  while (g.rows > 1 || g.cols > 1) {
    g = {(g.rows + 1) / 2, (g.cols + 1) / 2};
    l.levels.push_back(g);
  }
  return l;
}

size_t Pyramid::level_offset(unsigned level) const {
  size_t off = 0;
  for (unsigned l = 0; l < level; ++l) off += layout.view.slices * layout.tiles_per_slice(l);
  return off;
}

const TileStats& Pyramid::tile(unsigned level, uint64_t slice, uint64_t ty, uint64_t tx) const {
  const auto& g = layout.levels.at(level);
  if (slice >= layout.view.slices || ty >= g.rows || tx >= g.cols)
    throw Error(ErrorKind::InvalidArgument, "tile (" + std::to_string(tx) + ", " + std::to_string(ty) + ") of slice " +
                                                std::to_string(slice) + " does not exist at level " + std::to_string(level));
  return tiles[level_offset(level) + (slice * g.rows + ty) * g.cols + tx];
}

TileStats Pyramid::summary() const {
  TileStats all;
  const unsigned top = static_cast<unsigned>(layout.levels.size() - 1);
  for (uint64_t s = 0; s < layout.view.slices; ++s) merge_into(all, tile(top, s, 0, 0));
  return all;
}

struct PyramidBuilder::State {
  DType dtype;
  size_t width;
  PyramidLayout layout;
  uint64_t total = 0, pos = 0;           // elements expected, fed
  std::vector<uint8_t> carry;            // the start of a segment split between two feeds
  std::vector<double> values;            // one segment as float64 (the scalar path)
  std::vector<uint8_t> buckets;          // one segment's order buckets (the scalar path)
  std::vector<TileSums> band;            // the segment path: the open tiles of one row of tiles
  std::unique_ptr<PatternTiles> patterns;  // the pattern path (pattern_tiles.h), a band at a time
  std::vector<uint8_t> band_rows;        // the pattern path: the open band's rows before its last
  std::vector<TileStats> level0;         // slice-major, row-major
  std::vector<uint32_t> bucket_counts;   // kBuckets per level-0 tile (finite values only)

  // Where the next segment starts (the element after the last whole segment added), kept as
  // coordinates so that finding a segment costs no division: tile sides are powers of two.
  uint64_t slice = 0, row = 0, col = 0;
  unsigned row_shift = 0, col_shift = 0;  // log2 of tile_rows and tile_cols

  struct Segment {
    uint64_t length = 0;  // elements, up to the tile's right edge
    size_t tile = 0;      // level-0 tile index
    uint64_t row = 0;     // row of the slice
    uint64_t tx = 0;      // tile column
  };
  Segment next_segment() const {
    const uint64_t tx = col >> col_shift;
    const auto& grid = layout.levels[0];
    return {std::min(layout.view.cols - col, layout.tile_cols - (col & (layout.tile_cols - 1))),
            static_cast<size_t>((slice * grid.rows + (row >> row_shift)) * grid.cols + tx), row, tx};
  }
  void advance(uint64_t length) {
    col += length;
    if (col < layout.view.cols) return;
    col = 0;
    if (++row < layout.view.rows) return;
    row = 0;
    ++slice;
  }

  void add_segment(const uint8_t* data, const Segment& seg) {
    uint32_t* counts = bucket_counts.data() + seg.tile * kBuckets;
    if (!band.empty()) {  // f32 / bf16 / f16: tile_kernels.h
      TileSums& sums = band[seg.tx];
      if ((seg.row & (layout.tile_rows - 1)) == 0) start_tile(sums);
      add_tile_segment(dtype, data, seg.length, sums, counts);
      const uint64_t tile_end = std::min(layout.view.rows, ((seg.row >> row_shift) + 1) << row_shift);
      if (seg.row + 1 == tile_end) level0[seg.tile] = finish_tile(sums);
      return;
    }
    const uint64_t n = seg.length;
    decode_to_double(dtype, data, n, values.data());
    merge_into(level0[seg.tile], stats_of(values.data(), n));
    order_buckets(dtype, data, n, buckets.data());
    for (uint64_t i = 0; i < n; ++i) counts[buckets[i]] += (values[i] - values[i]) == 0.0;
  }

  // The pattern path: a band (the rows of one row of tiles) is counted tile by tile once its last row
  // arrives. Its rows before the last are copied into band_rows unless a feed holds the whole band;
  // the last row's segments close their tiles as they arrive (from the feed, or from carry when split).
  void feed_patterns(const uint8_t* p, uint64_t elements) {
    const View2D& v = layout.view;
    const uint64_t th = layout.tile_rows, tw = layout.tile_cols, stride = v.cols * width;
    const uint64_t slice_elements = v.rows * v.cols;
    while (elements > 0) {
      const uint64_t at = pos - carry.size() / width;  // the first element not yet in a closed tile or band row
      const uint64_t sl = at / slice_elements, in_slice = at % slice_elements;
      const uint64_t r = in_slice / v.cols, c = in_slice % v.cols;
      const uint64_t band_first = r / th * th, band_end = std::min(v.rows, band_first + th);
      const uint64_t band_height = band_end - band_first, ty = band_first / th;
      const size_t first_tile = static_cast<size_t>((sl * layout.levels[0].rows + ty) * layout.levels[0].cols);
      if (r == band_first && c == 0 && carry.empty() && elements >= band_height * v.cols) {
        for (uint64_t tx = 0; tx < layout.levels[0].cols; ++tx) {
          const uint64_t c0 = tx * tw, w = std::min(v.cols, c0 + tw) - c0;
          patterns->add_rows(p + c0 * width, stride, band_height, w);
          level0[first_tile + tx] = patterns->finish_tile(bucket_counts.data() + (first_tile + tx) * kBuckets);
        }
        const uint64_t n = band_height * v.cols;
        p += n * width, pos += n, elements -= n;
        continue;
      }
      if (r + 1 < band_end) {  // a row before the band's last: kept until the last row arrives
        const uint64_t n = std::min(elements, (band_end - 1) * v.cols - in_slice);
        band_rows.insert(band_rows.end(), p, p + n * width);
        p += n * width, pos += n, elements -= n;
        continue;
      }
      // The band's last row: the segment from column c to its tile's right edge closes that tile.
      const uint64_t tx = c / tw, seg = std::min(v.cols, (tx + 1) * tw) - c;
      const uint64_t carried = carry.size() / width, take = std::min(elements, seg - carried);
      const uint8_t* last_row = p;
      if (carried > 0 || take < seg) {
        carry.insert(carry.end(), p, p + take * width);
        last_row = carry.data();
      }
      p += take * width, pos += take, elements -= take;
      if (carried + take < seg) continue;
      patterns->add_rows(band_rows.data() + c * width, stride, band_height - 1, seg);
      patterns->add_rows(last_row, 0, 1, seg);
      level0[first_tile + tx] = patterns->finish_tile(bucket_counts.data() + (first_tile + tx) * kBuckets);
      carry.clear();
      if (c + seg == v.cols) band_rows.clear();
    }
  }
};

PyramidBuilder::PyramidBuilder(DType dtype, const View2D& view, TileKernels kernels) : s_(std::make_unique<State>()) {
  s_->dtype = dtype;
  s_->width = dtype_size(dtype);
  s_->layout = make_pyramid_layout(view);
  s_->row_shift = static_cast<unsigned>(std::countr_zero(s_->layout.tile_rows));
  s_->col_shift = static_cast<unsigned>(std::countr_zero(s_->layout.tile_cols));
  s_->total = view.slices * view.rows * view.cols;
  const size_t tiles = view.slices * s_->layout.tiles_per_slice(0);
  s_->level0.resize(tiles);
  s_->bucket_counts.assign(tiles * kBuckets, 0);
  // What the pattern path copies per band: its rows before the last (none when a band is one row).
  const uint64_t band_copy = (std::clamp<uint64_t>(view.rows, 1, s_->layout.tile_rows) - 1) * view.cols * s_->width;
  if (kernels == TileKernels::Simd && PatternTiles::supports(dtype) && band_copy <= kMaxBandBytes) {
    s_->patterns = std::make_unique<PatternTiles>(dtype);
  } else if (kernels != TileKernels::Scalar && tile_kernel_supports(dtype)) {
    s_->band.resize(s_->layout.levels[0].cols);
  } else {
    s_->values.resize(s_->layout.tile_cols);
    s_->buckets.resize(s_->layout.tile_cols);
  }
}

PyramidBuilder::~PyramidBuilder() = default;

void PyramidBuilder::feed(const void* data, uint64_t elements) {
  State& s = *s_;
  if (elements > s.total - s.pos)
    throw Error(ErrorKind::Internal, "pyramid: fed more elements than the tensor holds");
  const uint8_t* p = static_cast<const uint8_t*>(data);
  if (s.patterns) return s.feed_patterns(p, elements);
  while (elements > 0) {
    const uint64_t carried = s.carry.size() / s.width;
    const State::Segment seg = s.next_segment();
    const uint64_t take = std::min(seg.length - carried, elements);
    if (carried == 0 && take == seg.length) {
      s.add_segment(p, seg);
      s.advance(seg.length);
    } else {
      s.carry.insert(s.carry.end(), p, p + take * s.width);
      if (carried + take == seg.length) {
        s.add_segment(s.carry.data(), seg);
        s.carry.clear();
        s.advance(seg.length);
      }
    }
    p += take * s.width;
    s.pos += take;
    elements -= take;
  }
}

const std::vector<uint64_t>* PyramidBuilder::pattern_counts() const {
  return s_->patterns ? &s_->patterns->totals() : nullptr;
}

uint64_t PyramidBuilder::piece_elements(uint64_t max_elements) const {
  const View2D& v = s_->layout.view;
  const uint64_t band = std::min<uint64_t>(v.rows, s_->layout.tile_rows) * v.cols;
  if (!s_->patterns || band == 0 || band > max_elements) return max_elements;
  return max_elements / band * band;
}

Pyramid PyramidBuilder::finish() {
  State& s = *s_;
  if (s.pos != s.total || !s.carry.empty())
    throw Error(ErrorKind::Internal, "pyramid: " + std::to_string(s.pos) + " of " + std::to_string(s.total) +
                                         " elements were fed");
  Pyramid out;
  out.layout = s.layout;
  // Shared bins: the occupied buckets lo..hi grouped into at most kMaxBins runs of consecutive buckets.
  bool occupied[kBuckets] = {};
  for (size_t i = 0; i < s.bucket_counts.size(); ++i) occupied[i % kBuckets] |= s.bucket_counts[i] != 0;
  size_t lo = kBuckets, hi = 0;
  for (size_t b = 0; b < kBuckets; ++b)
    if (occupied[b]) lo = std::min(lo, b), hi = b;
  size_t bins = 0, span = 0;
  if (lo <= hi) {
    span = hi - lo + 1;
    bins = std::min(kMaxBins, span);
  }
  const auto bin_of = [&](size_t b) { return (b - lo) * bins / span; };

  const View2D& v = s.layout.view;
  size_t total_tiles = 0;
  for (unsigned l = 0; l < s.layout.levels.size(); ++l) total_tiles += v.slices * s.layout.tiles_per_slice(l);
  out.tiles.reserve(total_tiles);
  for (size_t t = 0; t < s.level0.size(); ++t) {
    TileStats tile = std::move(s.level0[t]);
    tile.hist.assign(bins, 0);
    if (bins)
      for (size_t b = lo; b <= hi; ++b) tile.hist[bin_of(b)] += s.bucket_counts[t * kBuckets + b];
    out.tiles.push_back(std::move(tile));
  }
  s.level0.clear();
  s.level0.shrink_to_fit();
  size_t child_offset = 0;
  for (unsigned l = 1; l < s.layout.levels.size(); ++l) {
    const auto& cg = s.layout.levels[l - 1];
    const auto& g = s.layout.levels[l];
    for (uint64_t slice = 0; slice < v.slices; ++slice)
      for (uint64_t ty = 0; ty < g.rows; ++ty)
        for (uint64_t tx = 0; tx < g.cols; ++tx) {
          TileStats merged;
          merged.hist.assign(bins, 0);
          for (uint64_t dy = 0; dy < 2; ++dy)
            for (uint64_t dx = 0; dx < 2; ++dx) {
              const uint64_t cy = 2 * ty + dy, cx = 2 * tx + dx;
              if (cy < cg.rows && cx < cg.cols)
                merge_into(merged, out.tiles[child_offset + (slice * cg.rows + cy) * cg.cols + cx]);
            }
          out.tiles.push_back(std::move(merged));
        }
    child_offset += v.slices * s.layout.tiles_per_slice(l - 1);
  }
  if (bins) {
    const TileStats all = out.summary();
    out.edges.resize(bins + 1);
    out.edges[0] = all.min;
    out.edges[bins] = all.max;
    for (size_t j = 1; j < bins; ++j) out.edges[j] = bucket_start(s.dtype, static_cast<unsigned>(lo + (j * span + bins - 1) / bins));
  }
  return out;
}

Pyramid build_pyramid(DType dtype, const View2D& view, const void* data, TileKernels kernels) {
  PyramidBuilder b(dtype, view, kernels);
  b.feed(data, view.slices * view.rows * view.cols);
  return b.finish();
}

}  // namespace tmorph
