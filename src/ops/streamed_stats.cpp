#include "ops/streamed_stats.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>

#include "support/thread_pool.h"
#include "ops/kernel_call.h"
#include "tensormorph/contract_math.h"
#include "ops/stats_options.h"
#include "tensormorph/op_contracts.h"
#include "tensormorph/error.h"
#include "tensormorph/planner.h"

namespace tmorph {

namespace {

constexpr uint32_t kBuckets = 65536;

bool finite_bits(uint32_t bits) { return (bits & 0x7f800000u) != 0x7f800000u; }

// Order keys: an unsigned key whose order is the values' order (-0 just below +0): negative values'
// bits inverted, positive ones' sign bit set. KeyCounter computes them branch-free; this inverts them.
float value_of_key(uint32_t key) {
  return std::bit_cast<float>((key & 0x80000000u) ? key & 0x7fffffffu : ~key);
}

// Zeroed 65,536-entry uint32 tables, kept across calls: a table is handed back zeroed (KeyCounter
// clears what it counted), so no call pays for allocating and faulting in fresh pages.
class TablePool {
 public:
  static TablePool& shared() {
    static TablePool pool;
    return pool;
  }
  std::unique_ptr<uint32_t[]> take() {
    std::lock_guard<std::mutex> lock(mu_);
    if (free_.empty()) return std::unique_ptr<uint32_t[]>(new uint32_t[kBuckets]());
    auto t = std::move(free_.back());
    free_.pop_back();
    return t;
  }
  void give_back(std::unique_ptr<uint32_t[]> t) {
    std::lock_guard<std::mutex> lock(mu_);
    if (free_.size() < kMaxKept) free_.push_back(std::move(t));  // else freed: at most 16 MiB stay
  }

 private:
  static constexpr size_t kMaxKept = 64;  // 256 KiB each
  std::mutex mu_;
  std::vector<std::unique_ptr<uint32_t[]>> free_;
};

// Counts, split across threads, of 16-bit slices of the order keys of a piece's finite values: the top
// slice of every value (slots == 0), or the low slice of the values whose top slice is a selected
// bucket (slot_of_bucket[top] < 255 picks its table). Each thread counts into its own uint32 tables,
// four interleaved per table so that runs of equal keys do not wait on one another's increments; they
// are flushed into the uint64 totals before any could overflow and when the totals are read.
class KeyCounter {
 public:
  static constexpr uint8_t kNoSlot = 255;
  static constexpr int kWays = 4;

  KeyCounter(unsigned threads, size_t tables, std::vector<uint8_t> slot_of_bucket = {})
      : threads_(threads), tables_(tables), slot_of_bucket_(std::move(slot_of_bucket)), totals_(tables * kBuckets, 0) {
    local_.resize(threads);
    for (auto& part : local_)
      for (size_t t = 0; t < tables * kWays; ++t) part.push_back(TablePool::shared().take());
  }
  ~KeyCounter() {
    flush();
    for (auto& part : local_)
      for (auto& table : part) TablePool::shared().give_back(std::move(table));
  }
  KeyCounter(const KeyCounter&) = delete;
  KeyCounter& operator=(const KeyCounter&) = delete;

  void count(const float* values, uint64_t n) {
    if (!tables_) return;
    if (pending_ + n > UINT32_MAX) flush();  // no uint32 count can overflow
    pending_ += n;
    auto run = [&](uint64_t b, uint64_t e, unsigned part) { count_range(values + b, e - b, local_[part]); };
    if (threads_ <= 1 || n < (uint64_t{1} << 16)) run(0, n, 0);
    else ThreadPool::shared(threads_).parallel_for(n, run);
  }
  const std::vector<uint64_t>& totals() {
    flush();
    return totals_;
  }

 private:
  void count_range(const float* values, uint64_t n, std::vector<std::unique_ptr<uint32_t[]>>& tables) {
    constexpr uint64_t kChunk = 2048;
    constexpr uint32_t kSkip = 0xffffffffu;
    uint32_t keys[kChunk];
    for (uint64_t first = 0; first < n; first += kChunk) {
      const uint64_t m = std::min(kChunk, n - first);
      for (uint64_t i = 0; i < m; ++i) {  // branch-free: vectorises
        uint32_t bits;
        std::memcpy(&bits, values + first + i, 4);
        const uint32_t key = bits ^ (static_cast<uint32_t>(static_cast<int32_t>(bits) >> 31) | 0x80000000u);
        keys[i] = finite_bits(bits) ? key : kSkip;
      }
      if (slot_of_bucket_.empty()) {
        for (uint64_t i = 0; i < m; ++i)
          if (keys[i] != kSkip) ++tables[i % kWays][keys[i] >> 16];
      } else {
        for (uint64_t i = 0; i < m; ++i) {
          if (keys[i] == kSkip) continue;
          const uint8_t slot = slot_of_bucket_[keys[i] >> 16];
          if (slot != kNoSlot) ++tables[slot * kWays + i % kWays][keys[i] & 0xffffu];
        }
      }
    }
  }

  void flush() {
    if (!pending_) return;
    for (auto& part : local_)
      for (size_t t = 0; t < tables_ * kWays; ++t) {
        uint32_t* table = part[t].get();
        uint64_t* total = totals_.data() + t / kWays * kBuckets;
        for (size_t k = 0; k < kBuckets; ++k)
          if (table[k]) total[k] += table[k], table[k] = 0;
      }
    pending_ = 0;
  }

