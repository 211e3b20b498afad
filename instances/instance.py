"""Instance: a topology, one or more collectives on it, and what is expected of a solution.

Instances are read from TOML files (``docs/instances.md``)::

    name = "mesh4x4-failed-allgather"
    suites = ["quick"]                # optional: which corpus suites list it
    [topology]
    generator = "mesh"                # or: file = "graphs/x.graphml" (.json node-link, .csv)
    dims = [4, 4]
    bandwidth = 100e9
    alpha = 0.5e-6
    failed_nodes = [7, 9]
    latency = "serial"                # or "pipelined": alpha delays arrivals, not link occupancy
    [collective]                      # or [[collective]] tables for concurrent collectives
    kind = "allgather"
    chunks_per_node = 1
    message_bytes = 1048576
    [expect]
    optimal_steps = 13

An optional top-level ``epoch = "fastest-link"`` (or ``"slowest-link"``) sets the TEN timestep
to one chunk's time on the fastest (slowest) physical link, TE-CCL's epoch choice
(:func:`epoch_timestep`), so epoch counts compare with TE-CCL's. Published numbers a run is
compared with are ``[[expect.paper]]`` tables (:func:`paper_entry_from_dict`): each names the
paper's table, the metric, our producer that stands for the paper's method, the value and
its source.

Every key is described in ``docs/instances.md``. Every error is an
:class:`~collsynth.InputError` naming the file and the field.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np

from .. import InputError
from . import files, generators, size
from .collective import Collective, make
from .switch_ops import check_switch_ops, with_switch_ops
from .topology import LATENCIES, Topology, with_latency

EXPECT_KEYS = {
    "optimal_steps": int,
    "lower_bound_steps": int,
    "upper_bound_steps": int,
    "optimal_time_s": float,
    "lower_bound_s": float,
    "bw_optimal": bool,
    "moore_optimal": bool,
    "note": str,
    "paper": list,
}
TOP_KEYS = {"name", "description", "suites", "epoch", "topology", "collective", "expect"}
EPOCHS = ("fastest-link", "slowest-link")
# What a published number measures, and how ours is computed (collsynth.results.paper):
# normalized_time: our time over the reference method's time (the paper's normalisation);
# synthesis_s / solver_s: wall time of the run; epochs: TEN timesteps of the schedule;
# finish_time_s: epochs x epoch duration; algo_bandwidth_GBps: output buffer / finish time.
PAPER_METRICS = ("normalized_time", "synthesis_s", "solver_s", "epochs", "finish_time_s", "algo_bandwidth_GBps")
PAPER_KEYS = {"table": str, "row": str, "column": str, "metric": str, "producer": str, "driver": str,
              "reference": str, "reference_driver": str, "model": str, "value": float, "source": str, "why": str}
PAPER_REQUIRED = ("table", "metric", "producer", "source")
COLLECTIVE_KEYS = {"kind", "root", "chunks_per_node", "message_bytes", "nodes", "name"}
# [topology] keys besides a generator's own parameters (see `collsynth topologies`)
TOPOLOGY_KEYS = {"generator", "file", "directed", "bandwidth", "alpha", "failed_nodes", "failed_links", "latency",
                 "reduce", "copy"}
FILE_TOPOLOGY_KEYS = TOPOLOGY_KEYS - {"generator"}


@dataclass(frozen=True, eq=False)
class Instance:
    """A topology with one or more concurrent collectives (each with its own chunk ids).

    The i-th collective's chunk ids are shifted by ``chunk_offsets[i]`` in a merged schedule.
    """

    name: str
    topology: Topology
    collectives: tuple[Collective, ...]
    expect: dict = field(default_factory=dict)
    source: str = ""
    suites: tuple[str, ...] = ()
    description: str = ""
    epoch: str = ""

    def __repr__(self) -> str:
        """A short repr: name, topology size, each collective's kind, ranks and message size.

        >>> from collsynth.instances import CORPUS
        >>> load_instance(CORPUS / "ring8-allgather.toml")
        Instance('ring8-allgather': 8 nodes, 16 links; allgather on 8 ranks, 1,048,576 B)
        """
        colls = "; ".join(f"{c.kind} on {len(c.nodes)} ranks, {c.message_bytes:,.0f} B" for c in self.collectives)
        return f"Instance({self.name!r}: {self.topology.size} nodes, {self.topology.graph.number_of_edges()} links; {colls})"

    @property
    def collective(self) -> Collective:
        """The one collective of a single-collective instance."""
        if len(self.collectives) != 1:
            raise InputError(self.source or self.name, "this instance has concurrent collectives; expected exactly one")
        return self.collectives[0]

    @property
    def concurrent(self) -> bool:
        """True when several collectives share the network."""
        return len(self.collectives) > 1

    @property
    def chunk_offsets(self) -> tuple[int, ...]:
        """First chunk id of each collective in a merged (concurrent) schedule."""
        out, acc = [], 0
        for c in self.collectives:
            out.append(acc)
            acc += c.num_chunks
        return tuple(out)

    def summary(self) -> dict:
        """The `collsynth instance --json` fields."""
        return {
            "instance": self.name,
            "source": self.source,
            "suites": list(self.suites),
            "topology": self.topology.summary(),
            "collectives": [c.describe() for c in self.collectives],
            "expect": dict(self.expect),
            "epoch": self.epoch or None,
            "epoch_timestep_s": epoch_timestep(self),
        }


def make_instance(
    topology: Topology,
    kind: str,
    *,
    name: str = "",
    chunks_per_node: int = 1,
    message_bytes: float = 1 << 20,
    root: int | None = None,
    nodes=None,
    expect: dict | None = None,
) -> Instance:
    """A single-collective instance over the live NPUs of ``topology`` (for code and tests)."""
    check_topology(topology, "topology")
    coll = make(
        kind,
        topology.npus if nodes is None else nodes,
        topology.size,
        chunks_per_node=chunks_per_node,
        message_bytes=message_bytes,
        root=root,
    )
    check_reachable(topology, coll, "collective")
    check_switch_ops(topology, (coll,), topology.meta.get("file", "topology"))
    return Instance(name=name or f"{topology.name}-{kind}", topology=topology, collectives=(coll,), expect=dict(expect or {}))


def load_instance(path: str | Path) -> Instance:
    """Read and validate an instance TOML file; errors name the file and the field."""
    path = Path(path)
    where = str(path)
    text = files.read_text(path)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise InputError(where, f"malformed TOML: {e}") from None
    try:
        return instance_from_dict(data, base_dir=path.parent, source=where)
    except InputError as e:
        if e.where.startswith(where):
            raise
        raise InputError(f"{where}: {e.where}", e.what) from None


def instance_from_dict(data: dict[str, Any], *, base_dir: Path = Path("."), source: str = "") -> Instance:
    """Validate a parsed instance table (see the module docstring for the format)."""
    for key in data:
        if key not in TOP_KEYS:
            raise InputError(key, f"unknown key; expected one of {', '.join(sorted(TOP_KEYS))}")
    name = data.get("name")
    if not isinstance(name, str) or not name:
        raise InputError("name", "expected a non-empty string")
    suites = data.get("suites", [])
    if not isinstance(suites, list) or not all(isinstance(s, str) for s in suites):
        raise InputError("suites", "expected a list of suite names")
    if "topology" not in data or not isinstance(data["topology"], dict):
        raise InputError("topology", "missing [topology] table")
    topology = topology_from_dict(data["topology"], base_dir=base_dir)
    raw = data.get("collective")
    if raw is None:
        raise InputError("collective", "missing [collective] table")
    tables = raw if isinstance(raw, list) else [raw]
    if not tables or not all(isinstance(t, dict) for t in tables):
        raise InputError("collective", "expected a [collective] table or [[collective]] tables")
    collectives = []
    for i, table in enumerate(tables):
        where = "collective" if not isinstance(raw, list) else f"collective[{i}]"
        collectives.append(collective_from_dict(table, topology, where))
    check_switch_ops(topology, collectives, _topology_source(data["topology"], base_dir))
    expect = expect_from_dict(data.get("expect", {}))
    description = data.get("description", "")
    if not isinstance(description, str):
        raise InputError("description", f"expected a string, got {description!r}")
    epoch = data.get("epoch", "")
    if epoch not in ("", *EPOCHS):
        raise InputError("epoch", f"expected one of {', '.join(EPOCHS)}, got {epoch!r}")
    return Instance(
        name=name,
        topology=topology,
        collectives=tuple(collectives),
        expect=expect,
        source=source,
        suites=tuple(suites),
        description=description,
        epoch=epoch,
    )


def epoch_timestep(instance: Instance) -> float | None:
    """The TEN timestep (s) of the instance's ``epoch`` choice; None without one (TEN default).

    TE-CCL (Liu et al., SIGCOMM 2024 (TE-CCL), its epochs, and the repository's
    ``teccl/input_data.py`` ``EpochType``: FASTEST_LINK / SLOWEST_LINK) sets the epoch to the time one chunk takes on
    the fastest (slowest) link. Here a link's chunk time is the TEN's own cost
    ``alpha + chunk_bytes / bandwidth`` (so with ``fastest-link`` the fastest link takes exactly
    one timestep, as in TACOS section IV-C), or ``chunk_bytes / bandwidth`` exactly as TE-CCL's
    epoch when the topology's latency is pipelined (``meta["latency"]``,
    :func:`collsynth.tens.ten.latency_pipelined`), over the physical link classes of
    ``topology.meta["link_classes"]`` when the generator declares them (per-port figures before
    switch unwinding), else over the live links (one parallel link each). The chunk is the
    largest of the instance's collectives.

    >>> from dataclasses import replace
    >>> from collsynth.instances import generators
    >>> t = generators.build("ring", {"nodes": 3}, bandwidth=1e9, alpha=1e-6)
    >>> inst = make_instance(t, "allgather", message_bytes=3e6)
    >>> epoch_timestep(inst) is None, round(epoch_timestep(replace(inst, epoch="slowest-link")), 9)
    (True, 0.001001)
    """
    if not instance.epoch:
        return None
    chunk = max(c.chunk_bytes for c in instance.collectives)
    classes = instance.topology.meta.get("link_classes")
    serial = float(instance.topology.meta.get("latency", "serial") != "pipelined")  # pipelined: no alpha
    if classes:
        present = {cls for _, _, cls in instance.topology.graph.edges(data="link_class")}
        costs = [serial * c["alpha"] + chunk / c["bandwidth"] for name, c in classes.items() if name in present]
    else:
        la = instance.topology.link_arrays
        costs = list(serial * la.alpha + chunk / (la.bandwidth / np.maximum(la.count, 1)))
    if not costs:
        raise InputError(instance.source or instance.name, "epoch: the topology has no live links")
    return float(min(costs) if instance.epoch == "fastest-link" else max(costs))


def topology_from_dict(table: dict[str, Any], *, base_dir: Path = Path("."), where: str = "topology") -> Topology:
    """Build the topology of a ``[topology]`` table: a generator or a file, then failures."""
    table = dict(table)
    failed_nodes = table.pop("failed_nodes", [])
    failed_links = table.pop("failed_links", [])
    bandwidth = _native(table.pop("bandwidth", None), float, f"{where}.bandwidth")
    alpha = _native(table.pop("alpha", None), float, f"{where}.alpha")
    latency = table.pop("latency", "serial")
    ops = {key: table.pop(key, []) for key in ("reduce", "copy")}
    named = where  # what a disconnection error names: the table, and the file it reads
    if "generator" in table and "file" in table:
        raise InputError(where, "give either 'generator' or 'file', not both")
    if "generator" in table:
        gen = table.pop("generator")
        if not isinstance(gen, str):
            raise InputError(f"{where}.generator", f"expected a generator name, got {gen!r}")
        topo = generators.build(gen, table, bandwidth=bandwidth, alpha=alpha, where=where, text=False)
    elif "file" in table:
        fname = table.pop("file")
        directed = table.pop("directed", None)
        if table:
            raise InputError(f"{where}.{next(iter(table))}",
                             f"unknown key for a topology file; expected one of {', '.join(sorted(FILE_TOPOLOGY_KEYS))}")
        if not isinstance(fname, str):
            raise InputError(f"{where}.file", f"expected a path, got {fname!r}")
        topo = files.read_topology(base_dir / fname, bandwidth=bandwidth, alpha=alpha, directed=directed)
        size.check_nodes(topo.size, topo.num_links, f"{where}.file")
        named = f"{where}.file {base_dir / fname}"  # a disconnected file's error names it too
    else:
        raise InputError(where, "expected 'generator = NAME' or 'file = PATH'")
    if not isinstance(failed_nodes, list) or not all(isinstance(n, int) and not isinstance(n, bool) for n in failed_nodes):
        raise InputError(f"{where}.failed_nodes", "expected a list of node ids")
    if not isinstance(failed_links, list) or not all(
        isinstance(p, list) and len(p) == 2 and all(isinstance(x, int) and not isinstance(x, bool) for x in p)
        for p in failed_links
    ):
        raise InputError(f"{where}.failed_links", "expected a list of [u, v] node-id pairs")
    if failed_nodes or failed_links:
        try:
            topo = topo.with_failures(failed_nodes, [tuple(p) for p in failed_links])
        except InputError as e:
            raise InputError(f"{where}.{e.where}", e.what) from None
    for key, ids in ops.items():
        if not isinstance(ids, list) or not all(isinstance(n, int) and not isinstance(n, bool) for n in ids):
            raise InputError(f"{where}.{key}", "expected a list of switch node ids")
    topo = with_switch_ops(topo, ops["reduce"], ops["copy"], where=where)
    if latency not in LATENCIES:
        raise InputError(f"{where}.latency", f"expected one of {', '.join(LATENCIES)}, got {latency!r}")
    if latency != "serial":
        topo = with_latency(topo, latency)
    check_topology(topo, named)
    return topo


def _topology_source(table: dict, base_dir: Path) -> str:
    """What a switch attribute's error names: the topology file, else the ``[topology]`` table."""
    return str(base_dir / table["file"]) if isinstance(table.get("file"), str) else "topology"


