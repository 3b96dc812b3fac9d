"""Runs the torch fixture generators of tests/tools (torch_write.py, dcp_write.py, zero_write.py,
megatron_write.py) with Debian's python3-torch: each checks what it writes against torch reading the same
files (torch.load, torch's DCP loader, a zero_to_fp32-style reassembly), element for element, and the values
it records must equal the committed expected.json. Skips with a message where torch is absent (CI: the
committed fixtures are what the other tests read)."""
import json
import os
import shutil
import subprocess
import tempfile
import unittest

TOOLS = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(TOOLS, "..", "fixtures")
PYTHON = "/usr/bin/python3"


def have_torch():
    return subprocess.run([PYTHON, "-c", "import torch"], capture_output=True).returncode == 0


@unittest.skipUnless(have_torch(), "python3-torch is not installed: the fixture generators were not re-run against torch")
class FixtureGenerators(unittest.TestCase):
    def check(self, script, fixture, keys):
        out = tempfile.mkdtemp(prefix="tm-gen-")
        try:
            target = os.path.join(out, fixture)
            r = subprocess.run([PYTHON, os.path.join(TOOLS, script), target], capture_output=True, text=True, timeout=600)
            self.assertEqual(r.returncode, 0, r.stderr[-3000:])
            with open(os.path.join(target, "expected.json")) as f:
                fresh = json.load(f)
            with open(os.path.join(FIXTURES, fixture, "expected.json")) as f:
                committed = json.load(f)
            for k in keys:
                self.assertEqual(fresh[k], committed[k], f"{script}: {k} differs from the committed fixture")
        finally:
            shutil.rmtree(out, ignore_errors=True)

    def test_torch_save(self):
        self.check("torch_write.py", "torch", ["files"])

    def test_dcp(self):
        self.check("dcp_write.py", "dcp", ["tensors", "metadata"])

    def test_zero(self):
        self.check("zero_write.py", "zero", ["runs"])

    def test_megatron(self):
        self.check("megatron_write.py", "megatron", ["tensors", "metadata"])


if __name__ == "__main__":
    unittest.main()
