#include "lod/pyramid.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "tensormorph/contract_math.h"
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

tm_tile_stats_method tile_stats_method(DType dtype, const View2D& view, TileKernels kernels) {
  const uint32_t dt = static_cast<uint32_t>(dtype);
  const PyramidLayout layout = make_pyramid_layout(view);
  // What the pattern method's band takes before its last row (none when a band is one row).
  const uint64_t band_copy = (std::clamp<uint64_t>(view.rows, 1, layout.tile_rows) - 1) * view.cols * dtype_size(dtype);
  if (kernels == TileKernels::Simd && tile_stats_method_takes(TM_TILE_PATTERNS, dt) && band_copy <= kMaxBandBytes)
    return TM_TILE_PATTERNS;
  if (kernels != TileKernels::Scalar && tile_stats_method_takes(TM_TILE_SEGMENTS, dt)) return TM_TILE_SEGMENTS;
  return TM_TILE_WIDENED;
}

struct PyramidBuilder::State {
  DType dtype;
  size_t width;
  PyramidLayout layout;
  TileStatsKernel kernel;
  tm_tile_stats_method method;
  uint64_t total = 0, pos = 0;           // elements expected, fed
  std::vector<uint8_t> pending;          // the open band's elements fed so far (a one-row view: its open tile's)
  std::vector<uint64_t> patterns;        // the pattern method's counts per raw bit pattern
  std::vector<tm_tile_stats_v1> records; // one call's output
  std::vector<TileStats> level0;         // slice-major, row-major
  std::vector<uint32_t> bucket_counts;   // kBuckets per level-0 tile (finite values only)

  // Computes the tiles of `rows` x `cols` elements at data, the first of them level-0 tile `first_tile`.
  void run(const uint8_t* data, uint64_t rows, uint64_t cols, size_t first_tile) {
    const uint64_t tiles = (cols + layout.tile_cols - 1) / layout.tile_cols;
    records.resize(tiles);
    const tm_tile_stats_params_v1 params{rows, cols, layout.tile_cols, static_cast<uint32_t>(method),
                                         patterns.empty() ? nullptr : patterns.data()};
    kernel(dtype, params, data, rows * cols, records.data(), tiles);
    for (uint64_t t = 0; t < tiles; ++t) {
      const tm_tile_stats_v1& r = records[t];
      TileStats& tile = level0[first_tile + t];
      tile.count = r.count, tile.nan = r.nan_count, tile.inf = r.inf_count, tile.zero = r.zero_count;
      tile.min = r.min, tile.max = r.max, tile.abs_max = r.abs_max, tile.sum = r.sum, tile.m2 = r.m2;
      std::copy(r.buckets, r.buckets + kBuckets, bucket_counts.begin() + static_cast<ptrdiff_t>((first_tile + t) * kBuckets));
    }
  }

  // Bands of several rows: each whole band in one call, from the feed when it holds the band, else once
  // the copy of it is complete.
  void feed_bands(const uint8_t* p, uint64_t elements) {
    const View2D& v = layout.view;
    const uint64_t th = layout.tile_rows, slice_elements = v.rows * v.cols;
    while (elements > 0) {
      const uint64_t at = pos - pending.size() / width;  // the open band's first element
      const uint64_t sl = at / slice_elements, r = at % slice_elements / v.cols;
      const uint64_t height = std::min(v.rows, r + th) - r, band = height * v.cols, ty = r / th;
      const size_t first_tile = static_cast<size_t>((sl * layout.levels[0].rows + ty) * layout.levels[0].cols);
      const uint64_t have = pending.size() / width;
      if (have == 0 && elements >= band) {
        run(p, height, v.cols, first_tile);
        p += band * width, pos += band, elements -= band;
        continue;
      }
      const uint64_t take = std::min(elements, band - have);
      pending.insert(pending.end(), p, p + take * width);
      p += take * width, pos += take, elements -= take;
      if (have + take < band) continue;
      run(pending.data(), height, v.cols, first_tile);
      pending.clear();
    }
  }

  // A view of one row per slice: runs of whole tiles as they arrive (the last tile of a row may be short).
  void feed_row(const uint8_t* p, uint64_t elements) {
    const View2D& v = layout.view;
    const uint64_t tw = layout.tile_cols;
    while (elements > 0) {
      const uint64_t at = pos - pending.size() / width;  // the open tile's first element
      const uint64_t sl = at / v.cols, c = at % v.cols, tx = c / tw;
      const size_t first_tile = static_cast<size_t>(sl * layout.levels[0].cols + tx);
      const uint64_t tile = std::min(v.cols, c + tw) - c, have = pending.size() / width;
      if (have == 0 && elements >= tile) {
        // Whole tiles of this row in the feed: all of them but a short piece at the end.
        const uint64_t in_row = std::min(elements, v.cols - c);
        const uint64_t n = in_row == v.cols - c ? in_row : in_row / tw * tw;
        run(p, 1, n, first_tile);
        p += n * width, pos += n, elements -= n;
        continue;
      }
      const uint64_t take = std::min(elements, tile - have);
      pending.insert(pending.end(), p, p + take * width);
      p += take * width, pos += take, elements -= take;
      if (have + take < tile) continue;
      run(pending.data(), 1, tile, first_tile);
      pending.clear();
    }
  }
};

PyramidBuilder::PyramidBuilder(DType dtype, const View2D& view, TileStatsKernel kernel, TileKernels kernels)
    : s_(std::make_unique<State>()) {
  s_->dtype = dtype;
  s_->width = dtype_size(dtype);
  s_->layout = make_pyramid_layout(view);
  s_->kernel = std::move(kernel);
  s_->method = tile_stats_method(dtype, view, kernels);
  s_->total = view.slices * view.rows * view.cols;
  const size_t tiles = view.slices * s_->layout.tiles_per_slice(0);
  s_->level0.resize(tiles);
  s_->bucket_counts.assign(tiles * kBuckets, 0);
  if (s_->method == TM_TILE_PATTERNS) s_->patterns.assign(size_t{1} << (8 * s_->width), 0);
}

PyramidBuilder::~PyramidBuilder() = default;

void PyramidBuilder::feed(const void* data, uint64_t elements) {
  State& s = *s_;
  if (elements > s.total - s.pos)
    throw Error(ErrorKind::Internal, "pyramid: fed more elements than the tensor holds");
  const uint8_t* p = static_cast<const uint8_t*>(data);
  if (s.layout.view.rows == 1) s.feed_row(p, elements);
  else s.feed_bands(p, elements);
}

const std::vector<uint64_t>* PyramidBuilder::pattern_counts() const {
  return s_->patterns.empty() ? nullptr : &s_->patterns;
}

uint64_t PyramidBuilder::piece_elements(uint64_t max_elements) const {
  const View2D& v = s_->layout.view;
  const uint64_t unit = v.rows == 1 ? s_->layout.tile_cols : std::min<uint64_t>(v.rows, s_->layout.tile_rows) * v.cols;
  if (unit == 0 || unit > max_elements) return max_elements;
  return max_elements / unit * unit;
}

Pyramid PyramidBuilder::finish() {
  State& s = *s_;
  if (s.pos != s.total || !s.pending.empty())
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

Pyramid build_pyramid(DType dtype, const View2D& view, const void* data, const TileStatsKernel& kernel,
                      TileKernels kernels) {
  PyramidBuilder b(dtype, view, kernel, kernels);
  b.feed(data, view.slices * view.rows * view.cols);
  return b.finish();
}

}  // namespace tmorph
