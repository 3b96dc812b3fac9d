"""Writes the seeds of the EMPAD harness (tests/fuzz/corpus/empad: each seed is one .xml sidecar naming fz.raw, the
one-frame .raw the harness writes beside it) from tests/fixtures/empad_writer.py's xml_text: a 1 x 1 scan by
pix_x/pix_y, quoted values, scan_resolution, a series, and one with comments, CDATA and character references.
Deterministic.

    /usr/bin/python3 tests/fuzz/make_empad_seeds.py"""
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "fixtures"))
from empad_writer import xml_text  # noqa: E402


def main():
    out = os.path.join(HERE, "corpus", "empad")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    seeds = {
        "scan.xml": xml_text("fz.raw", scan=(1, 1)),
        "quoted.xml": xml_text("fz.raw", scan=(1, 1), quoted=True),
        "resolution.xml": xml_text("fz.raw", resolution=(1, 1)),
        "series.xml": xml_text("fz.raw", series=2),
        "lying.xml": xml_text("fz.raw", scan=(1, 2)),
        "markup.xml": xml_text("fz.raw", scan=(1, 1), extra="  <note a='&lt;&#x41;&#66;&amp;'><![CDATA[<x>]]><!-- c --><?pi x?></note>"),
    }
    for name, text in seeds.items():
        with open(os.path.join(out, name), "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
