"""What a regular (non-editable) install ships: ``python -m build`` makes an sdist and a wheel
without a warning, the wheel holds every file git tracks that the package reads at run time
(modules, the corpus and its graphs, the report's site templates, any data file a module
reads) and nothing git does not track, and an install of the wheel alone, run from another
folder, finds its corpus and templates in the package. An editable install reads the working
tree and would hide a file missing from the wheel, hence a real build here.

What is not needed at run time is listed here, independently of setup.py's own list: the
project's files at the root, and the folders of tests, benchmarks, documentation, examples,
CI and the committed snapshot of a run (``results/tables``, ``results/plots``,
``results/quick-store``), which the code never reads.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOT_AT_RUN_TIME = ("tests/", "benchmarks/", "docs/", "examples/", ".ci/",
                   "results/tables/", "results/plots/", "results/quick-store/")

pytestmark = pytest.mark.slow


def tracked() -> list[str]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    return [f for f in out.decode().split("\0") if f and (ROOT / f).is_file()]


def needed_at_run_time(files: list[str]) -> set[str]:
    """The tracked files an installed package needs: modules anywhere in the package, and every
    other file below one of its folders, outside :data:`NOT_AT_RUN_TIME`."""
    return {f for f in files
            if not f.startswith(NOT_AT_RUN_TIME) and ("/" in f or (f.endswith(".py") and f != "setup.py"))}


def checkout_copy(into: Path) -> Path:
    """A git checkout at ``into`` holding the working tree's tracked files as they are now.

    The build runs there, not in the repository: building an sdist makes a release folder
    (``collsynth-<version>/``) and ``build/`` beside the sources for a while, and tests that
    walk the package's files at the same time (other workers) would read them."""
    for f in tracked():
        (into / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / f, into / f)
    subprocess.run(["git", "init", "-q"], cwd=into, check=True)
    subprocess.run(["git", "add", "-A"], cwd=into, check=True)
    return into


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs a git checkout: the wheel is checked against git ls-files")
    out = tmp_path_factory.mktemp("dist")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")}
    source = checkout_copy(tmp_path_factory.mktemp("source"))
    proc = subprocess.run([sys.executable, "-m", "build", "--outdir", str(out), str(source)],
                          capture_output=True, text=True, env=env, timeout=1200)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    warnings = [line for line in (proc.stdout + proc.stderr).splitlines() if "warn" in line.lower()]
    assert not warnings, warnings
    return out


def test_the_wheel_holds_every_tracked_file_the_package_needs_and_nothing_else(dist):
    (wheel,) = dist.glob("collsynth-*.whl")
    with zipfile.ZipFile(wheel) as z:
        shipped = {n.removeprefix("collsynth/") for n in z.namelist() if n.startswith("collsynth/")}
    files = tracked()
    needed = needed_at_run_time(files)
    assert {"instances/corpus/ring8-allgather.toml", "results/site/index.html", "api.py"} <= needed
    assert any(f.startswith("instances/corpus/graphs/") for f in needed)  # a data folder's folder too
    assert not needed - shipped, f"tracked but not in the wheel: {sorted(needed - shipped)}"
    assert not shipped - set(files), f"in the wheel but not tracked by git: {sorted(shipped - set(files))}"


def test_the_sdist_holds_what_the_wheel_is_built_from(dist):
    (sdist,) = dist.glob("collsynth-*.tar.gz")
    with tarfile.open(sdist) as t:
        names = {n.split("/", 1)[1] for n in t.getnames() if "/" in n}
    needed = needed_at_run_time(tracked())
    assert not needed - names, sorted(needed - names)


def test_an_installed_wheel_finds_its_corpus_and_templates(dist, tmp_path):
    """The wheel alone (dependencies from this environment), run from an empty folder: the
    corpus' suites, a bench of one corpus instance and the report of its store."""
    (wheel,) = dist.glob("collsynth-*.whl")
    target = tmp_path / "site-packages"
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target),
                          str(wheel)], capture_output=True, text=True, timeout=600)
    assert pip.returncode == 0, pip.stderr
    env = {**os.environ, "PYTHONPATH": str(target)}
    work = tmp_path / "elsewhere"
    work.mkdir()
    cli = [sys.executable, "-m", "collsynth.solvers.cli"]
    where = subprocess.run([sys.executable, "-c", "import collsynth; print(collsynth.__file__)"], cwd=work,
                           env=env, capture_output=True, text=True)
    assert where.stdout.strip() == str(target / "collsynth" / "__init__.py"), where
    corpus = subprocess.run(cli + ["corpus", "--suite", "quick", "--json"], cwd=work, env=env, capture_output=True,
                            text=True, timeout=600)
    assert corpus.returncode == 0 and "ring8-allgather" in corpus.stdout, corpus.stderr
    ring8 = target / "collsynth" / "instances" / "corpus" / "ring8-allgather.toml"
    bench = subprocess.run(cli + ["bench", "--instances", str(ring8), "--producers", "ring", "--no-progress"],
                           cwd=work, env=env, capture_output=True, text=True, timeout=600)
    assert bench.returncode == 0, bench.stderr
    report = subprocess.run(cli + ["report"], cwd=work, env=env, capture_output=True, text=True, timeout=900)
    assert report.returncode == 0, report.stderr
    assert (work / "collsynth-results" / "report" / "index.html").is_file()
