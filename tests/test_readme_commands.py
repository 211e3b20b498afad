"""Every command the README and the documentation site show works as written in a fresh clone.

The shell commands are read from the pages: each line of a fenced block that is not Python,
TOML or JSON (a ``\\`` continuation joined) that starts with ``collsynth``, ``pip`` or ``python``,
and each inline code span that starts with ``collsynth``. The cheap ones of the blocks run, in
the order a page gives them, with bash in a copy of the files git tracks (what a clone has;
the files they write stay there); the expensive ones (installs, the test suite, batches,
kernel compiles, whole-store tables and reports, a benchmark commented ``# takes minutes``)
are checked for the files they read: each must be in the clone or written by a command before
it on that page; so are the inline spans' paths into the repository.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = ["README.md", *sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md"))]
STARTS = ("collsynth", "pip", "python")
# installs, the suite, batches, whole-store pages, and a command the page says takes minutes (a benchmark)
EXPENSIVE = re.compile(r"^(pip|python -m pytest)\b|collsynth (bench|warmup|tables|report)\b|#\s*takes minutes")
WRITES = {"--out", "--store", "--plots"}  # options naming what a command writes
FENCE = re.compile(r"^```(\S*)\s*$")


def page_commands(text: str) -> tuple[list[str], list[str]]:
    """The commands of a page: those of its shell blocks (in order) and its inline spans."""
    blocks, inline, lang, lines = [], [], None, text.splitlines()
    pending = ""
    for line in lines:
        fence = FENCE.match(line.strip())
        if fence:
            lang = None if lang is not None else fence.group(1)
            continue
        if lang is None:
            inline += [c for c in re.findall(r"`([^`]+)`", line) if c.startswith("collsynth ")]
        elif lang in ("", "sh", "bash", "shell", "console"):
            line = pending + line.strip()
            if line.endswith("\\"):
                pending = line[:-1] + " "
                continue
            pending = ""
            if line.startswith(STARTS):
                blocks.append(line)
    return blocks, inline


def words(command: str) -> list[str]:
    """The words of ``command`` before its comment."""
    return shlex.split(command, comments=True)


def read_files(command: str) -> list[str]:
    """The paths ``command`` reads (a word with a ``/`` or a file suffix, a ``key=path``'s
    path), not those it writes (after :data:`WRITES`)."""
    out, ws = [], words(command)
    for i, w in enumerate(ws):
        w = w.split("=", 1)[1] if "=" in w and not w.startswith("-") else w
        if i and ws[i - 1] in WRITES or w.startswith(("-", "tcp://", "http")) or "=" in w:
            continue
        if "/" in w or re.search(r"\.(toml|json|xml|csv|graphml|py)$", w):
            out.append(w)
    return out


def written(command: str) -> set[str]:
    ws = words(command)
    return {ws[i + 1] for i, w in enumerate(ws[:-1]) if w in WRITES}


def missing(command: str, clone: Path, made: set[str], inline: bool = False) -> list[str]:
    """The files ``command`` reads that are neither in the clone nor in ``made``; for an
    inline span, only paths into the repository (a bare name there is a file the text has the
    reader write, and a capitalised one a placeholder: ``INSTANCE.toml``)."""
    files = read_files(command)
    folders = [clone] + [(clone / f).parent for f in files if "/" in f]  # a key=file is read beside the input
    return [f for f in files
            if f not in made and not any(any(d.glob(f)) or (d / f).exists() for d in folders)
            and not (inline and ("/" not in f or re.search(r"\b[A-Z]{3,}\b", f)))]


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    """The tracked files of this checkout, copied (a fresh clone's files, with this tree's
    changes), and a ``collsynth`` command on the PATH when none is installed."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs a git checkout")
    out = tmp_path_factory.mktemp("clone")
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for f in filter(None, files.decode().split("\0")):
        if (ROOT / f).is_file():
            (out / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / f, out / f)
    return out


def environment(tmp: Path) -> dict:
    env = dict(os.environ)
    if shutil.which("collsynth") is None:  # a working tree used without `pip install -e .`
        bin_dir = tmp / "bin"
        bin_dir.mkdir(exist_ok=True)
        (bin_dir / "collsynth").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m collsynth.solvers.cli "$@"\n')
        (bin_dir / "collsynth").chmod(0o755)
        env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    return env


def test_the_pages_show_commands():
    """The extraction sees the README's examples (a change of the README's layout that hid
    them would otherwise pass unnoticed)."""
    blocks, inline = page_commands((ROOT / "README.md").read_text())
    assert len(blocks) >= 20 and any(c.startswith("collsynth solve") for c in blocks)
    assert any(c.startswith("collsynth tables") for c in inline)
    assert read_files("collsynth instance a/b.json --from taccl --peer sketch=c/d.json --out e/f.json") == [
        "a/b.json", "c/d.json"]
    assert missing("collsynth instance examples/peers/inputs/topo-ndv2-1MB.json --peer sketch=nowhere.json",
                   ROOT, set()) == ["nowhere.json"]


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES)
def test_every_command_of_a_page_works_in_a_fresh_clone(page, clone, tmp_path):
    blocks, inline = page_commands((ROOT / page).read_text())
    env, made, failures = environment(tmp_path), set(), []
    for command in blocks:
        gone = missing(command, clone, made)
        if gone:
            failures.append(f"{command}: names {gone}, which a clone does not have")
        elif not EXPENSIVE.search(command):
            run = subprocess.run(["bash", "-c", command], cwd=clone, env=env, capture_output=True, text=True,
                                 timeout=900)
            if run.returncode:
                failures.append(f"{command}: exit {run.returncode}: {run.stderr.strip()[-500:]}")
        made |= written(command)
    for command in inline:
        made |= written(command)
    for command in inline:
        gone = missing(command, clone, made, inline=True)
        if gone:
            failures.append(f"{command}: names {gone}, which a clone does not have")
    assert not failures, "\n".join(failures)
