"""Readers for the peers' own inputs: TE-CCL input JSON, TACCL topology profiles, msccl-tools topologies.

Each reader turns one peer file into an :class:`~collsynth.instances.Instance` built from this
package's generators where the peer's system is one of them (TE-CCL's NDv2, DGX2, DGX1 and
AMD are :mod:`collsynth.instances.systems`'s ``ndv2``, ``dgx2`` and ``mi250``), and raises
:class:`~collsynth.InputError` with ``where = "<file>: <field>"`` on anything it cannot map:
an unknown topology name, a missing field, a matrix that is not square, a bandwidth
constraint that is no switch. Reader options (``collsynth instance FILE --from taccl
--peer nodes=2``) say what the peer takes from its command line rather than from the file.

- :func:`read_teccl`: TE-CCL's ``TopologyParams`` / ``InstanceParams`` JSON (repository
  microsoft/TE-CCL, ``teccl/input_data.py``; Liu et al., SIGCOMM 2024 (TE-CCL)).
- :func:`read_taccl`: TACCL's topology profile JSON (microsoft/taccl ``INPUT_GUIDE.md``,
  ``taccl/topologies/generic.py``; Shah et al., NSDI 2023 (TACCL)), with an optional sketch file for
  the node count and inter-node wiring.
- :func:`read_msccl`: msccl-tools' named topologies (``msccl/topologies/*.py``) or a
  serialized topology (``{"msccl_type": "topology", "links": ..., "switches": ...}``;
  repository microsoft/msccl-tools, the tools of Cowan et al., ASPLOS 2023 (MSCCLang)).
"""

from __future__ import annotations

import contextlib
import json
import math
import re
from pathlib import Path
from typing import Any, Iterator

from .. import InputError
from . import files, generators, systems
from .generators import DEFAULT_ALPHA, DEFAULT_BANDWIDTH
from .instance import Instance, make_instance
from .topology import Topology, with_latency

GB = 1e9  # TE-CCL's chunk_size and capacities are in GB and GB/s
TECCL_TOPOLOGIES = ("NDv2", "DGX2", "DGX1", "AMD", "Mesh")
TECCL_COLLECTIVES = {1: "allgather", 2: "alltoall"}
TECCL_EPOCHS = {1: "fastest-link", 2: "slowest-link"}
TACCL_TOPOLOGIES = ("NDv2", "DGX2", "HubAndSpoke", "custom")
TACCL_INTERNODE = {"NDv2": {"0": [1]}, "DGX2": {str(2 * k + 1): [2 * k] for k in range(8)}}
MSCCL_SIZED = ("Ring", "FullyConnected", "HubAndSpoke", "Line", "Star")
MSCCL_FIXED = ("DGX1", "DGX2", "AMD4", "AMD8", "DGX_A100")
FORMATS = ("teccl", "taccl", "msccl")
TACCL_OPTIONS = ("collective", "time_unit_s", "topology", "chunk_bytes", "nodes", "sketch", "unwind")
MSCCL_OPTIONS = ("nodes", "bandwidth", "alpha", "collective", "message_bytes", "unwind")
READER_OPTIONS = {"teccl": (), "taccl": TACCL_OPTIONS, "msccl": MSCCL_OPTIONS}  # what --peer k=v takes

# msccl-tools msccl/topologies/amd.py (links[dst][src], bandwidth units)
MSCCL_AMD4 = ((0, 1, 1, 0), (1, 0, 0, 1), (1, 0, 0, 1), (0, 1, 1, 0))
MSCCL_AMD8 = (
    (0, 5, 6, 6, 5, 6, 5, 5), (5, 0, 5, 5, 6, 5, 6, 6), (6, 5, 0, 6, 5, 6, 5, 5), (6, 5, 6, 0, 5, 6, 5, 5),
    (5, 6, 5, 5, 0, 5, 6, 6), (6, 5, 6, 6, 5, 0, 5, 5), (5, 6, 5, 5, 6, 5, 0, 6), (5, 6, 5, 5, 6, 5, 6, 0),
)


