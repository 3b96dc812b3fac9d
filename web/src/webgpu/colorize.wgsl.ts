// TM_OP_DISPLAY_COLORIZE (include/tensormorph/op_contracts.h) in WGSL: the colours and the 256-bin display
// histogram of float64 values, byte-identical to the CPU reference (backends/cpu, src/display/
// display_kernels.cpp) and to the Vulkan kernel (backends/vulkan/shaders/display_colorize.comp), which
// this one follows.
//
// WGSL has neither f64 nor i64. The host (colorize.ts) hands over each value as its float64 bit pattern
// (two u32 words, little-endian: lo, hi) and each of the 255 thresholds as its BIASED ordinal: the position
// of its bit pattern in float64 order (-0 and +0 both 0) plus 2^63, as a (hi, lo) u32 pair, so that
// "threshold <= key" as doubles is exactly the unsigned 64-bit compare of the pairs. The shader computes
// the same biased ordinal of every key (x, or |x| under the magnitude key) from its bits. No float
// operation runs, so a device's denormal flushing or f32-only arithmetic cannot change a colour.
//
//   NaN x:       colour (0, 0, 0, 0), counted in nan, not binned;
//   key +Inf:    k = 255; key -Inf: k = 0 (under the magnitude key both infinities are +Inf);
//   finite key:  k = the number of thresholds <= key (a branch-free binary search);
//   RGBA of x = table[k]; finite x adds 1 to bins[k]; +Inf / -Inf add 1 to pos_inf / neg_inf.
//
// Each workgroup counts in workgroup memory and adds its counts into 32-bit per-dispatch counters (a
// dispatch holds fewer than 2^32 values); the host adds those into its totals.
export const COLORIZE_WGSL = /* wgsl */ `
struct Params {
  elements: u32,
  key_mode: u32,   // 0: key = x; 1: key = |x|
  pad0: u32,
  pad1: u32,
};

// values[i] = (lo word, hi word) of the float64 bit pattern of value i.
@group(0) @binding(0) var<storage, read> values: array<vec2<u32>>;
// counts[0 .. 259): bins 0..255, nan, pos_inf, neg_inf (zeroed by the host).
@group(0) @binding(1) var<storage, read_write> counts: array<atomic<u32>, 260>;
// One RGBA word per value (R in the low byte).
@group(0) @binding(2) var<storage, read_write> rgba: array<u32>;
// thresholds[k] = (hi, lo) of the biased ordinal of threshold k (entry 255 unused).
@group(0) @binding(3) var<storage, read> thresholds: array<vec2<u32>, 256>;
// The 256 table entries as little-endian RGBA words.
@group(0) @binding(4) var<storage, read> colors: array<u32, 256>;
@group(0) @binding(5) var<uniform> params: Params;

const SIGN: u32 = 0x80000000u;
const INF_HI: u32 = 0x7FF00000u;

var<workgroup> s_thresholds: array<vec2<u32>, 256>;
var<workgroup> s_table: array<u32, 256>;
var<workgroup> s_counts: array<atomic<u32>, 259>;

// a <= b for (hi, lo) pairs read as unsigned 64-bit integers.
fn le64(a: vec2<u32>, b: vec2<u32>) -> bool {
  return a.x < b.x || (a.x == b.x && a.y <= b.y);
}

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) t: u32,
        @builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(num_workgroups) groups: vec3<u32>) {
  s_thresholds[t] = thresholds[t];
  s_table[t] = colors[t];
  for (var s = t; s < 259u; s += 256u) { atomicStore(&s_counts[s], 0u); }
  workgroupBarrier();

  let stride = groups.x * 256u;
  for (var i = gid.x; i < params.elements; i += stride) {
    let bits = values[i];
    let lo = bits.x;
    let hi_mag = bits.y & 0x7FFFFFFFu;
    let negative = (bits.y & SIGN) != 0u;
    var word = 0u;
    if (hi_mag > INF_HI || (hi_mag == INF_HI && lo != 0u)) {
      atomicAdd(&s_counts[256], 1u);  // NaN
    } else {
      let is_inf = hi_mag == INF_HI;
      let key_negative = negative && params.key_mode == 0u;
      var k = 0u;
      if (is_inf) {
        k = select(255u, 0u, key_negative);
      } else {
        // The biased ordinal of the key: 2^63 + mag, or 2^63 - mag for a negative key (-0 gives 2^63).
        var key: vec2<u32>;
        if (key_negative) {
          let borrow = select(0u, 1u, lo != 0u);
          key = vec2<u32>(SIGN - hi_mag - borrow, 0u - lo);
        } else {
          key = vec2<u32>(SIGN | hi_mag, lo);
        }
        for (var half = 128u; half > 0u; half = half >> 1u) {
          k += select(0u, half, le64(s_thresholds[k + half - 1u], key));
        }
      }
      word = s_table[k];
      var slot = k;
      if (is_inf) { slot = select(257u, 258u, negative); }
      atomicAdd(&s_counts[slot], 1u);
    }
    rgba[i] = word;
  }
  workgroupBarrier();
  for (var s = t; s < 259u; s += 256u) {
    let c = atomicLoad(&s_counts[s]);
    if (c != 0u) { atomicAdd(&counts[s], c); }
  }
}
`;
