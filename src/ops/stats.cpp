#include "tensormorph/stats.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <mutex>

#include "compute/resident_copy.h"
#include "support/thread_pool.h"
#include "ops/kernel_call.h"
#include "ops/moments.h"
#include "ops/split_run.h"
#include "tensormorph/contract_math.h"
#include "ops/stats_options.h"
#include "tensormorph/error.h"
#include "tensormorph/planner.h"

namespace tmorph {

namespace {

// Blocks handed to a backend per call: bounds the partials buffer (~6 MiB) whatever the tensor size.
constexpr uint64_t kStatsBlocksPerCall = 65536;

OpRequest request_for(tm_op op, DType dtype, uint64_t elements, const StatsOptions* options,
                      const ResidentCopy* resident = nullptr) {
  OpRequest r;
  if (resident) r.residency.devices.insert(resident->location());
  r.op = op;
  r.dtype = dtype;
  r.elements = elements;
  r.bytes = elements * dtype_size(dtype);
  if (options) {
    r.allowed_approx_steps = options->allowed_approx_steps;
    r.memory_budget_bytes = options->memory_budget_bytes;
  }
  return r;
}

// The value of every bit pattern of an 8- or 16-bit dtype, computed once per process and dtype.
const std::vector<double>& pattern_values(DType dtype) {
  static std::mutex mutex;
  static std::map<DType, std::unique_ptr<const std::vector<double>>> tables;
  std::lock_guard<std::mutex> guard(mutex);
  auto& table = tables[dtype];
  if (!table) {
    auto values = std::make_unique<std::vector<double>>(size_t{1} << (8 * dtype_size(dtype)));
    for (size_t p = 0; p < values->size(); ++p) {
      const uint8_t bytes[2] = {static_cast<uint8_t>(p & 0xFF), static_cast<uint8_t>(p >> 8)};
      (*values)[p] = element_to_double(dtype, bytes);
    }
    table = std::move(values);
  }
  return *table;
}

// Calls fn(value, count) for every finite pattern that occurs, in ascending value order, without sorting: floats
// are sign-magnitude (the negative patterns from the largest magnitude down, then the others up; -0 next to +0),
// signed integers two's complement (the negative patterns up, then the others up), unsigned integers and bool in
// pattern order. Throws Internal if a dtype ever broke that order.
template <class Fn>
void for_each_pattern_in_value_order(DType dtype, const std::vector<uint64_t>& counts, Fn&& fn) {
  const std::vector<double>& value = pattern_values(dtype);
  const size_t n = counts.size(), sign = n / 2;
  const bool is_float = dtype_is_float(dtype), is_signed = dtype_is_signed_int(dtype);
  double last = -std::numeric_limits<double>::infinity();
  for (size_t key = 0; key < n; ++key) {
    const size_t p = !(is_float || is_signed) ? key : key & sign ? key & ~sign : (is_float ? (~key & (n - 1)) : key | sign);
    if (!counts[p] || !std::isfinite(value[p])) continue;
    if (value[p] < last) throw Error(ErrorKind::Internal, "stats: the bit patterns of " + std::string(dtype_name(dtype)) + " are not in value order");
    last = value[p];
    fn(value[p], counts[p]);
  }
}

// Histogram counts (layout of op_contracts.h: bins, then below, then above) from pattern counts: each pattern in
// [edges[i], edges[i+1]) counts in bin i (the last bin closed), found by walking the edges alongside the values.
void histogram_from_patterns(DType dtype, const std::vector<uint64_t>& patterns, const std::vector<double>& edges,
                             uint64_t* counts) {
  const size_t bins = edges.size() - 1;
  size_t bin = 0;
  for_each_pattern_in_value_order(dtype, patterns, [&](double v, uint64_t count) {
    size_t slot;
    if (v < edges.front()) slot = bins;
    else if (v > edges.back()) slot = bins + 1;
    else if (v == edges.back()) slot = bins - 1;  // the last bin is closed
    else {
      while (bin + 1 < bins && edges[bin + 1] <= v) ++bin;
      slot = bin;
    }
    counts[slot] += count;
  });
}

// Exact quantiles from the count of every bit pattern of an 8- or 16-bit dtype.
std::vector<QuantileValue> quantiles_from_patterns(DType dtype, const std::vector<uint64_t>& counts,
                                                   const std::vector<double>& probabilities) {
  std::vector<std::pair<double, uint64_t>> values;  // (value, count), finite patterns only, in value order
  for_each_pattern_in_value_order(dtype, counts, [&](double v, uint64_t count) { values.emplace_back(v, count); });
  uint64_t n = 0;
  for (const auto& v : values) n += v.second;
  auto order_statistic = [&](uint64_t k) {  // value of rank k (0-based)
    uint64_t seen = 0;
    for (const auto& v : values) {
      seen += v.second;
      if (seen > k) return v.first;
    }
    return values.back().first;
  };
  std::vector<QuantileValue> out;
  for (double p : probabilities) {
    QuantileValue q;
    q.p = p;
    if (n == 0) {
      q.value = q.lo = q.hi = std::nan("");
    } else {
      q.value = q.lo = q.hi = quantile_of(p, n, order_statistic);
      q.sample_size = n;
    }
    out.push_back(q);
  }
  return out;
}

}  // namespace

// ---- MomentsStream -----------------------------------------------------------------------------------

struct MomentsStream::State {
  Placement placement;
  DType dtype;
  unsigned threads;
  MomentsReducer reducer;
  std::vector<uint8_t> pending;  // bytes of a block that a chunk boundary split
  std::vector<tm_moments_partial_v1> partials;
  uint64_t total, fed = 0;

