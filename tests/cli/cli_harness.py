"""Runs the built CLI in a clean environment (its own config directory) and captures the result."""
import json
import os
import pty
import select
import subprocess
import tempfile
import time

TM_BIN = os.environ.get("TM_BIN", "build/tensormorph")
PLUGIN_DIR = os.environ.get("TM_TEST_PLUGIN_DIR", "build/tests/plugins")


class Run:
    def __init__(self, proc):
        self.code = proc.returncode
        self.out = proc.stdout
        self.err = proc.stderr

    def json(self):
        return json.loads(self.out)


def run(args, config_home=None, plugins=False, env_extra=None, timeout=120, cache_home=None):
    """cache_home: where checkpoint indexes live (XDG_CACHE_HOME); a fresh one per call unless given."""
    env = dict(os.environ)
    env["XDG_CONFIG_HOME"] = config_home or tempfile.mkdtemp(prefix="tm-cfg-")
    env["XDG_CACHE_HOME"] = cache_home or tempfile.mkdtemp(prefix="tm-cache-")
    env.pop("TENSORMORPH_PLUGIN_DIR", None)
    if plugins:
        env["TENSORMORPH_PLUGIN_DIR"] = PLUGIN_DIR
    env.update(env_extra or {})
    proc = subprocess.run([TM_BIN] + list(args), capture_output=True, text=True, env=env, timeout=timeout)
    return Run(proc)


def run_on_terminal(argv, env, timeout=120):
    """Runs argv with stderr on a pseudo-terminal (what a user's terminal is: the CLI draws progress lines there),
    stdin /dev/null and stdout a pipe, both read as they come. Returns (exit code, stdout bytes, terminal bytes);
    raises subprocess.TimeoutExpired (after killing it) when it runs past `timeout` seconds."""
    master, slave = pty.openpty()
    p = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    out, seen = b"", b""
    open_ends = {master: "terminal", p.stdout.fileno(): "stdout"}
    deadline = time.monotonic() + timeout
    try:
        while open_ends:
            left = deadline - time.monotonic()
            if left <= 0:
                p.kill()
                raise subprocess.TimeoutExpired(argv, timeout)
            ready, _, _ = select.select(list(open_ends), [], [], left)
            for fd in ready:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:  # the child closed the terminal's other end
                    chunk = b""
                if not chunk:
                    del open_ends[fd]
                elif open_ends[fd] == "terminal":
                    seen += chunk
                else:
                    out += chunk
        p.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        os.close(master)
        p.stdout.close()
    return p.returncode, out, seen


def figure_body(img):
    """The part of a CLI PNG figure inside its frame (render/figure_frame.h: the title and axes around it): the
    cells at the top left, the colour bar and its label panel, as an RGBA numpy array, cut by the PNG's layout text.
    A PNG without a frame (tensormorph:figure_box absent) is returned whole."""
    import numpy as np
    a = np.asarray(img.convert("RGBA"))
    if "tensormorph:figure_box" not in img.text:
        return a
    x, y, _, _ = map(int, img.text["tensormorph:cells_box"].split(","))
    lx, _, lw, lh = map(int, img.text["tensormorph:labels_box"].split(","))
    return a[y:y + lh, x:lx + lw]


def require_vulkan(test):
    """Skips `test` (a unittest.TestCase) when the Vulkan backend is unavailable here, naming why; fails
    instead under TM_REQUIRE_VULKAN=1 (.ci/run, where lavapipe must be present)."""
    vk = [b for b in run(["backends", "--json"]).json()["backends"] if b["name"] == "vulkan"]
    if vk and vk[0]["available"]:
        return
    why = "not built" if not vk else vk[0]["reason"]
    if os.environ.get("TM_REQUIRE_VULKAN") == "1":
        test.fail("TM_REQUIRE_VULKAN=1 but the Vulkan backend is unavailable: " + why)
    test.skipTest("Vulkan backend unavailable (" + why + ")")


def check_listing(case, doc, fmt, expected, stored=None, readable=None, what=None):
    """ls --json of a checkpoint against a fixture's expected.json tensors: the format, every tensor once with
    its shape and stored type (stored[w["dtype"]], or the fixture's own w["stored_type"] when stored is None), and
    readable (readable(name, w) when given, else always). Returns the listing by name; `what` labels failures."""
    case.assertEqual(doc["format"], fmt)
    got = {t["name"]: t for t in doc["tensors"]}
    case.assertEqual(set(got), set(expected), what)
    for name, w in expected.items():
        case.assertEqual(got[name]["shape"], w["shape"], name)
        case.assertEqual(got[name]["stored_type"], w["stored_type"] if stored is None else stored[w["dtype"]], name)
        if readable is None:
            case.assertTrue(got[name]["readable"], (name, got[name].get("unavailable")))
        else:
            case.assertEqual(got[name]["readable"], readable(name, w), name)
    return got