  unsigned threads_;
  size_t tables_;
  std::vector<uint8_t> slot_of_bucket_;  // empty: count the top slices
  uint64_t pending_ = 0;                 // values counted since the last flush
  std::vector<uint64_t> totals_;
  std::vector<std::vector<std::unique_ptr<uint32_t[]>>> local_;  // [thread part][table * kWays + way]
};

// Where each wanted rank lies after the first pass: its top-16 bucket and its rank inside it.
struct RankTarget {
  uint64_t rank;
  uint32_t bucket;
  uint64_t within;
  int slot;  // the low-16 table that resolves it
};

}  // namespace

StatsResult streamed_float_stats(uint64_t elements, const Placement& decode, const FloatProducer& produce,
                                 const Planner& planner, const StatsOptions& options,
                                 const std::optional<KnownMoments>& known) {
  check_options(options);
  const unsigned threads = options.threads ? options.threads : default_thread_count();
  const bool want_quantiles = options.quantiles && !options.probabilities.empty();
  StatsResult result;
  bool decoded = false;
  auto pass = [&](const FloatSink& sink) {
    if (!decoded) result.placement.insert(result.placement.begin(), decode);
    decoded = true;
    produce(sink);
  };

  // Pass 1: moments (unless known), and the top 16 bits of every finite value's key.
  KeyCounter top(threads, want_quantiles ? 1 : 0);
  if (known) {
    result.moments = known->summary;
    result.placement.push_back(known->placement);
    if (want_quantiles) pass([&](const float* v, uint64_t n) { top.count(v, n); });
  } else {
    MomentsStream moments(planner, DType::F32, elements, threads);
    pass([&](const float* v, uint64_t n) {
      moments.feed(v, n);
      top.count(v, n);
    });
    result.moments = moments.finish();
    result.placement.push_back(moments.placement());
  }
  const MomentsSummary& m = result.moments;

  // What the second pass must find: the histogram over its edges, and the order statistics.
  const bool explicit_edges = !options.histogram_edges.empty();
  const bool want_histogram = options.histogram && (explicit_edges || options.histogram_range || m.finite_count > 0);
  std::vector<RankTarget> targets;
  std::vector<uint8_t> slot_of_bucket(kBuckets, KeyCounter::kNoSlot);
  int slots = 0;
  uint64_t finite = 0;
  if (want_quantiles) {
    const auto& counts = top.totals();
    for (uint64_t c : counts) finite += c;
    const std::vector<uint64_t> ranks =
        finite ? ranks_read(options.probabilities.data(), options.probabilities.size(), finite) : std::vector<uint64_t>{};
    uint64_t below = 0;
    uint32_t bucket = 0;
    for (uint64_t r : ranks) {
      while (below + counts[bucket] <= r) below += counts[bucket++];
      if (slot_of_bucket[bucket] == KeyCounter::kNoSlot) slot_of_bucket[bucket] = static_cast<uint8_t>(slots++);
      targets.push_back({r, bucket, r - below, slot_of_bucket[bucket]});
    }
  }

  Histogram h;
  std::vector<uint64_t> hist_counts;
  std::optional<Placement> hist_pl;
  if (want_histogram) {
    h.edges = histogram_edges(options, m);
    hist_counts.assign(h.edges.size() + 1, 0);
    OpRequest r;
    r.op = TM_OP_STATS_HISTOGRAM;
    r.dtype = DType::F32;
    r.elements = elements;
    r.bytes = elements * 4;
    r.allowed_approx_steps = options.allowed_approx_steps;
    r.memory_budget_bytes = options.memory_budget_bytes;
    hist_pl = planner.place(r);
  }
  KeyCounter low(threads, static_cast<size_t>(slots), std::move(slot_of_bucket));
  if (want_histogram || slots > 0) {
    const uint32_t bins = want_histogram ? static_cast<uint32_t>(h.edges.size() - 1) : 0;
    const tm_histogram_params_v1 params{bins, h.edges.data()};
    pass([&](const float* v, uint64_t n) {
      if (want_histogram)
        run_placed_kernel(*hist_pl, TM_OP_STATS_HISTOGRAM,
                          {DType::F32, v, n, &params, sizeof params, hist_counts.data(), hist_counts.size() * sizeof(uint64_t), threads});
      low.count(v, n);
    });
  }
  if (want_histogram) {
    const size_t bins = h.edges.size() - 1;
    h.counts.assign(hist_counts.begin(), hist_counts.begin() + static_cast<std::ptrdiff_t>(bins));
    h.below = hist_counts[bins], h.above = hist_counts[bins + 1];
    result.histogram = std::move(h);
    result.placement.push_back(*hist_pl);
  }
  if (want_quantiles) {
    auto value_of_rank = [&](uint64_t rank) {
      const auto t = std::find_if(targets.begin(), targets.end(), [&](const RankTarget& x) { return x.rank == rank; });
      if (t == targets.end()) throw Error(ErrorKind::Internal, "streamed quantiles: rank " + std::to_string(rank) + " was not selected");
      const uint64_t* lows = low.totals().data() + static_cast<size_t>(t->slot) * kBuckets;
      uint64_t below = 0;
      for (uint32_t k = 0; k < kBuckets; ++k) {
        if (below + lows[k] > t->within) return static_cast<double>(value_of_key(t->bucket << 16 | k));
        below += lows[k];
      }
      throw Error(ErrorKind::Internal, "streamed quantiles: the second pass saw fewer values than the first");
    };
    for (double p : options.probabilities) {
      const double v = finite ? quantile_of(p, finite, value_of_rank) : std::nan("");
      result.quantiles.push_back({p, v, v, v, finite});
    }
    result.quantile_method = "streamed_bitpattern_select";
  }
  return result;
}

}  // namespace tmorph
