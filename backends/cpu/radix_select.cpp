#include "radix_select.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <type_traits>
#include <vector>

#include "support/thread_pool.h"
#include "tensormorph/contract_math.h"

namespace tmorph::cpu {

namespace {

constexpr uint64_t kBuckets = 65536;
// Largest number of keys collected instead of refining (8 MiB of 64-bit keys at most).
constexpr uint64_t kCollectLimit = uint64_t{1} << 20;

template <class T>
struct Keys {
  using U = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  static constexpr int kBits = 8 * sizeof(T);
  static constexpr U kSign = U{1} << (kBits - 1);

  // Order-preserving key of the element at p, branch-free. NaN and ±Inf get keys too: their top 16
  // bits are exactly the buckets non_finite_bucket() names, which pass 1 empties, so no rank ever
  // lands on them and later passes never match them.
  static U key(const uint8_t* p) {
    U bits;
    std::memcpy(&bits, p, sizeof bits);
    if constexpr (std::is_floating_point_v<T>) {
      const U flip = static_cast<U>(-static_cast<std::make_signed_t<U>>(bits >> (kBits - 1))) | kSign;
      return bits ^ flip;  // negatives: all bits flipped; positives: sign bit set
    } else if constexpr (std::is_signed_v<T>) {
      return bits ^ kSign;
    } else {
      return bits;
    }
  }

  // True for the top-16-bit buckets of keys whose exponent field is all ones (NaN, ±Inf): for f32 the
  // top 16 bits hold sign, 8 exponent and 7 mantissa bits, for f64 sign, 11 exponent and 4 mantissa.
  static bool non_finite_bucket(uint32_t top) {
    if constexpr (!std::is_floating_point_v<T>) {
      return false;
    } else {
      constexpr uint32_t kMantissaBits = sizeof(T) == 4 ? 7 : 4;
      constexpr uint32_t kSpan = 1u << kMantissaBits;  // buckets per exponent value and sign
      return top < kSpan || top >= 65536 - kSpan;
    }
  }

