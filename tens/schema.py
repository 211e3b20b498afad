"""The result schema: every field of a run's row, written once.

It lives in :mod:`collsynth.tens`, below both the producers' pipeline (:mod:`collsynth.solvers`)
and the results store (:mod:`collsynth.results`), so that each uses it without importing the
other; :mod:`collsynth.results.schema` re-exports it for the results' modules.

:class:`Result` is the single list of fields. Everything else derives from it:

- the row :func:`collsynth.solvers.pipeline.run` returns (and ``collsynth solve --json``
  prints): :data:`ROW_FIELDS`, the key fields without ``params`` then the result fields;
- the SQLite table of :mod:`collsynth.results.store`: :data:`COLUMNS` with
  :func:`sql_type` of each field (an older store gains the missing columns when it is opened
  for writing, see :func:`collsynth.results.store.connect`);
- ``runs.csv`` of :mod:`collsynth.results.render`: :data:`ROW_FIELDS`.

Each field has a ``role``: ``key`` (the run's identity in the store), ``result`` (what the
run found; in the pipeline row) or ``stored`` (batch provenance the store adds). A new field
is one line here, typed, documented and defaulting to None. The fields of each cost model (its
time, its lower bound, its pricing time and any columns of its own) come from the model's
module in :mod:`collsynth.tens.cost_models`: :func:`model_fields`.

>>> [f for f in ROW_FIELDS[:5]]
['instance', 'producer', 'solver', 'driver', 'seed']
>>> sql_type("steps"), sql_type("T_L_s"), sql_type("verified"), sql_type("message")
('INTEGER', 'REAL', 'INTEGER', 'TEXT')
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from typing import Any

from .cost_models import MODELS
from .status import Status


def _f(doc: str, role: str = "result", default: Any = None) -> Any:
    return field(default=default, metadata={"doc": doc, "role": role})


@dataclass
class _Run:
    """The fields of :class:`Result` that are not a cost model's."""

    # the key: which run this is
    instance: str | None = _f("instance name", "key")
    producer: str | None = _f("producer name (see `collsynth producers`)", "key")
    solver: str | None = _f("solver backend the producer used ('' for producers that use none)", "key")
    driver: str | None = _f("driver actually run (the producer's default when none was asked; "
                            "'' for producers that take no driver)", "key")
    seed: int | None = _f("random seed", "key")
    params: str | None = _f("producer parameters as sorted JSON (store key only)", "key")
    # what the run found
    status: str | None = _f("collsynth's verdict, a collsynth.tens.status.Status value: "
                            + " / ".join(s.value for s in Status) + " (what each means: the status table)")
    found_by: str | None = _f("how the schedule was found: ilp@h=H, ilp@h=H+recovery, "
                              "warm-start@h=H+recovery, time-cluster, recovery, lp-rounding@h=H+..., "
                              "or the producer family (closed-form, greedy, bfb-lp, ...)")
    solver_status: str | None = _f("the solver's own status on the run's last solve ('' when none ran)")
    verified: bool | None = _f("the schedule passed collsynth.tens.verify")
    steps: int | None = _f("communication steps of the verified schedule")
    lower_bound_steps: int | None = _f("lower bound on the steps of schedules sent on links (hop distance)")
    lower_bound_timesteps: int | None = _f("lower bound on TEN timesteps of schedules that respect the TEN's "
                                           "link capacity (what TEN producers count)")
    bound_source: str | None = _f("the bound that proved the row optimal (a cost model's) or best in its "
                                  "model, else the best bound in the row's units (model: argument and "
                                  "witness, e.g. 'event: cut S={0-7}', 'timesteps: cut S={0-7}')")
    objective: float | None = _f("the producer's objective, in `units`")
    bound: float | None = _f("the bound the producer proved, in `units`")
    gap: float | None = _f("relative gap between objective and bound")
    units: str | None = _f("units of objective and bound (steps, timesteps, M/B, slots)")
    relaxation: bool | None = _f("the row is a relaxation's result (its bound, a fractional schedule)")
    build_s: float | None = _f("model building and loading time")
    solve_s: float | None = _f("the solver's own time (or the heuristic's run time)")
    verify_s: float | None = _f("verification time")
    wall_s: float | None = _f("wall time of the producer's run")
    compile_s: float | None = _f("time compiling, or loading from numba's on-disk cache, the run's kernels, "
                                 "before its clock started (in no other time)")
    sends: int | None = _f("number of sends in the schedule")
    message: str | None = _f("what the producer said (why it stopped, what it proved)")
    # batch provenance, added by the store
    suite: str | None = _f("suite the batch ran", "stored")
    instance_file: str | None = _f("instance file path", "stored")
    message_bytes: float | None = _f("message size M of the instance", "stored")
    schedule_path: str | None = _f("stored schedule file, relative to the store", "stored")
    extra: str | None = _f("producer-specific figures (JSON)", "stored")
    provenance: str | None = _f("package versions, git commit, host (JSON)", "stored")
    time_limit: float | None = _f("per-job time limit", "stored")
    threads: int | None = _f("solver threads", "stored")
    created_at: float | None = _f("when the row was stored (Unix time)", "stored")


