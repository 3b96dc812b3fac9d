"""Writes the seeds of the NanoMegas blockfile harness (tests/fuzz/corpus/blockfile: each seed is one .blo file) from
tests/fixtures/blockfile_writer.py: little- and big-endian headers, a 0x0103 file with a 16-bit note, a file cut
mid-frame. Deterministic.

    /usr/bin/python3 tests/fuzz/make_blockfile_seeds.py"""
import os
import shutil
import struct
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "fixtures"))
from blockfile_writer import write_blockfile  # noqa: E402


def main():
    out = os.path.join(HERE, "corpus", "blockfile")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    rng = np.random.default_rng(2)
    frames = rng.integers(0, 256, (2, 3, 8, 8), dtype=np.uint8)
    write_blockfile(os.path.join(out, "le.blo"), frames, note="seed")
    write_blockfile(os.path.join(out, "be.blo"), frames, endian=">")
    p = os.path.join(out, "cut.blo")
    write_blockfile(p, frames)
    os.truncate(p, os.path.getsize(p) - 30)
    # A 0x0103 file whose note says 16-bit frames: the header and note as the writer makes them, then 16-bit records.
    p = os.path.join(out, "u16.blo")
    h = write_blockfile(p, frames, MAGIC=0x0103, note="Blo Bit Depth: 16 bits")
    with open(p, "r+b") as f:
        f.seek(h["Data_offset_2"])
        for i, frame in enumerate(frames.reshape(6, 64)):
            f.write(struct.pack("<HI", 0x55AA, i) + (frame.astype("<u2") * 257).tobytes())
        f.truncate()

if __name__ == "__main__":
    main()
