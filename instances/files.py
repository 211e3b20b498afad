"""Topologies from files and back: networkx node-link JSON, GraphML, CSV edge lists.

The format follows the suffix:

``.json``
    networkx node-link data (:func:`networkx.node_link_data`): ``{"directed": true,
    "multigraph": true, "graph": {...}, "nodes": [{"id": 0}, ...], "edges": [{"source": 0,
    "target": 1, "bandwidth": 1e11, "alpha": 5e-7}, ...]}`` (``"links"`` is accepted for
    ``"edges"``). An undirected file (``"directed": false``) gives links both ways.
``.graphml``
    GraphML as written by :func:`networkx.write_graphml`; edge data keys ``bandwidth`` and
    ``alpha``.
``.csv``
    a header line naming the columns (``src,dst`` required, ``bandwidth`` and ``alpha``
    optional, any order), then one link per row: a directed link ``src -> dst``, or a link
    both ways when the file says ``# directed = false``. Empty ``bandwidth``/``alpha`` cells
    take the defaults. Lines starting with ``#`` are comments, except ``# key = value`` lines
    for ``directed`` (``true``, the default, or ``false``), ``nodes`` (the id count),
    ``name``, ``switches``, ``failed_nodes`` (comma-separated ids) and ``failed_links``
    (``u-v`` pairs), which :func:`write_topology` emits so that failures keep their ids.

Directedness: a node-link file says it with ``"directed"`` (default true), a GraphML file with
its ``edgedefault``, a CSV file with ``# directed = ...`` (default true). The ``directed``
argument of :func:`read_topology` (the instance TOML's ``directed`` key) sets it for a file
that does not say it, and must agree with a file that does.

Nodes may carry ``switch`` (a switch node) and ``failed`` (a failed node: it keeps its id but
has no links) attributes, and a switch ``reduce`` (``true`` or its reductions, e.g. ``"sum"``) and
``copy`` (``true``: it multicasts; :mod:`collsynth.instances.switch_ops`); a CSV file lists them
as ``# reduce = ids`` and ``# copy = ids``. Node ids that are the integers ``0..N-1`` (or their decimal strings)
are kept; any other labels are numbered in file order and kept in ``meta["labels"]``.
Links without ``bandwidth``/``alpha`` take the ``bandwidth``/``alpha`` arguments (else the
generator defaults). Every error names the file, the line or field, and what was expected.
"""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from typing import Any

import networkx as nx

from .. import InputError
from .generators import DEFAULT_ALPHA, DEFAULT_BANDWIDTH, coerce
from .size import check_nodes
from .switch_ops import reductions_of, switch_reductions
from .topology import Topology, check_costs, with_link_costs

FORMATS = {".json": "node-link", ".graphml": "graphml", ".csv": "csv"}
CSV_COLUMNS = ("src", "dst", "bandwidth", "alpha")
CSV_SETTINGS = ("directed", "nodes", "name", "switches", "failed_nodes", "failed_links", "reduce", "copy")


