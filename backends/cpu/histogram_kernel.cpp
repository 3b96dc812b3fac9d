#include "histogram_kernel.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "bin_candidates.h"
#include "decode_table.h"

namespace tmorph::cpu {

namespace {

// Bin finder for one set of edges. Uniform edges take a multiply and at most a step or two of
// correction; other edges a binary search. Both give the same answer: the comparison is the contract.
class BinFinder {
 public:
  BinFinder(const double* edges, uint32_t bins) : edges_(edges), bins_(bins) {
    lo_ = edges[0], hi_ = edges[bins];
    scale_ = bins / (hi_ - lo_);
    const double width = (hi_ - lo_) / bins;
    uniform_ = true;
    for (uint32_t i = 1; i < bins && uniform_; ++i)
      uniform_ = std::fabs(edges[i] - (lo_ + width * i)) <= width * 1e-6;
  }

  bool uniform() const { return uniform_; }
  double lo() const { return lo_; }
  double scale() const { return scale_; }
  uint32_t bins() const { return bins_; }
  // Distance (in bins) from an edge beyond which floor((x - lo) * scale) is certainly x's bin: the
  // rounding of that product and of the edges themselves (lo + i * step) stays far below it.
  double certainty_margin() const {
    const double eps = 0x1p-52;
    return 8 * eps * (bins_ + (std::fabs(lo_) + std::fabs(hi_)) * scale_) + 1e-12;
  }

  // 0..bins-1 for a bin, bins for below, bins+1 for above. x must be finite.
  uint32_t find(double x) const {
    if (x < lo_) return bins_;
    if (x > hi_) return bins_ + 1;
    if (x == hi_) return bins_ - 1;
    if (!uniform_) {
      return static_cast<uint32_t>(std::upper_bound(edges_, edges_ + bins_ + 1, x) - edges_) - 1;
    }
    double guess = (x - lo_) * scale_;
    uint32_t j = guess >= bins_ ? bins_ - 1 : static_cast<uint32_t>(guess);
    while (j > 0 && x < edges_[j]) --j;
    while (j + 1 < bins_ && x >= edges_[j + 1]) ++j;
    return j;
  }

