#version 450
// TM_OP_STEM_COMPACT_SUMS (op_contracts.h): stem.frame_sums over one page of the compact resident image. One
// workgroup per requested position; each invocation takes a strided share of the position's entries (value = its
// running total minus the previous one, uint32 arithmetic as the CPU) and the workgroup adds the shares in shared
// memory, in uint64 (exact integer sums do not depend on their order). Nothing outside the page is read: a position
// whose words break the contract (counts, offsets, a key outside the frame) sets its row's last slot, which the host
// turns into an error.
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require

layout(local_size_x = 64) in;
layout(constant_id = 0) const uint KEY_BYTES = 2u;

layout(std430, binding = 0) readonly buffer Page { uint words[]; };
// Per job, list_count + 5 values: the 4 + list_count sums of stem.frame_sums, then 1 when the page is malformed.
layout(std430, binding = 1) writeonly buffer Output { uint64_t sums[]; };
// aux[lists_at + 2k], aux[lists_at + 2k + 1]: key k's list bits (low, high word); aux[pixels_at + k]: key k's pixel;
// aux[jobs_at + i]: the page-local position of this dispatch's job i.
layout(std430, binding = 2) readonly buffer Aux { uint aux[]; };

layout(push_constant) uniform Push {
  uint page_words;  // words of the page that lie inside the image
  uint pixels;      // pixels per frame
  uint cols;
  uint list_count;
  uint com_list;    // a list index, or 0xFFFFFFFF: every key
  uint lists_only;  // 1: only the lists (TM_STEM_LISTS_ONLY)
  uint lists_at;
  uint pixels_at;
  uint jobs_at;
  uint first_job;   // job of workgroup 0
  uint ranges_at;   // aux[ranges_at + 2l], aux[ranges_at + 2l + 1]: list l's key range when lo < hi; 0xFFFFFFFF: none
} pc;

const uint N = 64u;
shared uint64_t s_sum[N];

uint64_t reduce(uint64_t v) {
  const uint t = gl_LocalInvocationID.x;
  barrier();
  s_sum[t] = v;
  barrier();
  for (uint w = N / 2u; w > 0u; w /= 2u) {
    if (t < w) s_sum[t] += s_sum[t + w];
    barrier();
  }
  return s_sum[0];
}

uint key_at(uint keys_at, uint k) {
  if (KEY_BYTES == 2u) return (words[keys_at + (k >> 1u)] >> ((k & 1u) * 16u)) & 0xFFFFu;
  return words[keys_at + k];
}

// The running total of the entries in [begin, end) whose key is below x (0 when none): keys strictly increasing.
uint total_below(uint keys_at, uint totals_at, uint begin, uint end, uint x) {
  uint lo = begin, hi = end;
  while (lo < hi) {
    const uint mid = lo + (hi - lo) / 2u;
    if (key_at(keys_at, mid) < x) lo = mid + 1u;
    else hi = mid;
  }
  return lo == begin ? 0u : words[totals_at + lo - 1u];
}

bool in_list(uint key, uint list) {
  const uint w = aux[pc.lists_at + 2u * key + (list >> 5u)];
  return ((w >> (list & 31u)) & 1u) != 0u;
}

void main() {
  const uint t = gl_LocalInvocationID.x;
  const uint job = pc.first_job + gl_WorkGroupID.x;
  const uint row_values = 5u + pc.list_count;
  const uint out_base = job * row_values;
  const uint j = aux[pc.jobs_at + job];

  // The page's counts and this position's entries, checked against the page before anything is read.
  bool ok = pc.page_words >= 2u;
  const uint n = ok ? words[0] : 0u, e = ok ? words[1] : 0u;
  ok = ok && n < pc.page_words && e < pc.page_words && j < n && 3u + n <= pc.page_words;
  const uint keys_at = 3u + n;
  const uint totals_at = keys_at + (KEY_BYTES == 2u ? (e + 1u) / 2u : e);
  ok = ok && uint64_t(totals_at) + uint64_t(e) <= uint64_t(pc.page_words);
  const uint first = ok ? words[2u + j] : 0u, last = ok ? words[3u + j] : 0u;
  ok = ok && first <= last && last <= e;
  const uint begin = ok ? first : 0u, end = ok ? last : 0u;

  uint64_t total = 0ul, w = 0ul, sr = 0ul, sc = 0ul;
  uint bad = ok ? 0u : 1u;
  for (uint k = begin + t; k < end; k += N) {
    const uint key = key_at(keys_at, k);
    if (key >= pc.pixels) {
      bad = 1u;
      continue;
    }
    const uint value = words[totals_at + k] - (k == begin ? 0u : words[totals_at + k - 1u]);
    const uint64_t v = uint64_t(value);
    total += v;
    if (pc.lists_only == 0u && (pc.com_list == 0xFFFFFFFFu || in_list(key, pc.com_list))) {
      const uint pixel = aux[pc.pixels_at + key];
      w += v;
      sr += uint64_t(pixel / pc.cols) * v;
      sc += uint64_t(pixel % pc.cols) * v;
    }
  }
  const uint64_t s_total = reduce(total), s_w = reduce(w), s_r = reduce(sr), s_c = reduce(sc);
  const uint64_t s_bad = reduce(uint64_t(bad));
  if (t == 0u) {
    const bool with_fixed = pc.lists_only == 0u;
    sums[out_base] = with_fixed ? s_total : 0ul;
    sums[out_base + 1u] = with_fixed ? s_w : 0ul;
    sums[out_base + 2u] = with_fixed ? s_r : 0ul;
    sums[out_base + 3u] = with_fixed ? s_c : 0ul;
    sums[out_base + 4u + pc.list_count] = s_bad;
  }
  for (uint l = 0u; l < pc.list_count; ++l) {
    uint64_t s = 0ul;
    const uint lo = pc.ranges_at == 0xFFFFFFFFu ? 0u : aux[pc.ranges_at + 2u * l];
    const uint hi = pc.ranges_at == 0xFFFFFFFFu ? 0u : aux[pc.ranges_at + 2u * l + 1u];
    if (lo < hi) {  // a key range: two running totals (invocation 0), whatever the detector's size
      if (t == 0u) s = uint64_t(total_below(keys_at, totals_at, begin, end, hi) - total_below(keys_at, totals_at, begin, end, lo));
    } else for (uint k = begin + t; k < end; k += N) {
      const uint key = key_at(keys_at, k);
      if (key < pc.pixels && in_list(key, l)) s += uint64_t(words[totals_at + k] - (k == begin ? 0u : words[totals_at + k - 1u]));
    }
    const uint64_t s_l = reduce(s);
    if (t == 0u) sums[out_base + 4u + l] = s_l;
  }
}