def read_topology(path: str | Path, bandwidth: float | None = None, alpha: float | None = None,
                  directed: bool | None = None) -> Topology:
    """Read a topology file (format by suffix, see the module docstring).

    ``bandwidth`` (bytes/s) and ``alpha`` (s) fill the links the file leaves without them.
    ``directed=False`` reads every link of a file that does not state its directedness as two
    directed links (None: what the file says, else directed); the topology's
    ``meta["directed"]`` records how the file was read.

    >>> import tempfile, os
    >>> from collsynth.instances import generators
    >>> p = os.path.join(tempfile.mkdtemp(), "r.csv")
    >>> write_topology(generators.build("ring", {"nodes": 4}), p)
    >>> read_topology(p).num_links
    8
    """
    path = Path(path)
    where = str(path)
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise InputError(where, f"unknown topology file type {path.suffix!r}; expected .json (node-link), .graphml or .csv")
    bw = DEFAULT_BANDWIDTH if bandwidth is None else coerce(bandwidth, float, "topology.bandwidth")
    al = DEFAULT_ALPHA if alpha is None else coerce(alpha, float, "topology.alpha")
    check_costs(bw, al)
    text = read_text(path, "no such topology file")
    if fmt == "node-link":
        parts = _parse_node_link(text, where)
    elif fmt == "graphml":
        parts = _parse_graphml(text, where)
    else:
        parts = _parse_csv(text, where)
    links = len(parts["edges"]) * (1 if parts["directed"] else 2)
    check_nodes(len(parts["nodes"]), links, where)
    if directed is not None:
        if not isinstance(directed, bool):
            raise InputError("topology.directed", f"expected true or false, got {directed!r}")
        if parts["declared"] and parts["directed"] != directed:
            raise InputError("topology.directed", f"{where} says directed = {str(parts['directed']).lower()}; "
                                                  "drop the key or make it agree with the file")
        parts["directed"] = directed
    topo = _assemble(parts, where)
    topo = with_link_costs(topo, bw, al)
    object.__setattr__(topo, "meta", {**topo.meta, "file": where, "format": fmt, "directed": parts["directed"]})
    return topo


def read_text(path: str | Path, missing: str = "no such file") -> str:
    """The UTF-8 text of ``path`` (a leading byte-order mark dropped); a missing file, a folder,
    an unreadable file or bytes that are not UTF-8 are refused naming the file.

    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "x.toml")
    >>> _ = open(p, "wb").write(b"name = 'caf\\xe9'")
    >>> read_text(p)
    Traceback (most recent call last):
    collsynth.InputError: ...x.toml: expected UTF-8 text (byte 0xe9 at offset 11)
    """
    where = str(path)
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise InputError(where, missing) from None
    except OSError as e:
        raise InputError(where, f"cannot read: {e.strerror or e}") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise InputError(where, f"expected UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start})") from None


def write_topology(topology: Topology, path: str | Path) -> None:
    """Write ``topology`` to ``path`` (format by suffix); :func:`read_topology` gives it back.

    All ``size`` node ids are written (failed ones marked ``failed``, switches ``switch``),
    every live directed link with its ``bandwidth`` and ``alpha``.
    """
    path = Path(path)
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise InputError(str(path), f"unknown topology file type {path.suffix!r}; expected .json, .graphml or .csv")
    edges = sorted((u, v, float(d["bandwidth"]), float(d["alpha"])) for u, v, d in topology.graph.edges(data=True))
    failed_links = sorted([list(p) for p in topology.failed_links])
    meta = {k: v for k, v in topology.meta.items() if k not in ("file", "format", "directed")}
    if fmt == "csv":
        lines = [f"# name = {topology.name}", f"# nodes = {topology.size}"]
        if topology.switches:
            lines.append(f"# switches = {','.join(map(str, sorted(topology.switches)))}")
        if topology.failed_nodes:
            lines.append(f"# failed_nodes = {','.join(map(str, sorted(topology.failed_nodes)))}")
        if failed_links:
            lines.append(f"# failed_links = {','.join(f'{u}-{v}' for u, v in failed_links)}")
        for key, ids in (("reduce", switch_reductions(topology)), ("copy", _copying(topology))):
            if ids:
                lines.append(f"# {key} = {','.join(map(str, sorted(ids)))}")
        lines.append(",".join(CSV_COLUMNS))
        lines += [f"{u},{v},{bw!r},{al!r}" for u, v, bw, al in edges]
        path.write_text("\n".join(lines) + "\n")
        return
    g = nx.MultiDiGraph()
    g.graph["name"] = topology.name
    for n in range(topology.size):
        g.add_node(n, switch=n in topology.switches, failed=n in topology.failed_nodes, **_ops_written(topology, n))
    for u, v, bw, al in edges:
        g.add_edge(u, v, bandwidth=bw, alpha=al)
    if fmt == "node-link":
        data = nx.node_link_data(g, edges="edges")
        data["graph"] = {"name": topology.name, "failed_links": failed_links, "meta": meta}
        path.write_text(json.dumps(data, indent=1, default=_jsonable))
    else:
        g.graph["failed_links"] = json.dumps(failed_links)
        g.graph["meta"] = json.dumps(meta, default=_jsonable)
        nx.write_graphml(g, str(path))


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, (set, frozenset, tuple)):
        return sorted(obj) if isinstance(obj, (set, frozenset)) else list(obj)
    return str(obj)


