"""Outputs replaced whole or not at all: every file and folder a command writes is built under a
temporary name and swapped in only when the whole of it is written.

- :func:`replaced_file` yields a temporary path beside the target file (with the target's
  suffix, for writers that choose the format by it); when the block ends
  without an exception the temporary file is renamed over the target (:func:`os.replace`, one
  atomic step on POSIX), else it is removed and the target keeps every byte it had.
- :func:`replaced_folder` yields a staging folder (``.<name>.tmp-<pid>-XXXX`` inside the target, so
  that every rename stays on one file system, whatever can be written beside it); when the
  block ends without an exception every file of the staging folder is renamed over its
  counterpart in the target, and every subfolder named in ``whole`` replaces the old one as a
  whole (the old one renamed aside to ``.<name>.old-XXXX``, the new one renamed in, the old one
  removed), so no file of an earlier run lingers in it. Files of the target that the run did
  not write (another command's tables in a shared folder) are kept. On an exception the staging
  folder is removed and the target is left byte for byte as it was (a target folder the block
  created is removed again).

A run that fails while writing (a corrupt schedule file, a plot that cannot be drawn, an
interrupt) therefore never leaves a mix of old and new output.

>>> import tempfile, pathlib
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> with replaced_folder(d / "out") as stage:
...     _ = (stage / "a.txt").write_text("new")
>>> (d / "out" / "a.txt").read_text(), sorted(p.name for p in (d / "out").iterdir())
('new', ['a.txt'])
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterable, Iterator


@contextlib.contextmanager
def replaced_file(target: str | os.PathLike) -> Iterator[Path]:
    """A temporary path beside ``target`` to write; renamed over ``target`` when the block
    succeeds, removed when it raises (``target`` is then untouched).

    >>> import tempfile, pathlib
    >>> f = pathlib.Path(tempfile.mkdtemp()) / "x.txt"
    >>> _ = f.write_text("old")
    >>> try:
    ...     with replaced_file(f) as tmp:
    ...         _ = tmp.write_text("half")
    ...         raise RuntimeError("failed midway")
    ... except RuntimeError:
    ...     pass
    >>> f.read_text(), sorted(p.name for p in f.parent.iterdir())
    ('old', ['x.txt'])
    """
    path = Path(target)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.tmp-", suffix=path.suffix)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        if path.exists():  # the new file takes the old one's permissions, as a rewrite would
            shutil.copymode(path, tmp)
        else:
            os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def replaced_folder(target: str | os.PathLike, whole: Iterable[str] = ()) -> Iterator[Path]:
    """A staging folder to write ``target``'s new content into; swapped in when the block
    succeeds (files renamed over their counterparts, the subfolders named in ``whole`` replaced
    as a whole), removed when it raises (``target`` is then untouched; see the module's text)."""
    folder = Path(target)
    created = not folder.exists()
    folder.mkdir(parents=True, exist_ok=True)
    _remove_abandoned(folder)
    stage = Path(tempfile.mkdtemp(dir=folder, prefix=f".{folder.name}.tmp-{os.getpid()}-"))
    try:
        yield stage
        _swap_in(stage, folder, set(whole))
    except BaseException:
        if created:
            shutil.rmtree(folder, ignore_errors=True)
        raise
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _remove_abandoned(folder: Path) -> None:
    """Remove staging folders in ``folder`` left by a run that was killed (``kill -9``) before
    it could: their names carry the process id, and that process is gone."""
    for stage in folder.glob(f".{folder.name}.tmp-*-*"):
        pid = stage.name[len(f".{folder.name}.tmp-"):].split("-", 1)[0]
        if pid.isdigit() and stage.is_dir() and not _alive(int(pid)):
            shutil.rmtree(stage, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _swap_in(stage: Path, folder: Path, whole: set[str]) -> None:
    """Move the staging folder's content into ``folder`` (see :func:`replaced_folder`): the
    ``whole`` subfolders first, then every other file, deepest folders created as needed."""
    for name in sorted(whole):
        new, old = stage / name, folder / name
        if not new.is_dir():
            continue
        aside = None
        if old.exists() or old.is_symlink():
            aside = Path(tempfile.mkdtemp(dir=folder, prefix=f".{name}.old-"))
            os.rename(old, aside / name)
        os.rename(new, old)
        if aside is not None:
            shutil.rmtree(aside, ignore_errors=True)
    for path in sorted(stage.rglob("*")):
        if path.is_dir():
            continue
        dest = folder / path.relative_to(stage)
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.replace(path, dest)
