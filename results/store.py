"""The results store: one folder with an SQLite database and the verified schedule files.

Layout of a store folder (default ``collsynth-results/store``)::

    runs.sqlite          one row per run (table ``runs``)
    schedules/<id>.json  the verified schedule of a run (``docs/schedules.md``)

Every run is committed on its own transaction the moment it finishes (SQLite in WAL mode;
the schedule file is written to a temporary name and renamed first), so a batch killed at any
point loses nothing that finished and leaves no half-written row. A run is identified by its
key ``(instance, producer, solver, driver, seed, params)``; storing a key again replaces
the old row (``--rerun``), and :func:`done_keys` lets a re-run skip what is done.

Only verified schedules are stored as schedule files; failed runs are stored as rows with
their status and message (and no schedule).

Several batches may write one store at once: a batch claims a run (table ``claims``:
:func:`claim`) before starting it, and a run another live batch has claimed is left to that
batch; storing the run drops its claim, and a batch that stops releases the claims of what
it did not finish (:func:`release`). A claim whose batch died (its process is gone, or the
claim's time is up) is taken over.

A folder that cannot be written is refused with an :class:`~collsynth.InputError` naming it;
reading (:func:`load`, :func:`count`, :func:`done_keys`) needs no write access.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from .. import InputError
from ..tens.schedule import Schedule, write_json
from . import schema

KEY_COLUMNS = schema.KEY_COLUMNS
RESULT_COLUMNS = schema.RESULT_COLUMNS
PROVENANCE_COLUMNS = schema.STORED_COLUMNS
COLUMNS = schema.COLUMNS
# what every store since the first schema has; the other columns an older store may lack
REQUIRED = {"runs": ("id", *KEY_COLUMNS, "status", "verified"), "claims": ("id", "owner", "host", "pid", "expires")}
NUMERIC_COLUMNS = tuple(c for c in COLUMNS if schema.sql_type(c) != "TEXT")
DEFAULT_STORE = Path("collsynth-results") / "store"  # where the user runs, not in the package
LOCK_WAIT_S = 60.0  # how long a writer waits for another one to release the store


def run_key(row: dict[str, Any]) -> tuple:
    """The identity of a run: ``(instance, producer, solver, driver, seed, params)``."""
    return tuple("" if row.get(k) is None else row.get(k) for k in KEY_COLUMNS[:4]) + (
        int(row.get("seed") or 0),
        row.get("params") or "{}",
    )


def _run_id(key: tuple) -> str:
    return hashlib.sha1(json.dumps(key, default=str).encode()).hexdigest()[:16]


def connect(store: str | Path = DEFAULT_STORE) -> sqlite3.Connection:
    """Open (creating if needed) the store folder's database for writing: WAL mode, table
    ``runs`` with every column of :mod:`collsynth.results.schema`, and table ``claims``.

    A store written by an older schema gains the columns it lacks (empty in its old rows), so
    adding a result field never breaks an existing store. A folder that cannot be written is
    an InputError naming it and saying why; so is a database that is not a store
    (:func:`check_tables`), which is left exactly as it was.
    """
    folder = Path(store)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        con = sqlite3.connect(folder / "runs.sqlite", timeout=LOCK_WAIT_S, isolation_level=None)
    except (OSError, sqlite3.Error) as e:
        raise InputError(str(folder), f"cannot write a results store here: {_reason(folder, e)}") from None
    try:
        _retry_while_locked(lambda: _set_up(con, folder / "runs.sqlite"), LOCK_WAIT_S)
        (folder / "schedules").mkdir(exist_ok=True)
    except BaseException as e:
        con.close()
        if isinstance(e, sqlite3.DatabaseError) and not isinstance(e, sqlite3.OperationalError):
            raise InputError(str(folder / "runs.sqlite"), f"not a results database: {e}") from None
        if isinstance(e, (OSError, sqlite3.Error)):
            raise InputError(str(folder), f"cannot write a results store here: {_reason(folder, e)}") from None
        raise
    return con


def _set_up(con: sqlite3.Connection, path: Path) -> None:
    """WAL mode and the store's tables on a fresh connection (see :func:`connect`), once the
    database at ``path`` is known to be a store or empty: nothing is altered otherwise."""
    check_tables(con, path)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=FULL")
    cols = ", ".join(f'"{c}" {schema.sql_type(c)}' for c in COLUMNS)
    con.execute(f"CREATE TABLE IF NOT EXISTS runs (id TEXT PRIMARY KEY, {cols})")
    con.execute("CREATE TABLE IF NOT EXISTS claims (id TEXT PRIMARY KEY, owner TEXT, host TEXT, pid INTEGER, "
                "expires REAL)")
    migrate(con)


def _retry_while_locked(step, wait_s: float) -> None:
    """Run ``step`` again while SQLite answers "database is locked", for up to ``wait_s``
    seconds. Two processes creating one store at once need this: switching a new database to
    WAL mode can fail at once with SQLITE_BUSY, without waiting for the connection's busy
    timeout (https://sqlite.org/pragma.html#pragma_journal_mode and
    https://sqlite.org/c3ref/busy_handler.html: the busy handler is not called where waiting
    could deadlock)."""
    give_up = time.monotonic() + wait_s
    pause = 0.01
    while True:
        try:
            return step()
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() > give_up:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.5)


def _columns(con: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in con.execute(f'PRAGMA table_info("{table}")')}


def check_tables(con: sqlite3.Connection, where: str | Path) -> None:
    """Refuse (InputError naming ``where``, the database file) a database that is not a
    results store: one whose ``runs`` or ``claims`` table lacks the columns every store has
    (:data:`REQUIRED`), or that holds other tables but no ``runs``. An empty database passes."""
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                        "AND name NOT LIKE 'sqlite%'")}
    if tables and "runs" not in tables:
        raise InputError(str(where), f"not a collsynth store: it has table(s) {', '.join(sorted(tables))} "
                                     "but no table runs")
    for table in sorted(tables & set(REQUIRED)):
        have = _columns(con, table)
        lacks = [c for c in REQUIRED[table] if c not in have]
        if lacks:
            raise InputError(str(where), f"not a collsynth store: table {table} lacks column{'s' * (len(lacks) > 1)} "
                                         f"{', '.join(lacks)} (expected the columns of collsynth.results.schema)")


def check_values(con: sqlite3.Connection, where: str | Path) -> None:
    """Refuse (InputError naming ``where`` and the column) a ``runs`` table with text where
    :mod:`collsynth.results.schema` has a number (an INTEGER or REAL column)."""
    cols = [c for c in NUMERIC_COLUMNS if c in _columns(con, "runs")]
    if not cols:
        return
    text = " OR ".join(f"typeof(\"{c}\") IN ('text', 'blob')" for c in cols)
    names = ", ".join(f'"{c}"' for c in cols)
    row = con.execute(f"SELECT id, {names} FROM runs WHERE {text} LIMIT 1").fetchone()
    if row is None:
        return
    col, value = next((c, v) for c, v in zip(cols, row[1:]) if isinstance(v, (str, bytes)))
    kind = "an integer" if schema.sql_type(col) == "INTEGER" else "a number"
    raise InputError(str(where), f"not a collsynth store: column {col} of run {row[0]} holds {_short(value)}; "
                                 f"expected {kind} or nothing")


def _short(value: str | bytes) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def missing_columns(con: sqlite3.Connection) -> list[str]:
    """Schema columns the database's ``runs`` table lacks (a store of an older schema)."""
    have = {row[1] for row in con.execute("PRAGMA table_info(runs)")}
    return [c for c in COLUMNS if c not in have]