  void run_blocks(const uint8_t* data, uint64_t elements, const ResidentCopy* resident) {
    const uint64_t blocks = (elements + TM_STATS_BLOCK_ELEMENTS - 1) / TM_STATS_BLOCK_ELEMENTS;
    partials.resize(blocks);
    if (placement.split.empty()) {
      run_placed_kernel(placement, TM_OP_STATS_MOMENTS,
                        {dtype, data, elements, nullptr, 0, partials.data(), blocks * sizeof(tm_moments_partial_v1), threads},
                        resident);
    } else {
      run_split(data, elements, blocks, resident);
    }
    for (const auto& p : partials) reducer.push(p);
  }

  // The call's blocks over the split's shares (ops/split_run.h), partials into partials[b] whoever computed block b.
  SplitRun split_run = SplitRun();

  void run_split(const uint8_t* data, uint64_t elements, uint64_t blocks, const ResidentCopy* resident) {
    const size_t width = dtype_size(dtype);
    split_run.call(placement.split, blocks, [&](size_t i, uint64_t b0, uint64_t b1, uint64_t* bytes) -> std::string {
      const uint64_t e0 = b0 * TM_STATS_BLOCK_ELEMENTS, e1 = std::min<uint64_t>(elements, b1 * TM_STATS_BLOCK_ELEMENTS);
      try {
        run_placed_kernel(placement.split[i].placement, TM_OP_STATS_MOMENTS,
                          {dtype, data + e0 * width, e1 - e0, nullptr, 0, partials.data() + b0,
                           (b1 - b0) * sizeof(tm_moments_partial_v1), threads},
                          resident);
      } catch (const Error& e) {
        return e.what();
      }
      *bytes = (e1 - e0) * width;
      return {};
    }, "stats.moments");
  }
};

MomentsStream::MomentsStream(const Planner& planner, DType dtype, uint64_t total_elements, unsigned threads)
    : state_(new State{planner.place(request_for(TM_OP_STATS_MOMENTS, dtype, total_elements, nullptr)), dtype,
                       threads ? threads : 1, {}, {}, {}, total_elements}) {}

MomentsStream::~MomentsStream() { delete state_; }

const Placement& MomentsStream::placement() const { return state_->placement; }

void MomentsStream::feed(const void* data, uint64_t elements) { feed(data, elements, nullptr); }

void MomentsStream::feed(const void* data, uint64_t elements, const ResidentCopy* resident) {
  State& s = *state_;
  if (elements > s.total - s.fed)
    throw Error(ErrorKind::InvalidArgument, "moments stream: fed more elements than the tensor holds (" +
                                                std::to_string(s.total) + ")");
  s.fed += elements;
  const size_t width = dtype_size(s.dtype);
  const uint64_t block_bytes = uint64_t{TM_STATS_BLOCK_ELEMENTS} * width;
  auto* p = static_cast<const uint8_t*>(data);
  uint64_t bytes = elements * width;
  if (!s.pending.empty()) {
    const uint64_t take = std::min<uint64_t>(bytes, block_bytes - s.pending.size());
    s.pending.insert(s.pending.end(), p, p + take);
    p += take, bytes -= take;
    if (s.pending.size() == block_bytes) {
      s.run_blocks(s.pending.data(), TM_STATS_BLOCK_ELEMENTS, nullptr);
      s.pending.clear();
    }
  }
  while (bytes >= block_bytes) {
    const uint64_t blocks = std::min<uint64_t>(bytes / block_bytes, kStatsBlocksPerCall);
    s.run_blocks(p, blocks * TM_STATS_BLOCK_ELEMENTS, resident);
    p += blocks * block_bytes, bytes -= blocks * block_bytes;
  }
  if (bytes && s.fed == s.total && s.pending.empty()) {  // the tensor's short last block, in place
    s.run_blocks(p, bytes / width, resident);
    return;
  }
  s.pending.insert(s.pending.end(), p, p + bytes);
}

MomentsSummary MomentsStream::finish() {
  State& s = *state_;
  if (s.fed != s.total)
    throw Error(ErrorKind::InvalidArgument, "moments stream: " + std::to_string(s.fed) + " of " +
                                                std::to_string(s.total) + " elements fed");
  if (!s.pending.empty()) {
    s.run_blocks(s.pending.data(), s.pending.size() / dtype_size(s.dtype), nullptr);
    s.pending.clear();
  }
  return summarize_moments(finalize_moments(s.reducer.finish(), s.dtype));
}

// ---- StatsStream -------------------------------------------------------------------------------------

struct StatsStream::State {
  const Planner& planner;
  DType dtype;
  uint64_t elements;
  StatsOptions options;
  unsigned threads;
  MomentsStream moments;
  bool narrow;                      // 8/16-bit: the bit-pattern counts give histogram and quantiles
  std::vector<uint64_t> patterns;   // counts per bit pattern (narrow dtypes, when wanted)
  std::optional<Placement> pattern_placement;
  bool patterns_elsewhere = false;  // counted by the caller (count_patterns_elsewhere)
  bool patterns_added = false;
  // A device copy of the whole tensor, made by the first op placed on a device that needs a transfer
  // (when the whole tensor is at hand); later ops on that device read it instead of moving it again.
  std::unique_ptr<ResidentCopy> resident;
  bool copy_refused = false;
  const void* whole = nullptr;

