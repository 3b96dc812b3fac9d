// WGSL: detector binning of a resident block of 4D-STEM frames, as the CLI's --detector-bin N (src/stem/load.cpp):
// output pixel (i, j) of each frame is the sum of input pixels [i·N, i·N + N) × [j·N, j·N + N) that lie on the
// detector (the last bins of a size N does not divide hold fewer pixels), one u32 per output value. Inputs are
// read as masked_sums.wgsl.ts reads them (u8/u16 values packed in u32 words); the caller keeps the sums below 2^32
// (u8/u16 frames, N <= 256).
export const DETECTOR_BIN_WGSL = /* wgsl */ `
struct Params {
  positions: u32,   // frames
  rows: u32,        // input detector rows
  cols: u32,        // input detector columns
  bin: u32,         // N
  out_rows: u32,    // ceil(rows / N)
  out_cols: u32,    // ceil(cols / N)
  width: u32,       // input bytes per value: 1 or 2
  pad: u32,
}

@group(0) @binding(0) var<storage, read> frames: array<u32>;
@group(0) @binding(1) var<storage, read_write> binned: array<u32>;
@group(0) @binding(2) var<uniform> params: Params;

fn value_at(e: u32) -> u32 {
  if (params.width == 2u) { return (frames[e >> 1u] >> ((e & 1u) * 16u)) & 0xffffu; }
  return (frames[e >> 2u] >> ((e & 3u) * 8u)) & 0xffu;
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let per_frame = params.out_rows * params.out_cols;
  let o = gid.x + gid.y * 65535u * 64u;
  if (o >= params.positions * per_frame) { return; }
  let p = o / per_frame;
  let i = (o % per_frame) / params.out_cols;
  let j = o % params.out_cols;
  var s = 0u;
  for (var a = 0u; a < params.bin; a = a + 1u) {
    let r = i * params.bin + a;
    if (r >= params.rows) { break; }
    for (var b = 0u; b < params.bin; b = b + 1u) {
      let c = j * params.bin + b;
      if (c >= params.cols) { break; }
      s = s + value_at((p * params.rows + r) * params.cols + c);
    }
  }
  binned[o] = s;
}
`;