def read_peer(path: str | Path, fmt: str, options: dict[str, str] | None = None) -> Instance:
    """Read ``path`` in the peer format ``fmt`` (teccl, taccl or msccl) with reader ``options``."""
    readers = {"teccl": read_teccl, "taccl": read_taccl, "msccl": read_msccl}
    if fmt not in readers:
        raise InputError("--from", f"expected one of {', '.join(FORMATS)}, got {fmt!r}")
    options = dict(options or {})
    _no_more({k: v for k, v in options.items() if k not in READER_OPTIONS[fmt]}, fmt)
    return readers[fmt](path, **options)


# ---- shared checks -------------------------------------------------------------------------

@contextlib.contextmanager
def _in_file(where: str | Path) -> Iterator[None]:
    """Errors raised inside name the file first: ``<file>: <field>`` (once: an error that
    already starts with the file's name is passed on as it is)."""
    try:
        yield
    except InputError as e:
        if e.where == str(where) or e.where.startswith(f"{where}: "):
            raise
        raise InputError(f"{where}: {e.where}".rstrip(": "), e.what) from None


def _json_object(path: Path, expected: str) -> dict:
    """The JSON object in ``path``; anything else is refused naming the file and ``expected``."""
    data = _load_json(path)
    if not isinstance(data, dict):
        raise InputError(str(path), f"expected {expected}")
    return data


def _load_json(path: Path) -> Any:
    text = files.read_text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(str(path), f"malformed JSON: {e}") from None


def _field(table: dict, key: str, typ: type | tuple, where: str, default: Any = ...) -> Any:
    """``table[key]`` checked against ``typ``; missing without a default is an error."""
    if key not in table:
        if default is ...:
            raise InputError(f"{where}.{key}" if where else key, "missing")
        return default
    value = table[key]
    types = typ if isinstance(typ, tuple) else (typ,)
    if isinstance(value, bool) and bool not in types or not isinstance(value, types):
        names = " or ".join(t.__name__ for t in types)
        raise InputError(f"{where}.{key}" if where else key, f"expected {names}, got {value!r}")
    return value


def _square(matrix: Any, n: int | None, where: str) -> list[list[float]]:
    """A square matrix of non-negative numbers (``n`` rows when given)."""
    if not isinstance(matrix, list) or not matrix:
        raise InputError(where, "expected a square matrix (a list of rows)")
    size = len(matrix) if n is None else n
    if len(matrix) != size:
        raise InputError(where, f"expected {size} rows, got {len(matrix)}")
    for i, row in enumerate(matrix):
        if not isinstance(row, list) or len(row) != size:
            got = len(row) if isinstance(row, list) else type(row).__name__
            raise InputError(where, f"expected a square {size} x {size} matrix; row {i} has {got} entries")
        for x in row:
            if isinstance(x, bool) or not isinstance(x, (int, float)) or x < 0:
                raise InputError(where, f"expected non-negative numbers; row {i} has {x!r}")
    return [[float(x) for x in row] for row in matrix]


def _option(options: dict, key: str, typ: Any, default: Any, low: float | None = None, above: bool = False) -> Any:
    """Reader option ``key`` (popped from ``options``) as ``typ``, ``default`` when absent; with
    ``low`` it must be a finite value >= ``low`` (> ``low`` when ``above``)."""
    if key not in options:
        return default
    value = generators.coerce(options.pop(key), typ, f"--peer {key}")
    if low is not None and not (math.isfinite(value) and (value > low if above else value >= low)):
        what = "an integer" if typ is int else "a finite number"
        raise InputError(f"--peer {key}", f"expected {what} {'>' if above else '>='} {low:g}, got {value!r}")
    return value


