#!/usr/bin/python3
"""Resident acquisitions (issue 44): virtual images and CoM over HTTP from the server's resident copy, beside the
streamed path (the same server with `--resident-memory 0`, which decodes the acquisition for every request), numpy
on the whole array already in memory (the py4DSTEM way: `(data * mask).sum(axis=(2, 3))`), and the bandwidth floor
(the copy's resident bytes / this machine's memory copy bandwidth).

  /usr/bin/python3 bench/stem_resident_bench.py --build build [--scan 192 --detector 128 --runs 8]

Requests (format=npy, as the page's drag sends them):
- centred annulus: `products/mask?inner=&outer=` about the detected disk (the copy's radial centre): two running
  totals per position;
- arbitrary mask: an annulus about another centre (`center=`), summed entry by entry;
- CoM: `products/com`.
Every resident answer is compared with the streamed one (byte-identical .npy payloads). Prints a Markdown table;
writes bench/last-run-stem-resident.md.

--vulkan adds the same requests from a server preferring Vulkan (`compute.prefer vulkan` in its own settings): the
masked sums run as stem.compact_sums on the copy's image uploaded once to the device (the first request uploads it).
On Mesa lavapipe (a software adapter on these same cores) those figures are a smoke test, never a performance claim.
"""
import argparse
import datetime
import http.client
import json
import os
import re
import statistics
import subprocess
import time

from stem_demo_data import demo_acquisition, private_env


