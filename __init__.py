"""collsynth: synthesize collective-communication schedules and compare the methods fairly.

The package is laid out as its architecture (imports flow one way)::

    instances  <-  tens  <-  formulations  <-  solvers
    results uses instances/tens types only

- :mod:`collsynth.instances` -- what is solved: Topology, generators, Collective, Instance.
- :mod:`collsynth.tens` -- the language of schedules: Schedule, verify, cost models, TEN, export.
- :mod:`collsynth.formulations` -- solver-agnostic Pyomo models, one module each.
- :mod:`collsynth.solvers` -- backends, drivers, greedy, closed forms, expansions, batch, CLI.
- :mod:`collsynth.results` -- the results store and table/plot rendering.
"""

__version__ = "0.1.0"


class InputError(ValueError):
    """Bad input from a user: a file, a field, and what was expected.

    The CLI prints it as one line ``error: <where>: <what>`` and exits with code 2.
    """

    def __init__(self, where: str, what: str):
        self.where = str(where)
        self.what = str(what)
        super().__init__(f"{self.where}: {self.what}")