def _no_more(options: dict, fmt: str) -> None:
    """Refuse reader options the ``fmt`` reader does not take, naming the ones it does."""
    if options:
        known = READER_OPTIONS[fmt]
        takes = f"expected one of {', '.join(known)}" if known else "it takes none (everything is in the file)"
        raise InputError(f"--peer {', '.join(options)}", f"unknown option for the {fmt} reader; {takes}")


def _instance(path: Path, topology: Topology, kind: str, message_bytes: float, chunks: int, epoch: str = "") -> Instance:
    with _in_file(path):  # make_instance checks that every NPU reaches every other
        inst = make_instance(topology, kind, name=f"{path.stem}", chunks_per_node=chunks, message_bytes=message_bytes)
    return Instance(name=inst.name, topology=inst.topology, collectives=inst.collectives, source=str(path), epoch=epoch)


# ---- TE-CCL --------------------------------------------------------------------------------

def read_teccl(path: str | Path, **options: str) -> Instance:
    """A TE-CCL input JSON (``TopologyParams``, ``InstanceParams``) as an Instance.

    The topology is TE-CCL's by name (repository microsoft/TE-CCL, ``teccl/topologies``):
    ``NDv2`` -> ``ndv2(chassis, inter_chassis = "direct" for 2 chassis, else "switch")`` (its
    InfiniBand switch's hop to a GPU timed as the DGX-2's NVSwitch below),
    ``DGX2`` -> ``dgx2(2)`` (TE-CCL builds 2 chassis only; its NVSwitch kept as a switch node
    whose hop to a GPU is instant in an allgather unless ``InstanceParams.switch_to_gpu_link_on``
    is true, and takes an epoch in an all-to-all, as in TE-CCL's allgather.py and alltoall.py:
    topology ``switch_hop``), ``DGX1`` -> the cube-mesh at
    25 GB/s per NVLink and ``alpha[0]``, ``AMD`` -> ``mi250(chassis)`` with ``alpha`` as
    (xGMI, NIC) alphas, ``Mesh`` -> TE-CCL's mesh (node i linked to i +- 1 and i +- side over
    the whole id range, so a row's last node also links to the next row's first, 100 GB/s,
    ``alpha[0]``). ``chunk_size`` is in GB (1e9 bytes); the collective (1 allgather,
    2 alltoall) moves ``num_chunks`` chunks per GPU (allgather) or per GPU pair (alltoall),
    so the output buffer is GPUs x num_chunks x chunk_size. ``epoch_type`` 1 / 2 become the
    instance's ``epoch`` (fastest-link / slowest-link); a user epoch (3) or an
    ``epoch_multiplier`` other than 1 has no counterpart and is refused. The topology's latency
    is pipelined (``meta["latency"]``, :mod:`collsynth.tens.ten`): TE-CCL's epoch is the
    transmission time and a link's alpha adds ``ceil(alpha / epoch)`` epochs to the arrival
    (its ``get_alpha_num_back``), overlapping the next chunk's transmission.
    """
    _no_more(options, "teccl")
    path = Path(path)
    data = _json_object(path, "a JSON object with TopologyParams and InstanceParams")
    with _in_file(path):
        topo_p = _field(data, "TopologyParams", dict, "")
        inst_p = _field(data, "InstanceParams", dict, "")
        link_on = _field(inst_p, "switch_to_gpu_link_on", bool, "InstanceParams", False)
        kind = _teccl_choice(inst_p, "collective", TECCL_COLLECTIVES)
        # its allgather honours the flag; its all-to-all LP forwards out of a switch the epoch after
        topology = _teccl_topology(topo_p, "instant" if kind == "allgather" and not link_on else "timestep")
        epoch = _teccl_choice(inst_p, "epoch_type", TECCL_EPOCHS)
        if _field(inst_p, "epoch_multiplier", (int, float), "InstanceParams", 1) != 1:
            raise InputError("InstanceParams.epoch_multiplier", "only 1 maps to an epoch choice (a multiple of it does not)")
        if _field(inst_p, "epoch_duration", (int, float), "InstanceParams", -1) != -1:
            raise InputError("InstanceParams.epoch_duration", "a user epoch duration has no counterpart; expected -1")
        chunks = _field(inst_p, "num_chunks", int, "InstanceParams", 1)
        if chunks < 1:
            raise InputError("InstanceParams.num_chunks", f"expected a positive integer, got {chunks}")
        chunk_gb = _field(topo_p, "chunk_size", (int, float), "TopologyParams")
        if not chunk_gb > 0:
            raise InputError("TopologyParams.chunk_size", f"expected a positive size in GB, got {chunk_gb}")
    message = len(topology.npus) * chunks * chunk_gb * GB
    # TE-CCL's links are busy for the transmission and alpha only delays the arrival
    return _instance(path, with_latency(topology, "pipelined"), kind, message, chunks, epoch)


