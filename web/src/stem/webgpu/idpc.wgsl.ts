// WGSL: the spectral step of iDPC (src/stem/products/dpc.cpp integrate_dpc, docs/stem.md "Products") on the
// transform of the rotated CoM field packed as one complex grid, z = u + i·v (u, v real, detector pixels), so that one
// forward FFT serves both components ("dual real"): with Z = FFT2(z) and Z*(−ν) = conj(Z[(R − i) mod R, (C − j) mod C]),
//   U = (Z + Z*(−ν)) / 2,  V = (Z − Z*(−ν)) / (2i)                (the transforms of u and v)
//   Φ = −0.25i · (ν_r·U + ν_c·V) / (ν_r² + ν_c²),  Φ(0, 0) = 0
// with ν_r = fftfreq(i, R), ν_c = fftfreq(j, C) in cycles per scan position (numpy's fftfreq: the Nyquist bin of
// an even size is −½). One thread per frequency; float32. The caller then takes real(IFFT2 Φ) / (R·C), subtracts
// its mean and negates it, as the CPU does.
export const IDPC_WGSL = /* wgsl */ `
struct Params {
  rows: u32,
  cols: u32,
  pad0: u32,
  pad1: u32,
}

@group(0) @binding(0) var<storage, read> z: array<vec2<f32>>;
@group(0) @binding(1) var<storage, read_write> phi: array<vec2<f32>>;
@group(0) @binding(2) var<uniform> params: Params;

fn fftfreq(i: u32, n: u32) -> f32 {
  if (i < (n + 1u) / 2u) { return f32(i) / f32(n); }
  return -f32(n - i) / f32(n);
}

@compute @workgroup_size(64)
fn idpc_spectrum(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let t = gid.x + gid.y * groups.x * 64u;
  let R = params.rows;
  let C = params.cols;
  if (t >= R * C) { return; }
  let i = t / C;
  let j = t % C;
  let a = z[t];
  let b = z[((R - i) % R) * C + (C - j) % C];
  let bc = vec2<f32>(b.x, -b.y);
  let U = 0.5 * (a + bc);
  let d = 0.5 * (a - bc);
  let V = vec2<f32>(d.y, -d.x);   // d / i
  let nr = fftfreq(i, R);
  let nc = fftfreq(j, C);
  let n2 = nr * nr + nc * nc;
  if (n2 == 0.0) {
    phi[t] = vec2<f32>(0.0, 0.0);
    return;
  }
  let q = (nr * U + nc * V) / n2;
  phi[t] = vec2<f32>(0.25 * q.y, -0.25 * q.x);   // −0.25i · q
}
`;