def serve(tm, master, env, extra):
    proc = subprocess.Popen([tm, "serve", "--port", "0", master] + extra, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for line in proc.stdout:
        m = re.search(r"on http://([^:/]+):(\d+)/", line)
        if m:
            return proc, m.group(1), int(m.group(2))
    raise RuntimeError("serve printed no URL: " + proc.stderr.read())


def get(host, port, path):
    c = http.client.HTTPConnection(host, port, timeout=600)
    try:
        t0 = time.perf_counter()
        c.request("GET", path)
        r = c.getresponse()
        body = r.read()
        s = time.perf_counter() - t0
        if r.status != 200:
            raise RuntimeError("%s: %d %s" % (path, r.status, body[:300]))
        return body, s
    finally:
        c.close()


def requests(centre_rc, k):
    """(name, [paths]) per kind: a drag of 8 radii for the masks, 8 repeats for CoM."""
    cr, cc = centre_rc
    other = "%g,%g" % (k * 0.4, k * 0.6)
    base = "/api/acquisitions/a0/products/"
    return [
        ("centred annulus (about the detected disk)", [base + "mask?inner=%d&outer=%d&format=npy" % (4 + s, 20 + 2 * s) for s in range(8)]),
        ("arbitrary mask (annulus about another centre)", [base + "mask?inner=%d&outer=%d&center=%s&format=npy" % (4 + s, 20 + 2 * s, other) for s in range(8)]),
        ("CoM", [base + "com?format=npy"] * 8),
    ]


def timed_requests(host, port, centre, args, answers, what):
    """(name, median s, "max … over n") per kind of requests(), each answer checked against the streamed one where
    the streamed server answered the same path."""
    out = []
    for name, paths in requests(centre, args.detector):
        times = []
        for p in paths[: args.runs]:
            body, s = get(host, port, p)
            if p in answers:
                assert body == answers[p], what + " and streamed answers differ: " + p
            times.append(s)
        out.append((name, statistics.median(times), "max %.3f s over %d" % (max(times), len(times))))
    return out


def memcpy_gbps():
    import numpy as np
    a = np.ones(1 << 28, dtype=np.uint8)  # 256 MiB
    b = np.empty_like(a)
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        np.copyto(b, a)
        best = min(best, time.perf_counter() - t0)
    return a.nbytes / best / 1e9


def numpy_in_memory(master, inner, outer, centre, runs):
    """The whole array in memory (read once, not timed), then (data * mask).sum(axis=(2, 3)), best of runs."""
    import h5py
    import hdf5plugin
    assert hdf5plugin
    import numpy as np
    frames = []
    with h5py.File(master, "r") as f:
        for key in sorted(f["entry/data"].keys()):
            frames.append(f["entry/data"][key][()])
    data = np.concatenate(frames)
    data[data == np.iinfo(data.dtype).max] = 0
    n = int(round(len(data) ** 0.5))
    data = data.reshape(n, n, data.shape[1], data.shape[2])
    k = data.shape[2]
    rr, cc = np.meshgrid(np.arange(k, dtype=np.float32), np.arange(data.shape[3], dtype=np.float32), indexing="ij")
    d = np.sqrt((rr - np.float32(centre[0])) ** 2 + (cc - np.float32(centre[1])) ** 2)
    mask = ((d >= np.float32(inner)) & (d <= np.float32(outer))).astype(data.dtype)
    best = float("inf")
    for _ in range(runs):
        t0 = time.perf_counter()
        (data * mask).sum(axis=(2, 3))
        best = min(best, time.perf_counter() - t0)
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--scan", type=int, default=192)
    ap.add_argument("--detector", type=int, default=128)
    ap.add_argument("--runs", type=int, default=8)
    ap.add_argument("--no-numpy", action="store_true", help="skip numpy (it holds the whole decoded array in memory)")
    ap.add_argument("--vulkan", action="store_true", help="also the resident path with its sums on Vulkan (a device copy)")
    args = ap.parse_args()
    tm = os.path.abspath(os.path.join(args.build, "tensormorph"))
    tmp, env = private_env("tm-stem-resident-bench-")
    master = demo_acquisition(tm, args.build, "stem-resident", args.scan, args.detector, env)
    decoded = args.scan * args.scan * args.detector * args.detector * 2
    rows, answers = [], {}

    # Streamed: every request decodes the acquisition (today's path).
    proc, host, port = serve(tm, master, env, ["--resident-memory", "0"])
    try:
        cal = json.loads(get(host, port, "/api/acquisitions/a0/calibration")[0])
        disk = cal["disk"]
        centre = (disk["row"], disk["col"])
        streamed = {}
        for name, paths in requests(centre, args.detector):
            times = []
            for p in paths[:3]:
                body, s = get(host, port, p)
                answers[p] = body
                times.append(s)
            streamed[name] = statistics.median(times)
    finally:
        proc.terminate()
        proc.wait(timeout=30)

    # Resident: the first request builds the copy; the others read it.
    proc, host, port = serve(tm, master, env, [])
    try:
        first_path = requests(centre, args.detector)[0][1][0]
        body, build_s = get(host, port, first_path)
        assert body == answers[first_path], "resident and streamed answers differ: " + first_path
        store = json.loads(get(host, port, "/api/stem/resident")[0])
        copy = store["copies"][0]
        rows.append(("first request: builds the copy (one decode) and answers", build_s, streamed[requests(centre, args.detector)[0][0]],
                     "build %.3f s of it" % copy["build_seconds"]))
        for name, median, spread in timed_requests(host, port, centre, args, answers, "resident"):
            rows.append((name, median, streamed[name], spread))
    finally:
        proc.terminate()
        proc.wait(timeout=30)

    # Resident with the sums on Vulkan: a server preferring it (its own settings folder).
    vulkan_rows = []
    if args.vulkan:
        venv = dict(env, XDG_CONFIG_HOME=os.path.join(tmp, "config-vulkan"))
        subprocess.run([tm, "config", "set", "compute.prefer", "vulkan"], check=True, env=venv, capture_output=True)
        proc, host, port = serve(tm, master, venv, [])
        try:
            first_path = requests(centre, args.detector)[0][1][0]
            body, first_s = get(host, port, first_path)
            assert body == answers[first_path], "Vulkan-resident and streamed answers differ: " + first_path
            doc = json.loads(get(host, port, first_path.replace("&format=npy", ""))[0])
            placed = {p["op"]: p["backend"] for p in doc["placement"]}
            if placed.get("stem.compact_sums") != "vulkan":
                raise RuntimeError("the sums did not run on Vulkan: %s" % doc["placement"])
            dcopy = doc["provenance"]["resident"]["device_copy"]
            vulkan_rows.append(("first request: builds the copy, uploads its image, answers", first_s,
                                "device copy %.1f MB on %s, uploaded in %.3f s" % (dcopy["bytes"] / 1e6, dcopy["device"], dcopy["build_seconds"])))
            vulkan_rows += timed_requests(host, port, centre, args, answers, "Vulkan-resident")
        finally:
            proc.terminate()
            proc.wait(timeout=30)

    bw = memcpy_gbps()
    floor = copy["bytes"] / (bw * 1e9)
    np_s = float("nan") if args.no_numpy else numpy_in_memory(master, 4, 20, centre, 3)
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = ["# Resident acquisitions (%s)\n\n" % when,
             "`/usr/bin/python3 bench/stem_resident_bench.py --build %s --scan %d --detector %d --runs %d`; %d x %d scan of "
             "%d x %d uint16 frames (%.0f MB decoded), `stem demo` data; %d cores.\n\n"
             % (args.build, args.scan, args.detector, args.runs, args.scan, args.scan, args.detector, args.detector, decoded / 1e6,
                os.cpu_count()),
             "Compact copy: %.1f MB resident (%.0f bytes per frame against %d dense uint16; %d non-zero pixels, %.1f per frame), "
             "%s order, built in %.3f s.\n\n" % (copy["bytes"] / 1e6, copy["bytes_per_frame"], args.detector * args.detector * 2,
                                                 copy["nonzeros"], copy["nonzeros"] / copy["positions"], copy["order"], copy["build_seconds"]),
             "| request (HTTP, format=npy) | resident, median s | streamed (`--resident-memory 0`), median s | streamed / resident | note |\n",
             "|---|---:|---:|---:|---|\n"]
    for name, s, st, note in rows:
        lines.append("| %s | %.4f | %.3f | %.1f | %s |\n" % (name, s, st, st / s, note))
    com_streamed = streamed[requests(centre, args.detector)[2][0]]
    lines.append("\nBuilding the copy against one streamed pass (the streamed CoM request, one decode): %.3f s / %.3f s = %.2f x "
                 "(target <= 1.5 x).\n" % (copy["build_seconds"], com_streamed, copy["build_seconds"] / com_streamed))
    lines.append("\nBeside them: numpy on the whole array already in memory, `(data * mask).sum(axis=(2, 3))` (best of 3): "
                 "%.3f s; the bandwidth floor of one pass over the copy (%.1f MB at %.1f GB/s memcpy): %.4f s. Every resident "
                 "answer above was checked byte-identical to the streamed server's.\n" % (np_s, copy["bytes"] / 1e6, bw, floor))
    if vulkan_rows:
        lines.append("\nThe same requests with the sums on Vulkan (`compute.prefer vulkan`: stem.compact_sums over the copy's "
                     "image uploaded once to the device; Mesa lavapipe here, a software adapter on the same cores: a smoke "
                     "test, not a performance figure). Every answer checked byte-identical to the streamed server's.\n\n"
                     "| request (HTTP, format=npy) | Vulkan-resident, median s | note |\n|---|---:|---|\n")
        for name, s, note in vulkan_rows:
            lines.append("| %s | %.4f | %s |\n" % (name, s, note))
    text = "".join(lines)
    print(text)
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "last-run-stem-resident.md"), "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
