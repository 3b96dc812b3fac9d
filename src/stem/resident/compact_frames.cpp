#include "stem/resident/compact_frames.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <numeric>
#include <utility>

#include "support/thread_pool.h"
#include "tensormorph/error.h"

namespace tmorph {

namespace {

constexpr uint64_t kRunningLimit = uint64_t{1} << 32;  // running totals are uint32
constexpr uint64_t kSegmentEntries = uint64_t{1} << 20;  // entries per segment (6 MiB with uint16 keys), unless a frame needs more

template <class T>
T load_value(const uint8_t* frame, uint64_t pixel) {
  T v;
  std::memcpy(&v, frame + pixel * sizeof(T), sizeof(T));
  return v;
}

// True when the 32 bytes at p are all zero (most of an electron-counted frame).
inline bool zero_block(const uint8_t* p) {
  uint64_t w[4];
  std::memcpy(w, p, sizeof w);
  return (w[0] | w[1] | w[2] | w[3]) == 0;
}

// Sorts (rank, value) pairs by rank, least significant byte first over `rank_bytes` bytes (a stable counting sort
// per byte: a frame's few hundred entries cost a few microseconds, a comparison sort several times that).
void sort_by_rank(std::vector<std::pair<uint32_t, uint32_t>>& entries, std::vector<std::pair<uint32_t, uint32_t>>& scratch,
                  unsigned rank_bytes) {
  scratch.resize(entries.size());
  for (unsigned byte = 0; byte < rank_bytes; ++byte) {
    const unsigned shift = 8 * byte;
    uint32_t start[257] = {};
    for (const auto& e : entries) ++start[((e.first >> shift) & 0xFF) + 1];
    for (unsigned b = 0; b < 256; ++b) start[b + 1] += start[b];
    for (const auto& e : entries) scratch[start[(e.first >> shift) & 0xFF]++] = e;
    entries.swap(scratch);
  }
}

}  // namespace

CompactFrames::CompactFrames(uint64_t positions, uint64_t rows, uint64_t cols)
    : positions_(positions), rows_(rows), cols_(cols), pixels_(rows * cols) {
  if (rows == 0 || cols == 0 || pixels_ >= (uint64_t{1} << 32))
    throw Error(ErrorKind::InvalidArgument, "resident copy: frames of " + std::to_string(rows) + " x " + std::to_string(cols) +
                                                " pixels (expected 1 to 2^32 - 1 pixels)");
  wide_keys_ = pixels_ > 65536;
  if (pixels_ < 65536) {  // checkpoint every 2^k ranks, k the smallest (at least 5) giving at most 160 per frame
    checkpoint_shift_ = 5;
    while ((pixels_ >> checkpoint_shift_) >= 160) ++checkpoint_shift_;
    checkpoints_per_frame_ = static_cast<uint32_t>((pixels_ + (uint64_t{1} << checkpoint_shift_) - 1) >> checkpoint_shift_);
  }
  where_.reserve(positions);
  pattern_sum_.assign(pixels_, 0);
  pattern_max_.assign(pixels_, 0);
}

// One contiguous run of the positions an Appender adds (one thread's), compacted into its own segments.
struct CompactFrames::Appender::Part {
  uint64_t begin = 0, end = 0, next = 0;  // positions [begin, end) of the append; next: the next one add() takes
  std::vector<Segment> segments;
  std::vector<Where> where;  // segment: index in `segments`
  std::vector<uint64_t> sum;
  std::vector<uint32_t> max;
  // One frame's non-zero pixels (pixels, values), and (rank, value) pairs in radial order.
  std::vector<uint32_t> nz_pixel, nz_value;
  std::vector<std::pair<uint32_t, uint32_t>> entries, scratch;
  uint64_t entries_so_far = 0;
  std::vector<uint16_t> checkpoints;  // radial order: the run's positions' checkpoints
};

CompactFrames::Appender::Appender(CompactFrames& copy, uint64_t count, DType dtype, unsigned parts)
    : copy_(copy), count_(count), dtype_(dtype), first_position_(copy.appended()) {
  if (count > copy.positions_ - copy.appended())
    throw Error(ErrorKind::InvalidArgument, "resident copy: " + std::to_string(count) + " more positions than the " +
                                                std::to_string(copy.positions_ - copy.appended()) + " left of " + std::to_string(copy.positions_));
  if (dtype != DType::U8 && dtype != DType::U16 && dtype != DType::U32)
    throw Error(ErrorKind::InvalidArgument, "resident copy: frames of " + std::string(dtype_name(dtype)) + " (expected uint8, uint16 or uint32)");
  if (copy.value_bytes_ != 0 && copy.value_bytes_ != dtype_size(dtype))
    throw Error(ErrorKind::InvalidArgument, "resident copy: frames of " + std::string(dtype_name(dtype)) + " appended to frames of " +
                                                std::to_string(8 * copy.value_bytes_) + "-bit values");
  parts_.resize(std::max(1u, parts));
}

CompactFrames::Appender::~Appender() = default;

void CompactFrames::Appender::begin(unsigned part, uint64_t begin, uint64_t end) {
  if (part >= parts_.size() || begin > end || end > count_)
    throw Error(ErrorKind::Internal, "resident copy: appender run " + std::to_string(part) + " [" + std::to_string(begin) + ", " +
                                         std::to_string(end) + ") outside its " + std::to_string(count_) + " positions");
  auto p = std::make_unique<Part>();
  p->begin = p->next = begin, p->end = end;
  const uint64_t pixels = copy_.pixels_;
  p->sum.assign(pixels, 0), p->max.assign(pixels, 0);
  p->nz_pixel.resize(pixels), p->nz_value.resize(pixels);
  if (copy_.keeps_checkpoints()) p->checkpoints.resize((end - begin) * copy_.checkpoints_per_frame_);
  parts_[part] = std::move(p);
}

void CompactFrames::Appender::add(unsigned part, const uint8_t* frame) {
  Part& p = *parts_[part];
  if (p.next >= p.end) throw Error(ErrorKind::Internal, "resident copy: more frames added than the appender run holds");
  const CompactFrames& c = copy_;
  const uint64_t pixels = c.pixels_, value_bytes = dtype_size(dtype_);
  // The frame's non-zero pixels into (pixels, values), branch-free inside the 32-byte blocks that hold any.
  const auto gather = [&]<class T>(T) {
    constexpr uint64_t per_block = 32 / sizeof(T);
    uint64_t n = 0, px = 0;
    for (; px + per_block <= pixels; px += per_block) {
      if (zero_block(frame + px * sizeof(T))) continue;
      for (uint64_t q = px; q < px + per_block; ++q) {
        const T v = load_value<T>(frame, q);
        p.nz_pixel[n] = static_cast<uint32_t>(q), p.nz_value[n] = v, n += v != 0;
      }
    }
    for (; px < pixels; ++px) {
      const T v = load_value<T>(frame, px);
      p.nz_pixel[n] = static_cast<uint32_t>(px), p.nz_value[n] = v, n += v != 0;
    }
    return n;
  };
  const uint64_t n = value_bytes == 1 ? gather(uint8_t{}) : value_bytes == 2 ? gather(uint16_t{}) : gather(uint32_t{});
  if (p.segments.empty() || p.segments.back().used + n > p.segments.back().capacity) {
    // A new segment sized for the rest of the run at the entries per frame seen so far (+25%), at most
    // kSegmentEntries unless one frame needs more.
    const uint64_t seen = std::max<uint64_t>(1, p.entries_so_far + n), frames_seen = p.next - p.begin + 1;
    const uint64_t want = std::max<uint64_t>(n, std::min(kSegmentEntries, seen * (p.end - p.begin) / frames_seen * 5 / 4 + 1));
    Segment fresh;
    fresh.capacity = static_cast<uint32_t>(want);
    fresh.keys = LargeBuffer(want * (c.wide_keys_ ? 4 : 2), LargeBuffer::Populate::yes);
    fresh.running = LargeBuffer(want * 4, LargeBuffer::Populate::yes);
    p.segments.push_back(std::move(fresh));
  }
  Segment& s = p.segments.back();
  const uint32_t start = s.used;
  for (uint64_t e = 0; e < n; ++e) {
    const uint32_t pixel = p.nz_pixel[e], value = p.nz_value[e];
    p.sum[pixel] += value;
    p.max[pixel] = std::max(p.max[pixel], value);
  }
  // Keys (pixels, or ranks in rank order: radial order, as order_radially leaves them) and running totals, in one pass.
  uint64_t total = 0;
  uint32_t* running = s.totals() + start;
  const auto write = [&]<class Key>(Key* keys, const auto& key_value) {
    for (uint64_t e = 0; e < n; ++e) {
      const auto [key, value] = key_value(e);
      total += value;
      running[e] = static_cast<uint32_t>(total);
      keys[e] = static_cast<Key>(key);
    }
  };
  const auto in_pixel_order = [&](uint64_t e) { return std::pair<uint32_t, uint32_t>{p.nz_pixel[e], p.nz_value[e]}; };
  const auto in_rank_order = [&](uint64_t e) { return p.entries[e]; };
  if (!c.rank_of_pixel_.empty()) {
    p.entries.resize(n);
    for (uint64_t e = 0; e < n; ++e) p.entries[e] = {c.rank_of_pixel_[p.nz_pixel[e]], p.nz_value[e]};
    sort_by_rank(p.entries, p.scratch, static_cast<unsigned>((std::bit_width(pixels - 1) + 7) / 8));
    if (c.wide_keys_) write(s.keys32() + start, in_rank_order);
    else write(s.keys16() + start, in_rank_order);
    if (c.keeps_checkpoints())
      c.write_checkpoints(s.keys16() + start, n, p.checkpoints.data() + (p.next - p.begin) * c.checkpoints_per_frame_);
  } else {
    if (c.wide_keys_) write(s.keys32() + start, in_pixel_order);
    else write(s.keys16() + start, in_pixel_order);
  }
  if (total >= kRunningLimit)
    throw FrameNotCompactable("resident copy: the frame at position " + std::to_string(first_position_ + p.next) +
                              " sums to 2^32 or more (its running totals would not fit uint32)");
  s.used += static_cast<uint32_t>(n);
  p.entries_so_far += n;
  p.where.push_back({static_cast<uint32_t>(p.segments.size() - 1), start, s.used});
  ++p.next;
}

void CompactFrames::Appender::finish() {
  // Every position of the append, each once: the runs (in position order) tile [0, count) and each took all its frames.
  std::vector<Part*> runs;
  for (auto& p : parts_)
    if (p && p->end > p->begin) runs.push_back(p.get());
  std::sort(runs.begin(), runs.end(), [](const Part* a, const Part* b) { return a->begin < b->begin; });
  uint64_t covered = 0;
  for (const Part* p : runs) {
    if (p->begin != covered || p->next != p->end)
      throw Error(ErrorKind::Internal, "resident copy: appender runs do not cover the positions in order");
    covered = p->end;
  }
  if (covered != count_) throw Error(ErrorKind::Internal, "resident copy: appender runs cover " + std::to_string(covered) + " of " +
                                                              std::to_string(count_) + " positions");
  CompactFrames& c = copy_;
  if (count_ > 0) c.value_bytes_ = dtype_size(dtype_);
  for (Part* p : runs) {
    const uint32_t base = static_cast<uint32_t>(c.segments_.size());
    for (Where w : p->where) w.segment += base, c.where_.push_back(w);
    for (uint64_t px = 0; px < c.pixels_; ++px)
      c.pattern_sum_[px] += p->sum[px], c.pattern_max_[px] = std::max(c.pattern_max_[px], p->max[px]);
    for (Segment& seg : p->segments) c.segments_.push_back(std::make_shared<const Segment>(std::move(seg)));
    if (c.keeps_checkpoints()) {
      if (c.checkpoints_.capacity() == 0) c.checkpoints_.reserve(c.positions_ * c.checkpoints_per_frame_);
      c.checkpoints_.insert(c.checkpoints_.end(), p->checkpoints.begin(), p->checkpoints.end());
    }
  }
  parts_.clear();
}

void CompactFrames::append(const uint8_t* frames, uint64_t count, DType dtype, unsigned threads) {
  ThreadPool& pool = ThreadPool::shared(std::max(1u, threads));
  Appender appender(*this, count, dtype, pool.size());
  if (count == 0) return;
  const uint64_t frame_bytes = pixels_ * dtype_size(dtype);
  pool.parallel_for(count, [&](uint64_t begin, uint64_t end, unsigned part) {
    appender.begin(part, begin, end);
    for (uint64_t i = begin; i < end; ++i) appender.add(part, frames + i * frame_bytes);
  });
  appender.finish();
}

std::unique_ptr<CompactFrames> CompactFrames::extended() const {
  auto out = std::unique_ptr<CompactFrames>(new CompactFrames(*this));
  out->where_.reserve(positions_);
  if (!checkpoints_.empty()) out->checkpoints_.reserve(positions_ * checkpoints_per_frame_);
  out->shares_segments_ = true;  // (the copy it came from is never reordered: only a fresh build is)
  return out;
}

uint64_t CompactFrames::nonzeros() const {
  uint64_t n = 0;
  for (const auto& s : segments_) n += s->used;
  return n;
}

uint64_t CompactFrames::bytes() const {
  uint64_t b = where_.capacity() * sizeof(Where) + pattern_sum_.size() * sizeof(uint64_t) + pattern_max_.size() * sizeof(uint32_t) +
               (pixel_of_rank_.size() + rank_of_pixel_.size()) * sizeof(uint32_t) + checkpoints_.capacity() * sizeof(uint16_t);
  for (const auto& s : segments_) b += uint64_t{s->capacity} * ((wide_keys_ ? 4 : 2) + sizeof(uint32_t));
  return b;
}

template <class Key, class Fn>
void CompactFrames::visit(uint64_t position, Fn&& fn) const {
  const Where w = where_[position];
  const Segment& s = *segments_[w.segment];
  const Key* keys = keys_of<Key>(s);
  const uint32_t* running = s.totals();
  uint32_t previous = 0;
  for (uint32_t e = w.begin; e < w.end; ++e) {
    fn(static_cast<uint32_t>(keys[e]), running[e] - previous);
    previous = running[e];
  }
}

void CompactFrames::order_radially(double center_row, double center_col, unsigned threads) {
  if (shares_segments_) throw Error(ErrorKind::Internal, "resident copy: order_radially on a copy sharing its entries");
  // Distances exactly as annulus_pixels (virtual_detector.cpp) computes them, so its sets are rank ranges.
  const float cr = static_cast<float>(center_row), cc = static_cast<float>(center_col);
  std::vector<float> distance(pixels_);
  for (uint64_t k = 0; k < rows_; ++k)
    for (uint64_t l = 0; l < cols_; ++l) {
      const float dr = static_cast<float>(k) - cr, dc = static_cast<float>(l) - cc;
      distance[k * cols_ + l] = std::sqrt(dr * dr + dc * dc);
    }
  std::vector<uint32_t> pixel_of_rank(pixels_);
  std::iota(pixel_of_rank.begin(), pixel_of_rank.end(), 0u);
  std::stable_sort(pixel_of_rank.begin(), pixel_of_rank.end(), [&](uint32_t a, uint32_t b) { return distance[a] < distance[b]; });
  std::vector<uint32_t> rank_of_pixel(pixels_);
  for (uint32_t r = 0; r < pixels_; ++r) rank_of_pixel[pixel_of_rank[r]] = r;

  std::vector<uint16_t> checkpoints;
  if (checkpoints_per_frame_ > 0) {
    checkpoints.reserve(positions_ * checkpoints_per_frame_);  // appends to come fill the rest
    checkpoints.resize(where_.size() * checkpoints_per_frame_);
  }
  ThreadPool::shared(std::max(1u, threads)).parallel_for(where_.size(), [&](uint64_t begin, uint64_t end, unsigned) {
    std::vector<std::pair<uint32_t, uint32_t>> entries, scratch;  // (rank, value)
    for (uint64_t position = begin; position < end; ++position) {
      entries.clear();
      const auto collect = [&](uint32_t key, uint32_t value) { entries.emplace_back(rank_of_pixel[pixel_of_key(key)], value); };
      if (wide_keys_) visit<uint32_t>(position, collect);
      else visit<uint16_t>(position, collect);
      sort_by_rank(entries, scratch, wide_keys_ ? 4 : 2);
      const Where w = where_[position];
      const Segment& s = *segments_[w.segment];  // entries not shared (checked above): rewritten in place
      uint32_t total = 0;
      for (uint32_t e = w.begin; e < w.end; ++e) {
        const auto [rank, value] = entries[e - w.begin];
        total += value;
        if (wide_keys_) s.keys32()[e] = rank;
        else s.keys16()[e] = static_cast<uint16_t>(rank);
        s.totals()[e] = total;
      }
      if (!checkpoints.empty()) write_checkpoints(s.keys16() + w.begin, w.end - w.begin, checkpoints.data() + position * checkpoints_per_frame_);
    }
  });
  checkpoints_ = std::move(checkpoints);
  pixel_of_rank_ = std::move(pixel_of_rank);
  rank_of_pixel_ = std::move(rank_of_pixel);
  radial_center_ = std::array<double, 2>{center_row, center_col};
}

std::optional<std::array<uint32_t, 2>> CompactFrames::rank_range(const std::vector<uint32_t>& pixels) const {
  if (rank_of_pixel_.empty() || pixels.empty()) return std::nullopt;
  uint32_t lo = UINT32_MAX, hi = 0;
  for (uint32_t p : pixels) {
    if (p >= pixels_) return std::nullopt;
    lo = std::min(lo, rank_of_pixel_[p]), hi = std::max(hi, rank_of_pixel_[p]);
  }
  // The pixels are distinct (a sorted list), so as many of them as ranks in [lo, hi] means exactly that range.
  if (uint64_t{hi} - lo + 1 != pixels.size()) return std::nullopt;
  return std::array<uint32_t, 2>{lo, hi + 1};
}

template <class Key>
CompactFrames::Sums CompactFrames::sums_as(const std::vector<std::vector<uint32_t>>& detectors, const std::vector<uint32_t>* com_pixels,
                                           bool fixed, const std::vector<uint64_t>& positions, unsigned threads) const {
  Sums out;
  const uint64_t n = positions.size();
  // Detectors that are rank ranges are read from two running totals; the others (at most 64) through a membership
  // bit per key.
  std::vector<std::optional<std::array<uint32_t, 2>>> ranges;
  std::vector<uint64_t> member;
  std::vector<size_t> bit_of;  // detector -> its membership bit
  for (size_t d = 0; d < detectors.size(); ++d) {
    ranges.push_back(rank_range(detectors[d]));
    out.evaluated_as.push_back(ranges.back() ? "rank range" : "direct");
    if (ranges.back()) continue;
    if (member.empty()) member.assign(pixels_, 0);
    const size_t bit = bit_of.size();
    if (bit >= 64) throw Error(ErrorKind::InvalidArgument, "resident copy: more than 64 detectors that are not centred annuli in one pass");
    bit_of.push_back(d);
    for (uint32_t p : detectors[d]) {
      if (p >= pixels_) throw Error(ErrorKind::InvalidArgument, "products: a detector pixel lies outside the frame");
      member[rank_of_pixel_.empty() ? p : rank_of_pixel_[p]] |= uint64_t{1} << bit;
    }
  }
  std::vector<uint8_t> com_member;
  if (fixed && com_pixels) {
    com_member.assign(pixels_, 0);
    for (uint32_t p : *com_pixels) {
      if (p >= pixels_) throw Error(ErrorKind::InvalidArgument, "products: a centre-of-mass pixel lies outside the frame");
      com_member[rank_of_pixel_.empty() ? p : rank_of_pixel_[p]] = 1;
    }
  }
  std::vector<uint32_t> row_of_key, col_of_key;
  if (fixed) {
    row_of_key.resize(pixels_), col_of_key.resize(pixels_);
    for (uint32_t key = 0; key < pixels_; ++key) {
      const uint32_t p = pixel_of_key(key);
      row_of_key[key] = static_cast<uint32_t>(p / cols_), col_of_key[key] = static_cast<uint32_t>(p % cols_);
    }
    out.totals.assign(n, 0), out.com_weight.assign(n, 0), out.com_row.assign(n, 0), out.com_col.assign(n, 0);
  }
  out.images.assign(detectors.size(), std::vector<uint64_t>(n, 0));
  const bool entry_pass = fixed || !bit_of.empty();

  ThreadPool::shared(std::max(1u, threads)).parallel_for(n, [&](uint64_t begin, uint64_t end, unsigned) {
    std::vector<uint64_t> direct(bit_of.size());
    for (uint64_t i = begin; entry_pass && i < end; ++i) {
      const uint64_t position = positions[i];
      const Where w = where_[position];
      const Segment& s = *segments_[w.segment];
      const Key* keys = keys_of<Key>(s);
      const uint32_t* running = s.totals();
      if (entry_pass) {
        std::fill(direct.begin(), direct.end(), 0);
        uint64_t weight = 0, row = 0, col = 0;
        uint32_t previous = 0;
        for (uint32_t e = w.begin; e < w.end; ++e) {
          const uint32_t key = keys[e], value = running[e] - previous;
          previous = running[e];
          if (fixed && (com_member.empty() || com_member[key]))
            weight += value, row += uint64_t{value} * row_of_key[key], col += uint64_t{value} * col_of_key[key];
          for (uint64_t bits = member.empty() ? 0 : member[key]; bits; bits &= bits - 1) direct[std::countr_zero(bits)] += value;
        }
        if (fixed) out.totals[i] = previous, out.com_weight[i] = com_pixels ? weight : previous, out.com_row[i] = row, out.com_col[i] = col;
        for (size_t b = 0; b < bit_of.size(); ++b) out.images[bit_of[b]][i] = direct[b];
      }
    }
    // Range detectors: the sum of the values of ranks below x is the running total of the last entry whose key is
    // below x. The binary searches of kLanes positions (two each) run in lockstep, so their cache misses overlap:
    // alone, each step of each search waits on memory (a full-size acquisition's copy is gigabytes).
    constexpr unsigned kLanes = 8;
    const bool checkpointed = sizeof(Key) == 2 && keeps_checkpoints();
    for (size_t d = 0; d < detectors.size(); ++d) {
      if (!ranges[d]) continue;
      for (uint64_t i0 = begin; i0 < end; i0 += kLanes) {
        const unsigned lanes = static_cast<unsigned>(std::min<uint64_t>(kLanes, end - i0));
        const Key *first[2 * kLanes], *base[2 * kLanes];
        const uint32_t* running[2 * kLanes];
        uint32_t left[2 * kLanes], x[2 * kLanes], longest = 0;
        for (unsigned l = 0; l < lanes; ++l) {
          const Where w = where_[positions[i0 + l]];
          const Segment& s = *segments_[w.segment];
          const uint16_t* cp = checkpointed ? checkpoints_.data() + positions[i0 + l] * checkpoints_per_frame_ : nullptr;
          for (unsigned e = 0; e < 2; ++e) {
            const unsigned k = 2 * l + e;
            x[k] = (*ranges[d])[e];
            // The entries below rank x lie before the checkpoint above x and include those below the one under it.
            uint32_t lo = 0, hi = w.end - w.begin;
            if (cp) {
              const uint32_t c = x[k] >> checkpoint_shift_;
              lo = c == 0 ? 0 : cp[c - 1];
              hi = c < checkpoints_per_frame_ ? cp[c] : hi;
            }
            first[k] = keys_of<Key>(s) + w.begin;
            base[k] = first[k] + lo;
            running[k] = s.totals() + w.begin;
            left[k] = hi - lo;
            longest = std::max(longest, hi - lo);
          }
        }
        for (uint32_t n = longest; n > 1; n -= n / 2)  // as many halvings as the longest search needs
          for (unsigned k = 0; k < 2 * lanes; ++k) {
            if (left[k] <= 1) continue;
            const uint32_t half = left[k] / 2;
            base[k] = base[k][half] < x[k] ? base[k] + half : base[k];
            left[k] -= half;
          }
        for (unsigned l = 0; l < lanes; ++l) {
          uint64_t below[2];
          for (unsigned e = 0; e < 2; ++e) {
            const unsigned k = 2 * l + e;
            const uint64_t at = static_cast<uint64_t>(base[k] - first[k]) + (left[k] == 1 && *base[k] < x[k]);
            below[e] = at == 0 ? 0 : running[k][at - 1];
          }
          out.images[d][i0 + l] = below[1] - below[0];
        }
      }
    }
  });
  return out;
}

CompactFrames::Sums CompactFrames::sums(const std::vector<std::vector<uint32_t>>& detectors, const std::vector<uint32_t>* com_pixels,
                                        bool fixed, const std::vector<uint64_t>& positions, unsigned threads) const {
  for (uint64_t p : positions)
    if (p >= appended()) throw Error(ErrorKind::InvalidArgument, "resident copy: position " + std::to_string(p) + " is not resident");
  return wide_keys_ ? sums_as<uint32_t>(detectors, com_pixels, fixed, positions, threads)
                    : sums_as<uint16_t>(detectors, com_pixels, fixed, positions, threads);
}

void CompactFrames::pattern(const std::vector<uint64_t>& positions, std::vector<uint64_t>& sum, std::vector<uint32_t>& max,
                            unsigned threads) const {
  bool everything = positions.size() == appended();
  for (uint64_t i = 0; everything && i < positions.size(); ++i) everything = positions[i] == i;
  if (everything) {  // summed while appending
    sum = pattern_sum_, max = pattern_max_;
    return;
  }
  for (uint64_t p : positions)
    if (p >= appended()) throw Error(ErrorKind::InvalidArgument, "resident copy: position " + std::to_string(p) + " is not resident");
  ThreadPool& pool = ThreadPool::shared(std::max(1u, threads));
  std::vector<std::vector<uint64_t>> sums(pool.size());
  std::vector<std::vector<uint32_t>> maxima(pool.size());
  pool.parallel_for(positions.size(), [&](uint64_t begin, uint64_t end, unsigned part) {
    std::vector<uint64_t>& s = sums[part];
    std::vector<uint32_t>& m = maxima[part];
    s.assign(pixels_, 0), m.assign(pixels_, 0);
    const auto add = [&](uint32_t key, uint32_t value) {
      const uint32_t p = pixel_of_key(key);
      s[p] += value, m[p] = std::max(m[p], value);
    };
    for (uint64_t i = begin; i < end; ++i) {
      if (wide_keys_) visit<uint32_t>(positions[i], add);
      else visit<uint16_t>(positions[i], add);
    }
  });
  sum.assign(pixels_, 0), max.assign(pixels_, 0);
  for (size_t part = 0; part < sums.size(); ++part)
    for (uint64_t p = 0; p < pixels_ && !sums[part].empty(); ++p) sum[p] += sums[part][p], max[p] = std::max(max[p], maxima[part][p]);
}

std::vector<uint32_t> CompactFrames::frame(uint64_t position) const {
  if (position >= appended()) throw Error(ErrorKind::InvalidArgument, "resident copy: position " + std::to_string(position) + " is not resident");
  std::vector<uint32_t> out(pixels_, 0);
  const auto put = [&](uint32_t key, uint32_t value) { out[pixel_of_key(key)] = value; };
  if (wide_keys_) visit<uint32_t>(position, put);
  else visit<uint16_t>(position, put);
  return out;
}

CompactFrames::Entries CompactFrames::entries(uint64_t position) const {
  if (position >= appended()) throw Error(ErrorKind::InvalidArgument, "resident copy: position " + std::to_string(position) + " is not resident");
  const Where w = where_[position];
  const Segment& s = *segments_[w.segment];
  Entries e;
  e.keys = wide_keys_ ? static_cast<const void*>(s.keys32() + w.begin) : static_cast<const void*>(s.keys16() + w.begin);
  e.totals = s.totals() + w.begin;
  e.count = w.end - w.begin;
  return e;
}

}  // namespace tmorph
