"""No import circle inside a folder: among the entries of one folder (its modules, its
``__init__.py`` and its sub-packages, each taken whole), imports go one way.

Every import statement of every module is read with :mod:`ast` (those inside functions too,
since a circle closed by a deferred import is still a circle a reader has to untangle),
relative ones resolved against the module's package. An import of a module below a
sub-package counts as an import of that sub-package, so ``solvers/producers.py`` importing
``solvers/peers/__init__.py`` while a module of ``solvers/peers`` imports
``solvers/producers.py`` is a circle of the folder ``solvers``. The layers between folders are
:mod:`tests.test_layers`' business.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "collsynth"
SKIPPED = {"tests", "benchmarks", "docs", "examples", "build", "dist"}


def module_name(root: Path, path: Path, package: str) -> str:
    """The dotted name of the module file ``path`` of the package rooted at ``root``."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([package, *parts])


def modules(root: Path, package: str) -> dict[str, Path]:
    """Every module of the package at ``root`` (folders in :data:`SKIPPED` left out)."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).parts
        if SKIPPED & set(rel[:-1]) or any(p.startswith(".") for p in rel):
            continue
        found[module_name(root, path, package)] = path
    return found


def imported(name: str, path: Path, known: set[str]) -> set[str]:
    """The modules of ``known`` that the module ``name`` (file ``path``) imports."""
    is_package = path.name == "__init__.py"
    here = name if is_package else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = here
            for _ in range(max(node.level - 1, 0)):
                base = base.rpartition(".")[0]
            target = ".".join(p for p in (base if node.level else "", node.module or "") if p)
            submodules = {f"{target}.{a.name}" for a in node.names} & known  # `from package import module`
            out |= submodules | ({target} if len(submodules) < len(node.names) else set())
    return {t for t in out if t in known}


def folder_circles(root: Path, package: str) -> list[list[str]]:
    """The import circles among the entries of each folder of the package at ``root``: lists
    of entry names (``folder/entry``), each circle once."""
    mods = modules(root, package)
    graphs: dict[str, nx.DiGraph] = {}
    for name, path in mods.items():
        for target in imported(name, path, set(mods)):
            a, b = name.split("."), target.split(".")
            common = 0
            while common < min(len(a), len(b)) and a[common] == b[common]:
                common += 1
            folder = ".".join(a[:common])
            src = a[common] if common < len(a) else "__init__"
            dst = b[common] if common < len(b) else "__init__"
            if src == dst:
                continue
            # the folder's own __init__ holds both: a module below it is never the folder itself
            graphs.setdefault(folder, nx.DiGraph()).add_edge(src, dst)
    return sorted(sorted(f"{folder}/{e}" for e in cycle)
                  for folder, g in graphs.items() for cycle in nx.simple_cycles(g))


def test_no_import_circle_inside_a_folder():
    circles = folder_circles(ROOT, PACKAGE)
    assert not circles, "\n".join(" <-> ".join(c) for c in circles)


def test_a_circle_through_a_sub_package_or_a_deferred_import_is_found(tmp_path):
    """The checker on a made-up package: each circle it must see, and a one-way import it
    must not flag."""
    files = {
        "__init__.py": "",
        "a.py": "def f():\n    from .b import g\n",  # deferred, inside a function
        "b.py": "from . import a\n",
        "c.py": "from .sub.x import y\n",
        "sub/__init__.py": "",
        "sub/x.py": "from ..c import z\n",  # sub-package <-> c
        "d.py": "import pkg.a\n",  # one way only
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    assert folder_circles(tmp_path, "pkg") == [["pkg/a", "pkg/b"], ["pkg/c", "pkg/sub"]]
