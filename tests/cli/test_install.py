"""`cmake --install` of the build TM_BIN belongs to (Debian's python3, standard library only): the installed
tree holds what the binary looks for beside itself (P/lib/tensormorph: the binary, plugins/, web/dist/),
P/bin/tensormorph links to it, and the installed binary — no source tree, no Node — loads its plugins from
there and serves the viewer from there."""
import http.client
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cli_harness import TM_BIN  # noqa: E402

BUILD = os.path.dirname(os.path.abspath(TM_BIN))
SOURCE_WEB = os.path.join(HERE, "..", "..", "web", "dist")


class InstallTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="tm-install-")
        cls.prefix = os.path.join(cls.tmp, "prefix")
        r = subprocess.run(["cmake", "--install", BUILD, "--prefix", cls.prefix], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
        cls.home = os.path.join(cls.prefix, "lib", "tensormorph")
        cls.bin = os.path.join(cls.prefix, "bin", "tensormorph")
        cls.env = dict(os.environ)
        cls.env.pop("TENSORMORPH_PLUGIN_DIR", None)
        for var in ("HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME"):
            cls.env[var] = os.path.join(cls.tmp, var.lower())
            os.makedirs(cls.env[var])

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_layout(self):
        self.assertTrue(os.path.islink(self.bin))
        self.assertEqual(os.path.realpath(self.bin), os.path.realpath(os.path.join(self.home, "tensormorph")))
        built = sorted(f for f in os.listdir(os.path.join(BUILD, "plugins")) if f.endswith(".so")) \
            if os.path.isdir(os.path.join(BUILD, "plugins")) else []
        installed = sorted(os.listdir(os.path.join(self.home, "plugins"))) if built else []
        self.assertEqual(installed, built)

    def test_installed_binary_loads_its_plugins(self):
        r = subprocess.run([self.bin, "backends", "--json"], capture_output=True, text=True, env=self.env, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        doc = json.loads(r.stdout)
        self.assertEqual(os.path.realpath(doc["plugin_dir"]), os.path.realpath(os.path.join(self.home, "plugins")))
        names = {b["name"] for b in doc["backends"]}
        if os.path.exists(os.path.join(self.home, "plugins", "libtensormorph-backend-vulkan.so")):
            self.assertIn("vulkan", names)

    def test_installed_binary_serves_the_installed_viewer(self):
        if not os.path.isfile(os.path.join(SOURCE_WEB, "index.html")):
            print("\nSKIPPED: the web app is not built (web/dist), so none was installed")
            return
        tensor = os.path.join(self.tmp, "one.safetensors")
        data = b"\0" * 16
        header = json.dumps({"x": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}).encode()
        header += b" " * (-len(header) % 8)
        with open(tensor, "wb") as f:
            f.write(len(header).to_bytes(8, "little") + header + data)
        p = subprocess.Popen([self.bin, "serve", tensor, "--port", "0"], env=self.env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        try:
            line = p.stdout.readline()
            m = re.search(r"on http://127\.0\.0\.1:(\d+)/", line)
            self.assertIsNotNone(m, line)
            conn = http.client.HTTPConnection("127.0.0.1", int(m.group(1)), timeout=30)
            conn.request("GET", "/")
            body = conn.getresponse().read()
            conn.close()
            with open(os.path.join(self.home, "web", "dist", "index.html"), "rb") as f:
                self.assertEqual(body, f.read())
        finally:
            p.terminate()
            _, err = p.communicate(timeout=30)
        self.assertIn("web app: " + os.path.realpath(os.path.join(self.home, "web", "dist")), err)


if __name__ == "__main__":
    unittest.main()
