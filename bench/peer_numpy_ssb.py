#!/usr/bin/python3
"""The numpy peer of `tensormorph stem ssb`: single-sideband ptychography written straight from the
conventions of src/stem/ssb/ssb.h and docs/stem.md (independently of ssb.cpp), as a numpy user would write it.

  /usr/bin/python3 bench/peer_numpy_ssb.py MASTER.h5 --C10 50 --scan-rotation-deg 0 \
      --center 32,32 --radius 7.92 -o phase.npy

Algorithm (lengths in angstrom, frequencies in 1/angstrom):
  frames    I[Rr, Rc, K, K] from the Dectris master (h5py + hdf5plugin); bad pixels (pixel_mask > 0, values
            equal to the dtype's maximum) are set to 0, and pixel_mask pixels are never bright-field pixels
  lambda    relativistic electron wavelength of the beam energy
  BF        pixels (u, v) whose float32 distance to the disk centre is <= radius, minus the bad pixels
  k_b       ((u - disk_row), (v - disk_col)) * dk, dk = detector_mrad_per_px * 1e-3 / lambda
  nu        nu_s = (fftfreq(Rr), fftfreq(Rc)) / step; nu = R(theta) nu_s in the detector (row, col) frame
  chi(k)    pi * lambda * |k|^2 * [C10 + C12 cos 2(phi - phi12)], phi = atan2(k_row, k_col)
  P(k)      exp(-i chi(k)) for |k| <= alpha / lambda, else 0
  G_b       FFT2 over the scan of I[., k_b] - mean (rfft2, expanded to the full plane with G(-nu) = G(nu)*)
  Gamma_b   P(k_b - nu) P*(k_b) - P*(k_b + nu) P(k_b)
  C_b       G_b Gamma_b* / max(|Gamma_b|, 1e-8), C_b(0) = N * mean_b
  O_b       ifft2(C_b); O = mean_b O_b; phase = arg O; loss = mean_R var_b arg O_b (population variance)

`prepare(frames, cal)` computes what does not depend on the aberrations (BF pixels, means, G_b: complex64
storage of float64 FFTs by default); `evaluate(G, cal, ab)` returns (phase, loss) for one set of aberrations,
processing the BF pixels in chunks so that memory stays bounded (--chunk-mib per complex plane stack).
"""
import argparse
import json
import math
import sys
import time

import numpy as np

H = 6.62607015e-34       # Planck constant, J s
M0 = 9.1093837015e-31    # electron rest mass, kg
QE = 1.602176634e-19     # elementary charge, C
C = 299792458.0          # speed of light, m/s


def wavelength_A(energy_ev):
    """Relativistic electron wavelength in angstrom for a beam of energy_ev electron volts."""
    e = QE * energy_ev
    return H / math.sqrt(2.0 * M0 * e * (1.0 + e / (2.0 * M0 * C * C))) * 1e10


# --------------------------------------------------------------------------------------------- loading
def load(master):
    """Frames [Rr, Rc, K, K] (source dtype, bad pixels zeroed), the bad-pixel mask [K, K] and the file's
    calibration values (dict; missing keys absent)."""
    import h5py
    import hdf5plugin  # noqa: F401  (registers the bitshuffle filter)

    with h5py.File(master, "r") as f:
        group = f["entry/data"]
        parts = [group[k][()] for k in sorted(group.keys())]
        frames = np.concatenate(parts) if len(parts) > 1 else parts[0]
        n, kr, kc = frames.shape
        sim = f.get("entry/sample/simulation")
        if sim is not None and "scan_rows" in sim and "scan_cols" in sim:
            rows, cols = int(sim["scan_rows"][()]), int(sim["scan_cols"][()])
        else:
            rows = cols = int(round(math.sqrt(n)))
            if rows * cols != n:
                raise SystemExit("frame count %d is not a square: the scan shape is unknown" % n)
        mask = np.zeros((kr, kc), bool)
        for p in ("entry/instrument/detector/pixel_mask", "entry/instrument/detector/detectorSpecific/pixel_mask"):
            if p in f:
                mask |= f[p][()] > 0
        file_cal = {}
        for key, path in (("energy_ev", "entry/instrument/beam/incident_energy"),
                          ("semiangle_mrad", "entry/instrument/beam/convergence_semi_angle")):
            if path in f:
                file_cal[key] = float(f[path][()])
        if sim is not None and "scan_step" in sim:
            d = sim["scan_step"]
            unit = d.attrs.get("units", b"angstrom")
            unit = unit.decode() if isinstance(unit, bytes) else str(unit)
            scale = {"angstrom": 1.0, "A": 1.0, "nm": 10.0, "m": 1e10, "pm": 0.01}.get(unit, 1.0)
            file_cal["scan_step_A"] = float(d[()]) * scale
        if sim is not None and "detector_angle_per_pixel" in sim:
            file_cal["detector_mrad_per_px"] = float(sim["detector_angle_per_pixel"][()])
    frames = frames.reshape(rows, cols, kr, kc)
    sentinel = np.iinfo(frames.dtype).max
    frames[:, :, mask] = 0
    dead = frames == sentinel
    if dead.any():
        frames[dead] = 0
    return frames, mask, file_cal


