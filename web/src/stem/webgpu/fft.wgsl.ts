// WGSL: batched 1-D discrete Fourier transforms in float32 over complex values (vec2<f32>: re, im), the kernels of
// fft.ts's plans. A batch is `lines` lines of `n` values each, line b's element k at b·line_stride + k·elem_stride
// (rows of a row-major grid: line_stride = cols, elem_stride = 1; its columns: line_stride = 1, elem_stride = cols).
// Unnormalised, numpy's sign convention: X[k] = Σ x[j]·exp(∓2πi·jk/n), − forward, + inverse (conj = 1).
// - stockham_pass: one radix-2 pass of a Stockham autosort transform of a power-of-two n (log2 n passes, each
//   out of place, src → dst; the result in natural order, no bit reversal). Twiddles come from tw[m] =
//   exp(−2πi·m/n), m < n/2, computed by the host in float64 (no WGSL sin/cos).
// - bluestein_pre / bluestein_mul / bluestein_post: Bluestein's chirp-z transform of any n, as a circular
//   convolution of length m (a power of two ≥ 2n − 1) done by stockham_pass on contiguous scratch lines:
//   pre: s[b·m + j] = x[j]·w[j] (j < n; 0 up to m), w[j] = exp(∓iπ·j²/n) (the chirp, host float64);
//   mul: s[b·m + j] ·= B[j], B the forward transform of the conjugate chirp laid out circularly, divided by m
//   (host float64); post: X[k] = w[k]·s[b·m + k], k < n, after the inverse length-m transform.
// Threads: gid.x + gid.y·(64·num_workgroups.x) (dispatches of more than 65535 workgroups are 2-D).
export const FFT_WGSL = /* wgsl */ `
struct Params {
  n: u32,            // stockham: the transform length (a power of two); bluestein: the line length n
  p: u32,            // stockham: this pass's sub-transform size (1, 2, 4, …, n/2); bluestein: m
  lines: u32,        // lines in the batch
  line_stride: u32,  // elements between line starts (in the data's layout; scratch lines are m apart)
  elem_stride: u32,  // elements between a line's consecutive values (scratch lines: 1)
  conj: u32,         // stockham: 1 for the inverse transform (conjugated twiddles)
  pad0: u32,
  pad1: u32,
}

@group(0) @binding(0) var<storage, read> src: array<vec2<f32>>;
@group(0) @binding(1) var<storage, read_write> dst: array<vec2<f32>>;
@group(0) @binding(2) var<storage, read> table: array<vec2<f32>>;   // stockham: twiddles; bluestein: chirp or B
@group(0) @binding(3) var<uniform> params: Params;

fn cmul(a: vec2<f32>, b: vec2<f32>) -> vec2<f32> {
  return vec2<f32>(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}

fn thread_index(gid: vec3<u32>, groups: vec3<u32>) -> u32 {
  return gid.x + gid.y * groups.x * 64u;
}

// One thread per butterfly: lines · n/2 threads. i in [0, n/2), k = i mod p its index in its sub-transform;
// reads x[i] and x[i + n/2], writes y[2(i − k) + k] and y[2(i − k) + k + p].
@compute @workgroup_size(64)
fn stockham_pass(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let t = thread_index(gid, groups);
  let half = params.n >> 1u;
  if (t >= params.lines * half) { return; }
  let line = t / half;
  let i = t % half;
  let p = params.p;
  let k = i & (p - 1u);
  let base = line * params.line_stride;
  let es = params.elem_stride;
  var w = table[k * (half / p)];   // exp(−2πi·k/(2p)) = tw[k·n/(2p)]
  if (params.conj == 1u) { w.y = -w.y; }
  let a = src[base + i * es];
  let b = cmul(src[base + (i + half) * es], w);
  let j = ((i - k) << 1u) + k;
  dst[base + j * es] = a + b;
  dst[base + (j + p) * es] = a - b;
}

// lines · m threads: the chirped line, zero-padded to m, into contiguous scratch (dst).
@compute @workgroup_size(64)
fn bluestein_pre(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let t = thread_index(gid, groups);
  let m = params.p;
  if (t >= params.lines * m) { return; }
  let line = t / m;
  let j = t % m;
  var v = vec2<f32>(0.0, 0.0);
  if (j < params.n) { v = cmul(src[line * params.line_stride + j * params.elem_stride], table[j]); }
  dst[t] = v;
}

// lines · m threads: scratch (dst, in place) times B (table), pointwise; src is not read.
@compute @workgroup_size(64)
fn bluestein_mul(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let t = thread_index(gid, groups);
  let m = params.p;
  if (t >= params.lines * m) { return; }
  dst[t] = cmul(dst[t], table[t % m]);
}

// lines · n threads: X[k] = w[k] · scratch[k] (src: scratch, dst: the data's layout).
@compute @workgroup_size(64)
fn bluestein_post(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let t = thread_index(gid, groups);
  if (t >= params.lines * params.n) { return; }
  let line = t / params.n;
  let k = t % params.n;
  dst[line * params.line_stride + k * params.elem_stride] = cmul(src[line * params.p + k], table[k]);
}
`;
