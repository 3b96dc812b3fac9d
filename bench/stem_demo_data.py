"""What the 4D-STEM benchmarks share: a private settings/cache environment and the `stem demo` acquisition they
run on (written once under BUILD/bench-data, reused by later runs)."""
import os
import subprocess
import tempfile


def private_env(prefix):
    """(scratch folder, environment): settings and caches in the scratch folder, the default plugin folder."""
    tmp = tempfile.mkdtemp(prefix=prefix)
    env = dict(os.environ, XDG_CONFIG_HOME=os.path.join(tmp, "config"), XDG_CACHE_HOME=os.path.join(tmp, "cache"))
    env.pop("TENSORMORPH_PLUGIN_DIR", None)
    return tmp, env


def demo_acquisition(tm, build, name, scan, detector, env):
    """The master file of a scan x scan acquisition of detector x detector uint16 frames over 4 data files,
    written by `tensormorph stem demo` into BUILD/bench-data/NAME-SCAN-DETECTOR unless it is there already."""
    data = os.path.join(build, "bench-data", "%s-%d-%d" % (name, scan, detector))
    master = os.path.join(data, "demo_master.h5")
    if not os.path.exists(master):
        subprocess.run([tm, "stem", "demo", "--out", data, "--scan", "%d,%d" % (scan, scan), "--detector", str(detector),
                        "--files", "4"], check=True, env=env, capture_output=True)
    return master