def migrate(con: sqlite3.Connection) -> list[str]:
    """Add the schema columns an older ``runs`` table lacks; returns their names.

    The check is repeated under the write lock, so two writers opening one old store add
    each column once.
    """
    if not missing_columns(con):
        return []
    con.execute("BEGIN IMMEDIATE")
    try:
        added = missing_columns(con)
        for c in added:
            con.execute(f'ALTER TABLE runs ADD COLUMN "{c}" {schema.sql_type(c)}')
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return added


def _reason(folder: Path, e: Exception) -> str:
    """Why a store folder cannot be used, in words (not an exception name)."""
    for p in (folder, *folder.parents):
        if p.exists():
            if not p.is_dir():
                return f"{p} is a file, not a folder"
            break
    if isinstance(e, OSError) and e.strerror:
        return e.strerror.lower()
    for target in (folder / "runs.sqlite", folder):
        try:
            if target.is_dir():
                tempfile.TemporaryFile(dir=target).close()
            elif target.exists():
                open(target, "r+b").close()
        except OSError as probe:
            return f"{target} cannot be written ({(probe.strerror or str(probe)).lower()})"
    return str(e)


def _read_only(store: str | Path) -> sqlite3.Connection | None:
    """An existing store's database opened for reading: nothing is created or altered,
    whatever its schema (:func:`load` fills the columns an older store lacks), and a store on
    a folder or disk that cannot be written is read as it is; None when there is no database
    or its ``runs`` table is not created yet. A database that is not a store is refused
    (:func:`check_tables`, :func:`check_values`)."""
    path = Path(store) / "runs.sqlite"
    if not path.is_file():
        if path.exists() or (Path(store).exists() and not Path(store).is_dir()):
            raise InputError(str(store), f"not a results store: {_reason(Path(store), OSError())}")
        return None
    try:
        con = sqlite3.connect(path, timeout=60)  # read-write handle: closing it tidies WAL files away
        con.execute("SELECT 1 FROM sqlite_master").fetchone()
    except sqlite3.OperationalError:  # a WAL database in a folder we cannot write: read it as is
        try:
            con = sqlite3.connect(f"{path.resolve().as_uri()}?immutable=1", uri=True)
            con.execute("SELECT 1 FROM sqlite_master").fetchone()
        except sqlite3.Error as e:
            raise InputError(str(path), f"cannot read the results store: {e}") from None
    except sqlite3.DatabaseError as e:
        raise InputError(str(path), f"not a results database: {e}") from None
    try:
        check_tables(con, path)
        if con.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'runs'").fetchone() is None:
            con.close()
            return None
        check_values(con, path)
    except BaseException:
        con.close()
        raise
    return con