 private:
  const double* edges_;
  uint32_t bins_;
  double lo_, hi_, scale_;
  bool uniform_;
};

template <class T>
void add_native(const uint8_t* p, uint64_t n, const BinFinder& f, uint64_t* counts) {
  for (uint64_t i = 0; i < n; ++i) {
    T x;
    std::memcpy(&x, p + i * sizeof(T), sizeof(T));
    const double v = static_cast<double>(x);
    if constexpr (!std::numeric_limits<T>::is_integer) {
      if (!std::isfinite(v)) continue;
    }
    ++counts[f.find(v)];
  }
}

// f32/f64 with uniform edges: SIMD computes the bins that are certain; the rest (near an edge, out of
// range, non-finite) take the exact comparison path. Four interleaved count tables hide the latency
// of repeated increments of one bin.
void add_prebinned(DType dtype, const uint8_t* p, uint64_t n, const BinFinder& f, uint64_t* counts) {
  const size_t width = dtype_size(dtype);
  const double margin = f.certainty_margin();
  constexpr uint64_t kChunk = 2048;
  int32_t idx[kChunk];
  std::vector<uint64_t> sub(4 * (f.bins() + 2), 0);
  for (uint64_t first = 0; first < n; first += kChunk) {
    const uint64_t m = std::min(kChunk, n - first);
    candidate_bins(dtype, p + first * width, m, f.lo(), f.scale(), margin, f.bins(), idx);
    for (uint64_t i = 0; i < m; ++i) {
      uint32_t bin;
      if (idx[i] >= 0) {
        bin = static_cast<uint32_t>(idx[i]);
      } else {
        const double v = element_to_double(dtype, p + (first + i) * width);
        if (!std::isfinite(v)) continue;
        bin = f.find(v);
      }
      ++sub[(i & 3) * (f.bins() + 2) + bin];
    }
  }
  for (uint32_t b = 0; b < f.bins() + 2; ++b)
    for (int k = 0; k < 4; ++k) counts[b] += sub[k * (f.bins() + 2) + b];
}

// 8- and 16-bit dtypes: bin each bit pattern once, then count patterns.
void add_by_pattern(DType dtype, const uint8_t* p, uint64_t n, const BinFinder& f, uint32_t bins,
                    uint64_t* counts) {
  const auto& values = decode_table(dtype);
  const size_t width = dtype_size(dtype);
  if (n < values.size()) {  // fewer elements than patterns: bin the elements themselves
    for (uint64_t i = 0; i < n; ++i) {
      const double v = values[width == 1 ? p[i] : (p[2 * i] | (p[2 * i + 1] << 8))];
      if (std::isfinite(v)) ++counts[f.find(v)];
    }
    return;
  }
  std::vector<uint32_t> bin_of(values.size());
  for (size_t q = 0; q < values.size(); ++q)
    bin_of[q] = std::isfinite(values[q]) ? f.find(values[q]) : bins + 2;  // bins + 2: not counted
  std::vector<uint64_t> pattern_counts(values.size());
  bitpattern_add(dtype, p, n, pattern_counts.data());
  for (size_t q = 0; q < values.size(); ++q)
    if (bin_of[q] <= bins + 1) counts[bin_of[q]] += pattern_counts[q];
}

}  // namespace

void histogram_add(DType dtype, const void* data, uint64_t count, const double* edges, uint32_t bins,
                   uint64_t* counts) {
  const BinFinder f(edges, bins);
  const auto* p = static_cast<const uint8_t*>(data);
  switch (dtype) {
    case DType::F64:
      return f.uniform() && f.certainty_margin() < 0.25 ? add_prebinned(dtype, p, count, f, counts)
                                                        : add_native<double>(p, count, f, counts);
    case DType::F32:
      return f.uniform() && f.certainty_margin() < 0.25 ? add_prebinned(dtype, p, count, f, counts)
                                                        : add_native<float>(p, count, f, counts);
    case DType::I32: return add_native<int32_t>(p, count, f, counts);
    case DType::U32: return add_native<uint32_t>(p, count, f, counts);
    case DType::I64: return add_native<int64_t>(p, count, f, counts);
    case DType::U64: return add_native<uint64_t>(p, count, f, counts);
    default: return add_by_pattern(dtype, p, count, f, bins, counts);
  }
}

void bitpattern_add(DType dtype, const void* data, uint64_t count, uint64_t* counts) {
  const auto* p = static_cast<const uint8_t*>(data);
  if (dtype_size(dtype) == 1) {
    // Four sub-tables break the dependency chain when neighbouring bytes repeat.
    uint64_t sub[4][256] = {};
    uint64_t i = 0;
    for (; i + 4 <= count; i += 4) {
      ++sub[0][p[i]], ++sub[1][p[i + 1]], ++sub[2][p[i + 2]], ++sub[3][p[i + 3]];
    }
    for (; i < count; ++i) ++sub[0][p[i]];
    for (int q = 0; q < 256; ++q) counts[q] += sub[0][q] + sub[1][q] + sub[2][q] + sub[3][q];
    return;
  }
  if (count < (uint64_t{1} << 18)) {  // small: the interleaved tables would cost more than they save
    for (uint64_t i = 0; i < count; ++i) {
      uint16_t v;
      std::memcpy(&v, p + 2 * i, 2);
      ++counts[v];
    }
    return;
  }
  // Two interleaved 32-bit tables (512 KiB together, L2-resident) break the store-to-load chains of
  // repeated patterns; they are flushed into the 64-bit counts before they could overflow. They are
  // kept per thread (and left zeroed by the flush): streaming callers count a tensor in pieces, and a
  // fresh 512 KiB allocation per piece cost more in page faults and zeroing than the counting.
  thread_local std::vector<uint32_t> t0(65536, 0), t1(65536, 0);
  constexpr uint64_t kFlushEvery = uint64_t{1} << 31;
  for (uint64_t first = 0; first < count; first += kFlushEvery) {
    const uint64_t last = std::min(count, first + kFlushEvery);
    uint64_t i = first;
    for (; i + 2 <= last; i += 2) {
      uint16_t a, b;
      std::memcpy(&a, p + 2 * i, 2);
      std::memcpy(&b, p + 2 * i + 2, 2);
      ++t0[a], ++t1[b];
    }
    if (i < last) {
      uint16_t a;
      std::memcpy(&a, p + 2 * i, 2);
      ++t0[a];
    }
    for (size_t q = 0; q < 65536; ++q) counts[q] += uint64_t{t0[q]} + t1[q], t0[q] = t1[q] = 0;
  }
}

}  // namespace tmorph::cpu
