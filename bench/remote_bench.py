"""Remote checkpoints (issue 49): what `tensormorph info` and `index` of a sharded safetensors checkpoint fetch from
Debian's nginx on loopback, beside the headers' bytes and beside `curl` fetching the same shard files.

The checkpoint is written here with numpy and json (--shards files of --dtype tensors, float16 by default as most
published checkpoints are 16-bit, or float32; --mb in all, and a model.safetensors.index.json); nginx is started and stopped by this script (tests/cli/remote_servers.py).
The local `index` of the same files is the compute ceiling on this machine. Prints a Markdown table; memory: the peak RSS of `index` (GNU time's maxrss)."""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "cli"))
import remote_servers  # noqa: E402
from test_remote import write_safetensors  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--shards", type=int, default=8)
    ap.add_argument("--mb", type=int, default=512)
    ap.add_argument("--tensors-per-shard", type=int, default=16)
    ap.add_argument("--dtype", choices=("f16", "f32"), default="f16")
    a = ap.parse_args()
    tm = os.path.abspath(os.path.join(a.build, "tensormorph"))
    root = tempfile.mkdtemp(prefix="tm-remote-bench-")
    rng = np.random.default_rng(1)
    dtype = np.float16 if a.dtype == "f16" else np.float32
    per_tensor = a.mb * (1 << 20) // (a.shards * a.tensors_per_shard) // np.dtype(dtype).itemsize
    header, weight_map, total, files = 0, {}, 0, []
    for s in range(a.shards):
        name = "model-%05d-of-%05d.safetensors" % (s + 1, a.shards)
        ts = {"layers.%d.t%d" % (s, j): rng.standard_normal(per_tensor, dtype=np.float32).astype(dtype) for j in range(a.tensors_per_shard)}
        header += write_safetensors(os.path.join(root, name), ts)
        files.append(name)
        for k, v in ts.items():
            weight_map[k] = name
            total += v.nbytes
    index = json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}).encode()
    open(os.path.join(root, "model.safetensors.index.json"), "wb").write(index)
    header += len(index)
    nginx = remote_servers.Nginx(root)
    env = dict(os.environ, XDG_CACHE_HOME=tempfile.mkdtemp(prefix="tm-rb-cache-"), XDG_CONFIG_HOME=tempfile.mkdtemp(prefix="tm-rb-cfg-"))
    try:
        url = nginx.url("model.safetensors.index.json")
        r = subprocess.run([tm, "info", url, "--json"], capture_output=True, text=True, env=env, check=True)
        info_bytes = int(re.search(r"fetched (\d+) bytes", r.stderr).group(1))
        t0 = time.time()
        r = subprocess.run(["/usr/bin/time", "-f", "maxrss %M", tm, "index", url, "--json"], capture_output=True, text=True, env=env, check=True)
        index_s = time.time() - t0
        index_bytes = int(re.search(r"fetched (\d+) bytes", r.stderr).group(1))
        rss_kb = int(re.search(r"maxrss (\d+)", r.stderr).group(1))
        t0 = time.time()
        subprocess.run(["curl", "-s", "--fail"] + sum((["-o", "/dev/null", nginx.url(f)] for f in files), []), check=True)
        curl_s = time.time() - t0
        env_local = dict(env, XDG_CACHE_HOME=tempfile.mkdtemp(prefix="tm-rb-cache-"))
        t0 = time.time()
        subprocess.run([tm, "index", os.path.join(root, "model.safetensors.index.json"), "--json"], capture_output=True, env=env_local, check=True)
        local_s = time.time() - t0
        file_bytes = sum(os.path.getsize(os.path.join(root, f)) for f in files)
        print("| measure | value |\n|---|---|")
        print("| checkpoint | %d shards, %d tensors, %.0f MB of %s |" % (a.shards, len(weight_map), total / 1e6, np.dtype(dtype).name))
        print("| headers' bytes (index JSON + 8 + JSON per shard) | %d |" % header)
        print("| `info` bytes transferred | %d (%.3fx the headers) |" % (info_bytes, info_bytes / header))
        print("| `index` (stats + pyramids) bytes transferred / wall | %d / %.2f s = %.0f MB/s, peak RSS %.0f MB |" % (
            index_bytes, index_s, index_bytes / index_s / 1e6, rss_kb / 1024))
        print("| `curl -o /dev/null` of the %d shard files | %d bytes in %.2f s = %.0f MB/s |" % (a.shards, file_bytes, curl_s, file_bytes / curl_s / 1e6))
        print("| local `index` of the same files (page cache warm) | %.2f s = %.0f MB/s |" % (local_s, total / local_s / 1e6))
        print("| remote index rate / curl rate | %.2f |" % ((index_bytes / index_s) / (file_bytes / curl_s)))
        print("| remote index rate / local index rate | %.2f |" % ((index_bytes / index_s) / (total / local_s)))
    finally:
        nginx.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
