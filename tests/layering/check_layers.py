"""The layering test: every `#include "..."` in src/, backends/ and include/, and every dependency that the
CMake files give a library there, must be an edge that docs/architecture.md's layer picture allows.

The picture is read from two fenced blocks of docs/architecture.md:
  ```modules        one line per module: NAME PATH...  (a folder, or one header)
  ```edges          one line per module: NAME: ALLOWED...  (a module, or MODULE=HEADER for one header only)
A violation names the file, the line, the include (or the library) and the rule it breaks. The picture itself
must be acyclic. Run with no arguments from anywhere; --root DIR checks another tree (the self-tests use it).
Debian's python3, standard library only."""
import argparse
import os
import re
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SOURCE_ROOTS = ("src", "backends", "include", "python")
INCLUDE_DIRS = ("include", "src", "backends")  # what the build puts on the include path, in order
SOURCE_EXT = (".h", ".hpp", ".cpp", ".cc", ".c", ".in", ".cu", ".inl")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+(["<])([^">]+)[">]')
CALL_RE = re.compile(r"\b(tm_module|target_link_libraries)\s*\(([^)]*)\)", re.S)


class Picture:
    def __init__(self, doc_path):
        with open(doc_path, encoding="utf-8") as fh:
            text = fh.read()
        self.modules = {}   # path (folder or file, relative to the root) -> module
        self.allowed = {}   # module -> {module: None (any header) or set of headers}
        for line in self._block(text, "modules", doc_path):
            name, *paths = line.split()
            for p in paths:
                self.modules[p.rstrip("/")] = name
        for line in self._block(text, "edges", doc_path):
            name, _, rest = line.partition(":")
            name = name.strip()
            rules = self.allowed.setdefault(name, {})
            for item in rest.split():
                target, _, header = item.partition("=")
                if header:
                    if rules.get(target, set()) is not None:
                        rules.setdefault(target, set()).add(header)
                else:
                    rules[target] = None
        names = set(self.modules.values())
        for name, rules in self.allowed.items():
            for target in list(rules) + [name]:
                if target not in names:
                    raise SystemExit(f"{doc_path}: edges block names an unknown module '{target}'")
        missing = names - set(self.allowed)
        if missing:
            raise SystemExit(f"{doc_path}: modules without an edges line: {', '.join(sorted(missing))}")

    @staticmethod
    def _block(text, tag, doc_path):
        m = re.search(r"^```" + tag + r"\n(.*?)^```", text, re.S | re.M)
        if not m:
            raise SystemExit(f"{doc_path}: no ```{tag} block")
        lines = []
        for line in m.group(1).splitlines():
            line = line.split("#", 1)[0].strip()
            if line:
                lines.append(line)
        return lines

    def module_of(self, rel):
        """The module of a path relative to the root: the longest matching entry, or None."""
        best = None
        for p, name in self.modules.items():
            if rel == p or rel.startswith(p + "/"):
                if best is None or len(p) > len(best[0]):
                    best = (p, name)
        return best[1] if best else None

    def cycle(self):
        """A cycle among the allowed edges, as a list of modules, or None."""
        state, stack = {}, []

        def visit(n):
            state[n] = 1
            stack.append(n)
            for m in self.allowed.get(n, {}):
                if m == n:
                    continue
                if state.get(m) == 1:
                    return stack[stack.index(m):] + [m]
                if m not in state:
                    found = visit(m)
                    if found:
                        return found
            stack.pop()
            state[n] = 2
            return None

        for n in sorted(self.allowed):
            if n not in state:
                found = visit(n)
                if found:
                    return found
        return None

    def permits(self, src, dst, header):
        if src == dst:
            return True
        rules = self.allowed.get(src, {})
        if dst not in rules:
            return False
        return rules[dst] is None or header in rules[dst]


def resolve(root, including_file, inc):
    """The file an include names, relative to root, or None (system or generated header)."""
    # Beside the file, then in each folder above it (a backend's private include directory is its own
    # folder: backends/cpu/dequant/x.cpp names "dequant/y.h"), then the build's include directories.
    d = os.path.dirname(including_file)
    while d:
        local = os.path.normpath(os.path.join(d, inc))
        if os.path.isfile(os.path.join(root, local)):
            return local
        d = os.path.dirname(d)
    for d in INCLUDE_DIRS:
        cand = os.path.normpath(os.path.join(d, inc))
        if os.path.isfile(os.path.join(root, cand)):
            return cand
    return None


def check_includes(root, picture):
    problems, edges = [], {}
    for top in SOURCE_ROOTS:
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for f in sorted(files):
                if not f.endswith(SOURCE_EXT):
                    continue
                path = os.path.join(dirpath, f)
                rel = os.path.relpath(path, root)
                src = picture.module_of(rel)
                if src is None:
                    problems.append(f"{rel}: belongs to no module of the picture (docs/architecture.md, ```modules)")
                    continue
                with open(path, encoding="utf-8", errors="replace") as fh:
                    for lineno, line in enumerate(fh, 1):
                        m = INCLUDE_RE.match(line)
                        if not m:
                            continue
                        bracket, inc = m.group(1), m.group(2)
                        target = resolve(root, rel, inc)
                        if bracket == "<":
                            # <...> names a system header unless it resolves in the tree through the build's
                            # include directories (every module exports them): then it is checked like "...".
                            if target is None:
                                continue
                        if target is None:
                            # A generated header (configure_file) names its module's folder: "app/parity_matrix.h".
                            first = inc.split("/")[0]
                            dst = picture.module_of("src/" + inc) if "/" in inc else None
                            if dst is None:
                                problems.append(f"{rel}:{lineno}: #include \"{inc}\": no such file in the tree "
                                                f"(and '{first}' is no module folder)")
                                continue
                            target = "src/" + inc
                        else:
                            dst = picture.module_of(target)
                            if dst is None:
                                problems.append(f"{rel}:{lineno}: #include \"{inc}\" ({target}) belongs to no module")
                                continue
                        if src != dst:
                            edges[(src, dst)] = edges.get((src, dst), 0) + 1
                        header = os.path.relpath(target, "src") if target.startswith("src/") else target
                        if not picture.permits(src, dst, header):
                            problems.append(f"{rel}:{lineno}: #include \"{inc}\": {src} may not include {dst}"
                                            f" (docs/architecture.md allows {src} -> "
                                            f"{', '.join(sorted(picture.allowed.get(src, {}))) or 'nothing'})")
    return problems, edges


def library_module(picture, target):
    """The module a CMake target of ours stands for: tm_NAME -> NAME, tm_backend_X -> backend-X, and a sub-module's
    library tm_A_B -> A-B (tm_stem_images -> stem-images) when no module is named A_B."""
    if not target.startswith("tm_"):
        return None
    name = target[3:]
    if name.startswith("backend_"):
        name = "backend-" + name[len("backend_"):]
    if name not in picture.allowed and name.replace("_", "-") in picture.allowed:
        name = name.replace("_", "-")
    return name if name in picture.allowed else None


def check_links(root, picture):
    """Every tm_* library a CMake file of src/ or backends/ links must stand for a module of the picture, and
    the link must be an allowed edge of the module that owns the linking target (tm_module(NAME …), a tm_*
    target named in target_link_libraries, or else the folder's own module)."""
    problems = []
    for top in ("src", "backends", "python"):
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            if "CMakeLists.txt" not in files:
                continue
            path = os.path.join(dirpath, "CMakeLists.txt")
            rel = os.path.relpath(path, root)
            folder = picture.module_of(os.path.relpath(dirpath, root))
            with open(path, encoding="utf-8") as fh:
                text = re.sub(r"#[^\n]*", "", fh.read())
            for m in CALL_RE.finditer(text):
                words = m.group(2).split()
                if not words:
                    continue
                lineno = text.count("\n", 0, m.start()) + 1
                name = ("tm_" + words[0]) if m.group(1) == "tm_module" else words[0]
                owner = library_module(picture, name)
                if owner is None and name.startswith("tm_") and m.group(1) == "tm_module":
                    problems.append(f"{rel}:{lineno}: tm_module({words[0]}): no module of that name in docs/architecture.md")
                    continue
                owner = owner or folder
                if owner is None:
                    continue
                for w in words[1:]:
                    if not w.startswith("tm_"):
                        continue
                    dst = library_module(picture, w)
                    if dst is None:
                        problems.append(f"{rel}:{lineno}: {name} links {w}: a library that stands for no module of the picture")
                    # A header-only edge (MODULE=HEADER) allows the link that the header's definitions need.
                    elif dst != owner and dst not in picture.allowed.get(owner, {}):
                        problems.append(f"{rel}:{lineno}: {name} links {w}: {owner} may not depend on {dst}")
    return problems


# Faces parse, call and print: the storage form of a checkpoint tensor (CheckpointTensor::storage, the variant of
# ggml blocks, packed parts, a view's strides, chunks, encoded values) is the checkpoint model's and app/'s business
# (docs/architecture.md). In a face's source, a member access to the variant or to one of its accessors (called or
# not: `t.storage`, `t.packed()`, `t->chunks()`, ...), or a name of the variant or of one of its alternatives
# (`StorageForm`, `PackedStorage`, ... as std::visit or std::get_if would need), is a finding (its file and line
# named). The model's questions stay open to faces: readable(), dequantized(), summary_dtype(), strided(), chunked().
FACE_DIRS = ("src/cli", "src/server", "python")
STORAGE_FIELD = re.compile(r"(?:\.|->)\s*(storage|ggml_type|packed|strides|chunks|encoded)\b"
                           r"|\b(StorageForm|(?:Dense|Strided|GgmlBlock|Packed|Chunked|Encoded)Storage)\b")


def check_storage_fields(root):
    problems = []
    for d in FACE_DIRS:
        for dirpath, _, files in os.walk(os.path.join(root, d)):
            for f in sorted(files):
                if not f.endswith((".cpp", ".h")):
                    continue
                path = os.path.join(dirpath, f)
                with open(path, errors="replace") as fh:
                    for n, line in enumerate(fh, 1):
                        code = line.split("//", 1)[0]
                        m = STORAGE_FIELD.search(code)
                        if m:
                            problems.append(f"{os.path.relpath(path, root)}:{n}: a face reads the storage form "
                                            f"'{m.group(1) or m.group(2)}' (ask the checkpoint model or app/checkpoint_json.h)")
    return problems


# Inside a domain folder no include arrow runs back up (issue 43): no cycle among its units (a unit is a
# file's path without its extension, so x.h and x.cpp are one), the way checkpoint.h once was both the data model
# the openers included and the dispatcher that included them. Folders held to it; the rest of src is not yet
# (compute's op table and known answers, image's movie writers and their factory, the server's state and stats
# JSON still include each other).
ACYCLIC_FOLDERS = ("src/checkpoint", "src/stem", "src/render")
QUOTED_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def unit_cycles(root, folder):
    """The cycles (each a sorted list of units, relative to src/) among the units under `folder`."""
    src = os.path.join(root, "src")
    units = {}
    for dirpath, _, files in os.walk(os.path.join(root, folder)):
        for f in files:
            if f.endswith((".h", ".cpp", ".inl")):
                rel = os.path.relpath(os.path.join(dirpath, f), src)
                units.setdefault(os.path.splitext(rel)[0], []).append(rel)
    edges = {u: set() for u in units}
    for u, files in units.items():
        for rel in files:
            with open(os.path.join(src, rel), errors="replace") as fh:
                for target in QUOTED_INCLUDE.findall(fh.read()):
                    t = os.path.splitext(target)[0]
                    if t in units and t != u:
                        edges[u].add(t)
    # Tarjan's strongly connected components, iteratively.
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]
    for start in sorted(units):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter[0]; counter[0] += 1; stack.append(start); on.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]; counter[0] += 1; stack.append(w); on.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop(); on.discard(w); comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def check_unit_cycles(root):
    problems = []
    for folder in ACYCLIC_FOLDERS:
        for comp in unit_cycles(root, folder):
            problems.append(f"{folder}: these units include each other (an arrow runs back up): " + ", ".join(comp) +
                            " (move the types they share into a header of their own)")
    return problems