  static double value(U key) {
    U bits;
    if constexpr (std::is_floating_point_v<T>) bits = (key & kSign) ? (key & ~kSign) : ~key;
    else if constexpr (std::is_signed_v<T>) bits = key ^ kSign;
    else bits = key;
    T x;
    std::memcpy(&x, &bits, sizeof x);
    return static_cast<double>(x);
  }
};

// One order statistic being refined: the key bits known so far and the rank within them.
template <class U>
struct Target {
  uint64_t rank;      // global rank (0-based) this target resolves
  U prefix = 0;       // known high bits of the key, right-aligned
  uint64_t residual;  // rank among values sharing the prefix
};

template <class T>
void radix_typed(const uint8_t* p, uint64_t n, const tm_quantiles_params_v1& params, tm_quantile_value_v1* out,
                 unsigned threads) {
  using K = Keys<T>;
  using U = typename K::U;
  ThreadPool& pool = ThreadPool::shared(threads);
  const uint64_t chunk = 1 << 16;
  const uint64_t chunks = (n + chunk - 1) / chunk;

  // Pass 1: top 16 bits of every finite key. Two interleaved 32-bit tables per chunk (flushed into
  // the 64-bit totals) break the store-to-load chains of repeated buckets and stay in L2.
  // The tables are kept between calls (fresh multi-MiB allocations cost page faults that dominate
  // small tensors): the caller's per-part totals, and each worker's 32-bit tables, which are all zero
  // again after every flush.
  static thread_local std::vector<std::vector<uint64_t>> caller_tables;
  // A plain reference: inside the workers' lambdas the thread_local name would mean *their* copy.
  std::vector<std::vector<uint64_t>>& local = caller_tables;
  local.resize(std::max<size_t>(local.size(), pool.size()));
  for (auto& h : local) h.assign(kBuckets, 0);
  pool.parallel_for(chunks, [&](uint64_t b, uint64_t e, unsigned part) {
    auto& h = local[part];
    static thread_local std::vector<uint32_t> t0(kBuckets, 0), t1(kBuckets, 0);
    for (uint64_t c = b; c < e; ++c) {
      const uint64_t first = c * chunk, last = std::min(n, first + chunk);
      uint64_t i = first;
      for (; i + 2 <= last; i += 2) {
        ++t0[K::key(p + i * sizeof(T)) >> (K::kBits - 16)];
        ++t1[K::key(p + (i + 1) * sizeof(T)) >> (K::kBits - 16)];
      }
      if (i < last) ++t0[K::key(p + i * sizeof(T)) >> (K::kBits - 16)];
      if (((c - b) & 0x3FFF) == 0x3FFF || c + 1 == e) {  // 2^30 elements at most between flushes
        for (uint64_t j = 0; j < kBuckets; ++j) h[j] += uint64_t{t0[j]} + t1[j], t0[j] = t1[j] = 0;
      }
    }
  });
  std::vector<uint64_t> top(kBuckets, 0);
  for (const auto& h : local)
    for (uint64_t i = 0; i < kBuckets; ++i) top[i] += h[i];
  for (uint32_t b = 0; b < kBuckets; ++b)
    if (K::non_finite_bucket(b)) top[b] = 0;
  uint64_t finite = 0;
  for (uint64_t c : top) finite += c;
  if (finite == 0) {
    for (uint32_t q = 0; q < params.count; ++q) out[q] = {std::nan(""), std::nan(""), std::nan(""), 0};
    return;
  }

  // The ranks wanted: floor and ceiling neighbour of each probability's position.
  std::vector<Target<U>> targets;
  auto want = [&](uint64_t r) {
    for (const auto& t : targets)
      if (t.rank == r) return;
    targets.push_back({r, 0, r});
  };
  for (uint64_t r : ranks_read(params.probabilities, params.count, finite)) want(r);
  // Walks a count table: which entry holds `residual`, and the residual within it.
  auto locate = [](const uint64_t* counts, uint64_t residual, U* entry, uint64_t* rest) {
    for (uint64_t i = 0; i < kBuckets; ++i) {
      if (residual < counts[i]) {
        *entry = static_cast<U>(i), *rest = residual;
        return;
      }
      residual -= counts[i];
    }
  };
  for (auto& t : targets) {
    U bucket = 0;
    locate(top.data(), t.residual, &bucket, &t.residual);
    t.prefix = bucket;
  }

  // When the wanted buckets hold few values (known exactly from pass 1), one more pass collects their
  // keys and selects among them: exact, and cheaper than the refinement passes' count tables.
  std::vector<U> buckets;
  for (const auto& t : targets)
    if (std::find(buckets.begin(), buckets.end(), t.prefix) == buckets.end()) buckets.push_back(t.prefix);
  uint64_t candidates = 0;
  for (U b : buckets) candidates += top[b];
  if (candidates <= kCollectLimit) {
    std::vector<int8_t> slot(kBuckets, -1);
    for (size_t j = 0; j < buckets.size(); ++j) slot[buckets[j]] = static_cast<int8_t>(j);
    std::vector<std::vector<std::vector<U>>> parts(pool.size(), std::vector<std::vector<U>>(buckets.size()));
    pool.parallel_for(chunks, [&](uint64_t b, uint64_t e, unsigned part) {
      auto& mine = parts[part];
      for (size_t j = 0; j < buckets.size(); ++j) mine[j].reserve(top[buckets[j]]);
      const uint64_t last = std::min(n, e * chunk);
      for (uint64_t i = b * chunk; i < last; ++i) {
        const U key = K::key(p + i * sizeof(T));
        const int8_t s = slot[key >> (K::kBits - 16)];
        if (s >= 0) mine[s].push_back(key);
      }
    });
    for (size_t j = 0; j < buckets.size(); ++j) {
      std::vector<U> keys;
      for (auto& part : parts) keys.insert(keys.end(), part[j].begin(), part[j].end());
      for (auto& t : targets) {
        if (t.prefix != buckets[j]) continue;
        std::nth_element(keys.begin(), keys.begin() + static_cast<std::ptrdiff_t>(t.residual), keys.end());
        t.prefix = keys[t.residual];  // the whole key now
      }
    }
  }

  // Otherwise refinement passes: 16 more key bits each, counting only keys under a wanted prefix.
  for (int known = 16; candidates > kCollectLimit && known < K::kBits; known += 16) {
    std::vector<U> prefixes;
    for (const auto& t : targets)
      if (std::find(prefixes.begin(), prefixes.end(), t.prefix) == prefixes.end()) prefixes.push_back(t.prefix);
    const size_t np = prefixes.size();
    const int shift_prefix = K::kBits - known, shift_digit = K::kBits - known - 16;
    // Most keys are rejected by one lookup of their top 16 bits; only candidates compare prefixes.
    std::vector<uint8_t> candidate(kBuckets, 0);
    for (U prefix : prefixes) candidate[static_cast<size_t>(prefix >> (known - 16))] = 1;
    for (auto& h : local) h.assign(np * kBuckets, 0);
    pool.parallel_for(chunks, [&](uint64_t b, uint64_t e, unsigned part) {
      uint64_t* h = local[part].data();
      const uint64_t last = std::min(n, e * chunk);
      for (uint64_t i = b * chunk; i < last; ++i) {
        const U key = K::key(p + i * sizeof(T));
        if (!candidate[key >> (K::kBits - 16)]) continue;
        const U prefix = key >> shift_prefix;
        for (size_t j = 0; j < np; ++j)
          if (prefixes[j] == prefix) {
            ++h[j * kBuckets + ((key >> shift_digit) & 0xFFFF)];
            break;
          }
      }
    });
    std::vector<uint64_t> merged(np * kBuckets, 0);
    for (const auto& h : local)
      for (size_t i = 0; i < merged.size(); ++i) merged[i] += h[i];
    for (auto& t : targets) {
      const size_t j = static_cast<size_t>(std::find(prefixes.begin(), prefixes.end(), t.prefix) - prefixes.begin());
      U digit = 0;
      locate(merged.data() + j * kBuckets, t.residual, &digit, &t.residual);
      t.prefix = static_cast<U>((t.prefix << 16) | digit);
    }
  }

  auto value_of_rank = [&](uint64_t r) {
    for (const auto& t : targets)
      if (t.rank == r) return K::value(t.prefix);
    return std::nan("");
  };
  for (uint32_t q = 0; q < params.count; ++q) {
    const double v = quantile_of(params.probabilities[q], finite, value_of_rank);
    out[q] = {v, v, v, finite};
  }
}

}  // namespace

uint64_t radix_select_workspace_bytes(unsigned threads) {
  // Count tables, or the collected keys (each thread reserves room for all, then they are
  // concatenated), whichever is larger.
  return std::max(uint64_t{threads} * (2 * kMaxRadixProbabilities + 1) * kBuckets * sizeof(uint64_t),
                  uint64_t{threads} * kBuckets * sizeof(uint64_t) + (threads + 1) * kCollectLimit * sizeof(uint64_t));
}

void quantiles_radix(DType dtype, const void* data, uint64_t count, const tm_quantiles_params_v1& params,
                     tm_quantile_value_v1* out, unsigned threads) {
  const auto* p = static_cast<const uint8_t*>(data);
  switch (dtype) {
    case DType::F32: return radix_typed<float>(p, count, params, out, threads);
    case DType::F64: return radix_typed<double>(p, count, params, out, threads);
    case DType::I32: return radix_typed<int32_t>(p, count, params, out, threads);
    case DType::U32: return radix_typed<uint32_t>(p, count, params, out, threads);
    case DType::I64: return radix_typed<int64_t>(p, count, params, out, threads);
    case DType::U64: return radix_typed<uint64_t>(p, count, params, out, threads);
    default: return;
  }
}

}  // namespace tmorph::cpu