# ---- parsers: each returns plain parts for _assemble ------------------------------------------

def _parse_node_link(text: str, where: str) -> dict:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"{where}: line {e.lineno}", f"malformed JSON: {e.msg}") from None
    if not isinstance(data, dict):
        raise InputError(where, "expected a node-link JSON object with 'nodes' and 'edges'")
    nodes = data.get("nodes")
    if not isinstance(nodes, list):
        raise InputError(f"{where}: nodes", "expected a list of {\"id\": ...} objects")
    edge_key = "edges" if "edges" in data else "links"
    edges = data.get(edge_key)
    if not isinstance(edges, list):
        raise InputError(f"{where}: edges", "expected a list of {\"source\": u, \"target\": v} objects")
    node_rows = []
    for i, nd in enumerate(nodes):
        if not isinstance(nd, dict) or "id" not in nd:
            raise InputError(f"{where}: nodes[{i}]", "expected an object with an 'id'")
        node_rows.append((nd["id"], nd, f"nodes[{i}]"))
    edge_rows = []
    for i, ed in enumerate(edges):
        if not isinstance(ed, dict) or "source" not in ed or "target" not in ed:
            raise InputError(f"{where}: {edge_key}[{i}]", "expected an object with 'source' and 'target'")
        edge_rows.append((ed["source"], ed["target"], ed, f"{edge_key}[{i}]"))
    graph = data.get("graph", {}) if isinstance(data.get("graph", {}), dict) else {}
    return {
        "nodes": node_rows,
        "edges": edge_rows,
        "directed": bool(data.get("directed", True)),
        "declared": "directed" in data,
        "name": str(graph.get("name", "")),
        "failed_links": graph.get("failed_links", []),
        "meta": graph.get("meta", {}) if isinstance(graph.get("meta", {}), dict) else {},
    }


def _parse_graphml(text: str, where: str) -> dict:
    try:
        g = nx.parse_graphml(text, force_multigraph=True)
    except Exception as e:  # ElementTree ParseError, NetworkXError, KeyError, ...
        raise InputError(where, f"malformed GraphML: {e}") from None
    node_rows = [(n, d, f"node {n!r}") for n, d in g.nodes(data=True)]
    edge_rows = [(u, v, d, f"edge {u}->{v}") for u, v, d in g.edges(data=True)]
    failed_links: Any = g.graph.get("failed_links", "[]")
    meta: Any = g.graph.get("meta", "{}")
    try:
        failed_links = json.loads(failed_links) if isinstance(failed_links, str) else failed_links
        meta = json.loads(meta) if isinstance(meta, str) else meta
    except json.JSONDecodeError as e:
        raise InputError(f"{where}: graph", f"failed_links/meta must be JSON: {e.msg}") from None
    return {
        "nodes": node_rows,
        "edges": edge_rows,
        "directed": g.is_directed(),
        "declared": True,
        "name": str(g.graph.get("name", "")),
        "failed_links": failed_links,
        "meta": meta if isinstance(meta, dict) else {},
    }


