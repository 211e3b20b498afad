"""One run: produce, verify, price. The single path every producer's schedule goes through.

:func:`run` calls a producer, verifies its schedule against the instance (a schedule that fails
verification is never priced, stored or exported: the row says ``invalid`` and why), prices it
under all three cost models of the design and reports the lower bounds beside it. The returned
dict carries the ``collsynth solve --json`` fields (:data:`collsynth.results.schema.ROW_FIELDS`);
the batch runner stores exactly these rows.

Every row says which method produced it: the producer, the solver and the driver actually run
(a producer's default driver when none was asked), ``found_by`` (the ILP at a horizon, time
clustering, recovery, LP rounding, a construction, ...) and the solver's own status and time
(``solver_status``, ``solve_s``) apart from model building (``build_s``).

An instance with an ``epoch`` choice runs on that TEN timestep (given to every producer that
declares a ``timestep`` parameter, unless the run sets its own) and is TEN-priced on it.
"""

from __future__ import annotations

import time
import traceback
from dataclasses import replace
from typing import Any

from .. import InputError
from ..instances import Instance
from ..instances.instance import epoch_timestep
from ..tens import cost, verify
from ..results import schema
from ..tens.schedule import Schedule
from . import backends
from .producers import Options, Outcome, Unsupported, check_params, get

RESULT_FIELDS = schema.ROW_FIELDS


def run(instance: Instance, producer: str, options: Options | None = None) -> tuple[dict[str, Any], Schedule | None]:
    """Run ``producer`` on ``instance``; return the result row and the verified schedule.

    The schedule is ``None`` unless it verified. Producer failures become rows with status
    ``error`` (or ``skipped`` when the producer does not support the instance); bad input
    (:class:`~collsynth.InputError`: an unknown solver or driver, a parameter the producer
    does not declare or a malformed value) propagates to the caller.
    """
    options = options or Options()
    prod = get(producer)
    epoch_step = epoch_timestep(instance)
    if epoch_step is not None and options.params.get("timestep") is None:
        # the instance's epoch choice (TE-CCL's fastest/slowest link) is the TEN timestep
        if any(p.name == "timestep" for p in prod.params):
            options = replace(options, params={**options.params, "timestep": epoch_step})
    else:
        epoch_step = None
    driver = prod.driver_for(options.driver)
    solver = backends.check_name(options.solver) if prod.uses_solver else ""
    options = replace(options, driver=driver or None, solver=solver or options.solver,
                      params=check_params(prod, options.params))
    row = schema.empty_row(
        instance=instance.name, producer=prod.name, solver=solver, driver=driver, seed=options.seed,
        verified=False, found_by="", solver_status="", message="",
    )
    bounds = cost.lower_bounds(instance)
    row["lower_bound_s"] = bounds["total_s"]
    row["lower_bound_steps"] = bounds["steps"]
    t0 = time.perf_counter()
    try:
        outcome = prod.run(instance, options)
    except InputError:
        raise
    except Unsupported as e:
        outcome = Outcome(None, "skipped", message=f"unsupported: {e}")
    except Exception as e:  # noqa: BLE001 - a producer crash is a recorded failure, not a dead batch
        outcome = Outcome(None, "error", message=f"{type(e).__name__}: {e}")
        outcome.extra["traceback"] = traceback.format_exc(limit=8)
    row["wall_s"] = time.perf_counter() - t0
    row.update(
        status=outcome.status, objective=outcome.objective, bound=outcome.bound, gap=outcome.gap,
        units=outcome.units, build_s=outcome.build_s, solve_s=outcome.solve_s,
        message=outcome.message, solver_status=outcome.solver_status,
        found_by=outcome.found_by or (prod.family if outcome.schedule is not None else ""),
    )
    if prod.uses_solver and outcome.solver:
        row["solver"] = outcome.solver
    extra = dict(outcome.extra)
    if outcome.version:
        extra["solver_version"] = outcome.version
    if outcome.nodes is not None:
        extra["solver_nodes"] = outcome.nodes
    row["extra"] = extra
    schedule = outcome.schedule
    if schedule is None:
        return row, None
    row["sends"] = len(schedule)
    t0 = time.perf_counter()
    violation = verify.verify(schedule, instance)
    row["verify_s"] = time.perf_counter() - t0
    if violation is not None:
        row["status"] = "invalid"
        row["message"] = f"verification failed: {violation}"
        return row, None
    row["verified"] = True
    row["steps"] = schedule.num_steps
    prices = {}
    for model in cost.MODELS:  # each stage timed on its own: the row shows where the time goes
        t0 = time.perf_counter()
        options = {"timestep": epoch_step} if model == "ten" else {}
        prices[model] = cost.price(schedule, instance, model, **options)
        row[f"price_{model}_s"] = time.perf_counter() - t0
    sync = prices["sync"]
    row["T_L_s"], row["T_B_s"], row["time_sync_s"] = sync.T_L_s, sync.T_B_s, sync.total_s
    row["time_ten_s"] = prices["ten"].total_s
    row["time_event_s"] = prices["event"].total_s
    return row, schedule
