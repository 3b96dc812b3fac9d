"""Long calls stay interruptible: Checkpoint.index()/stats() run with the GIL released, report progress, and
stop cleanly on Ctrl-C (SIGINT) or an exception from the progress callable — the tensors in flight are
committed, the exception reaches the caller, and calling again resumes from the index."""
import signal
import threading
import time

import numpy as np
import pytest

import tensormorph as tm
from safetensors_write import write_safetensors


def many_tensors(tmp_path, count, elements):
    rng = np.random.default_rng(7)
    path = str(tmp_path / "many.safetensors")
    write_safetensors(path, [("t%03d" % i, rng.standard_normal(elements).astype(np.float32).reshape(-1, 256))
                             for i in range(count)])
    return path


def test_an_exception_from_progress_stops_the_run_and_a_second_call_resumes(tmp_path):
    path = many_tensors(tmp_path, 64, 64 * 1024)
    seen = []

    def stop_at_first(p):
        seen.append(dict(p))
        raise RuntimeError("stop here")

    c = tm.open(path)
    with pytest.raises(RuntimeError, match="stop here"):
        c.index(progress=stop_at_first)
    assert len(seen) == 1 and seen[0]["tensors_total"] == 64 and seen[0]["bytes_total"] == 64 * 64 * 1024 * 4
    again = c.index()
    assert 0 < again["already_indexed"] < 64  # what was in flight was committed; the rest was not taken
    assert again["already_indexed"] + again["computed"] == 64
    assert c.stats("t005")["tensors"][0]["stats"]["count"] == 64 * 1024


def test_progress_callable_and_line(tmp_path, capsys):
    path = many_tensors(tmp_path, 8, 16 * 1024)
    calls = []
    report = tm.open(path).index(progress=calls.append)
    assert report["computed"] == 8
    last = calls[-1]
    assert last["tensors_done"] == last["tensors_total"] == 8 and last["bytes_done"] == last["bytes_total"]
    assert all(a["tensors_done"] <= b["tensors_done"] for a, b in zip(calls, calls[1:]))
    tm.open(path).stats(progress=True)  # already indexed: nothing to report, nothing written
    other = tmp_path / "other"
    other.mkdir()
    tm.open(many_tensors(other, 4, 4096)).index(progress=True)
    err = capsys.readouterr().err
    assert "tensormorph: indexed 4/4 tensors" in err and err.endswith("\n")


def interrupt_after(seconds, call):
    """Runs call() with SIGINT raised after `seconds` through a handler that raises KeyboardInterrupt (as the
    default one does) until call returns; returns (raised, seconds taken)."""
    armed = True

    def on_sigint(signum, frame):
        if armed:
            raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, on_sigint)
    timer = threading.Timer(seconds, signal.raise_signal, (signal.SIGINT,))
    t0 = time.perf_counter()
    try:
        timer.start()
        call()
        raised = False
    except KeyboardInterrupt:
        raised = True
    finally:
        armed = False
        timer.join()
        signal.signal(signal.SIGINT, previous)
    return raised, time.perf_counter() - t0


def test_ctrl_c_stops_a_stem_call(cli, tmp_path):
    """The STEM calls run on a helper thread while the caller's thread watches for signals: Ctrl-C during an
    SSB fit stops it at the next loss evaluation, and the module stays usable."""
    doc = cli.json("stem", "demo", "--out", str(tmp_path / "acq"), "--scan", "32,32", "--detector", "64",
                   "--defocus-nm", "6", "--scan-rotation-deg", "30")
    master = doc["master"]
    t0 = time.perf_counter()
    tm.stem.ssb(master, fit=True, search="wide", trials=60, threads=1)
    whole = time.perf_counter() - t0
    raised, took = interrupt_after(min(0.2, whole / 4), lambda: tm.stem.ssb(master, fit=True, search="wide", trials=60, threads=1))
    assert raised and took < whole, (took, whole)
    raised, _ = interrupt_after(0.05, lambda: tm.stem.load(master, threads=1))  # may finish first: either is clean
    frames, _ = tm.stem.load(master)
    assert frames.shape == (32, 32, 64, 64)


def test_ctrl_c_while_the_engine_runs(tmp_path):
    """SIGINT arriving while C++ runs without the GIL: Python's handler runs at the next progress call and its
    exception (KeyboardInterrupt under the default handler) stops the run."""
    path = many_tensors(tmp_path, 32, 2 * 1024 * 1024)  # 256 MB: indexing with pyramids outlasts the timer
    armed = True

    def on_sigint(signum, frame):  # the default handler's behaviour, disarmed once the call has returned
        if armed:
            raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, on_sigint)
    timer = threading.Timer(0.05, signal.raise_signal, (signal.SIGINT,))
    c = tm.open(path)
    try:
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            c.index()
    finally:
        armed = False
        timer.join()
        signal.signal(signal.SIGINT, previous)
    again = c.index()
    assert again["already_indexed"] < 32 and again["already_indexed"] + again["computed"] == 32