def _parse_csv(text: str, where: str) -> dict:
    settings, edge_rows = _csv_lines(text, where)
    failed_links = _csv_failed_links(settings, where)
    nodes_count = _csv_setting(settings, "nodes", where, str.isdigit, "a node count", int)
    directed = _csv_setting(settings, "directed", where, lambda v: v.lower() in ("true", "false"),
                            "true or false", lambda v: v.lower() == "true")
    switches, failed = set(_csv_ids(settings, "switches", where)), set(_csv_ids(settings, "failed_nodes", where))
    ops = {key: (set(_csv_ids(settings, key, where)), f"line {settings[key][0]}") for key in ("reduce", "copy")
           if key in settings}
    node_ids: set[int] = set(switches | failed)
    largest = (-1, "")  # the largest id and where it is written
    for key, ids in (("switches", switches), ("failed_nodes", failed)):
        if ids and max(ids) > largest[0]:
            largest = (max(ids), f"line {settings[key][0]}: {key}")
    for src, dst, _, field in edge_rows:
        for col, val in (("src", src), ("dst", dst)):
            if not val.isdigit():
                raise InputError(f"{where}: {field}", f"{col}: expected a node id (integer >= 0), got {val!r}")
            node_ids.add(int(val))
            largest = (int(val), f"{field}: {col}") if int(val) > largest[0] else largest
    size = largest[0] + 1
    if nodes_count is not None:
        if nodes_count < size:
            raise InputError(f"{where}: line {settings['nodes'][0]}", f"nodes: {nodes_count} is less than the largest id + 1 ({size})")
        size, largest = nodes_count, (nodes_count - 1, f"line {settings['nodes'][0]}: nodes")
    _check_dense(size, len(node_ids), f"{where}: {largest[1]}")
    return {
        "nodes": [(n, {"switch": n in switches, "failed": n in failed, **_csv_node_ops(n, ops)}, f"node {n}")
                  for n in range(size)],
        "edges": [(int(s), int(d), a, f) for s, d, a, f in edge_rows],
        "directed": True if directed is None else directed,
        "declared": "directed" in settings,
        "name": settings.get("name", (0, ""))[1],
        "failed_links": failed_links,
        "meta": {},
    }


def _copying(topology: Topology) -> list[int]:
    """The switches declaring ``copy = true``."""
    return [n for n in topology.switches if n in topology.graph and topology.graph.nodes[n].get("copy")]


def _ops_written(topology: Topology, n: int) -> dict:
    """Node ``n``'s ``reduce`` (comma-separated reductions) and ``copy`` attributes as written."""
    data = topology.graph.nodes[n] if n in topology.graph else {}
    out = {}
    if data.get("reduce"):
        out["reduce"] = ",".join(data["reduce"])
    if "copy" in data:
        out["copy"] = bool(data["copy"])
    return out


def _csv_node_ops(n: int, ops: dict) -> dict:
    """Node ``n``'s ``reduce`` / ``copy`` attributes from the CSV settings of those names (ids)."""
    return {key: True for key, (ids, _) in ops.items() if n in ids}


def _check_dense(size: int, listed: int, where: str) -> None:
    """Refuse node ids far beyond the nodes a file lists: every id up to the largest is a node
    (the graph and the hop distances grow with it), so a file of a few lines must not ask for
    a billion. At most ``10 x listed + 1000`` ids, where ``listed`` counts the distinct ids
    the file writes (link ends, switches, failed nodes).

    >>> _check_dense(1_000_000_000, 2, "g.csv: line 2: dst")
    Traceback (most recent call last):
    collsynth.InputError: g.csv: line 2: dst: node ids must be dense: id 999999999 for 2 listed nodes (at most 1020 ids, 10 x listed + 1000); renumber the nodes 0..N-1
    """
    limit = 10 * listed + 1000
    if size > limit:
        raise InputError(where, f"node ids must be dense: id {size - 1} for {listed} listed nodes (at most "
                                f"{limit} ids, 10 x listed + 1000); renumber the nodes 0..N-1")


