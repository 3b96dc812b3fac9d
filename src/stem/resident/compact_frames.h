// An acquisition's frames held in memory in an exact, count-preserving compact form: the resident store's copy
// (resident_store.h), from which every interactive product is computed without decoding again.
//
// Form. Per frame, only its non-zero pixels, in key order, each as (key, running total):
// - key: the pixel's index (pixel order, as built) or its rank by distance from a centre (radial order, after
//   order_radially); uint16 when a frame has at most 65 536 pixels, else uint32;
// - running total: the sum of the frame's values up to and including this entry (uint32; a pixel's value is the
//   difference of two running totals, the frame total is the last one).
// So a frame costs 6 bytes per non-zero pixel (8 with uint32 keys) plus 12 bytes of position index. Electron-counted
// frames are mostly zero outside the bright-field disk: the demo's 128 × 128 uint16 frames (32 KiB dense) take
// about 5 KiB; dense frames (an integrating detector) cost 3× their uint16 size, and the caller's budget decides.
//
// Radial order. Ranks sort the pixels by their float32 distance from the centre, computed exactly as the annulus
// contract of virtual_detector.h computes it, ties by pixel index. Every annulus about that centre is then one
// contiguous range of ranks, and its sum over a frame is the difference of two running totals found by binary
// search: a centred annulus costs O(positions × log(non-zeros per frame)), whatever the detector size. Per frame a
// few checkpoints (the entry counts below every 2^k-th rank, about 160 per frame, 2 bytes each) start each search
// within a few cache lines of its answer.
//
// Growing. A copy of the frames written so far can be extended: extended() is a new copy sharing every entry
// already held (nothing is copied or decoded again) to which the next positions are appended; in radial order the
// appended frames are ordered by rank as they arrive. The entries of a copy never change once appended, so a copy
// others read is extended through extended(), never in place.
//
// Exactness. The frames are the loader's output (masked, unbinned), values below 2^32 per frame total (append
// refuses a frame whose total reaches 2^32); every sum here is the integer sum the dense kernels compute, so
// products from this copy are bit-identical to the streamed ones (tests hold them to it).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "support/large_buffer.h"
#include "tensormorph/dtype.h"
#include "tensormorph/error.h"

namespace tmorph {

// A frame the compact form cannot hold exactly (its total reaches 2^32): the copy is not built, and the products
// stream instead (resident_products.h says why). An Error of kind InvalidArgument for any other caller.
struct FrameNotCompactable : Error {
  explicit FrameNotCompactable(const std::string& message) : Error(ErrorKind::InvalidArgument, message) {}
};

class CompactFrames {
 public:
  // Room for `positions` frames of rows × cols pixels (at most 2^32 - 1), appended in position order.
  CompactFrames(uint64_t positions, uint64_t rows, uint64_t cols);

  // Appends the next `count` positions from dense row-major frames of `dtype` (U8, U16 or U32), on `threads`
  // threads, and adds them to the pattern sums; in radial order their entries are ordered by rank. Throws Error(InvalidArgument) naming the position when a frame's
  // total reaches 2^32 or when more positions are appended than the copy has room for.
  void append(const uint8_t* frames, uint64_t count, DType dtype, unsigned threads);

  // Appending frames produced one at a time elsewhere (the loader's per-frame sink: each frame is compacted while it
  // is still in cache, not written out and read back): begin(part, begin, end) once per contiguous run [begin, end)
  // of the `count` positions (one run per thread), then add(part, frame) for each frame of the run in order, on
  // that run's thread; finish() checks that the runs cover the positions and adds them to the copy in position
  // order. Nothing is added before finish() (an error, or no finish(), leaves the copy as it was). append() is this
  // over frames already in memory; the same errors, from the constructor and add().
  class Appender {
   public:
    Appender(CompactFrames& copy, uint64_t count, DType dtype, unsigned parts);
    ~Appender();
    Appender(const Appender&) = delete;
    Appender& operator=(const Appender&) = delete;
    void begin(unsigned part, uint64_t begin, uint64_t end);
    void add(unsigned part, const uint8_t* frame);
    void finish();

   private:
    struct Part;
    CompactFrames& copy_;
    uint64_t count_;
    DType dtype_;
    uint64_t first_position_;
    std::vector<std::unique_ptr<Part>> parts_;
  };

  // A new copy holding this copy's positions (their entries shared, not copied), to which more can be appended.
  std::unique_ptr<CompactFrames> extended() const;

  uint64_t positions() const { return positions_; }
  uint64_t appended() const { return where_.size(); }
  bool complete() const { return appended() == positions_; }
  uint64_t rows() const { return rows_; }
  uint64_t value_bytes() const { return value_bytes_; }  // of the frames appended (their dtype's size); 0 before
  uint64_t dense_frame_bytes() const { return rows_ * cols_ * value_bytes_; }
  uint64_t cols() const { return cols_; }
  uint64_t nonzeros() const;
  uint64_t bytes() const;  // resident bytes: entries, position index, pattern and rank tables
  // Per pixel over every appended position: the sum and the maximum (the loader's mean/max pattern inputs).
  const std::vector<uint64_t>& pattern_sum() const { return pattern_sum_; }
  const std::vector<uint32_t>& pattern_max() const { return pattern_max_; }

