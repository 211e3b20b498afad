"""Checking and repairing a damaged results store (``collsynth store check`` and ``collsynth
store repair``; ``docs/results.md``, "A damaged store").

What is damage: a database file that is empty (0 bytes) or truncated
(:func:`collsynth.results.store.file_damage`), one with a damaged page (SQLite's own
``PRAGMA integrity_check``), and a run's schedule file that is missing or does not parse
(:func:`collsynth.results.store.schedule_damage`). Every command that reads or writes a
store refuses a damaged one, naming the file, and writes nothing to it; :func:`check` lists
every damage at once.

What :func:`repair` rebuilds, and from what:

- the database, from every row SQLite can still read: the ``runs`` table is read from its first
  row forward and from its last row backward, each up to the first damaged page, so only the
  rows on damaged pages are lost (an empty or truncated database whose first page is gone
  gives no rows). A row is kept only if its id is the hash of its key, as every stored run's
  is, so no row made of a damaged page's bytes comes back. The new database is made beside the old one and renamed into place; the
  damaged one is kept beside it as ``runs.sqlite.damaged-<UTC time>`` (never deleted).
- the runs, from the schedule files: a run whose schedule file is missing or does not parse is
  dropped (its file moved to ``schedules/damaged/``), so the next ``collsynth bench`` runs it
  again instead of a report showing a run without its schedule.
- schedule files that no readable row names (their rows were on a damaged page) cannot be
  turned back into rows: a schedule file holds the schedule, not the run's instance, producer,
  solver, seed or results. They are moved to ``schedules/orphaned/``; ``bench`` runs those
  runs again.

Claims of running batches are not carried over: repair a store while no bench writes to it.
A database that is not a store (other tables, a file that is not SQLite) is not repaired.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Iterator

from .. import InputError
from . import store as results_store


@contextlib.contextmanager
def _copy_of(db: Path) -> Iterator[sqlite3.Connection]:
    """A connection to a copy of the database ``db`` (with its WAL file): reading a damaged
    database, even to close it, could write to it; its copy takes whatever SQLite does."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / db.name
        shutil.copyfile(db, copy)
        if Path(f"{db}-wal").is_file():
            shutil.copyfile(f"{db}-wal", f"{copy}-wal")
        con = sqlite3.connect(copy)
        try:
            yield con
        finally:
            con.close()


def readable_rows(db: Path) -> list[dict]:
    """Every row of the ``runs`` table SQLite can still read from ``db`` (forward from the
    first row and backward from the last, each up to the first damaged page), by run id."""
    rows: dict[str, dict] = {}
    with _copy_of(db) as con:
        for order in ("ASC", "DESC"):
            try:
                cursor = con.execute(f"SELECT * FROM runs ORDER BY rowid {order}")
                names = [d[0] for d in cursor.description]
                for values in cursor:
                    row = dict(zip(names, values))
                    if _genuine(row):
                        rows[str(row["id"])] = row
            except sqlite3.DatabaseError:
                continue
    return [rows[k] for k in sorted(rows)]


def _genuine(row: dict) -> bool:
    """Whether a row read from a damaged page is a run as it was stored: its id is the hash of
    its key (:func:`collsynth.results.store.run_key`), which bytes of a damaged page do not
    give by chance."""
    try:
        return row.get("id") == results_store._run_id(results_store.run_key(row))
    except (TypeError, ValueError):
        return False


def _database_damage(db: Path) -> str | None:
    """What is wrong with the store's database file, or None (see the module's text)."""
    what = results_store.file_damage(db)
    if what:
        return what
    try:
        with _copy_of(db) as con:
            return results_store.page_damage(con, limit_s=None) or _not_a_store(con, db)
    except sqlite3.Error as e:
        return f"not a results database: {e}"


def _not_a_store(con: sqlite3.Connection, db: Path) -> str | None:
    try:
        results_store.check_tables(con, db)
    except InputError as e:
        return e.what
    return None


def _orphans(folder: Path, rows: list[dict]) -> list[Path]:
    named = {(folder / r["schedule_path"]).resolve() for r in rows if r.get("schedule_path")}
    return sorted(p for p in (folder / "schedules").glob("*.json") if p.resolve() not in named)