def _csv_lines(text: str, where: str) -> tuple[dict[str, tuple[int, str]], list]:
    """The ``# key = value`` settings (with their line numbers) and the link rows of a CSV file."""
    header = None
    settings: dict[str, tuple[int, str]] = {}
    edge_rows = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("#"):
            key, sep, value = stripped[1:].partition("=")
            key = key.strip()
            if sep and key in CSV_SETTINGS:
                settings[key] = (lineno, value.strip())
            continue
        cells = [c.strip() for c in next(csv.reader(io.StringIO(line)))]
        if header is None:
            header = cells
            unknown = [c for c in header if c not in CSV_COLUMNS]
            if unknown or "src" not in header or "dst" not in header or len(set(header)) != len(header):
                raise InputError(f"{where}: line {lineno}",
                                 f"expected a header 'src,dst,bandwidth,alpha' (src and dst required), got {line.strip()!r}")
            continue
        if len(cells) > len(header):
            raise InputError(f"{where}: line {lineno}", f"expected at most {len(header)} cells ({','.join(header)}), got {len(cells)}")
        row = dict(zip(header, cells + [""] * (len(header) - len(cells))))
        attrs = {k: row[k] for k in ("bandwidth", "alpha") if row.get(k, "") != ""}
        edge_rows.append((row["src"], row["dst"], attrs, f"line {lineno}"))
    if header is None:
        raise InputError(where, "expected a header line 'src,dst,bandwidth,alpha' and one link per row")
    return settings, edge_rows


def _csv_setting(settings: dict, key: str, where: str, valid, expected: str, convert):
    """``convert(value)`` of setting ``key``, None when absent; a one-line error when not ``valid``."""
    if key not in settings:
        return None
    lineno, value = settings[key]
    if not valid(value):
        raise InputError(f"{where}: line {lineno}", f"{key}: expected {expected}, got {value!r}")
    return convert(value)


def _csv_ids(settings: dict, key: str, where: str) -> list[int]:
    """The comma-separated node ids of setting ``key`` (empty when absent)."""
    if key not in settings:
        return []
    lineno, value = settings[key]
    try:
        return [int(x) for x in value.replace(" ", "").split(",") if x]
    except ValueError:
        raise InputError(f"{where}: line {lineno}", f"{key}: expected comma-separated node ids, got {value!r}") from None


def _csv_failed_links(settings: dict, where: str) -> list[list[int]]:
    """The ``u-v`` pairs of the ``failed_links`` setting."""
    if "failed_links" not in settings:
        return []
    lineno, value = settings["failed_links"]
    return [list(p) for p in link_pairs(value, f"{where}: line {lineno}", "failed_links: expected u-v pairs")]


def link_pairs(text: str, where: str, expected: str = "expected directed links as u-v") -> list[tuple[int, int]]:
    """The directed links ``"0-1, 2-3"`` as ``[(0, 1), (2, 3)]``; a malformed pair is refused
    naming ``where``.

    >>> link_pairs("0-1, 2-3,", "--failed-links")
    [(0, 1), (2, 3)]
    """
    pairs = []
    for pair in text.replace(" ", "").split(","):
        if not pair:
            continue
        u, sep, v = pair.partition("-")
        if not sep or not u.isdigit() or not v.isdigit():
            raise InputError(where, f"{expected}, got {pair!r}")
        pairs.append((int(u), int(v)))
    return pairs


