"""Which files the distribution ships: every folder of the package and every file in it that git
tracks, found here so that a new module, sub-package or data file ships without an edit to
pyproject.toml (which keeps everything else; setuptools' own ``packages.find`` cannot prefix
the folders with ``collsynth``, since the repository's root is the package). What is not
shipped is named once, in :data:`NOT_SHIPPED`; tests/test_wheel.py builds the wheel and checks
it against ``git ls-files``.

Built from an sdist (no git there), the sdist's files are what git tracked when it was made.
"""

from __future__ import annotations

import subprocess
from pathlib import Path, PurePosixPath

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
PACKAGE = "collsynth"
NOT_SHIPPED = (  # folders of the checkout that are no part of the installed package
    "tests", "benchmarks", "docs", "examples", ".ci",
    "results/tables", "results/plots", "results/quick-store",  # the committed snapshot of a run, not read by the code
    "build", "dist",
)
JUNK = ("__pycache__", ".egg-info", ".pyc", ".nbi", ".nbc")  # what a build or a run leaves, never tracked


def checkout_files() -> list[str] | None:
    """The files git tracks here (relative POSIX paths); None outside a git checkout whose top
    is this folder (an unpacked sdist)."""
    try:
        top = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=ROOT, capture_output=True, text=True)
        if top.returncode or Path(top.stdout.strip()).resolve() != ROOT:
            return None
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return [f for f in out.decode().split("\0") if f and (ROOT / f).is_file()]


def shipped(files: list[str]) -> list[PurePosixPath]:
    """The files of the installed package: below a folder (the root's files other than modules
    are the project's: README, pyproject), outside :data:`NOT_SHIPPED`, not build or run output."""
    out = []
    for f in map(PurePosixPath, files):
        top = str(f.parent)
        if top == "." and f.suffix != ".py" or f.name == "setup.py" and top == ".":
            continue
        if any(top == n or top.startswith(n + "/") for n in NOT_SHIPPED) or any(j in str(f) for j in JUNK):
            continue
        out.append(f)
    return out


def layout(files: list[PurePosixPath]) -> tuple[list[str], dict[str, list[str]]]:
    """The packages (every folder whose path is made of Python names, and the folders above it)
    and each one's data files (the files that are not modules, each given to the deepest such
    folder above it)."""
    packages, data = {PACKAGE}, {}
    for f in files:
        parts = f.parent.parts if str(f.parent) != "." else ()
        depth = next((i for i, p in enumerate(parts) if not p.isidentifier()), len(parts))
        for i in range(1, depth + 1):
            packages.add(".".join((PACKAGE, *parts[:i])))
        if f.suffix != ".py" or depth < len(parts):
            owner = ".".join((PACKAGE, *parts[:depth]))
            data.setdefault(owner, []).append(str(PurePosixPath(*f.parts[depth:])))
    return sorted(packages), {k: sorted(v) for k, v in sorted(data.items())}


class build_modules(build_py):
    """setuptools' build_py without this file: the package's root is the project's, so its
    modules would otherwise include ``collsynth.setup``."""

    def find_package_modules(self, package, package_dir):
        return [m for m in super().find_package_modules(package, package_dir)
                if not (package == PACKAGE and m[1] == "setup")]


def sdist_files() -> list[str]:
    """Every file of an unpacked sdist (what git tracked when it was made)."""
    return [p.relative_to(ROOT).as_posix() for p in ROOT.rglob("*") if p.is_file()]


if __name__ == "__main__":
    found = checkout_files()
    packages, package_data = layout(shipped(sdist_files() if found is None else found))
    setup(packages=packages, package_data=package_data, cmdclass={"build_py": build_modules})
