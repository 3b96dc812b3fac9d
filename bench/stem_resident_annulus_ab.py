#!/usr/bin/python3
"""Centred-annulus drag over HTTP against several `tensormorph` binaries on the same acquisition, one after the other
(issue 44): for each binary a server is started, the first request builds the resident copy, then N requests of a
drag of 8 radii about the detected disk; prints the medians of the report's `seconds` (the product's computation in
the server) and of the wall time of the same request with format=npy (what the page waits for).

  /usr/bin/python3 bench/stem_resident_annulus_ab.py MASTER BINARY [BINARY ...] [--n 16]

Not part of `make bench`: for comparing builds of the resident path in one sitting (same machine, same load)."""
import argparse
import http.client
import json
import os
import re
import statistics
import subprocess
import tempfile
import time


def run(tm, master, n):
    tmp = tempfile.mkdtemp(prefix="tm-annulus-ab-")
    env = dict(os.environ, XDG_CONFIG_HOME=os.path.join(tmp, "config"), XDG_CACHE_HOME=os.path.join(tmp, "cache"))
    p = subprocess.Popen([tm, "serve", "--port", "0", master], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for line in p.stdout:
            m = re.search(r"on http://([^:/]+):(\d+)/", line)
            if m:
                host, port = m.group(1), int(m.group(2))
                break
        else:
            raise RuntimeError("serve printed no URL: " + p.stderr.read())

        def get(path):
            c = http.client.HTTPConnection(host, port, timeout=900)
            t = time.perf_counter()
            c.request("GET", path)
            r = c.getresponse()
            body = r.read()
            c.close()
            if r.status != 200:
                raise RuntimeError("%s: %d %s" % (path, r.status, body[:300]))
            return body, time.perf_counter() - t

        get("/api/acquisitions/a0/products/mask?inner=4&outer=20&format=npy")  # builds the copy
        secs, walls = [], []
        for i in range(n):
            q = "inner=%d&outer=%d" % (4 + i % 8, 20 + 2 * (i % 8))
            secs.append(json.loads(get("/api/acquisitions/a0/products/mask?" + q)[0])["seconds"])
            walls.append(get("/api/acquisitions/a0/products/mask?%s&format=npy" % q)[1])
        return statistics.median(secs), statistics.median(walls)
    finally:
        p.terminate()
        p.wait(timeout=60)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("master")
    ap.add_argument("binaries", nargs="+")
    ap.add_argument("--n", type=int, default=16)
    args = ap.parse_args()
    for tm in args.binaries:
        s, w = run(os.path.abspath(tm), args.master, args.n)
        print("%s: report seconds %.4f, format=npy wall %.4f (medians of %d)" % (tm, s, w, args.n))


if __name__ == "__main__":
    main()