def _native(value: Any, typ: type, where: str) -> Any:
    """A value read from a file converted to ``typ`` (None stays None): a string is not parsed."""
    return None if value is None else generators.coerce(value, typ, where, text=False)


def check_topology(topo: Topology, where: str) -> None:
    """Reject a topology whose live NPUs cannot all reach each other."""
    if len(topo.npus) < 2:
        raise InputError(where, f"expected at least 2 live NPUs, got {len(topo.npus)}")
    if not topo.reach_each_other(topo.npus):
        d = topo.distances
        ids = np.asarray(topo.npus)
        sub = d[np.ix_(ids, ids)]
        u, v = np.argwhere(sub < 0)[0]
        raise InputError(where, f"disconnected topology: node {ids[u]} cannot reach node {ids[v]}{one_way_hint(topo)}")


def one_way_hint(topo: Topology) -> str:
    """What to say when a file read as directed is disconnected but would be connected with
    every link both ways (an undirected edge list read as one-way links)."""
    if "file" not in topo.meta or not topo.meta.get("directed") or not nx.is_weakly_connected(topo.graph):
        return ""
    return ("; the file's links are one-way: for an undirected edge list write 'directed = false' "
            "under [topology] (or a '# directed = false' line in a CSV file)")


def collective_from_dict(table: dict[str, Any], topology: Topology, where: str = "collective") -> Collective:
    """Validate a ``[collective]`` table against the topology (roots and nodes must be live)."""
    for key in table:
        if key not in COLLECTIVE_KEYS:
            raise InputError(f"{where}.{key}", f"unknown key; expected one of {', '.join(sorted(COLLECTIVE_KEYS))}")
    if "kind" not in table:
        raise InputError(f"{where}.kind", "missing collective kind")
    if not isinstance(table.get("name", ""), str):
        raise InputError(f"{where}.name", f"expected a string, got {table['name']!r}")
    nodes = table.get("nodes", list(topology.npus))
    if not isinstance(nodes, list) or not all(isinstance(n, int) and not isinstance(n, bool) for n in nodes):
        raise InputError(f"{where}.nodes", "expected a list of node ids")
    live = set(topology.npus)
    for n in nodes:
        if n in topology.failed_nodes:
            raise InputError(f"{where}.nodes", f"node {n} has failed")
        if n not in live and 0 <= n < topology.size:
            raise InputError(f"{where}.nodes", f"node {n} is a switch, not an NPU")
    root = table.get("root")
    if isinstance(root, int) and not isinstance(root, bool) and root in topology.failed_nodes:
        raise InputError(f"{where}.root", f"root {root} is a failed node")
    coll = make(
        table["kind"],
        nodes,
        topology.size,
        chunks_per_node=table.get("chunks_per_node", 1),
        message_bytes=table.get("message_bytes", 1 << 20),
        root=root,
        where=where,
    )
    size.check_collective(coll.kind, topology.size, len(coll.nodes), coll.chunks_per_node, where,
                          size.topology_field(topology))
    size.check_chunk_bytes(coll, where)
    check_reachable(topology, coll, where)
    return coll