  // Reorders every frame's entries radially about (center_row, center_col) (see above), on `threads` threads; a
  // copy already in radial order is re-ordered about the new centre. Only on a copy no other copy shares entries
  // with (not extended(), nor extended from): throws Error(Internal).
  void order_radially(double center_row, double center_col, unsigned threads);
  // The centre of the radial order, when ordered so.
  std::optional<std::array<double, 2>> radial_center() const { return radial_center_; }
  // [first, last) when `pixels` (sorted pixel indices) are exactly the pixels of one range of ranks: any annulus
  // or disk about the radial centre. nullopt in pixel order or for any other set.
  std::optional<std::array<uint32_t, 2>> rank_range(const std::vector<uint32_t>& pixels) const;

  // What stem.frame_sums computes (op_contracts.h), per position of `positions` (frame indices < appended()), in
  // that order: when `fixed`, totals and the centre-of-mass sums over `com_pixels` (null: every pixel); always one
  // image per detector (sorted pixel lists). Detectors that are rank ranges are summed from two running totals
  // (`evaluated_as` says "rank range"), the others entry by entry ("direct").
  struct Sums {
    std::vector<uint64_t> totals, com_weight, com_row, com_col;
    std::vector<std::vector<uint64_t>> images;
    std::vector<std::string> evaluated_as;
  };
  Sums sums(const std::vector<std::vector<uint32_t>>& detectors, const std::vector<uint32_t>* com_pixels, bool fixed,
            const std::vector<uint64_t>& positions, unsigned threads) const;
  // Per pixel over `positions`: sum (uint64) and maximum, written over `sum` and `max` (rows × cols each).
  void pattern(const std::vector<uint64_t>& positions, std::vector<uint64_t>& sum, std::vector<uint32_t>& max,
               unsigned threads) const;
  // One position's frame, dense (rows × cols values).
  std::vector<uint32_t> frame(uint64_t position) const;

  // One position's entries as held (what a device image copies, device_copy.h): `count` keys (uint16, or uint32 when
  // wide_keys()) in key order and their running totals. Position < appended().
  struct Entries {
    const void* keys = nullptr;
    const uint32_t* totals = nullptr;
    uint32_t count = 0;
  };
  Entries entries(uint64_t position) const;
  bool wide_keys() const { return wide_keys_; }
  // The key of a pixel (its rank in radial order, else the pixel itself), and the pixel of each key (empty in pixel
  // order: key k is pixel k).
  uint32_t key_of_pixel(uint32_t pixel) const { return rank_of_pixel_.empty() ? pixel : rank_of_pixel_[pixel]; }
  const std::vector<uint32_t>& pixel_of_key() const { return pixel_of_rank_; }

 private:
  // The entries of consecutive positions written by one thread of one append, in memory that never moves once
  // allocated (anonymous, huge pages where the kernel gives them: building touches few pages and copies nothing).
  struct Segment {
    LargeBuffer keys, running;  // capacity uint16 or uint32 keys; capacity uint32 running totals
    uint32_t used = 0, capacity = 0;
    uint16_t* keys16() const { return reinterpret_cast<uint16_t*>(keys.get()); }
    uint32_t* keys32() const { return reinterpret_cast<uint32_t*>(keys.get()); }
    uint32_t* totals() const { return reinterpret_cast<uint32_t*>(running.get()); }
  };
  template <class Key>
  static const Key* keys_of(const Segment& s) {
    if constexpr (sizeof(Key) == 2) return s.keys16();
    else return s.keys32();
  }
  struct Where {  // one position's entries: segment, [begin, end)
    uint32_t segment = 0, begin = 0, end = 0;
  };
  template <class Key, class Fn>
  void visit(uint64_t position, Fn&& fn) const;
  template <class Key>
  Sums sums_as(const std::vector<std::vector<uint32_t>>& detectors, const std::vector<uint32_t>* com_pixels, bool fixed,
               const std::vector<uint64_t>& positions, unsigned threads) const;
  uint32_t pixel_of_key(uint32_t key) const { return pixel_of_rank_.empty() ? key : pixel_of_rank_[key]; }

  uint64_t positions_ = 0, rows_ = 0, cols_ = 0, pixels_ = 0, value_bytes_ = 0;
  bool wide_keys_ = false;
  std::vector<std::shared_ptr<const Segment>> segments_;  // shared with the copies extended() makes
  bool shares_segments_ = false;
  std::vector<Where> where_;
  std::vector<uint64_t> pattern_sum_;
  std::vector<uint32_t> pattern_max_;
  std::optional<std::array<double, 2>> radial_center_;
  std::vector<uint32_t> pixel_of_rank_, rank_of_pixel_;  // empty in pixel order
  // Checkpoints (radial order, uint16 keys, fewer than 65 536 pixels): per position, checkpoints_per_frame_ entry
  // counts, the j-th the number of its entries whose rank is below (j + 1) << checkpoint_shift_; a rank bound's
  // search then starts between two of them, within a few cache lines. Empty otherwise.
  uint32_t checkpoint_shift_ = 0, checkpoints_per_frame_ = 0;
  std::vector<uint16_t> checkpoints_;
  bool keeps_checkpoints() const { return checkpoints_per_frame_ > 0 && !rank_of_pixel_.empty(); }
  // Writes one frame's checkpoints from its `n` ranks in order.
  template <class Rank>
  void write_checkpoints(const Rank* ranks, uint64_t n, uint16_t* out) const {
    uint64_t e = 0;
    for (uint32_t j = 0; j < checkpoints_per_frame_; ++j) {
      const uint64_t bound = uint64_t{j + 1} << checkpoint_shift_;
      while (e < n && ranks[e] < bound) ++e;
      out[j] = static_cast<uint16_t>(e);
    }
  }
};

}  // namespace tmorph
