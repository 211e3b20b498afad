"""The architecture's one-way imports: instances <- tens <- formulations <- solvers, and
results uses the instances' and tens' types only. Every import statement of every module is
read (those inside functions too), relative ones resolved against the module's package."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAY_IMPORT = {  # layer: the layers it may import from (besides itself and the package root)
    "instances": set(),
    "tens": {"instances"},
    "formulations": {"instances", "tens"},
    "solvers": {"instances", "tens", "formulations", "results"},
    "results": {"instances", "tens"},
}


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


def test_imports_flow_one_way():
    wrong = []
    for layer, allowed in MAY_IMPORT.items():
        for path in sorted((ROOT / layer).rglob("*.py")):
            for line, module in _imported(path, path.read_text()):
                target = _layer(module)
                if target not in (None, layer) and target not in allowed:
                    wrong.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    assert not wrong, "\n".join(wrong)


def test_the_check_sees_relative_and_lazy_imports():
    text = "def f():\n    from ..solvers import pipeline\n    from . import ten\n    import collsynth.results.store\n"
    found = [m for _, m in _imported(ROOT / "tens" / "schedule.py", text)]  # as if written in tens/schedule.py
    assert found == ["collsynth.solvers", "collsynth.tens.ten", "collsynth.results.store"]
    assert [_layer(m) for m in found] == ["solvers", "tens", "results"]