def _teccl_choice(table: dict, key: str, choices: dict) -> str:
    value = _field(table, key, int, "InstanceParams")
    if value not in choices:
        raise InputError(f"InstanceParams.{key}", f"expected one of {', '.join(f'{k} ({v})' for k, v in choices.items())}, got {value}")
    return choices[value]


def _teccl_topology(p: dict, switch_hop: str) -> Topology:
    name = _field(p, "name", str, "TopologyParams")
    if name not in TECCL_TOPOLOGIES:
        raise InputError("TopologyParams.name", f"unknown topology {name!r}; TE-CCL's topologies: {', '.join(TECCL_TOPOLOGIES)}")
    chassis = _field(p, "chassis", int, "TopologyParams")
    alpha = _field(p, "alpha", list, "TopologyParams", [0.0, 0.0])
    if len(alpha) != 2 or not all(isinstance(a, (int, float)) and not isinstance(a, bool) and a >= 0 for a in alpha):
        raise InputError("TopologyParams.alpha", f"expected [link alpha, switch alpha] in seconds, got {alpha!r}")
    where = "TopologyParams"
    if name == "NDv2":
        _within(chassis, 1, 4, "TopologyParams.chassis", "TE-CCL's NDv2 as ndv2")
        wiring = {"inter_chassis": "direct"} if chassis <= 2 else {"inter_chassis": "switch", "switch_hop": switch_hop}
        return generators.build("ndv2", {"chassis": chassis, **wiring}, where=where)
    if name == "DGX2":
        _within(chassis, 2, 2, "TopologyParams.chassis", "TE-CCL's dgx2.py builds 2 chassis whatever this says")
        return generators.build("dgx2", {"chassis": 2, "switch_hop": switch_hop}, where=where)
    if name == "DGX1":
        _within(chassis, 1, 1, "TopologyParams.chassis", "TE-CCL's DGX1 is one chassis")
        return generators.build("ndv2", {"chassis": 1, "nvlink_bandwidth": 25e9, "nvlink_alpha": float(alpha[0])}, where=where)
    if name == "AMD":
        _within(chassis, 1, 64, "TopologyParams.chassis", "AMD chassis")
        return generators.build("mi250", {"nodes": chassis, "xgmi_alpha": float(alpha[0]), "nic_alpha": float(alpha[1])}, where=where)
    side = _field(p, "side_length", int, "TopologyParams", 4)
    _within(side, 2, 64, "TopologyParams.side_length", "Mesh side")
    n = side * side
    classes = {"mesh": systems.link_class(100e9, float(alpha[0]), "TE-CCL repository, teccl/topologies/mesh.py")}
    edges = [systems.class_edge(i, j, classes, "mesh") for i in range(n) for j in (i - 1, i + 1, i - side, i + side) if 0 <= j < n]
    return systems.classed_topology(n, edges, [], f"teccl-mesh{side}", classes, generator="teccl-mesh", params={"side_length": side})


def _within(value: int, lo: int, hi: int, where: str, what: str) -> None:
    if not lo <= value <= hi:
        raise InputError(where, f"{what}: expected {lo}..{hi}, got {value}" if lo != hi else f"{what}: expected {lo}, got {value}")