def detect_disk(frames):
    """The bright-field disk of docs/stem.md: threshold the mean pattern at mean + std, centroid, sqrt(area/pi)."""
    mean = frames.sum(axis=(0, 1), dtype=np.uint64).astype(np.float64) / (frames.shape[0] * frames.shape[1])
    above = mean > mean.mean() + mean.std()
    r, c = np.nonzero(above)
    return float(r.mean()), float(c.mean()), math.sqrt(len(r) / math.pi)


# --------------------------------------------------------------------------------------------- the algorithm
def bright_field_pixels(shape, cal, excluded=None):
    """(u, v) index arrays of the bright-field pixels, row-major."""
    u = np.arange(shape[0], dtype=np.float32)[:, None] - np.float32(cal["disk_row"])
    v = np.arange(shape[1], dtype=np.float32)[None, :] - np.float32(cal["disk_col"])
    d = np.sqrt(u * u + v * v, dtype=np.float32)
    inside = d.astype(np.float64) <= cal["disk_radius_px"]
    if excluded is not None:
        inside &= ~excluded
    return np.nonzero(inside)


def prepare(frames, cal, excluded=None, dtype=np.complex64, chunk_mib=64):
    """Everything that does not depend on the aberrations: a dict with G [B, Rr, Rc] (full plane), the mean
    intensity of each BF pixel, the BF pixels' spatial frequencies and the scan frequencies."""
    rows, cols, kr, kc = frames.shape
    bu, bv = bright_field_pixels((kr, kc), cal, excluded)
    nb = len(bu)
    if nb == 0:
        raise ValueError("no bright-field pixel")
    lam = wavelength_A(cal["energy_ev"])
    dk = cal["detector_mrad_per_px"] * 1e-3 / lam
    G = np.empty((nb, rows, cols), dtype)
    means = np.empty(nb)
    per = max(1, int(chunk_mib * 2**20 // (rows * cols * 16)))
    for s in range(0, nb, per):
        e = min(nb, s + per)
        x = np.moveaxis(frames[:, :, bu[s:e], bv[s:e]], 2, 0).astype(np.float64)  # [b, Rr, Rc]
        m = x.mean(axis=(1, 2))
        means[s:e] = m
        half = np.fft.rfft2(x - m[:, None, None])  # [b, Rr, Rc//2 + 1]
        h = half.shape[2]
        G[s:e, :, :h] = half
        # G(-nu) = conj G(nu): column j > Rc/2 is the conjugate of row (-i) mod Rr, column Rc - j.
        j = np.arange(h, cols)
        i = (-np.arange(rows)) % rows
        G[s:e, :, h:] = np.conj(half[:, i][:, :, cols - j])
    krow = (bu.astype(np.float64) - cal["disk_row"]) * dk
    kcol = (bv.astype(np.float64) - cal["disk_col"]) * dk
    return {"G": G, "means": means, "k_row": krow, "k_col": kcol, "pixels": (bu, bv),
            "wavelength_A": lam, "dk": dk, "scan": (rows, cols), "chunk_mib": chunk_mib}


def scan_frequencies(rows, cols, step, rotation_deg):
    """nu = R(theta) nu_s in the detector frame, [Rr, Rc] each."""
    ns_r = (np.fft.fftfreq(rows) / step)[:, None]
    ns_c = (np.fft.fftfreq(cols) / step)[None, :]
    t = math.radians(rotation_deg)
    ct, st = math.cos(t), math.sin(t)
    return ct * ns_r - st * ns_c, st * ns_r + ct * ns_c


def chi(k_row, k_col, lam, ab):
    """pi * lambda * |k|^2 * [C10 + C12 cos 2(phi - phi12)], with |k|^2 cos 2(phi - phi12) expanded as
    (k_col^2 - k_row^2) cos 2phi12 + 2 k_row k_col sin 2phi12 (phi = atan2(k_row, k_col))."""
    k2 = k_row * k_row + k_col * k_col
    out = ab.get("C10", 0.0) * k2
    c12 = ab.get("C12", 0.0)
    if c12:
        p = math.radians(2.0 * ab.get("phi12", 0.0))
        out = out + c12 * ((k_col * k_col - k_row * k_row) * math.cos(p) + 2.0 * k_row * k_col * math.sin(p))
    return (math.pi * lam) * out


def probe(k_row, k_col, lam, alpha, ab):
    """A(k) exp(-i chi(k)), A = 1 for |k| <= alpha / lambda (cos and sin written out: numpy's complex exp of
    an imaginary array costs twice as much)."""
    k_row, k_col = np.broadcast_arrays(k_row, k_col)
    inside = k_row * k_row + k_col * k_col <= (alpha / lam) ** 2
    x = chi(k_row, k_col, lam, ab)
    p = np.empty(x.shape, np.complex128)
    p.real = np.cos(x)
    p.imag = -np.sin(x)
    p *= inside
    return p


def evaluate(prep, cal, ab, want_phase=True):
    """(phase [Rr, Rc] or None, loss) for aberrations ab = {"C10", "C12", "phi12"} (angstrom, degrees)."""
    G, means = prep["G"], prep["means"]
    nb, rows, cols = G.shape
    n = rows * cols
    lam = prep["wavelength_A"]
    alpha = cal["semiangle_mrad"] * 1e-3
    nu_r, nu_c = scan_frequencies(rows, cols, cal["scan_step_A"], cal["scan_rotation_deg"])
    O = np.zeros((rows, cols), np.complex128)
    s1 = np.zeros((rows, cols))
    s2 = np.zeros((rows, cols))
    per = max(1, int(prep["chunk_mib"] * 2**20 // (n * 16)))
    for s in range(0, nb, per):
        e = min(nb, s + per)
        kr = prep["k_row"][s:e, None, None]
        kc = prep["k_col"][s:e, None, None]
        p0 = probe(kr, kc, lam, alpha, ab)  # P(k_b), [b, 1, 1]
        gamma = probe(kr - nu_r, kc - nu_c, lam, alpha, ab) * np.conj(p0) \
            - np.conj(probe(kr + nu_r, kc + nu_c, lam, alpha, ab)) * p0
        c = G[s:e] * np.conj(gamma) / np.maximum(np.abs(gamma), 1e-8)
        c[:, 0, 0] = n * means[s:e]
        ob = np.fft.ifft2(c)  # [b, Rr, Rc], / N
        O += ob.sum(axis=0)
        a = np.angle(ob)
        s1 += a.sum(axis=0)
        s2 += (a * a).sum(axis=0)
    O /= nb
    var = s2 / nb - (s1 / nb) ** 2
    loss = float(var.mean())
    return (np.angle(O) if want_phase else None), loss


# --------------------------------------------------------------------------------------------- CLI
def calibration(args, file_cal, frames):
    cal = {}
    cal["energy_ev"] = args.kv * 1e3 if args.kv else file_cal.get("energy_ev")
    cal["semiangle_mrad"] = args.semiangle_mrad or file_cal.get("semiangle_mrad")
    cal["scan_step_A"] = args.scan_step_A or file_cal.get("scan_step_A")
    if args.center and args.radius:
        r, c = (float(x) for x in args.center.split(","))
        cal["disk_row"], cal["disk_col"], cal["disk_radius_px"] = r, c, args.radius
    else:
        cal["disk_row"], cal["disk_col"], cal["disk_radius_px"] = detect_disk(frames)
    cal["detector_mrad_per_px"] = (args.detector_mrad_per_px or file_cal.get("detector_mrad_per_px")
                                   or cal["semiangle_mrad"] / cal["disk_radius_px"])
    cal["scan_rotation_deg"] = args.scan_rotation_deg
    missing = [k for k, v in cal.items() if v is None]
    if missing:
        raise SystemExit("missing calibration (give it on the command line): " + ", ".join(missing))
    return cal


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("master")
    ap.add_argument("--C10", type=float, default=0.0, help="defocus, angstrom")
    ap.add_argument("--C12", type=float, default=0.0, help="two-fold astigmatism, angstrom")
    ap.add_argument("--phi12", type=float, default=0.0, help="its azimuth, degrees from +column towards +row")
    ap.add_argument("--scan-rotation-deg", type=float, default=0.0)
    ap.add_argument("--center", help="R,C of the bright-field disk (with --radius; default: detected)")
    ap.add_argument("--radius", type=float)
    ap.add_argument("--kv", type=float)
    ap.add_argument("--semiangle-mrad", type=float)
    ap.add_argument("--scan-step-A", type=float)
    ap.add_argument("--detector-mrad-per-px", type=float)
    ap.add_argument("--precision", choices=("complex64", "complex128"), default="complex64",
                    help="storage of G (the FFTs themselves are float64, numpy's)")
    ap.add_argument("--chunk-mib", type=float, default=64)
    ap.add_argument("-o", "--out", help="phase .npy (float64 radians)")
    args = ap.parse_args(argv)

    t0 = time.perf_counter()
    frames, mask, file_cal = load(args.master)
    t_load = time.perf_counter() - t0
    cal = calibration(args, file_cal, frames)
    ab = {"C10": args.C10, "C12": args.C12, "phi12": args.phi12}
    t0 = time.perf_counter()
    prep = prepare(frames, cal, excluded=mask, dtype=np.dtype(args.precision), chunk_mib=args.chunk_mib)
    t_prep = time.perf_counter() - t0
    t0 = time.perf_counter()
    phase, loss = evaluate(prep, cal, ab)
    t_eval = time.perf_counter() - t0
    if args.out:
        np.save(args.out, phase)
    print(json.dumps({"loss": loss, "bright_field_pixels": int(prep["G"].shape[0]), "shape": list(phase.shape),
                      "calibration": cal, "wavelength_A": prep["wavelength_A"], "aberrations": ab,
                      "timings": {"load_s": t_load, "prepare_s": t_prep, "evaluate_s": t_eval,
                                  "compute_s": t_prep + t_eval}}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