def run(root, verbose=True):
    picture = Picture(os.path.join(root, "docs", "architecture.md"))
    problems = []
    cyc = picture.cycle()
    if cyc:
        problems.append("docs/architecture.md: the allowed edges form a cycle: " + " -> ".join(cyc))
    inc_problems, edges = check_includes(root, picture)
    problems += inc_problems + check_links(root, picture) + check_storage_fields(root) + check_unit_cycles(root)
    if verbose:
        print(f"layering: {len(edges)} module edges, {sum(edges.values())} cross-module includes")
        for (a, b), n in sorted(edges.items()):
            print(f"  {a} -> {b}: {n}")
    return problems


class SelfTest(unittest.TestCase):
    """The checker must catch what it is for: a planted forbidden include, a forbidden link, a cycle."""

    def tree(self, files):
        d = tempfile.TemporaryDirectory()
        self.addCleanup(d.cleanup)
        for rel, text in files.items():
            p = os.path.join(d.name, rel)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "w") as fh:
                fh.write(text)
        return d.name

    DOC = ("```modules\nabi include/tensormorph\ncore src/core\ncli src/cli\nbackend-cpu backends/cpu\n```\n"
           "```edges\nabi:\ncore: abi\ncli: core abi\nbackend-cpu: abi\n```\n")

    def test_real_tree_has_no_forbidden_edge(self):
        problems = run(REPO, verbose=True)
        self.assertEqual(problems, [], "\n" + "\n".join(problems))

    def test_planted_forbidden_include_is_named_with_file_and_line(self):
        root = self.tree({"docs/architecture.md": self.DOC, "src/cli/app.h": "#pragma once\n",
                          "src/core/x.h": '#pragma once\n\n#include "cli/app.h"\n'})
        problems = run(root, verbose=False)
        self.assertEqual(len(problems), 1, problems)
        self.assertIn("src/core/x.h:3", problems[0])
        self.assertIn("core may not include cli", problems[0])

    def test_backend_reaching_past_the_abi_is_caught(self):
        root = self.tree({"docs/architecture.md": self.DOC, "src/core/error.h": "#pragma once\n",
                          "backends/cpu/k.cpp": '#include "core/error.h"\n'})
        problems = run(root, verbose=False)
        self.assertTrue(any("backends/cpu/k.cpp:1" in p and "backend-cpu may not include core" in p for p in problems),
                        problems)

    def test_forbidden_link_is_caught(self):
        root = self.tree({"docs/architecture.md": self.DOC,
                          "src/core/CMakeLists.txt": "tm_module(core\n  SOURCES a.cpp\n  PRIVATE tm_cli)\n"})
        problems = run(root, verbose=False)
        self.assertTrue(any("core may not depend on cli" in p for p in problems), problems)

    def test_cycle_in_the_picture_is_refused(self):
        doc = self.DOC.replace("core: abi", "core: abi cli")
        root = self.tree({"docs/architecture.md": doc})
        problems = run(root, verbose=False)
        self.assertTrue(any("cycle" in p for p in problems), problems)

    def test_header_only_edge(self):
        doc = self.DOC.replace("cli: core abi", "cli: abi core=core/launch.h")
        root = self.tree({"docs/architecture.md": doc, "src/core/launch.h": "", "src/core/other.h": "",
                          "src/cli/a.cpp": '#include "core/launch.h"\n#include "core/other.h"\n'})
        problems = run(root, verbose=False)
        self.assertEqual(len(problems), 1, problems)
        self.assertIn("src/cli/a.cpp:2", problems[0])

    def test_angle_bracket_include_of_the_tree_is_checked(self):
        root = self.tree({"docs/architecture.md": self.DOC, "src/cli/app.h": "#pragma once\n",
                          "src/core/x.cpp": '#include <vector>\n#include <cli/app.h>\n'})
        problems = run(root, verbose=False)
        self.assertEqual(len(problems), 1, problems)
        self.assertIn("src/core/x.cpp:2", problems[0])

    def test_link_to_a_library_outside_the_picture_is_caught(self):
        root = self.tree({"docs/architecture.md": self.DOC,
                          "src/core/CMakeLists.txt": "tm_module(core SOURCES a.cpp)\n"
                                                     "add_library(tm_core_extra STATIC b.cpp)\n"
                                                     "target_link_libraries(tm_core_extra PRIVATE tm_cli tm_nowhere)\n"})
        problems = run(root, verbose=False)
        self.assertTrue(any("core may not depend on cli" in p for p in problems), problems)
        self.assertTrue(any("tm_nowhere" in p and "no module" in p for p in problems), problems)

    def test_sub_module_library_is_checked_as_its_module(self):
        doc = self.DOC.replace("cli src/cli\n", "cli src/cli\ncore-sub src/core/sub\n").replace("core: abi\n", "core: abi\ncore-sub: core abi\n")
        root = self.tree({"docs/architecture.md": doc,
                          "src/core/sub/CMakeLists.txt": "tm_module(core_sub SOURCES a.cpp PUBLIC tm_core PRIVATE tm_cli)\n"})
        problems = run(root, verbose=False)
        self.assertEqual(len(problems), 1, problems)
        self.assertIn("core-sub may not depend on cli", problems[0])

    def test_face_reading_a_storage_field_is_caught(self):
        root = self.tree({"docs/architecture.md": self.DOC,
                          "src/cli/x.cpp": "int f(const T& t) {\n  // t.packed() and t.storage in a comment are fine\n"
                                           "  return t.packed() ? 1 : t.strided() || t.chunked() || t.readable();\n"
                                           "  if (t.storage.index()) return 2;\n"
                                           "  for (auto c : t->chunks()) g(c.offsets);\n"
                                           "  if (std::holds_alternative<GgmlBlockStorage>(s)) return 3;\n"
                                           "  return t.ggml_type ? 4 : t.encoded() ? 5 : t.strides().size();\n}\n",
                          "src/cli/y.cpp": "int g(const T& t) { return t.strided() ? t.summary_dtype() : t.dequantized(); }\n"})
        problems = run(root, verbose=False)
        self.assertEqual(len(problems), 5, problems)
        for line, name in ((3, "packed"), (4, "storage"), (5, "chunks"), (6, "GgmlBlockStorage"), (7, "ggml_type")):
            self.assertTrue(any(f"src/cli/x.cpp:{line}:" in p and f"'{name}'" in p for p in problems), (line, name, problems))

    def test_units_including_each_other_inside_a_domain_folder_are_caught(self):
        root = self.tree({"docs/architecture.md": self.DOC,
                          "src/stem/model.h": "#pragma once\n",
                          "src/stem/model.cpp": '#include "stem/model.h"\n#include "stem/formats/opener.h"\n',
                          "src/stem/formats/opener.h": '#pragma once\n#include "stem/model.h"\n',
                          "src/stem/formats/opener.cpp": '#include "stem/formats/opener.h"\n',
                          "src/checkpoint/a.h": '#pragma once\n#include "checkpoint/b.h"\n',
                          "src/checkpoint/b.h": "#pragma once\n"})
        problems = [p for p in run(root, verbose=False) if "include each other" in p]
        self.assertEqual(len(problems), 1, problems)
        self.assertIn("stem/formats/opener, stem/model", problems[0])

    def test_unresolvable_include_is_reported(self):
        root = self.tree({"docs/architecture.md": self.DOC, "src/core/a.cpp": '#include "nowhere/x.h"\n'})
        problems = run(root, verbose=False)
        self.assertTrue(any("src/core/a.cpp:1" in p for p in problems), problems)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", help="check this tree instead of running the self-tests and the repository")
    args, rest = ap.parse_known_args()
    if args.root:
        found = run(args.root)
        for p in found:
            print("FORBIDDEN " + p)
        sys.exit(1 if found else 0)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
