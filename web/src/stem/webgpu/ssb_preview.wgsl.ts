// WGSL: the per-redraw step of the page's SSB preview (ssb_preview.ts), the CPU's stem.ssb_overlap
// (backends/cpu/ssb_overlap_kernel.cpp, quadratic variant) summed over the bright-field pixels before the inverse
// FFT instead of after it (the IFFT is linear, so mean_b IFFT2(C_b) = IFFT2(Σ_b C_b) / B; the phase is arg of it).
// For each scan frequency ν = (i, j), one thread:
//   S(ν) = w₋(ν)·Σ_{b: minus only} G_b(ν)·F_b(ν) + w₊(ν)·Σ_{b: plus only} G_b(ν)·F_b(ν) + w±(ν)·Σ_{b: both} G_b(ν)·F_b(ν)
// with F_b(ν) = row_f[b, i]·col_f[b, j] = conj e^{i·2Bχ(k_b, ν)} (the separable overlap's per-pixel factors),
// w₋ = e^{iχ(ν)} (only k_b − ν inside the aperture), w₊ = −e^{−iχ(ν)} (only k_b + ν), w± = i·2 sin χ / max(|2 sin χ|,
// 1e-8) (both: the double-overlap region's "trotter"), each table computed by the host in float64 per redraw, and
// which region (b, ν) lies in — 0 none, 1 minus only, 2 plus only, 3 both — from the host's float64 aperture tests
// (2 bits per (ν, b), 16 per u32 word, index ν·B + b), made once per scan rotation. S(0) = Σ_b N·Ī_b (dc, the
// unscattered wave; host float64). Layouts: G complex64 [i][b][j] (fft.ts's batched planes), row_f [b][i],
// col_f [b][j], weights [ν][3] (w₋, w₊, w±), out [i][j]. Float32 throughout; the sums over b are compensated
// (Kahan) so that their rounding does not grow with B.
export const SSB_PREVIEW_WGSL = /* wgsl */ `
struct Params {
  rows: u32,
  cols: u32,
  pixels: u32,   // B, the bright-field pixels
  pad0: u32,
  dc: f32,       // S(0) = Σ_b N·Ī_b
  pad1: f32,
  pad2: f32,
  pad3: f32,
}

@group(0) @binding(0) var<storage, read> g: array<vec2<f32>>;
@group(0) @binding(1) var<storage, read> regions: array<u32>;
@group(0) @binding(2) var<storage, read> row_f: array<vec2<f32>>;
@group(0) @binding(3) var<storage, read> col_f: array<vec2<f32>>;
@group(0) @binding(4) var<storage, read> weights: array<vec2<f32>>;
@group(0) @binding(5) var<storage, read_write> out: array<vec2<f32>>;
@group(0) @binding(6) var<uniform> params: Params;

fn cmul(a: vec2<f32>, b: vec2<f32>) -> vec2<f32> {
  return vec2<f32>(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}

// Kahan: sum and compensation of one complex accumulator.
struct Acc {
  s: vec2<f32>,
  c: vec2<f32>,
}

fn add(a: Acc, v: vec2<f32>) -> Acc {
  let y = v - a.c;
  let t = a.s + y;
  return Acc(t, (t - a.s) - y);
}

@compute @workgroup_size(64)
fn ssb_sum(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let q = gid.x + gid.y * groups.x * 64u;
  let R = params.rows;
  let C = params.cols;
  let B = params.pixels;
  if (q >= R * C) { return; }
  if (q == 0u) {
    out[0] = vec2<f32>(params.dc, 0.0);
    return;
  }
  let i = q / C;
  let j = q % C;
  let zero = Acc(vec2<f32>(0.0, 0.0), vec2<f32>(0.0, 0.0));
  var minus = zero;
  var plus = zero;
  var both = zero;
  for (var b = 0u; b < B; b = b + 1u) {
    let k = q * B + b;
    let region = (regions[k >> 4u] >> ((k & 15u) * 2u)) & 3u;
    if (region == 0u) { continue; }
    let v = cmul(g[(i * B + b) * C + j], cmul(row_f[b * R + i], col_f[b * C + j]));
    if (region == 1u) { minus = add(minus, v); }
    else if (region == 2u) { plus = add(plus, v); }
    else { both = add(both, v); }
  }
  out[q] = cmul(weights[3u * q], minus.s) + cmul(weights[3u * q + 1u], plus.s) + cmul(weights[3u * q + 2u], both.s);
}
`;
