"""The topology generators' registry: each generator under its function's name, with the size
formula it declares where it is defined.

A generator is one decorated function (in :mod:`collsynth.instances.generators`,
:mod:`collsynth.instances.systems` or a module they import)::

    @generator(size=lambda p: (p["nodes"], 2 * p["nodes"], "nodes"))
    def ring(nodes: int, bidirectional: bool = True) -> Topology: ...

Its signature is its parameters (:func:`collsynth.instances.generators.parameters`); its
``size`` formula says, from the validated parameters alone and before anything is built, how
many node ids and directed links (an upper bound) they give and which parameter sets the size
(:mod:`collsynth.instances.size` refuses a topology over the memory budget from it, naming that
parameter). A parameter that is itself a nested topology table (``base`` of a line graph)
reaches the formula as that topology's own ``(nodes, links, parameter)``. ``size=None``
declares a generator of fixed small graphs (a catalogue of named graphs): nothing to estimate.

>>> from collsynth.instances import generators
>>> SIZES["torus"]({"dims": [3, 4]})
(12, 48, 'dims')
"""

from __future__ import annotations

from typing import Any, Callable, TypeVar

Counts = tuple[int, int, str]  # (node ids, directed links (an upper bound), the parameter that sets the size)
SizeFormula = Callable[[dict[str, Any]], Counts]
Generator = TypeVar("Generator", bound=Callable[..., Any])

GENERATORS: dict[str, Callable[..., Any]] = {}  # name -> the function that builds the Topology
SIZES: dict[str, SizeFormula | None] = {}  # name -> its size formula (None: fixed small graphs)


def generator(*, size: SizeFormula | None) -> Callable[[Generator], Generator]:
    """Register the decorated function as a topology generator under its own name, with
    ``size``, its size formula (see the module docstring); every generator declares one
    (``@generator`` without ``size=`` is a TypeError where it is written)."""

    def register(func: Generator) -> Generator:
        GENERATORS[func.__name__] = func
        SIZES[func.__name__] = size
        return func

    return register
