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

A damaged store is refused, named and never written to: a database file that is empty or
truncated (:func:`file_damage`), one whose pages SQLite's quick check finds damaged
(:func:`page_damage`, within :data:`CHECK_S` seconds, once per process and file), and, for the
commands that call :func:`refuse_damaged` before they start, a stored run's schedule file that
is missing or does not parse (:func:`schedule_damage`). :mod:`collsynth.results.repair` lists
and repairs the damage.
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
    (:func:`check_tables`) or is damaged (:func:`file_damage`, :func:`page_damage`: the quick check runs
    once per process and database file), which is left exactly as it was. A new database is
    made under a temporary name and linked into place whole, so no other process ever sees a
    half-made (0-byte) one.
    """
    folder = Path(store)
    path = folder / "runs.sqlite"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if not path.exists():
            _create(path)
        refuse_damaged_file(path)
        con = sqlite3.connect(path, timeout=LOCK_WAIT_S, isolation_level=None)
    except (OSError, sqlite3.Error) as e:
        raise InputError(str(folder), f"cannot write a results store here: {_reason(folder, e)}") from None
    try:
        _refuse_damaged_pages(con, path)
        _retry_while_locked(lambda: _set_up(con, path), LOCK_WAIT_S)
        (folder / "schedules").mkdir(exist_ok=True)
    except BaseException as e:
        con.close()
        if isinstance(e, sqlite3.DatabaseError) and not isinstance(e, sqlite3.OperationalError):
            raise InputError(str(folder / "runs.sqlite"), f"not a results database: {e}") from None
        if isinstance(e, (OSError, sqlite3.Error)):
            raise InputError(str(folder), f"cannot write a results store here: {_reason(folder, e)}") from None
        raise
    return con


def _create(path: Path) -> None:
    """Make an empty store database at ``path``: set up under a temporary name beside it and
    linked into place whole (another process creating it at the same moment wins; its database
    is kept)."""
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.new-")
    os.close(fd)
    tmp = Path(name)
    mask = os.umask(0)
    os.umask(mask)
    os.chmod(tmp, 0o666 & ~mask)  # as sqlite3 would create it
    try:
        con = sqlite3.connect(tmp, isolation_level=None)
        try:
            _set_up(con, tmp)
        finally:
            con.close()  # the last connection: the WAL is checkpointed into the file and removed
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
        except OSError:  # a file system without hard links: renamed in, unless another made it first
            if not path.exists():
                os.replace(tmp, path)
    finally:
        for extra in ("", "-wal", "-shm"):
            Path(f"{tmp}{extra}").unlink(missing_ok=True)


# ---- damage: refused, named, never written to ---------------------------------------------------

CHECK_S = 10.0  # at most this long for SQLite's quick check when a command opens a store
SETTLE_S = 1.0  # a database file shorter than its header for this long is truncated (see refuse_damaged_file)
SQLITE_MAGIC = b"SQLite format 3\x00"
_checked: dict[str, tuple] = {}  # database files this process has quick-checked, by path: their identity


def _identity(path: Path) -> tuple:
    st = path.stat()
    return st.st_dev, st.st_ino


def file_damage(path: str | Path) -> str | None:
    """What is wrong with the SQLite database file ``path`` that its size and header show, in
    words, or None: empty (0 bytes), or truncated (shorter than its 100-byte header, not a whole
    number of pages, or shorter than the page count its header records). The header layout is
    SQLite's (https://sqlite.org/fileformat2.html, section 1.3: page size at offset 16, page
    count at 28, valid when the counters at 24 and 92 agree). A file that is not SQLite at all
    is left to SQLite to refuse."""
    size = Path(path).stat().st_size
    if size == 0:
        return "empty database file (0 bytes)"
    with open(path, "rb") as f:
        head = f.read(100)
    if not head.startswith(SQLITE_MAGIC[:min(len(head), 16)]):
        return None
    if len(head) < 100:
        return f"truncated: {size} bytes, shorter than the 100-byte SQLite header"
    page = int.from_bytes(head[16:18], "big")
    page = 65536 if page == 1 else page
    pages = int.from_bytes(head[28:32], "big")
    if page and size % page:
        return f"truncated: {size} bytes is not a whole number of {page}-byte pages"
    if head[24:28] == head[92:96] and size < pages * page:
        return f"truncated: {size} bytes where its header records {pages} pages of {page} bytes"
    return None


def page_damage(con: sqlite3.Connection, limit_s: float | None = CHECK_S) -> str | None:
    """The first line SQLite's ``PRAGMA quick_check`` reports on the open database ``con`` (a
    damaged page: https://sqlite.org/pragma.html#pragma_quick_check), or None when it says
    ``ok`` or did not finish within ``limit_s`` seconds (None: no limit). The check reads every
    page once, so its time grows with the database; the limit keeps opening a huge store quick."""
    deadline = None if limit_s is None else time.monotonic() + limit_s
    if deadline is not None:
        con.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
    try:
        rows = con.execute("PRAGMA quick_check").fetchall()
    except sqlite3.OperationalError as e:
        if "interrupt" in str(e):
            return None
        return f"damaged: {e}"
    except sqlite3.DatabaseError as e:
        return f"damaged: {e}"
    finally:
        con.set_progress_handler(None, 0)
    lines = [line for r in rows for line in str(r[0]).splitlines() if line and not line.startswith("***")]
    return None if lines == ["ok"] else f"damaged page(s), SQLite quick_check says: {lines[0] if lines else rows}"


REFUSED = ("refused: nothing read or written (`collsynth store check` lists the damage, "
           "`collsynth store repair` rebuilds the store)")


def refuse_damaged_file(path: Path) -> None:
    """An InputError naming the database file ``path`` when :func:`file_damage` finds it
    empty or truncated for a second (:data:`SETTLE_S`): while another process checkpoints
    the WAL into the file, page 1 (with the new page count) can be written before the last
    page, so a file shorter than its header for a moment is not yet damage."""
    what, settle = file_damage(path), time.monotonic() + SETTLE_S
    while what and what.startswith("truncated") and time.monotonic() < settle:
        time.sleep(0.05)
        what = file_damage(path)
    if what:
        raise InputError(str(path), f"damaged results database: {what}; {REFUSED}")


def _refuse_damaged_pages(con: sqlite3.Connection, path: Path) -> None:
    """An InputError naming ``path`` (``con`` closed) when :func:`page_damage` finds a damaged
    page; each database file is checked once per process (by path and inode)."""
    key, identity = str(path.resolve()), _identity(path)
    if _checked.get(key) == identity:
        return
    what = page_damage(con)
    if what:
        con.close()
        raise InputError(str(path), f"damaged results database: {what}; {REFUSED}")
    _checked[key] = identity


def schedule_damage(store: str | Path, rows: Iterable[dict]) -> list[tuple[str, str]]:
    """``(file, what)`` for every stored run's schedule file of ``rows`` that is missing, not
    a file, not UTF-8 JSON or not a schedule (``docs/schedules.md``): each file is read and
    parsed as JSON, its sends not built (that is what reading it for a picture does)."""
    from ..instances.files import read_text

    found = []
    for row in rows:
        path = schedule_file(store, row)
        if path is None:
            continue
        try:
            data = json.loads(read_text(path))
        except InputError as e:
            found.append((str(path), e.what))
            continue
        except (ValueError, RecursionError) as e:
            found.append((str(path), f"malformed JSON: {e}"))
            continue
        if not isinstance(data, dict) or not isinstance(data.get("sends"), list):
            found.append((str(path), "not a schedule file: expected a JSON object with a list of sends"))
    return found


def refuse_damaged(store: str | Path) -> None:
    """Refuse (InputError naming the file) a store whose database is damaged or not a store,
    or one of whose schedule files is (:func:`schedule_damage`); a store that does not exist
    yet passes. Every command that reads or writes a store calls it once before it starts."""
    con = _read_only(store)
    if con is None:
        return
    try:
        rows = con.execute("SELECT id, schedule_path FROM runs WHERE schedule_path IS NOT NULL "
                           "AND schedule_path != '' ORDER BY id").fetchall()
    except sqlite3.DatabaseError as e:
        raise InputError(str(Path(store) / "runs.sqlite"), f"damaged results database: {e}; {REFUSED}") from None
    finally:
        con.close()
    found = schedule_damage(store, [{"id": i, "schedule_path": p} for i, p in rows])
    if found:
        more = f" (and {len(found) - 1} more schedule file(s))" if len(found) > 1 else ""
        raise InputError(found[0][0], f"{found[0][1]}{more}; {REFUSED}")


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


def _open_for_reading(path: Path) -> sqlite3.Connection:
    """A read-write handle on the database ``path`` (closing it tidies the WAL files away),
    checked once for damaged pages. Right after a writer was killed, SQLite may answer "database
    is locked" at once while it recovers the WAL index (:func:`_retry_while_locked` waits)."""
    con = sqlite3.connect(path, timeout=60)
    try:
        con.execute("SELECT 1 FROM sqlite_master").fetchone()
        _refuse_damaged_pages(con, path)
    except BaseException:
        con.close()
        raise
    return con


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
    refuse_damaged_file(path)
    try:
        con = _retry_while_locked(lambda: _open_for_reading(path), LOCK_WAIT_S)
    except sqlite3.OperationalError as e:  # a WAL database in a folder we cannot write: read it as is
        if os.access(path.parent, os.W_OK):  # a writable store is read whole (its WAL too), never as is
            raise InputError(str(path), f"cannot read the results store: {e}") from None
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
    try:
        write_json(schedule, path)  # under a temporary name, renamed (collsynth.outputs.replaced_file)
    except OSError as e:
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
