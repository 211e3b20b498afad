"""Every docstring example of the package runs as a doctest, one test per docstring.

The repository root is the package (``package-dir = {"collsynth" = "."}``), so the modules are
found by walking the installed ``collsynth`` package and imported by their real names: a
doctest sees the same ``collsynth.InputError`` as the code it documents. ``__main__`` modules
are skipped (importing them runs the program); ``benchmarks/`` and ``tests/`` are not packages
and are never reached.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import collsynth

FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def package_modules() -> list[str]:
    """Every importable module of the package except ``__main__`` ones, by dotted name."""
    found = [info.name for info in pkgutil.walk_packages(collsynth.__path__, "collsynth.")]
    return ["collsynth"] + sorted(name for name in found if name.rsplit(".", 1)[-1] != "__main__")


def docstring_examples() -> list[tuple[str, str]]:
    """(module, docstring name) of every docstring with at least one example."""
    out = []
    for name in package_modules():
        module = importlib.import_module(name)
        for test in doctest.DocTestFinder().find(module, name):
            if test.examples:
                out.append((name, test.name))
    return out


EXAMPLES = docstring_examples()


def test_doctests_are_found():
    """The walk reaches every layer of the package (a broken walk would pass vacuously)."""
    layers = {name.split(".")[1] for name, _ in EXAMPLES if name != "collsynth"}
    assert {"instances", "tens", "formulations", "solvers", "results"} <= layers
    assert len(EXAMPLES) >= 30


@pytest.mark.parametrize("module,docstring", EXAMPLES, ids=[d for _, d in EXAMPLES])
def test_doctest(module, docstring, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # examples that write files write them here
    mod = importlib.import_module(module)
    test = next(t for t in doctest.DocTestFinder().find(mod, module) if t.name == docstring)
    report = []
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    runner.run(test, out=report.append)
    assert runner.failures == 0, "".join(report)
