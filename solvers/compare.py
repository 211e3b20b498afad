"""Several producers on one instance, each through the pipeline with the options it takes.

:func:`compare` is what ``collsynth solve --producer a,b,c`` and :func:`collsynth.compare` run:
one :func:`collsynth.solvers.pipeline.run` per producer, in the order given. Options are routed
as a batch routes them: ``solver`` only to producers that use one, ``driver`` only to those
that take it (the others run their default), and each parameter only to the producers
declaring it. Every name is checked before anything runs.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from ..tens.status import Status
from .. import InputError
from ..instances import Instance
from ..limits import TooBig
from ..tens import schema
from ..tens import cost_models
from ..tens.schedule import Schedule
from .backends import names as backend_names
from .pipeline import run
from .producers import Options, get, route_params

# the columns of a comparison table, in order (a subset of the result schema)
TABLE_COLUMNS = ("producer", "solver", "driver", "status", "steps",
                 *(m.time_column for m in cost_models.MODELS.values()), "lower_bound_s", "wall_s")


def split_names(text: str | Sequence[str], where: str = "--producer") -> list[str]:
    """Producer names from ``"a,b,c"`` or a list; an InputError for none or a repeated one."""
    names = [s.strip() for s in text.split(",")] if isinstance(text, str) else [str(s).strip() for s in text]
    names = [n for n in names if n]
    if not names:
        raise InputError(where, "expected one or more producer names")
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise InputError(where, f"given twice: {', '.join(repeated)}")
    return names


def compare(instance: Instance, names: Sequence[str], options: Options | None = None,
            solver_given: bool = False) -> list[tuple[dict, Schedule | None]]:
    """``(row, verified schedule or None)`` of each producer in ``names`` on ``instance``.

    ``options.driver`` goes to the producers that take it and must suit at least one;
    ``options.params`` are routed by declaration; ``solver_given`` says the solver was asked
    for explicitly, which then must suit at least one producer. A producer that does not
    support the instance, or whose run would exceed the memory budget
    (:class:`~collsynth.limits.TooBig`), gives a ``skipped`` row (it does not stop the others).
    """
    options = options or Options()
    selected = [get(n) for n in split_names(names)]
    if solver_given and not any(p.uses_solver for p in selected):
        raise InputError("--solver", f"no selected producer uses a solver ({', '.join(p.name for p in selected)})")
    solver = backend_names.check_name(options.solver)
    if options.driver and not any(options.driver in p.drivers for p in selected):
        takes = sorted({d for p in selected for d in p.drivers})
        raise InputError("--driver", f"no selected producer takes driver {options.driver!r} "
                                     f"(drivers: {', '.join(takes) or 'none'})")
    shares = route_params(selected, options.params)
    out = []
    for prod in selected:
        driver = options.driver if options.driver in prod.drivers else None
        try:
            out.append(run(instance, prod.name, replace(options, solver=solver, driver=driver, params=shares[prod.name])))
        except TooBig as e:  # this producer's run would not fit in memory; the others still run
            out.append((schema.empty_row(instance=instance.name, producer=prod.name, status=Status.SKIPPED, verified=False,
                                         message=f"{e.where}: {e.what}"), None))
    return out
