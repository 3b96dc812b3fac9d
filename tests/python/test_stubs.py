"""The type stubs (tensormorph/__init__.pyi) describe what the module has: every exported name, every
Checkpoint and Mapping member; and every public function and method carries a docstring."""
import ast
import os

import tensormorph as tm


def stub_tree():
    with open(os.path.join(os.path.dirname(tm.__file__), "__init__.pyi"), encoding="utf-8") as f:
        return ast.parse(f.read())


def test_stubs_name_every_export_and_member():
    tree = stub_tree()
    top = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    top |= {n.target.id for n in tree.body if isinstance(n, ast.AnnAssign)}
    assert set(tm.__all__) <= top, set(tm.__all__) - top
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef) and n.name in ("Checkpoint", "Mapping")):
        members = {n.name for n in cls.body if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")}
        actual = {m for m in dir(getattr(tm, cls.name)) if not m.startswith("_")}
        assert members == actual, (cls.name, members ^ actual)


def test_docstrings():
    for f in (tm.open, tm.backends, tm.Checkpoint.stats, tm.Checkpoint.index, tm.Checkpoint.read):
        assert f.__doc__ and len(f.__doc__) > 40, f
    assert tm.__doc__ and "docs/python.md" in tm.__doc__