def check(store: str | Path) -> list[dict]:
    """Every damage of the store folder ``store``: ``{"file", "what"}`` per damaged file (the
    database, schedule files that are missing or do not parse, schedule files no readable row
    names). An empty list: nothing is damaged. Nothing is written."""
    folder = Path(store)
    db = folder / "runs.sqlite"
    if not db.is_file():
        raise InputError(str(store), "no results store here (no runs.sqlite)")
    found = []
    what = _database_damage(db)
    if what:
        found.append({"file": str(db), "what": what})
    rows = readable_rows(db)
    found += [{"file": f, "what": w} for f, w in results_store.schedule_damage(folder, rows)]
    if what:
        found += [{"file": str(p), "what": "no readable run names this schedule file (its row was lost)"}
                  for p in _orphans(folder, rows)]
    return found


def _fresh_database(folder: Path, rows: list[dict]) -> Path:
    """A new store database beside the old one holding ``rows`` (columns of the schema)."""
    fd, name = tempfile.mkstemp(dir=folder, prefix=".runs.sqlite.repaired-")
    os.close(fd)
    con = sqlite3.connect(name, isolation_level=None)
    try:
        results_store._set_up(con, Path(name))
        con.execute("BEGIN IMMEDIATE")
        for row in rows:
            record = {c: row.get(c) for c in ("id", *results_store.COLUMNS)}
            names = ", ".join(f'"{c}"' for c in record)
            con.execute(f"INSERT OR REPLACE INTO runs ({names}) VALUES ({', '.join('?' for _ in record)})",
                        list(record.values()))
        con.execute("COMMIT")
    finally:
        con.close()
    return Path(name)


def _move_into(paths: list[Path], folder: Path) -> list[str]:
    """Move ``paths`` into ``folder`` (created); returns their new paths."""
    moved = []
    for p in paths:
        folder.mkdir(parents=True, exist_ok=True)
        dest = folder / p.name
        os.replace(p, dest)
        moved.append(str(dest))
    return moved


def repair(store: str | Path) -> dict:
    """Rebuild the damaged store ``store`` as the module's text says; returns ``kept`` (rows),
    ``dropped`` (runs whose schedule file is damaged), ``damaged_files`` and ``orphaned_files``
    (where they were moved), and ``damaged_database`` (where the old database was kept, when
    it was replaced). A store with no damage is left as it is."""
    folder = Path(store)
    found = check(folder)
    db = folder / "runs.sqlite"
    report = {"store": str(folder), "damage": found, "kept": None, "dropped": [], "damaged_files": [],
              "orphaned_files": [], "damaged_database": None}
    if not found:
        return report
    db_what = next((d["what"] for d in found if d["file"] == str(db)), None)
    if db_what and db_what.startswith(("not a results database", "not a collsynth store")):
        raise InputError(str(db), f"{db_what}: not a store that was damaged; nothing repaired")
    rows = readable_rows(db)
    bad = {f for f, _ in results_store.schedule_damage(folder, rows)}
    kept = [r for r in rows if not (r.get("schedule_path") and str(folder / r["schedule_path"]) in bad)]
    report["dropped"] = [r["id"] for r in rows if r not in kept]
    report["kept"] = len(kept)
    if db_what:
        fresh = _fresh_database(folder, kept)
        aside = db.with_name(f"runs.sqlite.damaged-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}")
        for extra in ("-wal", "-shm"):  # an old WAL must never be read with the new database
            if Path(f"{db}{extra}").exists():
                os.replace(f"{db}{extra}", f"{aside}{extra}")
        os.replace(db, aside)
        os.replace(fresh, db)
        results_store._checked.clear()
        report["damaged_database"] = str(aside)
    elif report["dropped"]:
        con = results_store.connect(folder)
        try:
            con.execute("BEGIN IMMEDIATE")
            con.executemany("DELETE FROM runs WHERE id = ?", [(i,) for i in report["dropped"]])
            con.execute("COMMIT")
        finally:
            con.close()
    report["damaged_files"] = _move_into([Path(f) for f in sorted(bad) if Path(f).is_file()],
                                         folder / "schedules" / "damaged")
    if db_what:
        report["orphaned_files"] = _move_into(_orphans(folder, kept), folder / "schedules" / "orphaned")
    return report
