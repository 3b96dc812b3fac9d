"""`cmake --install` puts the package in P/lib/tensormorph/python, where it imports without the build tree
and loads the installed plugins."""
import json
import os
import subprocess

import pytest

import tensormorph as tm


@pytest.mark.skipif(bool(os.environ.get("TM_UNDER_ASAN")), reason="the release build tests the install")
def test_installed_package_imports_and_loads_plugins(tmp_path):
    build = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(tm.__file__))))
    if not os.path.isfile(os.path.join(build, "cmake_install.cmake")):
        pytest.skip("not imported from a CMake build folder")
    prefix = tmp_path / "prefix"
    r = subprocess.run(["cmake", "--install", build, "--prefix", str(prefix)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    package = prefix / "lib" / "tensormorph" / "python" / "tensormorph"
    assert (package / "__init__.pyi").is_file() and (package / "py.typed").is_file()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(prefix / "lib" / "tensormorph" / "python")
    code = "import json, tensormorph as tm; print(json.dumps([tm.__file__, [b['name'] for b in tm.backends()]]))"
    r = subprocess.run(["/usr/bin/python3", "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    where, names = json.loads(r.stdout)
    assert where.startswith(str(package))
    assert names == [b["name"] for b in tm.backends()]