def put(store: str | Path, row: dict[str, Any], schedule: Schedule | None = None) -> str:
    """Commit one finished run (and its verified schedule) atomically; returns the run id.

    A row whose ``verified`` is false must come without a schedule: only verified schedules
    are stored.
    """
    if schedule is not None and not row.get("verified"):
        raise ValueError("only verified schedules are stored")
    folder = Path(store)
    con = connect(folder)
    key = run_key(row)
    rid = _run_id(key)
    record = {c: row.get(c) for c in COLUMNS}
    record.update(dict(zip(KEY_COLUMNS, key)))
    for c in ("extra", "provenance"):
        if record[c] is not None and not isinstance(record[c], str):
            record[c] = json.dumps(record[c], default=str, sort_keys=True)
    record["verified"] = int(bool(record["verified"]))
    record["created_at"] = record["created_at"] or time.time()
    try:
        if schedule is not None:
            rel = Path("schedules") / f"{rid}.json"
            _write_schedule(schedule, folder / rel)
            record["schedule_path"] = str(rel)
        names = ", ".join(f'"{c}"' for c in record)
        marks = ", ".join("?" for _ in record)
        con.execute("BEGIN IMMEDIATE")
        con.execute(f"INSERT OR REPLACE INTO runs (id, {names}) VALUES (?, {marks})", [rid, *record.values()])
        con.execute("DELETE FROM claims WHERE id = ?", [rid])
        con.execute("COMMIT")
    finally:
        con.close()
    return rid