# ---- TACCL ---------------------------------------------------------------------------------

def read_taccl(path: str | Path, **options: str) -> Instance:
    """A TACCL topology profile (``name``, ``gpus_per_node``, ``alpha``, betas, remote costs).

    The known topology is TACCL's command-line ``<topo>`` (NDv2, DGX2, HubAndSpoke, custom);
    option ``topology``, else the profile name's prefix (``NDv2_1MB`` -> NDv2), else custom
    when the profile has a ``links`` matrix. Intra-node links follow
    ``taccl/topologies/generic.py``: NDv2's cube-mesh with ``node_betas_list[0]`` on the pairs
    joined by two NVLinks and ``[1]`` on the others; DGX2 and HubAndSpoke's switch (one port
    each way per GPU, kept as a switch node or unwound, option ``unwind``); custom's
    ``links[dst][src]`` with ``betas[dst][src]``. Nodes: option ``nodes`` or the sketch file
    (option ``sketch``: ``nnodes`` and ``internode_conn``), default 1; inter-node links
    follow TACCL's ``_add_ext_edge`` (GPU s of node i to GPU r of every other node j for each
    ``s: [r, ...]`` of ``internode_conn``) with ``remote_alpha`` and ``remote_beta``.
    Costs are in the profile's time unit (option ``time_unit_s``, default 1e-6: TACCL's
    profiles are in microseconds, some scaled by 10 or 100, INPUT_GUIDE.md) for one chunk of
    ``chunk_bytes`` (option; default the size in the profile name, ``_1MB`` = 1e6 bytes):
    alpha = cost x unit, bandwidth = chunk_bytes / (beta x unit). Option ``collective``
    (allgather, alltoall, allreduce; default allgather): each GPU's chunk is one profile chunk.
    """
    path = Path(path)
    data = _json_object(path, "a JSON object (a TACCL topology profile)")
    opts = dict(options)
    with _in_file(path):
        kind = _option(opts, "collective", str, "allgather")
        if kind not in ("allgather", "alltoall", "allreduce"):
            raise InputError("--peer collective", f"TACCL synthesises allgather, alltoall and allreduce; got {kind!r}")
        unit = _option(opts, "time_unit_s", float, 1e-6, low=0, above=True)
        name = _field(data, "name", str, "")
        topo_name = _option(opts, "topology", str, None)
        topo_name = _taccl_known(name, data) if topo_name is None else topo_name
        chunk = _option(opts, "chunk_bytes", float, None, low=0, above=True)
        chunk = _size_in_name(name) if chunk is None else chunk
        nodes, conn = _taccl_nodes(opts, path.parent, topo_name)
        unwind = _option(opts, "unwind", int, 0, low=0)
        _no_more(opts, "taccl")
        topology = _taccl_topology(data, topo_name, nodes, conn, chunk, unit, unwind)
    n = len(topology.npus)
    return _instance(path, topology, kind, n * chunk, 1)


def _taccl_known(name: str, data: dict) -> str:
    prefix = name.split("_")[0]
    if prefix in TACCL_TOPOLOGIES:
        return prefix
    if "links" in data:
        return "custom"
    raise InputError("name", f"cannot tell TACCL's known topology from {name!r}; expected a name starting "
                             f"{', '.join(t + '_' for t in TACCL_TOPOLOGIES[:3])}, a 'links' matrix (custom) or --peer topology=NAME")


