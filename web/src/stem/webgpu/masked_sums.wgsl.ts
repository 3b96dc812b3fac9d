// WGSL: masked sums of 4D-STEM frames (the contract of TM_OP_STEM_FRAME_SUMS' detector sums, op_contracts.h):
// for each scan position p, S[p] = sum of the frame's values over a pixel list (or over every pixel), exact as a
// 64-bit integer carried in a u32 pair (lo, hi) since WGSL has no 64-bit integers. Frames are read from u32 words
// in the block layout GET /api/acquisitions/{id}/block serves: u8, u16 or u32 values, little-endian, packed.
// com_main: the centre-of-mass sums of the same op over every pixel, S = sum v, R = sum k*v, C = sum l*v (k, l the
// pixel's detector row and column), each exact as a u32 pair (k*v formed as a full 64-bit product).
// pattern_main: TM_OP_STEM_PATTERN_REDUCE's contract, one thread per detector pixel: the sum over every scan
// position (a u32 pair) and the maximum (u32).
export const MASKED_SUMS_WGSL = /* wgsl */ `
struct Params {
  positions: u32,      // scan positions in this dispatch
  first: u32,          // the first position's index in the block
  pixels: u32,         // pixels per frame
  list_len: u32,       // entries of list (ignored when all_pixels == 1)
  width: u32,          // bytes per value: 1, 2 or 4
  all_pixels: u32,     // 1: sum every pixel of the frame
  pad0: u32,
  pad1: u32,
}

@group(0) @binding(0) var<storage, read> frames: array<u32>;
@group(0) @binding(1) var<storage, read> list: array<u32>;
@group(0) @binding(2) var<storage, read_write> sums: array<u32>;   // 2 per position: lo, hi
@group(0) @binding(3) var<uniform> params: Params;

fn value_at(e: u32) -> u32 {
  if (params.width == 4u) { return frames[e]; }
  if (params.width == 2u) { return (frames[e >> 1u] >> ((e & 1u) * 16u)) & 0xffffu; }
  return (frames[e >> 2u] >> ((e & 3u) * 8u)) & 0xffu;
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let p = gid.x;
  if (p >= params.positions) { return; }
  let base = (params.first + p) * params.pixels;
  var lo = 0u;
  var hi = 0u;
  let n = select(params.list_len, params.pixels, params.all_pixels == 1u);
  for (var i = 0u; i < n; i = i + 1u) {
    let pixel = select(list[i], i, params.all_pixels == 1u);
    let v = value_at(base + pixel);
    let before = lo;
    lo = lo + v;
    if (lo < before) { hi = hi + 1u; }
  }
  sums[2u * p] = lo;
  sums[2u * p + 1u] = hi;
}

// (lo, hi) + (a_lo, a_hi), modulo 2^64.
fn add64(x: vec2<u32>, a: vec2<u32>) -> vec2<u32> {
  let lo = x.x + a.x;
  return vec2<u32>(lo, x.y + a.y + select(0u, 1u, lo < x.x));
}

// The full 64-bit product of two u32 as (lo, hi), from 16-bit halves.
fn mul64(a: u32, b: u32) -> vec2<u32> {
  let a0 = a & 0xffffu;
  let a1 = a >> 16u;
  let b0 = b & 0xffffu;
  let b1 = b >> 16u;
  let mid = vec2<u32>(a0 * b1, 0u);
  let mid2 = add64(mid, vec2<u32>(a1 * b0, 0u));          // up to 2^33: carried in .y
  var r = vec2<u32>(a0 * b0, a1 * b1);
  r = add64(r, vec2<u32>(mid2.x << 16u, (mid2.x >> 16u) | (mid2.y << 16u)));
  return r;
}

// 6 u32 per position: S (lo, hi), R (lo, hi), C (lo, hi).
@compute @workgroup_size(64)
fn com_main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let p = gid.x;
  if (p >= params.positions) { return; }
  let base = (params.first + p) * params.pixels;
  let cols = params.list_len;   // com_main: list_len carries the detector's columns
  var s = vec2<u32>(0u, 0u);
  var r = vec2<u32>(0u, 0u);
  var c = vec2<u32>(0u, 0u);
  for (var i = 0u; i < params.pixels; i = i + 1u) {
    let v = value_at(base + i);
    if (v == 0u) { continue; }
    s = add64(s, vec2<u32>(v, 0u));
    r = add64(r, mul64(i / cols, v));
    c = add64(c, mul64(i % cols, v));
  }
  sums[6u * p] = s.x;
  sums[6u * p + 1u] = s.y;
  sums[6u * p + 2u] = r.x;
  sums[6u * p + 3u] = r.y;
  sums[6u * p + 4u] = c.x;
  sums[6u * p + 5u] = c.y;
}

// 3 u32 per detector pixel: sum (lo, hi), max. params.positions: scan positions; params.pixels: pixels per frame.
@compute @workgroup_size(64)
fn pattern_main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x;
  if (i >= params.pixels) { return; }
  var s = vec2<u32>(0u, 0u);
  var m = 0u;
  for (var p = 0u; p < params.positions; p = p + 1u) {
    let v = value_at((params.first + p) * params.pixels + i);
    s = add64(s, vec2<u32>(v, 0u));
    m = max(m, v);
  }
  sums[3u * i] = s.x;
  sums[3u * i + 1u] = s.y;
  sums[3u * i + 2u] = m;
}
`;
