"""Reference counts and memory over loops of opens and reads: nothing is kept alive that should not be."""
import gc
import os
import sys

import pytest

import tensormorph as tm


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def test_array_holds_exactly_one_reference_to_its_mapping(small):
    c = tm.open(small[0])
    a = c.read("f32")
    base = a.base
    before = sys.getrefcount(base)
    views = [c.read("f32") for _ in range(10)]
    assert all(v.base is not base for v in views)  # each read has its own Mapping object
    assert sys.getrefcount(base) == before
    b = a[1:]  # a numpy view of the view keeps the same chain
    assert b.base is a
    del b, views
    gc.collect()
    assert sys.getrefcount(base) == before


# Under ASan freed memory sits in its quarantine: RSS says nothing there (ASan checks the heap instead).
rss_meaningful = pytest.mark.skipif(bool(os.environ.get("TM_UNDER_ASAN")), reason="RSS under ASan's quarantine")


@rss_meaningful
def test_open_read_loop_does_not_grow(small):
    path = small[0]

    def work():
        c = tm.open(path)
        for name in ("f32", "bf16", "e4m3", "i32"):
            c.read(name).sum()
        c.tensors
        try:
            c.read("nope")
        except tm.InvalidArgument:
            pass

    for _ in range(200):  # warm up allocator pools
        work()
    gc.collect()
    start = rss_bytes()
    for _ in range(2000):
        work()
    gc.collect()
    grown = rss_bytes() - start
    assert grown < 4 * 1024 * 1024, f"RSS grew by {grown} bytes over 2000 opens"


@rss_meaningful
def test_stats_loop_does_not_grow(small):
    c = tm.open(small[0])
    for _ in range(20):
        c.stats("f32")
    gc.collect()
    start = rss_bytes()
    for _ in range(200):
        c.stats("f32")
    gc.collect()
    assert rss_bytes() - start < 8 * 1024 * 1024


@pytest.mark.parametrize("name", ["f32", "bf16"])
def test_refcount_of_returned_arrays(small, name):
    c = tm.open(small[0])
    a = c.read(name)
    assert sys.getrefcount(a) == 2  # the name and getrefcount's argument


@rss_meaningful
def test_region_render_and_interrupted_call_loop_does_not_grow(small, tmp_path):
    """The calls added later: strided region reads, render (an RGBA copy), and indexing stopped by an exception
    from its progress callable (the stored Python exception must be released each time)."""
    import numpy as np
    from safetensors_write import write_safetensors
    path = small[0]
    c = tm.open(path)
    c.index()
    fresh = []  # files not indexed yet: their indexing calls progress, which raises
    for i in range(250):
        p = str(tmp_path / ("t%d.safetensors" % i))
        write_safetensors(p, [("x", np.full((4, 4), i, dtype=np.float32))])
        fresh.append(p)
    stopped = 0

    def stop(p):
        raise RuntimeError("stop")

    def work():
        nonlocal stopped
        c.read("f32", rows=(1, 3), cols=slice(0, None, 2)).sum()
        c.read("bf16", rows=(0, 1)).sum()
        c.render("f32")[0].sum()
        try:
            tm.open(fresh.pop()).index(progress=stop)
        except RuntimeError:
            stopped += 1

    for _ in range(50):
        work()
    gc.collect()
    start = rss_bytes()
    for _ in range(200):
        work()
    gc.collect()
    grown = rss_bytes() - start
    assert stopped == 250
    assert grown < 4 * 1024 * 1024, f"RSS grew by {grown} bytes over 200 loops"