def _size_in_name(name: str) -> float:
    m = re.search(r"(\d+(?:\.\d+)?)\s*(B|KB|MB|GB)$", name)
    if not m:
        raise InputError("name", f"no chunk size in {name!r} (e.g. NDv2_1MB); give --peer chunk_bytes=BYTES")
    return float(m.group(1)) * {"B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9}[m.group(2)]


def _taccl_nodes(opts: dict, base: Path, topo_name: str) -> tuple[int, dict]:
    sketch = _option(opts, "sketch", str, None)
    nodes = _option(opts, "nodes", int, None, low=1)
    conn = TACCL_INTERNODE.get(topo_name, {})
    if sketch is not None:
        spath = Path(sketch) if Path(sketch).is_absolute() else base / sketch
        sk = _load_json(spath)
        with _in_file(spath):
            nodes = _field(sk, "nnodes", int, "")
            inter = _field(sk, "internode_sketch", dict, "", {})
            conn = _field(inter, "internode_conn", dict, "internode_sketch", conn)
    nodes = 1 if nodes is None else nodes
    if nodes < 1:
        raise InputError("nnodes", f"expected a positive number of nodes, got {nodes}")
    return nodes, conn


def _taccl_topology(data: dict, topo_name: str, nodes: int, conn: dict, chunk: float, unit: float, unwind: int) -> Topology:
    if topo_name not in TACCL_TOPOLOGIES:
        raise InputError("--peer topology", f"unknown TACCL topology {topo_name!r}; known: {', '.join(TACCL_TOPOLOGIES)}")
    g = {"NDv2": 8, "DGX2": 16}.get(topo_name) or _field(data, "gpus_per_node", int, "")
    alpha = float(_field(data, "alpha", (int, float), "")) * unit
    src = f"TACCL topology profile ({topo_name})"
    classes: dict = {}
    intra: list[tuple[int, int, str]] = []
    if topo_name == "NDv2":
        betas = _field(data, "node_betas_list", list, "")
        if len(betas) != 2:
            raise InputError("node_betas_list", f"NDv2 needs two betas (two-NVLink and one-NVLink pairs), got {betas!r}")
        for k, beta in zip((2, 1), betas):
            classes[f"nvlink_x{k}"] = systems.link_class(chunk / (float(beta) * unit), alpha, src)
        intra = [(i, j, f"nvlink_x{k}") for i, row in enumerate(systems.CUBE_MESH) for j, k in enumerate(row) if k]
    elif topo_name == "custom":
        links = _square(_field(data, "links", list, ""), g, "links")
        betas = _square(_field(data, "betas", list, ""), g, "betas")
        for dst, row in enumerate(links):
            for s, count in enumerate(row):
                if count > 0 and s != dst:
                    cls = f"link_{s}_{dst}"
                    classes[cls] = systems.link_class(count * chunk / (betas[dst][s] * unit), alpha, src)
                    intra.append((s, dst, cls))
    else:
        betas = _field(data, "node_betas_list", list, "")
        classes["switch"] = systems.link_class(chunk / (float(betas[0]) * unit), alpha, src)
    remote = conn and nodes > 1
    if remote:
        classes["remote"] = systems.link_class(chunk / (float(_field(data, "remote_beta", (int, float), "")) * unit),
                                               float(_field(data, "remote_alpha", (int, float), "")) * unit, src)
    edges, switches = [], []
    for n in range(nodes):
        edges += [systems.class_edge(g * n + i, g * n + j, classes, c) for i, j, c in intra]
        if "switch" in classes:
            e, s = systems.switch_group(list(range(g * n, g * n + g)), classes, "switch", unwind, g * nodes + n, "--peer unwind")
            edges += e
            switches += s
    for a in range(nodes):
        for b in range(nodes):
            if a != b and remote:
                edges += [systems.class_edge(g * a + int(s), g * b + int(r), classes, "remote") for s, rs in conn.items() for r in rs]
    return systems.classed_topology(g * nodes + len(switches), edges, switches, f"taccl-{topo_name}x{nodes}", classes,
                                    generator=f"taccl-{topo_name}", params={"nodes": nodes})


# ---- msccl-tools ----------------------------------------------------------------------------

def read_msccl(path: str | Path, **options: str) -> Instance:
    """An msccl-tools topology: a serialized one (JSON with ``msccl_type = "topology"``) or a
    named one (``Ring``, ``FullyConnected``, ``HubAndSpoke``, ``Line``, ``Star`` with option
    ``nodes``; ``DGX1``, ``DGX2``, ``AMD4``, ``AMD8``, ``DGX_A100`` fixed), as in
    ``msccl/topologies/{generic,nvidia,amd}.py``.

    ``links[dst][src]`` counts bandwidth units: the link src -> dst gets units x option
    ``bandwidth`` (bytes/s per unit, default the corpus 100 GB/s) and option ``alpha``
    (s, default 0.5 us). A switch entry ``(srcs, dsts, bw, name)`` limits the summed
    bandwidth of the links from ``srcs`` to ``dsts``; those of the hub-and-spoke form (one
    node to all the others of its group, or all of them to it) become one switch node per
    group, the node's port carrying ``bw`` units (option ``unwind`` > 0 unwinds it); any other
    constraint is refused. Options ``collective`` (default allgather) and ``message_bytes``
    (default 1 MiB).
    """
    opts = dict(options)
    name = str(path)
    known = MSCCL_SIZED + MSCCL_FIXED + ("NVLinkOnly",)
    with _in_file(name):
        nodes = _option(opts, "nodes", int, None, low=2)
        bw = _option(opts, "bandwidth", float, DEFAULT_BANDWIDTH, low=0, above=True)
        alpha = _option(opts, "alpha", float, DEFAULT_ALPHA, low=0)
        kind = _option(opts, "collective", str, "allgather")
        message = _option(opts, "message_bytes", float, float(1 << 20), low=0, above=True)
        unwind = _option(opts, "unwind", int, 0, low=0)
        _no_more(opts, "msccl")
        if Path(name).exists():
            data = _load_json(Path(name))
            if not isinstance(data, dict) or data.get("msccl_type") != "topology":
                raise InputError("msccl_type", "expected a serialized msccl topology (msccl_type = \"topology\")")
            links = _square(_field(data, "links", list, ""), None, "links")
            switches = _field(data, "switches", list, "", [])
            label = _field(data, "name", str, "", Path(name).stem)
            if nodes is not None and nodes != len(links):
                raise InputError("--peer nodes", f"the file's topology has {len(links)} nodes, got {nodes}")
        elif name in known:
            links, switches, label = _msccl_named(name, nodes)
        else:
            raise InputError("topology", f"no such file, and not an msccl-tools topology name; known: {', '.join(known)}")
        topology = _msccl_topology(links, switches, bw, alpha, unwind, label)
    return _instance(Path(name), topology, kind, message, 1)


def _msccl_named(name: str, nodes: int | None) -> tuple[list, list, str]:
    """links[dst][src] and switches of an msccl-tools named topology."""
    if name == "NVLinkOnly":
        raise InputError("topology", "NVLinkOnly reads `nvidia-smi topo -m` on the GPU machine; serialize that "
                                     "topology (msccl_type = \"topology\") and read the file instead")
    fixed = {"DGX1": [list(r) for r in systems.CUBE_MESH], "AMD4": [list(r) for r in MSCCL_AMD4],
             "AMD8": [list(r) for r in MSCCL_AMD8],
             "DGX_A100": [[0 if i == j else 12 for j in range(8)] for i in range(8)]}
    if name in fixed:
        if nodes is not None and nodes != len(fixed[name]):
            raise InputError("--peer nodes", f"{name} has {len(fixed[name])} nodes, got {nodes}")
        return fixed[name], [], name
    if name == "DGX2":
        name, nodes = "HubAndSpoke", 16
    if nodes is None or nodes < 2:
        raise InputError("--peer nodes", f"{name} needs nodes >= 2, got {nodes}")
    n = nodes
    adj = {
        "Ring": lambda d, s: (s - d) % n in (1, n - 1),
        "Line": lambda d, s: abs(s - d) == 1,
        "Star": lambda d, s: d != s and (d == 0 or s == 0),
        "FullyConnected": lambda d, s: d != s,
        "HubAndSpoke": lambda d, s: d != s,
    }[name]
    links = [[1 if adj(d, s) else 0 for s in range(n)] for d in range(n)]
    switches = []
    if name == "HubAndSpoke":
        for v in range(n):
            others = [o for o in range(n) if o != v]
            switches += [[[v], others, 1, f"node_{v}_out"], [others, [v], 1, f"node_{v}_in"]]
    return links, switches, f"{name}(n={n})"


def _msccl_topology(links: list, switches: list, bw: float, alpha: float, unwind: int, label: str) -> Topology:
    """Links and hub-and-spoke switch groups (see :func:`read_msccl`) as a topology."""
    n = len(links)
    ports = _hub_ports(switches, n)
    groups: dict[tuple, dict] = {}
    for v, (group, out_bw, in_bw) in ports.items():
        groups.setdefault(group, {})[v] = (out_bw, in_bw)
    classes = {"link": systems.link_class(bw, alpha, "msccl-tools topology (links in bandwidth units)")}
    in_group = {v: g for g in groups for v in g}
    edges, switch_ids = [], []
    for d, row in enumerate(links):
        for s, units in enumerate(row):
            if units > 0 and s != d and not (s in in_group and in_group[s] == in_group.get(d)):
                edges.append(systems.class_edge(s, d, classes, "link", units))
    for k, (group, members) in enumerate(sorted(groups.items())):
        sid = n + k
        classes[f"switch{k}"] = systems.link_class(bw, alpha, "msccl-tools switch (hub-and-spoke bandwidth constraint)")
        if unwind:
            e, _ = systems.switch_group(list(group), classes, f"switch{k}", unwind, sid, "--peer unwind")
            edges += e
            continue
        for v in group:
            out_bw, in_bw = members.get(v, (None, None))
            up = out_bw if out_bw is not None else sum(links[d][v] for d in group if d != v)
            down = in_bw if in_bw is not None else sum(links[v][s] for s in group if s != v)
            edges += [systems.class_edge(v, sid, classes, f"switch{k}", up), systems.class_edge(sid, v, classes, f"switch{k}", down)]
        switch_ids.append(sid)
    size = n + len(switch_ids)
    return systems.classed_topology(size, edges, switch_ids, f"msccl-{label}", classes, generator="msccl", params={"name": label})


def _hub_ports(switches: list, n: int) -> dict[int, tuple]:
    """``{node: (group, out units or None, in units or None)}`` from hub-and-spoke constraints."""
    out: dict[int, list] = {}
    for i, sw in enumerate(switches):
        where = f"switches[{i}]"
        if not isinstance(sw, list) or len(sw) != 4:
            raise InputError(where, "expected [srcs, dsts, bandwidth, name]")
        srcs, dsts, units, _ = sw
        if not (isinstance(srcs, list) and isinstance(dsts, list) and all(isinstance(x, int) and 0 <= x < n for x in srcs + dsts)):
            raise InputError(where, f"expected lists of node ids in 0..{n - 1}")
        if isinstance(units, bool) or not isinstance(units, (int, float)) or units <= 0:
            raise InputError(where, f"expected a positive bandwidth, got {units!r}")
        if len(srcs) == 1 and srcs[0] not in dsts:
            hub, direction, others = srcs[0], 0, dsts
        elif len(dsts) == 1 and dsts[0] not in srcs:
            hub, direction, others = dsts[0], 1, srcs
        else:
            raise InputError(where, "cannot map this bandwidth constraint to links or a switch node: only one node "
                                    "to a group or a group to one node (hub and spoke) maps")
        group = tuple(sorted({hub, *others}))
        entry = out.setdefault(hub, [group, None, None])
        if entry[0] != group:
            raise InputError(where, f"node {hub} is constrained towards two different groups")
        entry[1 + direction] = float(units)
    members = {v: tuple(e) for v, e in out.items()}
    for v, (group, _, _) in members.items():
        for m in group:
            if m in members and members[m][0] != group:
                raise InputError("switches", f"nodes {v} and {m} belong to overlapping but different switch groups")
    return members