def model_fields() -> tuple[list[tuple], list[tuple]]:
    """The result fields of every cost model: after ``steps``, each model's own columns, its
    time ``time_<name>_s`` and its lower bound; after ``verify_s``, its pricing time."""
    priced, bounded, timed = [], [], []
    for m in MODELS.values():
        priced += [(c.name, float | None, _f(c.doc)) for c in m.columns]
        priced.append((m.time_column, float | None, _f(m.doc)))
        bounded.append((m.lower_bound_column, float | None, _f(f"lower bound on the {m.doc}")))
        timed.append((m.price_column, float | None, _f(f"time to price under the {m.name} model")))
    return priced + bounded, timed


def _with_model_fields() -> list[tuple]:
    after_steps, after_verify = model_fields()
    out = []
    for f in dataclasses.fields(_Run):
        out.append((f.name, f.type, field(default=f.default, metadata=f.metadata)))
        out += after_steps if f.name == "steps" else after_verify if f.name == "verify_s" else []
    return out


Result = dataclasses.make_dataclass("Result", _with_model_fields(), namespace={"__module__": __name__})
Result.__doc__ = """One run of a producer on an instance: its key, what it found, and batch provenance.

Times are seconds. ``status`` is collsynth's verdict (:class:`~collsynth.tens.status.Status`:
``optimal`` only when the schedule's time under a named cost model meets the instance's bound
in that model); ``solver_status`` is what the solver itself reported.
"""

FIELDS: tuple[dataclasses.Field, ...] = dataclasses.fields(Result)
_HINTS = typing.get_type_hints(Result)


def names(role: str | None = None) -> tuple[str, ...]:
    """Field names of :class:`Result` in order, optionally only those of one ``role``."""
    return tuple(f.name for f in FIELDS if role is None or f.metadata["role"] == role)


def python_type(name: str) -> type:
    """The field's value type without its ``None`` (``int | None`` -> ``int``)."""
    hint = _HINTS[name]
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
    return hint


def sql_type(name: str) -> str:
    """The SQLite column type of a field: INTEGER for int and bool, REAL for float, else TEXT."""
    t = python_type(name)
    return "INTEGER" if t in (int, bool) else "REAL" if t is float else "TEXT"


def doc(name: str) -> str:
    """The field's one-line description."""
    return next(f.metadata["doc"] for f in FIELDS if f.name == name)


KEY_COLUMNS = names("key")
RESULT_COLUMNS = names("result")
STORED_COLUMNS = names("stored")
COLUMNS = names()
ROW_FIELDS = tuple(n for n in KEY_COLUMNS if n != "params") + RESULT_COLUMNS


def empty_row(**values: Any) -> dict[str, Any]:
    """A pipeline row: every field of :data:`ROW_FIELDS` set to None, then ``values``."""
    unknown = set(values) - set(ROW_FIELDS)
    if unknown:
        raise KeyError(f"not result fields: {', '.join(sorted(unknown))}")
    return {**dict.fromkeys(ROW_FIELDS), **values}


# ---- the result-columns table of docs/results.md ----------------------------------------------

UNITS = {"steps": "steps", "sends": "sends", "message_bytes": "bytes", "objective": "`units`", "bound": "`units`",
         "gap": "fraction", "time_limit": "s", "created_at": "s (Unix time)"}
SUFFIX_UNITS = (("_timesteps", "timesteps"), ("_steps", "steps"), ("_s", "s"))


def unit(name: str) -> str:
    """The unit of a field's values ('' for names, flags and counts of no unit).

    >>> unit("time_event_s"), unit("lower_bound_steps"), unit("objective"), unit("status")
    ('s', 'steps', '`units`', '')
    """
    if name in UNITS:
        return UNITS[name]
    return next((u for suffix, u in SUFFIX_UNITS if name.endswith(suffix)), "")


def markdown() -> str:
    """Every field as a Markdown table row (``docs/results.md`` carries this table; regenerate
    it with ``python -m collsynth.results.schema``, or ``collsynth.tens.schema``)."""
    lines = ["| column | type | unit | role | meaning |", "|---|---|---|---|---|"]
    for f in FIELDS:
        lines.append(f"| `{f.name}` | {python_type(f.name).__name__} | {unit(f.name)} | {f.metadata['role']} "
                     f"| {f.metadata['doc'].replace('|', '/')} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown())
