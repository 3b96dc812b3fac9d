"""Runs the torch fixture generators of tests/tools (torch_write.py, dcp_write.py, zero_write.py,
megatron_write.py, torch_onnx_write.py) with Debian's python3-torch: each checks what it writes against torch reading
the same files (torch.load, torch's DCP loader, a zero_to_fp32-style reassembly; for torch.onnx.export's models,
onnx.numpy_helper.to_array and the module's own parameters), element for element, and the values it records must
equal the committed expected.json. Skips with a message where torch is absent (CI: the
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


def have_onnx():
    return subprocess.run([PYTHON, "-c", "import onnx"], capture_output=True).returncode == 0


@unittest.skipUnless(have_torch(), "python3-torch is not installed: the fixture generators were not re-run against torch")
class FixtureGenerators(unittest.TestCase):
    def check(self, script, fixture, keys, same_bytes=(), versions=()):
        """same_bytes: files that must equal the committed ones byte for byte when the generator's `versions` (keys of
        expected.json: the writers' versions) equal the committed ones."""
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
            if all(fresh[v] == committed[v] for v in versions):
                for name in same_bytes:
                    with open(os.path.join(target, name), "rb") as a, open(os.path.join(FIXTURES, fixture, name), "rb") as b:
                        self.assertEqual(a.read(), b.read(), f"{script}: {name} differs from the committed fixture")
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

    @unittest.skipUnless(have_onnx(), "python3-onnx is not installed: torch_onnx_write.py reads torch's models with it")
    def test_torch_onnx_export(self):
        self.check("torch_onnx_write.py", "onnx_torch", ["files", "state_dict"],
                   same_bytes=["folded.onnx", "unfolded.onnx", "external.onnx", "external.data"],
                   versions=["torch_version", "onnx_version"])


if __name__ == "__main__":
    unittest.main()
