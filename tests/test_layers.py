"""The architecture's one-way imports, every import statement of every module read (those
inside functions too), relative ones resolved against the module's package:

    instances <- tens <- formulations <- solvers (algorithms, backends, the pipeline)
                  ^                            ^
                  +--------- results ----------+--- top floor: solvers/cli, solvers/batch.py,
                                                    solvers/reports, and the library API (api.py)

``results`` (the store, tables, report) uses the instances' and tens' types only, and the row
schema and the statuses live in ``tens`` (``tens/schema.py``, ``tens/status.py``), so the
producers' pipeline and the results share them without ``solvers`` importing ``results``.

The top floor is where runs meet the store: the command line (``solvers/cli``), the batch
runner (``solvers/batch.py``) and the paper reports (``solvers/reports``) may import
``results``; nothing else of ``solvers`` may. It stays inside ``solvers/`` rather than a new
top-level package because the design names the top level's packages (instances, tens,
formulations, solvers, results) and the command's entry point
(``collsynth.solvers.cli:run``) is installed under that name; the rule is enforced here by
path instead. The library API (``api.py``) is on the top floor beside the command line, not
above it: it calls the batch runner and the pipeline, never the command line
(``solvers/cli``).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAY_IMPORT = {  # layer: the layers it may import from (besides itself and the package root)
    "instances": set(),
    "tens": {"instances"},
    "formulations": {"instances", "tens"},
    "solvers": {"instances", "tens", "formulations"},
    "results": {"instances", "tens"},
}
TOP_FLOOR = ("solvers/cli", "solvers/batch.py", "solvers/reports")  # may import results too


def _imported(path: Path, text: str) -> list[tuple[int, str]]:
    """``(line, dotted module)`` of every import in ``text``, the module at ``path``, relative
    ones made absolute (``collsynth.``...)."""
    package = ["collsynth", *path.relative_to(ROOT).parts[:-1]]
    out = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(package[:len(package) - node.level + 1]) if node.level else ""
            module = ".".join(x for x in (base, node.module) if x)
            names = [f"{module}.{alias.name}" for alias in node.names] if node.module in (None, "collsynth") else []
            out += [(node.lineno, name) for name in names] or [(node.lineno, module)]
    return out


def _layer(dotted: str) -> str | None:
    parts = dotted.split(".")
    return parts[1] if parts[0] == "collsynth" and len(parts) > 1 and parts[1] in MAY_IMPORT else None


def _top_floor(path: Path) -> bool:
    rel = path.relative_to(ROOT).as_posix()
    return any(rel == top or rel.startswith(top + "/") for top in TOP_FLOOR)


def test_imports_flow_one_way():
    wrong = []
    for layer, allowed in MAY_IMPORT.items():
        for path in sorted((ROOT / layer).rglob("*.py")):
            may = allowed | {"results"} if _top_floor(path) else allowed
            for line, module in _imported(path, path.read_text()):
                target = _layer(module)
                if target not in (None, layer) and target not in may:
                    wrong.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    assert not wrong, "\n".join(wrong)


def test_the_library_api_does_not_import_the_command_line():
    path = ROOT / "api.py"
    wrong = [f"api.py:{line} imports {module}" for line, module in _imported(path, path.read_text())
             if module == "collsynth.solvers.cli" or module.startswith("collsynth.solvers.cli.")]
    assert not wrong, "\n".join(wrong)


def test_the_top_floor_is_where_it_is_said_to_be():
    assert all((ROOT / top).exists() for top in TOP_FLOOR)
    assert _top_floor(ROOT / "solvers" / "cli" / "commands" / "bench.py") and _top_floor(ROOT / "solvers" / "batch.py")
    assert not _top_floor(ROOT / "solvers" / "pipeline.py") and not _top_floor(ROOT / "solvers" / "batches.py")


def test_the_check_sees_relative_and_lazy_imports():
    text = "def f():\n    from ..solvers import pipeline\n    from . import ten\n    import collsynth.results.store\n"
    found = [m for _, m in _imported(ROOT / "tens" / "schedule.py", text)]  # as if written in tens/schedule.py
    assert found == ["collsynth.solvers", "collsynth.tens.ten", "collsynth.results.store"]
    assert [_layer(m) for m in found] == ["solvers", "tens", "results"]
