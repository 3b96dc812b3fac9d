"""Fixtures of the Python module's tests (run by ctest as `python.test_*`, one entry per file, with PYTHONPATH=<build>/python and
TM_BIN=<build>/tensormorph): a private cache and config folder per test, the test writers of tests/tools,
and the CLI to compare with."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "tools"))

from safetensors_write import write_safetensors  # noqa: E402


@pytest.fixture(autouse=True)
def private_homes(tmp_path, monkeypatch):
    """Each test's index cache and settings live in its own folders (the module and the CLI read them)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("TENSORMORPH_PLUGIN_DIR", raising=False)


class Cli:
    """The tensormorph binary of the same build."""

    def __init__(self, binary):
        self.binary = binary

    def run(self, *args):
        # Under ASan this interpreter runs with the sanitizer's shared runtime preloaded (for the module); the
        # binary carries its own, and two runtimes in one process refuse to start: the preload is not passed on.
        env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
        return subprocess.run([self.binary, *args], capture_output=True, text=True, timeout=300, env=env)

    def json(self, *args):
        r = self.run(*args, "--json")
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)


@pytest.fixture
def cli():
    binary = os.environ.get("TM_BIN")
    if not binary:
        pytest.skip("TM_BIN is not set (run through ctest)")
    return Cli(binary)


def bf16_bits(values):
    """float32 values that bf16 holds exactly, as their bf16 bit patterns (uint16)."""
    return (np.asarray(values, dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16)


@pytest.fixture
def small(tmp_path):
    """A safetensors file with one tensor of each kind the module reads differently."""
    rng = np.random.default_rng(26)
    tensors = {
        "f32": rng.standard_normal((3, 5)).astype(np.float32),
        "f64": rng.standard_normal(7),
        "f16": rng.standard_normal((2, 4)).astype(np.float16),
        "i32": np.arange(-6, 6, dtype=np.int32).reshape(3, 4),
        "u8": np.arange(10, dtype=np.uint8),
        "flag": np.array([True, False, True]),
    }
    bf16_values = np.array([[1.0, -2.5, 3.140625], [0.0, -0.0, 65280.0]], dtype=np.float32)
    path = str(tmp_path / "small.safetensors")
    write_safetensors(path, list(tensors.items()) + [
        ("bf16", ("BF16", bf16_bits(bf16_values))),
        ("e4m3", ("F8_E4M3", np.array([0x38, 0x40, 0xB8, 0x7F, 0x00], dtype=np.uint8))),
        ("e5m2", ("F8_E5M2", np.array([0x3C, 0x40, 0xBC, 0x7C], dtype=np.uint8))),
        ("e8m0", ("F8_E8M0", np.array([127, 128], dtype=np.uint8))),  # no dense dtype: unreadable here
    ])
    return path, tensors, bf16_values