def _assemble(parts: dict, where: str) -> Topology:
    """Number the nodes, check every link's costs, remove failed nodes (ids kept)."""
    labels = [label for label, _, _ in parts["nodes"]]
    seen: set = set()
    for label, _, field in parts["nodes"]:
        if isinstance(label, (dict, list)) or label in seen:
            raise InputError(f"{where}: {field}", f"expected a unique node id, got {label!r}")
        seen.add(label)
    as_int = [_int_label(x) for x in labels]
    if labels and all(x is not None for x in as_int) and sorted(as_int) == list(range(len(labels))):
        index = {lab: i for lab, i in zip(labels, as_int)}
        relabelled = None
    else:
        index = {lab: i for i, lab in enumerate(labels)}
        relabelled = [str(x) for x in labels]
    size = len(labels)
    g = nx.MultiDiGraph()
    g.add_nodes_from(range(size))
    switches, failed = set(), set()
    for label, data, field in parts["nodes"]:
        if _flag(data.get("switch", False), f"{where}: {field}", "switch"):
            switches.add(index[label])
        if _flag(data.get("failed", False), f"{where}: {field}", "failed"):
            failed.add(index[label])
    ops = _switch_ops(parts["nodes"], index, switches, where)
    for src, dst, data, field in parts["edges"]:
        for col, lab in (("source", src), ("target", dst)):
            if lab not in index:
                raise InputError(f"{where}: {field}", f"{col} {lab!r} is not a listed node")
        u, v = index[src], index[dst]
        if u == v:
            raise InputError(f"{where}: {field}", f"self-loop {src}->{dst}; expected a link between two nodes")
        if u in failed or v in failed:
            raise InputError(f"{where}: {field}", f"link {src}->{dst} touches a failed node")
        attrs = {}
        if data.get("bandwidth") not in (None, ""):
            attrs["bandwidth"] = _number(data["bandwidth"], f"{where}: {field}", "bandwidth", positive=True)
        if data.get("alpha") not in (None, ""):
            attrs["alpha"] = _number(data["alpha"], f"{where}: {field}", "alpha", positive=False)
        g.add_edge(u, v, bandwidth=attrs.get("bandwidth"), alpha=attrs.get("alpha"))
        if not parts["directed"]:
            g.add_edge(v, u, bandwidth=attrs.get("bandwidth"), alpha=attrs.get("alpha"))
    fl = parts["failed_links"]
    if not isinstance(fl, list) or not all(isinstance(p, list) and len(p) == 2 for p in fl):
        raise InputError(f"{where}: failed_links", "expected a list of [u, v] pairs")
    failed_links = frozenset((int(u), int(v)) for u, v in fl)
    g.remove_nodes_from(failed)
    for n, attrs in ops.items():
        if n in g:
            g.nodes[n].update(attrs)
    meta = dict(parts["meta"])
    if relabelled is not None:
        meta["labels"] = relabelled
    return Topology(
        graph=g, size=size, name=parts["name"] or Path(where).stem, switches=frozenset(switches),
        failed_nodes=frozenset(failed), failed_links=failed_links, meta=meta,
    )


def _switch_ops(nodes: list, index: dict, switches: set[int], where: str) -> dict[int, dict]:
    """``{node: {"reduce": reductions, "copy": bool}}`` of the nodes declaring ``reduce`` or
    ``copy`` (:mod:`collsynth.instances.switch_ops`); a compute node declaring either is refused."""
    out: dict[int, dict] = {}
    for label, data, field in nodes:
        attrs = {}
        if data.get("reduce") not in (None, ""):
            attrs["reduce"] = reductions_of(data["reduce"], f"{where}: {field}")
        if data.get("copy") not in (None, ""):
            attrs["copy"] = _flag(data["copy"], f"{where}: {field}", "copy")
        declared = [k for k in ("reduce", "copy") if attrs.get(k)]
        if declared and index[label] not in switches:
            raise InputError(f"{where}: {field} field {declared[0]}",
                             f"node {label} is a GPU (compute node); only a switch node may declare {declared[0]}")
        if attrs:
            out[index[label]] = attrs
    return out


def _int_label(x: Any) -> int | None:
    if isinstance(x, bool):
        return None
    if isinstance(x, int):
        return x if x >= 0 else None
    if isinstance(x, str) and x.isdigit():
        return int(x)
    return None


def _flag(value: Any, where: str, key: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false", "1", "0"):
        return value.lower() in ("true", "1")
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise InputError(where, f"{key}: expected true or false, got {value!r}")


def _number(value: Any, where: str, key: str, positive: bool) -> float:
    try:
        x = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        x = math.nan
    if positive and not x > 0:
        raise InputError(where, f"{key}: expected a positive number of bytes/s, got {value!r}")
    if not positive and not x >= 0:
        raise InputError(where, f"{key}: expected a non-negative latency in seconds, got {value!r}")
    if math.isinf(x):
        raise InputError(where, f"{key}: expected a finite number, got {value!r}")
    return x
