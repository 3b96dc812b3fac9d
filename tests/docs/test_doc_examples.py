"""Every command example of a Markdown document runs, in order, on the demo data, and prints what the document shows.

Usage: test_doc_examples.py DOC.md [DOC.md ...]   (ctest: one `docs.<name>` entry per file of README.md and docs/*.md)
       test_doc_examples.py --self-test          (ctest `docs.self_test`: planted wrong examples must fail)

The convention (docs/doc-examples.md says it for writers):
- An example is a fenced block whose info string is `console`. Other blocks (synopses, JSON shapes, ```python, which
  tests/python/test_docs.py runs) are not run.
- In it, a line starting with `$ ` is a command (a line ending in `\\` continues it); the lines after it, up to the next
  command, are what it prints (stdout and stderr together, trailing spaces ignored). A command with no lines after it
  is checked only for its exit status.
- Output lines match exactly, except: a line `...` matches any number of lines (none included), and `…` inside a line
  matches any text within that line (timings, paths, numbers that vary).
- A last output line `[exit N]` says the command exits with status N; otherwise it must exit 0.
- `<!-- doc-test: skip REASON -->` on the line before a block skips it, printing REASON (for what CI lacks: a GPU).
- Commands run under bash in one working folder per document, holding `build/demo` (tensormorph demo) and
  `build/stem-demo` (tensormorph stem demo); `tensormorph` and `build/tensormorph` are the build's binary ($TM_BIN);
  the index cache and settings are private to the run. A command naming http://127.0.0.1:8765 talks to
  `tensormorph serve build/demo build/stem-demo`, started on a free port on first use (the port is rewritten both ways).
Runs with Debian's python3 alone (no pytest, no numpy)."""
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
DOC_PORT = "8765"
COMMAND_TIMEOUT_S = 60
BLOCK_RE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```[ \t]*$", re.S | re.M)
MARKER_RE = re.compile(r"<!--\s*doc-test:\s*(\w+)\s*(.*?)\s*-->\s*$")
EXIT_RE = re.compile(r"^\[exit (\d+)\]$")


class Example:
    """One command of a console block: where it is, what it runs, what it should print and exit with."""

    def __init__(self, doc, line, command, expected, exit_status):
        self.doc, self.line, self.command, self.expected, self.exit_status = doc, line, command, expected, exit_status

    def where(self):
        return f"{self.doc}:{self.line}"


def parse_examples(doc, text):
    """The console blocks of one document as (skip reason or None, [Example]) in document order."""
    blocks = []
    for m in BLOCK_RE.finditer(text):
        if m.group(1) != "console":
            continue
        start_line = text.count("\n", 0, m.start()) + 1
        before = text[:m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        marker = MARKER_RE.search(before)
        skip = None
        if marker:
            if marker.group(1) != "skip":
                raise SystemExit(f"{doc}:{start_line - 1}: unknown doc-test marker '{marker.group(1)}' (only 'skip')")
            skip = marker.group(2) or "marked skip"
        examples, current = [], None
        lines = m.group(2).split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        i = 0
        while i < len(lines):
            line = lines[i]
            if line.startswith("$ "):
                command, first = line[2:], start_line + 1 + i
                while command.endswith("\\") and i + 1 < len(lines):
                    i += 1
                    command = command + "\n" + lines[i]  # bash reads backslash-newline as a continuation
                current = Example(doc, first, command, [], 0)
                examples.append(current)
            elif current is None:
                raise SystemExit(f"{doc}:{start_line + 1 + i}: a console block must start with a '$ ' command line")
            else:
                current.expected.append(line.rstrip())
            i += 1
        for e in examples:
            if e.expected and EXIT_RE.match(e.expected[-1]):
                e.exit_status = int(EXIT_RE.match(e.expected[-1]).group(1))
                e.expected.pop()
        blocks.append((skip, examples))
    return blocks


def line_matches(pattern, line):
    """`…` in the pattern matches any text within the line; everything else literally."""
    if "…" not in pattern:
        return pattern == line
    return re.fullmatch(".*?".join(re.escape(p) for p in pattern.split("…")), line, re.S) is not None


def output_matches(expected, actual):
    """Expected lines against actual lines, `...` matching any run of lines (backtracking; docs are short)."""
    memo = {}

    def match(i, j):
        if (i, j) in memo:
            return memo[(i, j)]
        if i == len(expected):
            ok = j == len(actual)
        elif expected[i] == "...":
            ok = any(match(i + 1, k) for k in range(j, len(actual) + 1))
        else:
            ok = j < len(actual) and line_matches(expected[i], actual[j]) and match(i + 1, j + 1)
        memo[(i, j)] = ok
        return ok

    return match(0, 0)


class Workspace:
    """The working folder of one document: demo data, the binary under both names, private homes, a lazy server."""

    def __init__(self, binary):
        self.root = tempfile.mkdtemp(prefix="tm-doc-")
        self.binary = binary
        self.server = None
        self.port = None
        bindir = os.path.join(self.root, "bin")
        os.makedirs(os.path.join(self.root, "build"))
        os.makedirs(bindir)
        os.symlink(binary, os.path.join(bindir, "tensormorph"))
        os.symlink(binary, os.path.join(self.root, "build", "tensormorph"))
        env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "TENSORMORPH_PLUGIN_DIR")}
        env.update(PATH=bindir + os.pathsep + env.get("PATH", "/usr/bin:/bin"), COLUMNS="120", LC_ALL="C.UTF-8",
                   XDG_CACHE_HOME=os.path.join(self.root, "cache"), XDG_CONFIG_HOME=os.path.join(self.root, "config"))
        self.env = env
        for args in (["demo", "--out", "build/demo"], ["stem", "demo", "--out", "build/stem-demo"]):
            r = subprocess.run([binary, *args], cwd=self.root, env=env, capture_output=True, text=True, timeout=120)
            if r.returncode != 0:
                raise SystemExit(f"setup 'tensormorph {' '.join(args)}' failed ({r.returncode}): {r.stderr}")

    def start_server(self):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = str(s.getsockname()[1])
        log = open(os.path.join(self.root, "serve.log"), "w")
        self.server = subprocess.Popen([self.binary, "serve", "build/demo", "build/stem-demo", "--port", self.port],
                                       cwd=self.root, env=self.env, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.server.poll() is not None:
                raise SystemExit(f"tensormorph serve exited {self.server.returncode}: {open(log.name).read()}")
            try:
                with socket.create_connection(("127.0.0.1", int(self.port)), timeout=1):
                    return
            except OSError:
                time.sleep(0.1)
        raise SystemExit("tensormorph serve did not listen within 60 s")

    def run(self, command):
        if f"127.0.0.1:{DOC_PORT}" in command:
            if self.server is None:
                self.start_server()
            command = command.replace(f"127.0.0.1:{DOC_PORT}", f"127.0.0.1:{self.port}")
        r = subprocess.run(["bash", "-c", command], cwd=self.root, env=self.env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=COMMAND_TIMEOUT_S)
        out = r.stdout
        if self.port:
            out = out.replace(f"127.0.0.1:{self.port}", f"127.0.0.1:{DOC_PORT}")
        return r.returncode, [line.rstrip() for line in out.rstrip("\n").split("\n")] if out.strip() else []

    def close(self):
        if self.server is not None:
            self.server.terminate()
            try:
                self.server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.server.kill()
        shutil.rmtree(self.root, ignore_errors=True)


def check_document(path, binary, label=None):
    """Runs one document's examples; returns (ran, skipped, [failure messages])."""
    label = label or os.path.relpath(path, REPO)
    with open(path, encoding="utf-8") as f:
        blocks = parse_examples(label, f.read())
    ran, skipped, failures = 0, 0, []
    if not any(examples for _, examples in blocks):
        return ran, skipped, failures
    ws = Workspace(binary)
    try:
        for skip, examples in blocks:
            if skip:
                for e in examples:
                    print(f"SKIP {e.where()}: $ {e.command}  ({skip})")
                skipped += len(examples)
                continue
            for e in examples:
                started = time.time()
                status, actual = ws.run(e.command)
                ran += 1
                problems = []
                if status != e.exit_status:
                    problems.append(f"exit status {status}, the document says {e.exit_status}")
                if e.expected and not output_matches(e.expected, actual):
                    problems.append("output differs")
                if problems:
                    failures.append(f"{e.where()}: $ {e.command}\n  " + "; ".join(problems) +
                                    "\n  --- the document shows:\n" + "".join(f"  | {x}\n" for x in e.expected) +
                                    "  --- the command printed:\n" + "".join(f"  | {x}\n" for x in actual))
                print(f"{'FAIL' if problems else 'ok  '} {e.where()}: $ {e.command.splitlines()[0]}"
                      f"  ({time.time() - started:.2f} s)")
    finally:
        ws.close()
    return ran, skipped, failures


def self_test(binary):
    """Planted examples: a wrong number, a wrong exit status and a missing line must fail; `...`, `…` must pass."""
    good = ("```console\n$ tensormorph ls build/demo --filter '*down_proj*'\n...\n"
            "model.layers.0.mlp.down_proj.weight  …\n...\n$ tensormorph ls build/missing\n…\n[exit 6]\n```\n")
    bad = ["```console\n$ tensormorph demo --out build/demo2\nwrote build/demo2 in … s: llama-shaped bf16 demo, "
           "40 tensors, …\n...\n```\n",
           "```console\n$ tensormorph ls build/missing\n…\n```\n",
           "```console\n$ tensormorph info build/demo\nformat: gguf\n```\n"]
    tmp = tempfile.mkdtemp(prefix="tm-doc-self-")
    try:
        def run(text, name):
            path = os.path.join(tmp, name)
            with open(path, "w", encoding="utf-8") as f:
                f.write("# planted\n\n" + text)
            return check_document(path, binary, label=name)

        ran, _, failures = run(good, "good.md")
        assert ran == 2 and not failures, failures
        for i, text in enumerate(bad):
            ran, _, failures = run(text, f"bad{i}.md")
            assert ran == 1 and len(failures) == 1, (text, failures)
            print(f"planted wrong example caught as expected:\n{failures[0]}")
        skip_text = "<!-- doc-test: skip needs a GPU -->\n```console\n$ false\n```\n"
        ran, skipped, failures = run(skip_text, "skip.md")
        assert ran == 0 and skipped == 1 and not failures
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("self-test passed")


def main(argv):
    binary = os.environ.get("TM_BIN")
    if not binary or not os.path.exists(binary):
        print("TM_BIN is not set to the built tensormorph (run through ctest)")
        return 2
    binary = os.path.abspath(binary)
    if argv == ["--self-test"]:
        self_test(binary)
        return 0
    total_ran, total_skipped, all_failures = 0, 0, []
    for doc in argv:
        ran, skipped, failures = check_document(os.path.join(REPO, doc) if not os.path.isabs(doc) else doc, binary)
        total_ran, total_skipped = total_ran + ran, total_skipped + skipped
        all_failures += failures
    print(f"{total_ran} example(s) run, {total_skipped} skipped, {len(all_failures)} failed")
    for f in all_failures:
        print("\n" + f)
    return 1 if all_failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
