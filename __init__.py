"""collsynth: synthesize collective-communication schedules and compare the methods fairly.

The package is laid out as its architecture (imports flow one way)::

    instances  <-  tens  <-  formulations  <-  solvers
    results uses instances/tens types only

- :mod:`collsynth.instances` -- what is solved: Topology, generators, Collective, Instance.
- :mod:`collsynth.tens` -- the language of schedules: Schedule, verify, cost models, TEN, export.
- :mod:`collsynth.formulations` -- solver-agnostic Pyomo models, one module each.
- :mod:`collsynth.solvers` -- backends, drivers, greedy, closed forms, expansions, batch, CLI.
- :mod:`collsynth.results` -- the results store and table/plot rendering.

The Python API (:mod:`collsynth.api`) is reached from here: ``load_instance``,
``make_instance``, ``solve``, ``compare``, ``bench``, ``open_store``, ``verify``, ``price``,
``export`` and the ``Result`` and ``Store`` they return. It is loaded on first use, so that
``import collsynth`` stays light: every batch worker and OR-Tools child process imports this
package, and the API brings Pyomo, pandas and every producer with it.

>>> import collsynth as cs
>>> r = cs.solve(cs.make_instance("dgx1", "allgather"), "bfb-lp")
>>> r.status, r.verified, r.row["steps"]
('optimal', True, 2)
"""

import importlib

__version__ = "0.1.0"

API = ("load_instance", "make_instance", "solve", "compare", "bench", "open_store", "verify", "price", "export",
       "Result", "Store")
__all__ = ["InputError", "__version__", *API]


class InputError(ValueError):
    """Bad input from a user: a file, a field, and what was expected.

    The CLI prints it as one line ``error: <where>: <what>`` and exits with code 2.
    """

    def __init__(self, where: str, what: str):
        self.where = str(where)
        self.what = str(what)
        super().__init__(f"{self.where}: {self.what}")

    def __reduce__(self):
        """Pickled as its two parts, so that it crosses to a parent process intact (a process
        pool re-raises a worker's exception there)."""
        return InputError, (self.where, self.what)


def did_you_mean(name: object, choices) -> str:
    """`` (did you mean 'x'?)`` for the choice closest to a mistyped ``name`` (difflib's ratio),
    or ``""`` when none is close: every "unknown name" error says it.

    >>> did_you_mean("bandwith", ["dims", "bandwidth"]), did_you_mean("zzz", ["ring"])
    (" (did you mean 'bandwidth'?)", '')
    """
    import difflib

    close = difflib.get_close_matches(str(name), [str(c) for c in choices], n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def __getattr__(name: str):
    """The API's names, from :mod:`collsynth.api` when first asked for."""
    if name in API:
        return getattr(importlib.import_module(f"{__name__}.api"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(API))