def check_reachable(topology: Topology, coll: Collective, where: str) -> None:
    """Every participant must reach every other through live links (else the collective is impossible)."""
    if topology.reach_each_other(coll.nodes):
        return
    ids = np.asarray(coll.nodes)
    sub = topology.distances[np.ix_(ids, ids)]
    if (sub < 0).any():
        u, v = np.argwhere(sub < 0)[0]
        raise InputError(where, f"impossible collective: node {ids[u]} cannot reach node {ids[v]}")


def expect_from_dict(table: Any) -> dict:
    """Validate the optional ``[expect]`` table (known optima and bounds, published numbers)."""
    if not isinstance(table, dict):
        raise InputError("expect", "expected a table")
    out = {}
    for key, value in table.items():
        if key not in EXPECT_KEYS:
            raise InputError(f"expect.{key}", f"unknown key; expected one of {', '.join(sorted(EXPECT_KEYS))}")
        if key == "paper":
            if not isinstance(value, list) or not value:
                raise InputError("expect.paper", "expected [[expect.paper]] tables")
            out[key] = [paper_entry_from_dict(e, f"expect.paper[{i}]") for i, e in enumerate(value)]
            continue
        typ = EXPECT_KEYS[key]
        ok = isinstance(value, typ) and not (typ is not bool and isinstance(value, bool))
        if typ is float and isinstance(value, int) and not isinstance(value, bool):
            ok, value = True, float(value)
        if not ok:
            raise InputError(f"expect.{key}", f"expected {typ.__name__}, got {value!r}")
        out[key] = value
    return out


