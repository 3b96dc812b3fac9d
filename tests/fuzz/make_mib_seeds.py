"""Writes the seeds of the Merlin .mib harness (tests/fuzz/corpus/mib, fuzz_mib.cpp's input layout: a flags byte,
an optional .hdr with its 2-byte length, then the .mib bytes), from tests/fixtures/mib_writer.py. Deterministic.

    /usr/bin/python3 tests/fuzz/make_mib_seeds.py"""
import os
import shutil
import struct
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "fixtures"))
import mib_writer as mw  # noqa: E402


def seed(flags, mib, hdr=None):
    if hdr is None:
        return bytes([flags & ~1]) + mib
    h = hdr.encode("ascii")
    return bytes([flags | 1]) + struct.pack("<H", len(h)) + h + mib


def main():
    out = os.path.join(HERE, "corpus", "mib")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    rng = np.random.default_rng(1)
    u16 = b"".join(mw.records(mw.counts(rng, (3, 8, 8), 12, np.uint16)))
    u08 = b"".join(mw.records(mw.counts(rng, (2, 4, 6), 6, np.uint8), pixel_type="U08"))
    raw1 = b"".join(mw.records(mw.counts(rng, (1, 256, 256), 1, np.uint8), raw=True, depth=1))
    seeds = {"u16": seed(0, u16), "u16-hdr": seed(1, u16, mw.hdr_text(4, 2)), "u08-folder": seed(4, u08),
             "u16-cut": seed(1 | 2, u16[:-37], mw.hdr_text(3, 3, scan=(1, 3))), "raw1": seed(0, raw1)}
    for name, data in seeds.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