  bool wants_distribution() const { return options.quantiles || options.histogram; }

  // The device copy `pl` should read for [data, data + its elements): made now when this is the whole
  // tensor and none exists yet; null when the op reads host data. When the copy already existed, the
  // op moved nothing, and its report says so.
  const ResidentCopy* copy_for(Placement& pl, const void* data, uint64_t n) {
    const uint64_t bytes = n * dtype_size(dtype);
    const bool existed = resident != nullptr;
    if (!resident && !copy_refused && data && data == whole) {
      resident = ResidentCopy::make(pl, data, bytes, options.memory_budget_bytes);
      // Not kept (too large, or no room on the device): the ops stream the tensor; do not try again.
      copy_refused = !resident && pl.backend_ref && pl.backend_ref->can_upload;
    }
    if (!resident || !resident->serves(pl, data, bytes)) return nullptr;
    if (existed) pl.bytes_transferred = 0;
    return resident.get();
  }
};

StatsStream::StatsStream(const Planner& planner, DType dtype, uint64_t total_elements, const StatsOptions& options) {
  check_options(options);
  const unsigned threads = options.threads ? options.threads : default_thread_count();
  // Owned locally until every placement succeeded: a refused one throws without leaking the state.
  std::unique_ptr<State> s(new State{planner, dtype, total_elements, options, threads,
                                     MomentsStream(planner, dtype, total_elements, threads), dtype_size(dtype) <= 2, {}, {},
                                     false, false, nullptr, false, nullptr});
  if (s->narrow && s->wants_distribution()) {
    s->pattern_placement = planner.place(request_for(TM_OP_STATS_BITPATTERN_HISTOGRAM, dtype, total_elements, &options));
    s->patterns.assign(size_t{1} << (8 * dtype_size(dtype)), 0);
  }
  state_ = s.release();
}

StatsStream::~StatsStream() { delete state_; }

bool StatsStream::needs_second_pass() const { return !state_->narrow && state_->wants_distribution(); }

void StatsStream::feed(const void* data, uint64_t elements) {
  State& s = *state_;
  if (elements && elements == s.elements && !s.whole) s.whole = data;  // the whole tensor in one piece
  Placement moments_placement = s.moments.placement();
  s.moments.feed(data, elements, s.copy_for(moments_placement, data, elements));
  if (s.pattern_placement && !s.patterns_elsewhere && elements)
    run_placed_kernel(*s.pattern_placement, TM_OP_STATS_BITPATTERN_HISTOGRAM,
                      {s.dtype, data, elements, nullptr, 0, s.patterns.data(), s.patterns.size() * sizeof(uint64_t), s.threads},
                      s.copy_for(*s.pattern_placement, data, elements));
}

bool StatsStream::count_patterns_elsewhere(const std::string& reason) {
  State& s = *state_;
  if (!s.pattern_placement || s.pattern_placement->backend != "cpu") return false;
  s.patterns_elsewhere = true;
  s.pattern_placement->reason = reason;
  s.pattern_placement->rejected.clear();
  s.pattern_placement->estimated_seconds = 0;
  return true;
}

void StatsStream::add_pattern_counts(const std::vector<uint64_t>& counts) {
  State& s = *state_;
  if (!s.patterns_elsewhere || counts.size() != s.patterns.size())
    throw Error(ErrorKind::Internal, "stats: bit-pattern counts were added that this stream did not ask for");
  for (size_t i = 0; i < counts.size(); ++i) s.patterns[i] += counts[i];
  s.patterns_added = true;
}

StatsResult StatsStream::finish(const void* whole_tensor) {
  State& s = *state_;
  if (s.patterns_elsewhere && !s.patterns_added && s.elements)
    throw Error(ErrorKind::Internal, "stats: the bit-pattern counts made elsewhere never arrived");
  const StatsOptions& options = s.options;
  if (needs_second_pass() && !whole_tensor && s.elements)
    throw Error(ErrorKind::Internal, "stats: the histogram and quantiles of a wide dtype need the whole tensor");
  StatsResult result;
  result.moments = s.moments.finish();
  result.placement.push_back(s.moments.placement());
  if (s.pattern_placement) result.placement.push_back(*s.pattern_placement);
  const MomentsSummary& m = result.moments;
  if (!s.whole) s.whole = whole_tensor;

  const bool explicit_edges = !options.histogram_edges.empty();
  if (options.histogram && (explicit_edges || options.histogram_range || m.finite_count > 0)) {
    Histogram h;
    h.edges = histogram_edges(options, m);
    const uint32_t bins = static_cast<uint32_t>(h.edges.size() - 1);
    std::vector<uint64_t> counts(bins + 2, 0);
    const tm_histogram_params_v1 params{bins, h.edges.data()};
    if (s.pattern_placement) {
      // Each distinct bit pattern is binned once, by the same edge comparison the kernels use: the same
      // exact counts without a second pass over the data. The report says so.
      Placement pl = *s.pattern_placement;
      pl.op = op_name(TM_OP_STATS_HISTOGRAM);
      pl.reason = "derived_from_bitpattern_histogram";
      pl.rejected.clear();
      pl.estimated_seconds = 0;
      pl.bytes_transferred = 0;
      histogram_from_patterns(s.dtype, s.patterns, h.edges, counts.data());
      result.placement.push_back(pl);
    } else {
      Placement pl = s.planner.place(request_for(TM_OP_STATS_HISTOGRAM, s.dtype, s.elements, &options, s.resident.get()));
      const ResidentCopy* copy = s.copy_for(pl, whole_tensor, s.elements);
      run_placed_kernel(pl, TM_OP_STATS_HISTOGRAM,
                        {s.dtype, whole_tensor, s.elements, &params, sizeof params, counts.data(),
                         counts.size() * sizeof(uint64_t), s.threads},
                        copy);
      result.placement.push_back(pl);
    }
    h.counts.assign(counts.begin(), counts.begin() + bins);
    h.below = counts[bins], h.above = counts[bins + 1];
    result.histogram = std::move(h);
  }

  if (options.quantiles && !options.probabilities.empty()) {
    if (s.narrow) {
      result.quantiles = quantiles_from_patterns(s.dtype, s.patterns, options.probabilities);
      result.quantile_method = "bitpattern_histogram";
    } else {
      Placement pl = s.planner.place(request_for(TM_OP_STATS_QUANTILES, s.dtype, s.elements, &options, s.resident.get()));
      const tm_quantiles_params_v1 params{static_cast<uint32_t>(options.probabilities.size()),
                                          options.probabilities.data(), options.memory_budget_bytes};
      std::vector<tm_quantile_value_v1> out(options.probabilities.size());
      const ResidentCopy* copy = s.copy_for(pl, whole_tensor, s.elements);
      run_placed_kernel(pl, TM_OP_STATS_QUANTILES,
                        {s.dtype, whole_tensor, s.elements, &params, sizeof params, out.data(),
                         out.size() * sizeof(tm_quantile_value_v1), s.threads},
                        copy);
      result.placement.push_back(pl);
      for (size_t i = 0; i < out.size(); ++i)
        result.quantiles.push_back({options.probabilities[i], out[i].value, out[i].lo, out[i].hi, out[i].sample_size});
      result.quantiles_exact = pl.approx_step.empty();
      result.quantile_method = pl.approx_step.empty() ? "radix_select" : pl.approx_step;
    }
  }
  return result;
}

// ---- compute_stats ----------------------------------------------------------------------------------

StatsResult compute_stats(const void* data, DType dtype, uint64_t elements, const Planner& planner,
                          const StatsOptions& options) {
  StatsStream stream(planner, dtype, elements, options);
  stream.feed(data, elements);
  return stream.finish(data);
}

}  // namespace tmorph
