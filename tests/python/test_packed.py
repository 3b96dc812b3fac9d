"""Packed safetensors schemes (GPTQ, AWQ, bitsandbytes, FP8 with scales, MXFP4; tests/tools/packed_write.py):
read() decodes every logical tensor to float32 bit for bit as the writer's reference; listings and
statistics are the CLI's documents."""
import os

import numpy as np
import pytest

import tensormorph as tm
from packed_write import write_all


@pytest.fixture(scope="module")
def schemes(tmp_path_factory):
    out = tmp_path_factory.mktemp("packed")
    write_all(str(out))
    return {name: str(out / name) for name in sorted(os.listdir(out))}


def test_every_scheme_decodes_bit_for_bit(schemes):
    assert len(schemes) >= 10
    for scheme, path in schemes.items():
        expected = np.load(os.path.join(path, "expected.npz"))
        c = tm.open(path)
        names = [k[: -len("/ref")] for k in expected.files if k.endswith("/ref")]
        assert names, scheme
        for name in names:
            a = c.read(name)
            ref = expected[name + "/ref"]
            assert a.dtype == np.float32 and a.shape == ref.shape, (scheme, name)
            assert np.array_equal(a.view(np.uint32), ref.view(np.uint32)), (scheme, name)


def test_packed_listing_and_stats_equal_cli(schemes, cli):
    path = schemes["gptq"]
    c = tm.open(path)
    packed = [t for t in c.tensors if "packed" in t]
    assert packed
    ls = {t["name"]: t for t in cli.json("ls", path)["tensors"]}
    for t in packed:
        assert t["packed"] == ls[t["name"]]["packed"]
    name = packed[0]["name"]
    mine = c.stats(name)
    assert mine == cli.json("stats", path, name)
    assert mine["tensors"][0]["dequantized_from"] == packed[0]["stored_type"]
