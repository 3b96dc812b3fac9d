#!/usr/bin/python3
"""`tensormorph serve` under load and under slow clients. Part of `make bench`.

  /usr/bin/python3 bench/server_load_bench.py --build build [--tm OTHER_BINARY]

Starts `tensormorph serve` on the demo checkpoint build/demo (written with `tensormorph demo` if absent, as
`make run` does; its index is kept under build/server-load-bench/ so later runs do not index again), waits
for its indexing job, then, on loopback only:
1. Load: --clients keep-alive clients (--procs processes of threads, so the clients' own interpreter lock
   does not dominate the latencies) for --seconds, each request a random kind, then a random URL of that kind:
   inventory rows (GET /api/tensors?limit=50&offset=…&sort=…), binary tiles (GET /api/tiles/0/NAME?level&x&y)
   and heatmap cells (GET /api/cells/0/NAME?level&x&y&stat=mean) of every 2-D tensor's pyramid. Requests/s,
   p50/p99/max per route kind, errors (a status other than 200, or a failed connection).
2. Slow clients: --slow clients connect and send a request's bytes one every 2 s while /api/health is asked
   on fresh connections every 0.5 s (3 s timeout each) for --slow-seconds: its latencies and timeouts, and
   when the server cut the slow clients off.
Server RSS (VmRSS) before the load, after it and after the slow clients. Prints a markdown table and writes it
to bench/last-run-server-load.md. --tm measures another binary (e.g. a copy of an older build) on the same data.
"""
import argparse
import datetime
import http.client
import json
import multiprocessing
import os
import platform
import random
import re
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse


def log(msg):
    print(f"[server_load_bench] {msg}", file=sys.stderr, flush=True)


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def percentile(sorted_values, p):
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, int(p * len(sorted_values)))]


class Server:
    def __init__(self, tm, paths, env):
        self.proc = subprocess.Popen([tm, "serve", "--port", "0"] + paths, env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True)
        deadline = time.time() + 120
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                raise SystemExit("serve exited early")
            m = re.search(r"on (http://\S+)", line)
            if m:
                u = urllib.parse.urlsplit(m.group(1))
                self.host, self.port = u.hostname, u.port
                return
        raise SystemExit("serve printed no URL")

    def get(self, path, timeout=60):
        c = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            c.request("GET", path)
            r = c.getresponse()
            return r.status, r.read()
        finally:
            c.close()

    def wait_indexed(self, timeout=600):
        deadline = time.time() + timeout
        while time.time() < deadline:
            status, body = self.get("/api/jobs")
            if status == 200 and all(j["state"] != "running" for j in json.loads(body)["jobs"]):
                return
            time.sleep(0.2)
        raise SystemExit("indexing did not finish")

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def viewer_urls(s, per_kind=400):
    """(kind, path) pairs like the viewer's: inventory rows pages, binary tiles and cells of every 2-D tensor."""
    status, body = s.get("/api/tensors?limit=100000")
    assert status == 200, body[:200]
    tensors = json.loads(body)["tensors"]
    rows = [("rows", f"/api/tensors?limit=50&offset={off}&sort={sort}")
            for off in range(0, max(1, len(tensors)), 25) for sort in ("name", "size")]
    tiles, cells = [], []
    for t in tensors:
        if len(t.get("shape", [])) != 2:
            continue
        q = urllib.parse.quote(t["name"], safe="")
        status, body = s.get(f"/api/tensors/0/{q}")
        if status != 200:
            continue
        pyramid = json.loads(body).get("pyramid") or {}
        for level, info in enumerate(pyramid.get("levels", [])):
            cols, rows_ = info["grid"]
            for y in range(rows_):
                for x in range(cols):
                    tiles.append(("tile", f"/api/tiles/0/{q}?level={level}&x={x}&y={y}"))
                    cells.append(("cells", f"/api/cells/0/{q}?level={level}&x={x}&y={y}&stat=mean"))
    rng = random.Random(7)
    rng.shuffle(tiles), rng.shuffle(cells)
    return rows[:per_kind] + tiles[:per_kind] + cells[:per_kind]


