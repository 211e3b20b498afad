"""Checks of command-line values that several commands share: output files and folders,
comma-separated lists and Dask scheduler addresses. Each returns the value it checked or
raises :class:`~collsynth.InputError` naming the option, before any long work starts.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from ... import InputError

RESULTS = Path("collsynth-results")  # the default results folder, in the folder the user runs from


def out_file(where: str, path: str | os.PathLike) -> Path:
    """``path`` as a file to write: not empty, not a folder, in a folder that exists and can
    be written (nothing is created).

    >>> out_file("--out", "x.json").name
    'x.json'
    """
    text = str(path)
    if not text.strip():
        raise InputError(where, "expected a file name, got ''")
    p = Path(text)
    if p.is_dir():
        raise InputError(where, f"{text} is a folder; expected a file name")
    folder = p.parent
    if not folder.exists():
        raise InputError(where, f"cannot write {text}: no such folder {folder}")
    if not folder.is_dir():
        raise InputError(where, f"cannot write {text}: {folder} is not a folder")
    if not os.access(folder, os.W_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise InputError(where, f"cannot write {text}: permission denied")
    return p


def out_folder(where: str, path: str | os.PathLike) -> Path:
    """``path`` as a folder to write into, created (with its parents) if missing: not empty,
    not a file, writable."""
    text = str(path)
    if not text.strip():
        raise InputError(where, "expected a folder, got ''")
    p = Path(text)
    try:
        p.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise InputError(where, f"{text} is a file; expected a folder") from None
    except OSError as e:
        raise InputError(where, f"cannot create folder {text}: {e.strerror}") from None
    if not os.access(p, os.W_OK | os.X_OK):
        raise InputError(where, f"cannot write into folder {text}: permission denied")
    ignore_results(p)
    return p


def ignore_results(path: str | os.PathLike) -> None:
    """Mark the default results folder :data:`RESULTS`, when ``path`` is in it, as generated
    output: a ``.gitignore`` of ``*`` in it (as a virtual environment does), so that the main
    job leaves a git checkout it runs in clean whichever folder it runs from."""
    p = Path(path)
    root = next((q for q in (p, *p.parents) if q.name == RESULTS.name), None)
    if root is not None and root.is_dir() and not (root / ".gitignore").exists():
        (root / ".gitignore").write_text("# written by collsynth: generated results, not tracked\n*\n")


def items(where: str, text: str | None) -> list[str]:
    """The comma-separated items of ``text`` (spaces dropped; None: none); an empty item
    (``''``, ``a,,b``, ``a,``) is an InputError.

    >>> items("--seeds", "1, 2"), items("--seeds", None)
    (['1', '2'], [])
    """
    if text is None:
        return []
    parts = [s.strip() for s in text.split(",")]
    if not all(parts):
        raise InputError(where, f"expected comma-separated values with none empty, got {text!r}")
    return parts


def finite(where: str, value: float, what: str, low: float = 0.0, strict: bool = False) -> float:
    """``value`` if it is a finite number >= ``low`` (> when ``strict``), else an InputError
    saying ``what`` was expected."""
    if not math.isfinite(value) or value < low or (strict and value == low):
        raise InputError(where, f"expected {what}, got {value}")
    return value
