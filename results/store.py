"""The results store: one folder with an SQLite database and the verified schedule files.

Layout of a store folder (default ``results/store``)::

    runs.sqlite          one row per run (table ``runs``)
    schedules/<id>.json  the verified schedule of a run (design "Schedule files")

Every run is committed on its own transaction the moment it finishes (SQLite in WAL mode;
the schedule file is written to a temporary name and renamed first), so a batch killed at any
point loses nothing that finished and leaves no half-written row. A run is identified by its
key ``(instance, producer, solver, driver, seed, params)``; storing a key again replaces
the old row (``--rerun``), and :func:`done_keys` lets a re-run skip what is done.

Only verified schedules are stored as schedule files; failed runs are stored as rows with
their status and message (and no schedule).
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from ..tens.schedule import Schedule, write_json
from . import schema

KEY_COLUMNS = schema.KEY_COLUMNS
RESULT_COLUMNS = schema.RESULT_COLUMNS
PROVENANCE_COLUMNS = schema.STORED_COLUMNS
COLUMNS = schema.COLUMNS
DEFAULT_STORE = Path("results") / "store"


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
    ``runs`` with every column of :mod:`collsynth.results.schema`.

    A store written by an older schema gains the columns it lacks (empty in its old rows), so
    adding a result field never breaks an existing store.
    """
    folder = Path(store)
    (folder / "schedules").mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(folder / "runs.sqlite", timeout=60, isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=FULL")
    cols = ", ".join(f'"{c}" {schema.sql_type(c)}' for c in COLUMNS)
    con.execute(f"CREATE TABLE IF NOT EXISTS runs (id TEXT PRIMARY KEY, {cols})")
    migrate(con)
    return con


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


def _read_only(store: str | Path) -> sqlite3.Connection | None:
    """An existing store's database opened for reading: nothing is created or altered,
    whatever its schema (:func:`load` fills the columns an older store lacks); None when there
    is no database or its ``runs`` table is not created yet. (A read-write handle, so that
    closing it tidies SQLite's WAL files away.)"""
    path = Path(store) / "runs.sqlite"
    if not path.exists():
        return None
    con = sqlite3.connect(path, timeout=60)
    if con.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'runs'").fetchone() is None:
        con.close()
        return None
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
    if schedule is not None:
        rel = Path("schedules") / f"{rid}.json"
        fd, tmp = tempfile.mkstemp(dir=folder / "schedules", suffix=".tmp")
        os.close(fd)
        write_json(schedule, tmp)
        os.replace(tmp, folder / rel)
        record["schedule_path"] = str(rel)
    names = ", ".join(f'"{c}"' for c in record)
    marks = ", ".join("?" for _ in record)
    try:
        con.execute("BEGIN IMMEDIATE")
        con.execute(f"INSERT OR REPLACE INTO runs (id, {names}) VALUES (?, {marks})", [rid, *record.values()])
        con.execute("COMMIT")
    finally:
        con.close()
    return rid


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
