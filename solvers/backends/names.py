"""Solver backend names: what a user may write for ``--solver`` and its canonical spelling.

Kept apart from the solving modules of :mod:`collsynth.solvers.backends` (which load Pyomo and the embedded solvers,
a second of start-up) so that checking a run's options costs nothing for the producers that
use no solver. A name outside collsynth's own backends (:data:`KNOWN`) is looked up in Pyomo's
solver registry, which loads Pyomo then.

>>> canonical(" CP-SAT "), check_name("gurobi_direct")
('cpsat', 'gurobi')
"""

from __future__ import annotations

import difflib
import importlib

from ... import InputError

KNOWN = ("highs", "gurobi", "cpsat", "scip", "glop", "pdlp", "cbc", "glpk")
ALIASES = {"cp-sat": "cpsat", "sat": "cpsat", "gurobi_direct": "gurobi", "gurobi_persistent": "gurobi"}


def canonical(name: str) -> str:
    """The backend's canonical name (``cp-sat`` -> ``cpsat``, ``gurobi_direct`` -> ``gurobi``)."""
    name = name.strip().lower()
    return ALIASES.get(name, name)


def pyomo_names() -> tuple[str, ...]:
    """Solver names Pyomo's own factory registers (reachable through the legacy interface);
    loads Pyomo's environment, which fills that registry."""
    factory = importlib.import_module("pyomo.environ").SolverFactory
    return tuple(sorted(n for n in factory if not n.startswith("_")))


def check_name(name: str, where: str = "--solver") -> str:
    """The canonical name of a solver a user asked for; an InputError listing the known
    backends (and the closest match) when neither collsynth nor Pyomo knows it.

    >>> check_name("CP-SAT")
    'cpsat'
    """
    canon = canonical(str(name))
    if canon in KNOWN or canon in pyomo_names():
        return canon
    close = difflib.get_close_matches(canon, KNOWN + tuple(ALIASES) + pyomo_names(), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise InputError(where, f"unknown solver {name!r}{hint}; known: {', '.join(KNOWN)}, "
                            "or another solver Pyomo registers (cplex, xpress, ipopt, ...)")