def _write_schedule(schedule: Schedule, path: Path) -> None:
    """Write the schedule file under a temporary name, then rename it to ``path``; a path
    that cannot be written (a folder in its place, a full disk) is an InputError naming it."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    os.close(fd)
    try:
        write_json(schedule, tmp)
        os.replace(tmp, path)
    except OSError as e:
        Path(tmp).unlink(missing_ok=True)
        raise InputError(str(path), f"cannot write the schedule file: {(e.strerror or str(e)).lower()}") from None


def claim(store: str | Path, key: tuple, owner: str, expires: float, *, rerun: bool = False) -> str:
    """Claim the run ``key`` for batch ``owner`` until ``expires`` (Unix time).

    Returns ``"claimed"``, ``"done"`` (the run is stored and ``rerun`` is false) or
    ``"taken"`` (another batch holds a live claim on it). A claim is live while its batch's
    process runs (same host) and its time is not up.
    """
    rid = _run_id(tuple(key))
    host, pid = socket.gethostname(), os.getpid()
    con = connect(store)
    try:
        con.execute("BEGIN IMMEDIATE")
        if not rerun and con.execute("SELECT 1 FROM runs WHERE id = ?", [rid]).fetchone():
            con.execute("COMMIT")
            return "done"
        held = con.execute("SELECT owner, host, pid, expires FROM claims WHERE id = ?", [rid]).fetchone()
        if held and held[0] != owner and _live(held[1], held[2], held[3]):
            con.execute("COMMIT")
            return "taken"
        con.execute("INSERT OR REPLACE INTO claims (id, owner, host, pid, expires) VALUES (?, ?, ?, ?, ?)",
                    [rid, owner, host, pid, expires])
        con.execute("COMMIT")
        return "claimed"
    finally:
        con.close()


def _live(host: str, pid: int, expires: float) -> bool:
    if time.time() > expires:
        return False
    if host != socket.gethostname():
        return True
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def release(store: str | Path, keys: Iterable[tuple], owner: str) -> None:
    """Drop ``owner``'s claims on ``keys`` (runs it did not finish)."""
    ids = [_run_id(tuple(k)) for k in keys]
    if not ids:
        return
    con = connect(store)
    try:
        con.execute("BEGIN IMMEDIATE")
        con.executemany("DELETE FROM claims WHERE id = ? AND owner = ?", [(i, owner) for i in ids])
        con.execute("COMMIT")
    finally:
        con.close()


def done_keys(store: str | Path) -> set[tuple]:
    """Keys of every run already in the store (a re-run skips them)."""
    con = _read_only(store)
    if con is None:
        return set()
    try:
        cols = ", ".join(f'"{c}"' for c in KEY_COLUMNS)
        rows = con.execute(f"SELECT {cols} FROM runs").fetchall()
    finally:
        con.close()
    return {run_key(dict(zip(KEY_COLUMNS, r))) for r in rows}


def load(store: str | Path = DEFAULT_STORE) -> pd.DataFrame:
    """Every run as a DataFrame (one row per run, columns of :data:`COLUMNS` plus ``id``).

    The database is only read: columns a store of an older schema lacks come back empty.
    """
    con = _read_only(store)
    if con is None:
        return pd.DataFrame(columns=["id", *COLUMNS])
    try:
        df = pd.read_sql_query("SELECT * FROM runs", con)
    finally:
        con.close()
    for c in COLUMNS:
        if c not in df.columns:
            df[c] = None
    df["verified"] = df["verified"].astype(bool)
    return df.sort_values(list(KEY_COLUMNS)).reset_index(drop=True)


def count(store: str | Path) -> int:
    """Number of stored runs."""
    con = _read_only(store)
    if con is None:
        return 0
    try:
        return con.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
    finally:
        con.close()


def schedule_file(store: str | Path, row: dict[str, Any]) -> Path | None:
    """Absolute path of a stored run's schedule file (None if the run has none)."""
    rel = row.get("schedule_path")
    return (Path(store) / rel) if rel else None


def delete(store: str | Path, keys: Iterable[tuple]) -> None:
    """Remove the runs with these keys (used by ``--rerun`` before re-running)."""
    con = connect(store)
    try:
        con.execute("BEGIN IMMEDIATE")
        for key in keys:
            con.execute("DELETE FROM runs WHERE id = ?", [_run_id(tuple(key))])
        con.execute("COMMIT")
    finally:
        con.close()
