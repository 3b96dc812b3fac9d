"""Every ```python block of docs/python.md runs, in order, in one namespace, on the model and the acquisition it
describes."""
import os
import re

import numpy as np

from conftest import REPO, bf16_bits
from safetensors_write import write_safetensors


def test_tutorial_snippets_run(cli, tmp_path, monkeypatch, capsys):
    with open(os.path.join(REPO, "docs", "python.md"), encoding="utf-8") as f:
        blocks = re.findall(r"^```python\n(.*?)^```", f.read(), re.S | re.M)
    assert len(blocks) >= 5
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(0)
    write_safetensors("model.safetensors", [
        ("layers.0.weight", rng.standard_normal((16, 8)).astype(np.float32)),
        ("layers.0.bias", ("BF16", bf16_bits([0.5, -1.25, 2.0, 0.0]))),
    ])
    r = cli.run("stem", "demo", "--out", "acquisition", "--scan", "32,32", "--detector", "64")
    assert r.returncode == 0, r.stderr
    namespace = {}
    for i, block in enumerate(blocks):
        exec(compile(block, f"docs/python.md block {i + 1}", "exec"), namespace)
    out = capsys.readouterr().out
    assert "safetensors" in out and "layers.0.bias BF16 [4] True" in out
    assert "6 missing.safetensors: cannot open: No such file or directory" in out
    assert "[32, 32] [64, 64] complete" in out
    assert "(32, 32) 300000.0 file: beam energy" in out
    assert "True radial" in out  # the resident copy: smaller than the dense frames, ordered about the disk
    assert "('layers.0.weight', 0.0)" in out