def client_process(host, port, urls, threads, seconds, seed):
    """Runs `threads` keep-alive clients until `seconds` have passed; returns [(kind, seconds, ok, detail)]."""
    end = time.perf_counter() + seconds
    out, lock = [], threading.Lock()
    kinds = sorted({kind for kind, _ in urls})
    by_kind = {kind: [u for u in urls if u[0] == kind] for kind in kinds}

    def client(k):
        rng = random.Random(seed * 1000 + k)
        conn, mine = None, []
        while time.perf_counter() < end:
            kind, path = rng.choice(by_kind[rng.choice(kinds)])
            t0 = time.perf_counter()
            try:
                if conn is None:
                    conn = http.client.HTTPConnection(host, port, timeout=30)
                conn.request("GET", path)
                r = conn.getresponse()
                r.read()
                ok, detail = r.status == 200, str(r.status)
                if r.getheader("Connection", "").lower() == "close":
                    conn.close()
                    conn = None
            except (OSError, http.client.HTTPException) as e:
                ok, detail = False, type(e).__name__
                if conn is not None:
                    conn.close()
                conn = None
            mine.append((kind, time.perf_counter() - t0, ok, detail))
        if conn is not None:
            conn.close()
        with lock:
            out.extend(mine)

    ts = [threading.Thread(target=client, args=(k,)) for k in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return out


def load(s, urls, clients, procs, seconds):
    per = [clients // procs + (1 if k < clients % procs else 0) for k in range(procs)]
    ctx = multiprocessing.get_context("fork")
    t0 = time.perf_counter()
    with ctx.Pool(procs) as pool:
        parts = pool.starmap(client_process, [(s.host, s.port, urls, n, seconds, k) for k, n in enumerate(per) if n])
    wall = time.perf_counter() - t0
    samples = [x for p in parts for x in p]
    result = {"wall": wall, "kinds": {}}
    for kind in ("rows", "tile", "cells", "all"):
        mine = [x for x in samples if kind == "all" or x[0] == kind]
        lat = sorted(x[1] for x in mine if x[2])
        errors = [x[3] for x in mine if not x[2]]
        result["kinds"][kind] = {"n": len(mine), "rps": len(mine) / wall, "p50": percentile(lat, 0.50) * 1e3,
                                 "p99": percentile(lat, 0.99) * 1e3, "max": (lat[-1] if lat else float("nan")) * 1e3,
                                 "errors": len(errors), "error_kinds": sorted(set(errors))}
    return result


def slow_clients(s, n, seconds):
    """n clients dribbling a request (one byte every 2 s) while /api/health is probed; see the module doc."""
    request = f"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: {'z' * 64}\r\n\r\n".encode()
    socks, sent, cut = [], [], {}
    start = time.perf_counter()
    for _ in range(n):
        c = socket.create_connection((s.host, s.port), timeout=5)
        c.setblocking(False)
        socks.append(c)
        sent.append(0)
    stop = threading.Event()

    def dribble():
        next_byte = time.perf_counter()
        while not stop.is_set():
            live = [c for c in socks if c.fileno() not in cut]
            readable, _, _ = select.select(live, [], [], 0.05) if live else ([], [], [])
            for c in readable:  # the server answered (408) or closed: cut off
                try:
                    c.recv(65536)
                except OSError:
                    pass
                cut[c.fileno()] = time.perf_counter() - start
            if time.perf_counter() >= next_byte:
                for k, c in enumerate(socks):
                    if c.fileno() in cut or sent[k] >= len(request):
                        continue
                    try:
                        c.send(request[sent[k]:sent[k] + 1])
                        sent[k] += 1
                    except OSError:
                        cut[c.fileno()] = time.perf_counter() - start
                next_byte += 2.0
            if not live:
                stop.wait(0.05)

    t = threading.Thread(target=dribble)
    t.start()
    time.sleep(1.0)  # every slow client has connected and sent a byte or so
    probes = []
    while time.perf_counter() - start < seconds:
        t0 = time.perf_counter()
        try:
            status, _ = s.get("/api/health", timeout=3)
            probes.append((time.perf_counter() - t0, status == 200))
        except (OSError, http.client.HTTPException):
            probes.append((time.perf_counter() - t0, False))
        time.sleep(max(0.0, 0.5 - (time.perf_counter() - t0)))
    stop.set()
    t.join()
    for c in socks:
        c.close()
    lat = sorted(p[0] for p in probes if p[1])
    times = sorted(cut.values())
    return {"probes": len(probes), "answered": len(lat), "p50": percentile(lat, 0.5) * 1e3,
            "max": (lat[-1] if lat else float("nan")) * 1e3, "timeouts": len(probes) - len(lat), "cut": len(times),
            "cut_first": times[0] if times else None, "cut_last": times[-1] if times else None, "n": n, "seconds": seconds}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--tm", help="the tensormorph binary to measure (default: BUILD/tensormorph)")
    ap.add_argument("--demo", help="the checkpoint to serve (default: BUILD/demo, written if absent)")
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--procs", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--slow", type=int, default=20)
    ap.add_argument("--slow-seconds", type=float, default=12.0)
    ap.add_argument("--out", help="markdown file to write (default bench/last-run-server-load.md)")
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    tm = os.path.abspath(a.tm or os.path.join(build, "tensormorph"))
    demo = os.path.abspath(a.demo or os.path.join(build, "demo"))
    work = os.path.join(build, "server-load-bench")
    tmp = tempfile.mkdtemp(prefix="tm-server-load-")
    env = dict(os.environ)
    env.pop("TENSORMORPH_PLUGIN_DIR", None)
    for var in ("HOME", "XDG_CONFIG_HOME"):
        env[var] = os.path.join(tmp, var.lower())
        os.makedirs(env[var])
    env["XDG_CACHE_HOME"] = os.path.join(work, "cache")  # the demo's index, kept between runs
    os.makedirs(env["XDG_CACHE_HOME"], exist_ok=True)
    if not a.demo and not os.path.exists(os.path.join(demo, "model.safetensors.index.json")):
        log(f"writing the demo checkpoint to {demo}")
        subprocess.run([os.path.join(build, "tensormorph"), "demo", "--out", demo], check=True, env=env,
                       stdout=subprocess.DEVNULL)
    bench_start = time.perf_counter()
    s = Server(tm, [demo], env)
    try:
        s.wait_indexed()
        urls = viewer_urls(s)
        rss0 = rss_mib(s.proc.pid)
        log(f"load: {a.clients} clients for {a.seconds:g} s ({len(urls)} URLs)")
        ld = load(s, urls, a.clients, a.procs, a.seconds)
        rss1 = rss_mib(s.proc.pid)
        log(f"slow clients: {a.slow} for {a.slow_seconds:g} s")
        sl = slow_clients(s, a.slow, a.slow_seconds)
        rss2 = rss_mib(s.proc.pid)
    finally:
        s.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    total_s = time.perf_counter() - bench_start

    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip()
    version = subprocess.run([tm, "--version"], capture_output=True, text=True).stdout.strip()
    try:
        load_avg = "%.2f %.2f %.2f" % os.getloadavg()
    except OSError:
        load_avg = "?"
    names = {"rows": "rows (GET /api/tensors?limit=50&offset=…)", "tile": "tile (GET /api/tiles/0/…?level&x&y)",
             "cells": "cells (GET /api/cells/0/…?level&x&y&stat=mean)", "all": "**all**"}
    cmd = " ".join(["/usr/bin/python3 bench/server_load_bench.py"] + sys.argv[1:])
    lines = [
        f"## Server under load (`{cmd}`, {when}, commit {commit}, binary {tm} {version})",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, {platform.platform()}; load average at the end {load_avg}. "
        f"{total_s:.0f} s in all.",
        "",
        f"Load: {a.clients} keep-alive clients ({a.procs} processes) for {a.seconds:g} s ({ld['wall']:.1f} s with the "
        f"requests in flight at the end), {demo}, each request a random kind (a third each), then a random URL of it ({len(urls)} URLs):",
        "",
        "| route | requests | req/s | p50 ms | p99 ms | max ms | errors |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for kind in ("rows", "tile", "cells", "all"):
        k = ld["kinds"][kind]
        err = f"{k['errors']}" + (f" ({', '.join(k['error_kinds'])})" if k["errors"] else "")
        lines.append(f"| {names[kind]} | {k['n']} | {k['rps']:.0f} | {k['p50']:.1f} | {k['p99']:.1f} | {k['max']:.0f} | {err} |")
    cut = (f"{sl['cut']} of {sl['n']}, after {sl['cut_first']:.1f}–{sl['cut_last']:.1f} s" if sl["cut"]
           else f"none within {sl['seconds']:g} s")
    lines += [
        "",
        f"Slow clients: {sl['n']} connections sending a request one byte every 2 s, /api/health asked every 0.5 s "
        f"on a fresh connection (3 s timeout):",
        "",
        "| health probes | answered | p50 ms | max ms | timeouts | slow clients cut off |",
        "|---:|---:|---:|---:|---:|---|",
        f"| {sl['probes']} | {sl['answered']} | {sl['p50']:.1f} | {sl['max']:.0f} | {sl['timeouts']} | {cut} |",
        "",
        f"Server RSS: {rss0:.0f} MiB before the load, {rss1:.0f} MiB after it, {rss2:.0f} MiB after the slow clients.",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    out = a.out or os.path.join(os.path.dirname(os.path.abspath(__file__)), "last-run-server-load.md")
    with open(out, "w") as f:
        f.write(text + "\n")


if __name__ == "__main__":
    main()