def paper_entry_from_dict(entry: Any, where: str) -> dict:
    """Validate one ``[[expect.paper]]`` table: a published number and what it is compared with.

    Keys: ``table`` (the paper and table, e.g. "TACOS Table I"), ``row``, ``column`` (the
    paper's labels), ``metric`` (one of :data:`PAPER_METRICS`), ``producer`` and optional
    ``driver`` (our method standing for the paper's), ``reference`` / ``reference_driver``
    (the method ``normalized_time`` divides by, as the paper normalises), ``model`` (the cost
    model of a time: sync, ten or event; default event), ``value`` (the paper's number;
    omitted when it cannot be derived) and ``source`` (where the number is printed), ``why``
    (required without a value: why it cannot be derived; else an optional caveat).
    """
    if not isinstance(entry, dict):
        raise InputError(where, "expected a table")
    out = {}
    for key, value in entry.items():
        if key not in PAPER_KEYS:
            raise InputError(f"{where}.{key}", f"unknown key; expected one of {', '.join(sorted(PAPER_KEYS))}")
        typ = PAPER_KEYS[key]
        if typ is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, typ) or isinstance(value, bool):
            raise InputError(f"{where}.{key}", f"expected {typ.__name__}, got {value!r}")
        out[key] = value
    for key in PAPER_REQUIRED:
        if key not in out:
            raise InputError(f"{where}.{key}", "missing")
    if out["metric"] not in PAPER_METRICS:
        raise InputError(f"{where}.metric", f"expected one of {', '.join(PAPER_METRICS)}, got {out['metric']!r}")
    if out["metric"] == "normalized_time" and "reference" not in out:
        raise InputError(f"{where}.reference", "a normalized_time needs the reference method it divides by")
    if "value" not in out and "why" not in out:
        raise InputError(f"{where}.why", "without a value, say why the paper value cannot be derived")
    return out
