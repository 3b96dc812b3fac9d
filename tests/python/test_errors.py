"""The exception hierarchy: one class per CLI exit code, each raised with the CLI's message for the same
failure (and exit_code the CLI's exit status)."""
import json

import numpy as np
import pytest

import tensormorph as tm
from safetensors_write import write_safetensors

CLASSES = {tm.InvalidArgument: 2, tm.BadInput: 3, tm.Unavailable: 4, tm.PrecisionRefused: 5, tm.IoError: 6,
           tm.Incomplete: 7, tm.InternalError: 70}


def test_hierarchy():
    assert issubclass(tm.Error, Exception)
    for cls, code in CLASSES.items():
        assert issubclass(cls, tm.Error) and cls.exit_code == code
        assert cls.__module__ == "tensormorph" and cls.__doc__


def same_as_cli(cli, cls, cli_args, call):
    """call() raises cls; the CLI run with cli_args fails with the same exit code and message."""
    with pytest.raises(cls) as e:
        call()
    r = cli.run(*cli_args)
    assert r.returncode == e.value.exit_code == CLASSES[cls], r.stderr
    assert f"tensormorph: error: {e.value}\n" in r.stderr
    return str(e.value)


def test_missing_file_is_io_error(tmp_path, cli):
    path = str(tmp_path / "nope.safetensors")
    msg = same_as_cli(cli, tm.IoError, ["ls", path], lambda: tm.open(path))
    assert "nope.safetensors" in msg


def test_truncated_file_is_bad_input(tmp_path, cli):
    path = str(tmp_path / "cut.safetensors")
    write_safetensors(path, [("w", np.arange(64, dtype=np.float32))])
    with open(path, "r+b") as f:
        f.truncate(100)
    msg = same_as_cli(cli, tm.BadInput, ["ls", path], lambda: tm.open(path))
    assert "cut.safetensors" in msg
    garbage = str(tmp_path / "garbage.safetensors")
    with open(garbage, "wb") as f:
        f.write(b"\xff" * 7)
    same_as_cli(cli, tm.BadInput, ["ls", garbage], lambda: tm.open(garbage))


def test_bad_settings(tmp_path, cli):
    cfg = tmp_path / "config" / "tensormorph"
    cfg.mkdir(parents=True)
    (cfg / "settings.json").write_text("{oops")
    same_as_cli(cli, tm.BadInput, ["backends"], tm.backends)
    (cfg / "settings.json").write_text(json.dumps({"compute.threads": "2K"}))
    same_as_cli(cli, tm.InvalidArgument, ["backends"], tm.backends)


def test_unknown_tensor_is_invalid_argument(small, cli):
    path = small[0]
    c = tm.open(path)
    same_as_cli(cli, tm.InvalidArgument, ["stats", path, "nope"], lambda: c.stats("nope"))


def test_strict_backend_that_cannot_serve_is_unavailable(small, cli):
    path = small[0]
    c = tm.open(path)
    same_as_cli(cli, tm.Unavailable, ["stats", path, "e8m0", "--backend", "cpu", "--json"],
                lambda: c.stats("e8m0", backend="cpu"))
