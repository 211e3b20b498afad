"""What a regular (non-editable) install ships: every package folder is named in
pyproject.toml, since setuptools installs only the packages listed there (an editable install
reads the working tree and would hide a missing one)."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOT_SHIPPED = {"tests", "benchmarks", "docs", "examples"}


def test_every_package_folder_is_listed():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    folders = {".".join(("collsynth",) + init.parent.relative_to(ROOT).parts)
               for init in ROOT.rglob("__init__.py")
               if not NOT_SHIPPED & set(init.relative_to(ROOT).parts) and ".git" not in init.parts}
    assert "collsynth.tens.cost_models" in folders  # the walk sees nested packages
    assert folders == listed, (folders - listed, listed - folders)
