"""How big an instance is, and what a run of it needs, known before anything is allocated.

Every allocation that grows with an instance is estimated here first, and refused with a
one-line :class:`collsynth.limits.TooBig` naming the field that makes it big when it exceeds
the memory budget (:func:`collsynth.limits.memory_budget`):

- a generated topology, from the size formula its generator declares
  (:mod:`collsynth.instances.registry`) and its parameters alone (:func:`check_generator`): the
  graph (``BYTES_PER_LINK`` a directed link) and the hop-distance matrix every instance
  computes (``DISTANCE_BYTES`` per ordered node pair, the peak while it is built);
- a collective, before anything reads it (:func:`check_collective`): its used chunk ids
  (its conditions are read row by row from the kind's rule; an all-to-all of ``N`` ranks has
  ``N^2`` of them);
- the pre/postcondition matrices, one byte per chunk id and node id in each, by the runs that
  read them whole (:func:`check_run`: every run but one whose producer declares it does not);
- a run (:func:`estimate`, :func:`check_run`, before a producer starts): what its producer
  declares it will build (:class:`Build`), else the fewest sends any schedule of the instance
  has (``BYTES_PER_SEND`` each: the schedule, its verification and pricing), and TEN
  variables (chunks x (links + nodes) x horizon) that producers building TEN models check
  before building (:func:`check_ten`; a formulation may refine the count).

The per-item figures were measured on this code (``benchmarks/bench_limits.py`` prints them).

>>> fewest_sends("allgather", 4, 2), fewest_sends("broadcast", 4, 2), fewest_sends("allreduce", 4, 1)
(24, 6, 24)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

from ..limits import human_bytes, memory_budget, require
from .registry import SIZES, Counts

BYTES_PER_LINK = 1300  # a directed link in the networkx graph, with its costs (peak while built)
BYTES_PER_NODE = 600
DISTANCE_BYTES = 21  # per ordered node pair while the hop-distance matrix is computed
BYTES_PER_SEND = 768  # a send of a schedule, peak through production, verification and pricing
# (swing-bw allreduce on a 16x16 torus: 772; greedy and ring allgather on 24x24: 577, 594; ring
# allgather on 32x32, 1.05 million sends: 610)
BYTES_PER_TREE_SEND = 256  # a send of packed trees expanded by the pipeline rule, peak through expansion,
# verification and the sync and event prices (benchmarks/bench_clusters_explicit.py, whole process at 2,048-4,096
# GPUs: 96-143, 206-227 before the lean columns; MI250 x3's allreduce runs: 159 at 32 M sends, 158 at 64 M)
BYTES_PER_ID = 8  # a used chunk id (int64)
BYTES_PER_VARIABLE = 2200  # per chunk x (link pair + node) x timestep of a TEN model, built in Pyomo
# and loaded into the solver (TEN ILP, mesh 6x6 allgather, horizon 12)

# ---- topologies, from generator parameters ---------------------------------------------------

Resolve = Callable[[dict, str], tuple[str, dict]]


HUGE = 1 << 80  # a count beyond any machine: exponents are capped here before Python computes them


def power(base: int, exp: int) -> int:
    """``base ** exp``, capped at :data:`HUGE` (a parameter such as ``dim = 10**9`` must not
    make the estimate itself expensive).

    >>> power(2, 10), power(10, 10**9) == HUGE
    (1024, True)
    """
    if base <= 1 or exp <= 0:
        return base ** max(exp, 0) if exp >= 0 else 0
    return HUGE if exp * math.log2(base) > 80 else base ** exp


def product(values) -> int:
    """The product of ``values``, capped at :data:`HUGE`."""
    out = 1
    for v in values:
        out = min(out * int(v), HUGE)
    return out


def larger(params: dict, a: str, b: str) -> str:
    """The name of parameter ``a`` or ``b``, whichever is larger (the one to blame for a size)."""
    return a if params[a] >= params[b] else b


def levels(dims: list[int], field: str) -> Counts:
    """The counts of a hierarchy of groups (one level per dimension): NPUs, one switch per
    group at most, and at most every group member linked to every other both ways."""
    n = product(dims)
    return 2 * n, 2 * n * sum(int(d) for d in dims), field


def generator_counts(name: str, params: dict, resolve: Resolve, where: str = "topology") -> Counts | None:
    """``(node ids, directed links, size parameter)`` of generator ``name`` with validated
    ``params``, from the size formula the generator declares (:mod:`collsynth.instances.registry`;
    links are an upper bound); None for the generators of fixed small graphs. ``resolve``
    validates a nested topology table into ``(generator name, parameters)``; a nested table
    reaches the formula as its own counts.

    >>> generator_counts("torus", {"dims": [200, 200]}, None)
    (40000, 160000, 'dims')
    """
    formula = SIZES.get(name)
    if formula is None:
        return None
    nested = {key: _nested(table, resolve, f"{where}.{key}")
              for key, table in sorted(params.items()) if isinstance(table, dict)}
    return formula({**params, **nested})


def _nested(table: dict, resolve: Resolve, where: str) -> Counts:
    name, kwargs = resolve(table, where)
    return generator_counts(name, kwargs, resolve, where) or (0, 0, where.rsplit(".", 1)[-1])


def topology_bytes(nodes: int, links: int) -> int:
    """Memory of a topology with its hop-distance matrix (the peak while both are built)."""
    return nodes * BYTES_PER_NODE + links * BYTES_PER_LINK + DISTANCE_BYTES * nodes * nodes


def check_generator(name: str, params: dict, resolve: Resolve, where: str = "topology") -> None:
    """Refuse a generated topology (and its hop distances) over the memory budget before it
    is built; the error names ``where.<size parameter>``."""
    counts = generator_counts(name, params, resolve, where)
    if counts is None:
        return
    n, links, field = counts
    require(topology_bytes(n, links), f"{where}.{field}",
            f"{name} with {_shown(params, field)} has {_n(n)} nodes and up to {_n(links)} links; "
            "its graph and hop distances")


def check_nodes(nodes: int, links: int, where: str) -> None:
    """Refuse a topology read from a file whose hop distances would not fit (``where``: the
    file field)."""
    require(topology_bytes(nodes, links), where, f"{_n(nodes)} nodes and {_n(links)} links: the graph and hop distances")


def _n(count: int) -> str:
    """A count for a message: ``40,000``, or ``1.2e+24`` when it is astronomical."""
    return f"{count:,}" if count < 10**12 else f"{float(count):.2g}"


def _shown(params: dict, field: str) -> str:
    value = params.get(field)
    return f"{field} = {value!r}" if not isinstance(value, dict) else f"this {field}"


# ---- collectives and runs ------------------------------------------------------------------

def chunk_ids(kind: str, size: int, chunks_per_node: int) -> int:
    """Chunk ids of a collective (see :class:`collsynth.instances.collective.Collective`)."""
    if kind in ("broadcast", "reduce"):
        return chunks_per_node
    if kind == "alltoall":
        return size * size * chunks_per_node
    return size * chunks_per_node


def fewest_sends(kind: str, ranks: int, chunks_per_node: int) -> int:
    """Sends no schedule of the collective can do without: every chunk reaches (or, reduced,
    leaves) each rank that lacks it at least once; allreduce moves it both ways."""
    n, c = ranks, chunks_per_node
    per_rank = {"broadcast": c, "reduce": c, "scatter": c, "gather": c}
    if kind in per_rank:
        return (n - 1) * per_rank[kind]
    if kind == "allreduce":  # each block: n - 1 sends to reduce it, n - 1 to share it
        return 2 * n * (n - 1) * c
    return n * (n - 1) * c  # allgather, reduce_scatter, alltoall


def conditions_bytes(kind: str, size: int, chunks_per_node: int) -> int:
    """The pre/postcondition matrices of one collective (a byte per chunk id and node id each),
    built when a run reads them whole (verifying explicit sends, a TEN model, the bounds'
    demand where no box stands for it)."""
    return 2 * chunk_ids(kind, size, chunks_per_node) * size


def chunk_id_bytes(kind: str, ranks: int, chunks_per_node: int) -> int:
    """What a collective keeps before anything reads its conditions whole: its used chunk ids
    (``BYTES_PER_ID`` each), from which any row of its conditions is read
    (:meth:`collsynth.instances.collective.Collective.condition_rows`)."""
    return BYTES_PER_ID * chunk_ids(kind, ranks, chunks_per_node)


def check_collective(kind: str, size: int, ranks: int, chunks_per_node: int, where: str, topology_field: str) -> None:
    """Refuse a collective whose used chunk ids exceed the memory budget, naming the field that
    makes it big (see :func:`blame`); its condition matrices are counted by the runs that read
    them whole (:func:`check_run`)."""
    need = chunk_id_bytes(kind, ranks, chunks_per_node)
    field = blame(lambda k, c: chunk_id_bytes(k, ranks, c), kind, chunks_per_node, where, topology_field)
    require(need, field, f"{kind} on {_n(ranks)} ranks with {_n(chunks_per_node)} chunk(s) per node: "
                         f"{_n(chunk_ids(kind, ranks, chunks_per_node))} chunk ids")


def blame(need: Callable[[str, int], int], kind: str, chunks_per_node: int, where: str, topology_field: str) -> str:
    """The field that makes ``need(kind, chunks_per_node)`` bytes too many: ``where.chunks_per_node``
    when one chunk per node would fit, ``where.kind`` when an allgather of the same ranks
    would (all-to-all grows as N^3), else ``topology_field`` (the topology's size)."""
    budget = memory_budget()[0]
    if chunks_per_node > 1 and need(kind, 1) <= budget:
        return f"{where}.chunks_per_node"
    if kind == "alltoall" and need("allgather", chunks_per_node) <= budget:
        return f"{where}.kind"
    return topology_field


MIN_CHUNK_ENV = "COLLSYNTH_MIN_CHUNK_BYTES"
MIN_CHUNK_BYTES = 1.0  # the smallest chunk an instance may have, unless the environment sets another


def min_chunk_bytes() -> float:
    """The smallest chunk an instance may have, in bytes: :data:`MIN_CHUNK_BYTES` (one byte),
    or the number in the environment variable ``COLLSYNTH_MIN_CHUNK_BYTES`` (the command
    line's ``--min-chunk-bytes`` sets it for one command)."""
    import os

    text = os.environ.get(MIN_CHUNK_ENV, "").strip()
    if not text:
        return MIN_CHUNK_BYTES
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        from .. import InputError
        raise InputError(MIN_CHUNK_ENV, f"expected a number of bytes >= 0, got {text!r}")
    return value


def check_chunk_bytes(collective: Any, where: str) -> None:
    """Refuse (an InputError naming the field) a collective whose chunks are smaller than
    :func:`min_chunk_bytes`: a chunk is the unit a schedule moves, and no network moves a
    fraction of a byte. The field named is ``chunks_per_node`` when one chunk per node would
    be big enough, else ``message_bytes``.

    >>> from collsynth.instances.collective import make
    >>> many = make("allgather", range(16), 16, chunks_per_node=1000000, message_bytes=1 << 20)
    >>> check_chunk_bytes(many, "collective")
    Traceback (most recent call last):
    collsynth.InputError: collective.chunks_per_node: chunks of 0.0655 B (message_bytes = 1048576 over 16 x ...
    """
    from .. import InputError

    least, chunk = min_chunk_bytes(), collective.chunk_bytes
    if chunk >= least:
        return
    c = collective.chunks_per_node
    field = "chunks_per_node" if chunk * c >= least and c > 1 else "message_bytes"
    parts = c if collective.kind in ("broadcast", "reduce") else f"{len(collective.nodes)} x {c}"
    raise InputError(f"{where}.{field}", f"chunks of {chunk:.3g} B (message_bytes = {collective.message_bytes:.15g} "
                                         f"over {parts} chunks); expected chunks of at least {least:g} B: "
                                         "fewer chunks per node or more bytes")


@dataclass(frozen=True)
class Size:
    """What a run of an instance needs at least: ``sends`` (the fewest sends of a schedule
    of it), ``bytes`` (the instance's arrays and those sends through production, verification
    and pricing), ``variables`` (TEN variables at ``horizon``: chunks x (``pairs``, the
    directed node pairs joined by links, + nodes) x horizon) and ``ten_bytes`` (a TEN model of
    them); ``field`` names the instance field that makes it big."""

    nodes: int
    links: int
    pairs: int
    chunks: int
    sends: int
    horizon: int
    variables: int
    bytes: int
    ten_bytes: int
    field: str

    def describe(self) -> str:
        """One line: nodes, links, chunks, sends, TEN variables and memory."""
        return (f"{_n(self.nodes)} nodes, {_n(self.links)} links, {_n(self.chunks)} chunks, at least "
                f"{_n(self.sends)} sends ({human_bytes(self.bytes)}), {_n(self.variables)} TEN variables "
                f"at horizon {self.horizon} ({human_bytes(self.ten_bytes)})")


def estimate(instance: Any, horizon: int | None = None, variables_per_unit: float = 1.0) -> Size:
    """The :class:`Size` of a run of ``instance`` (an :class:`~collsynth.instances.Instance`).

    ``horizon``: the TEN horizon to count variables at (default: the topology's diameter,
    a lower bound for every TEN schedule). ``variables_per_unit``: a formulation's variables
    per chunk x (link pair + node) x timestep, to refine the count for its own model.
    """
    topo = instance.topology
    n, pairs = topo.size, len(topo.link_arrays)
    h = max(1, int(horizon if horizon is not None else max(topo.diameter, 1)))
    colls = instance.collectives
    # chunk ids some participant holds or needs: a collective over its ranks alone
    chunks = sum(chunk_ids(c.kind, len(c.nodes), c.chunks_per_node) for c in colls)
    sends = sum(fewest_sends(c.kind, len(c.nodes), c.chunks_per_node) for c in colls)
    variables = int(chunks * (pairs + n) * h * variables_per_unit)
    base = topology_bytes(n, topo.num_links)

    def need(kind: str, c: int, coll=colls[0]) -> int:  # the first collective as (kind, c), the others as they are
        rest = sum(conditions_bytes(x.kind, n, x.chunks_per_node) + BYTES_PER_SEND * fewest_sends(
            x.kind, len(x.nodes), x.chunks_per_node) for x in colls[1:])
        return base + rest + conditions_bytes(kind, n, c) + BYTES_PER_SEND * fewest_sends(kind, len(coll.nodes), c)

    where = "collective" if len(colls) == 1 else "collective[0]"
    field = blame(need, colls[0].kind, colls[0].chunks_per_node, where, topology_field(topo))
    return Size(n, topo.num_links, pairs, chunks, sends, h, variables, need(colls[0].kind, colls[0].chunks_per_node),
                variables * BYTES_PER_VARIABLE, field)


@dataclass(frozen=True)
class Build:
    """What a producer declares its run will build, before it starts: ``bytes`` of the
    schedule as the producer keeps it (through production, verification and pricing),
    ``what`` it is (for a refusal), ``field``, the setting that makes it big (a parameter
    the user can change, or the topology field), ``reads_conditions``: whether the run
    reads the collectives' condition matrices whole (False: ``bytes`` counts the rows it reads),
    and ``sends``: the sends the run is expected to emit, verify and price at its default
    settings where that is more than the fewest of any schedule (a pipeline's pieces; None: the
    fewest), which decides whether the run compiles its kernels
    (:func:`collsynth.solvers.compiling.interprets`)."""

    bytes: int
    what: str
    field: str
    reads_conditions: bool = True
    sends: int | None = None


def check_run(instance: Any, build: Build | None = None) -> Size:
    """Refuse (:class:`~collsynth.limits.TooBig`) a run whose schedule and instance arrays
    exceed the memory budget; returns the :class:`Size` otherwise (counted at horizon 1: a
    run's own arrays do not depend on a horizon, and the all-pairs diameter would take seconds
    on thousands of nodes before the run's clock starts). The schedule is ``build`` when the
    run's producer declares what it will build (a schedule kept as trees plus a rule is
    smaller than its sends), else the fewest sends any schedule of the instance has.

    >>> from collsynth.instances import make_instance
    >>> from collsynth.instances.generators import build as generate
    >>> inst = make_instance(generate("ring", {"nodes": 8}), "allgather")
    >>> check_run(inst, Build(1 << 90, "a schedule listed in full", "--param form")).sends
    Traceback (most recent call last):
    collsynth.limits.TooBig: --param form: too big: a schedule listed in full need about ...
    """
    size = estimate(instance, horizon=1)
    if build is None:
        require(size.bytes, size.field, f"the instance's arrays and a schedule of at least {_n(size.sends)} sends")
        return size
    arrays = size.bytes - BYTES_PER_SEND * size.sends  # the topology and the pre/postconditions
    if not build.reads_conditions:  # the topology and the chunk ids; the build counts what it reads of the rest
        arrays = topology_bytes(size.nodes, size.links) + sum(
            chunk_id_bytes(c.kind, len(c.nodes), c.chunks_per_node) for c in instance.collectives)
    require(arrays, size.field, "the instance's arrays")
    require(arrays + build.bytes, build.field, build.what)
    return size


def check_ten(instance: Any, horizon: int | None = None, variables_per_unit: float = 1.0) -> Size:
    """Refuse (:class:`~collsynth.limits.TooBig`) a TEN model of ``instance`` at ``horizon``
    over the memory budget; returns the :class:`Size` otherwise."""
    size = estimate(instance, horizon, variables_per_unit)
    require(size.ten_bytes, size.field, f"the {_n(size.variables)} variables of a TEN model ({_n(size.chunks)} chunks "
                                        f"x ({_n(size.pairs)} links + {_n(size.nodes)} nodes) x {size.horizon} timesteps)")
    return size


def topology_field(topology: Any) -> str:
    """The instance field that sets a topology's size: ``topology.<size parameter>`` of its
    generator (``topology.base`` for a generator of a nested topology), or ``topology.file``."""
    meta = topology.meta or {}
    name, params = meta.get("generator"), meta.get("params") or {}
    formula = SIZES.get(name)
    if formula is None:
        return "topology" if name else "topology.file"
    if any(isinstance(value, dict) for value in params.values()):
        return "topology.base"
    try:
        return f"topology.{formula(params)[2]}"
    except (KeyError, TypeError):
        return "topology"
