"""Topology generators: plain functions returning a :class:`Topology`, registered by name with
the size formula each declares (``@generator(size=...)``, :mod:`collsynth.instances.registry`).

Each generator is a function whose keyword parameters (with type annotations and defaults)
*are* its documented interface: ``collsynth topologies`` lists them from the signature and the
docstring, and :func:`build` validates and converts user values (TOML values or ``k=v``
strings from the command line) against them. Link costs are not generator parameters: every
link a generator makes without an explicit ``bandwidth``/``alpha`` gets the instance's
``bandwidth``/``alpha`` (a generator may give a link a relative ``scale``).

Node ids are ``0..N-1``; meshes and tori are row-major (the last coordinate varies fastest).

>>> build("torus", {"dims": [5, 7]}).diameter
5
"""

from __future__ import annotations

import inspect
import itertools
import json
import math
import typing
from typing import Any, Callable

from .. import InputError, did_you_mean
from . import constructions, size
from .registry import GENERATORS, generator
from .size import larger, levels, power, product
from .topology import Topology, check_costs, from_edges, with_link_costs

DEFAULT_BANDWIDTH = 100e9  # bytes/s of a link, unless the instance says otherwise
DEFAULT_ALPHA = 0.5e-6  # seconds of a link, unless the instance says otherwise
RESERVED = ("bandwidth", "alpha", "failed_nodes", "failed_links", "generator", "file")


# ---- the registry's interface ------------------------------------------------------------

def parameters(name: str) -> dict[str, dict]:
    """``{param: {"type": str, "default": value or None, "required": bool}}`` of a generator."""
    func = _lookup(name, "generator")
    hints = typing.get_type_hints(func)
    out = {}
    for p in inspect.signature(func).parameters.values():
        required = p.default is inspect.Parameter.empty
        out[p.name] = {
            "type": _type_name(hints.get(p.name, str)),
            "default": None if required else p.default,
            "required": required,
        }
    return out


def describe() -> list[dict]:
    """Every generator with its one-line summary and parameters (for ``collsynth topologies``)."""
    rows = []
    for name in sorted(GENERATORS):
        doc = inspect.getdoc(GENERATORS[name]) or ""
        rows.append({"name": name, "summary": doc.splitlines()[0] if doc else "", "parameters": parameters(name)})
    return rows


def build(
    name: str,
    params: dict[str, Any] | None = None,
    *,
    bandwidth: float | None = None,
    alpha: float | None = None,
    where: str = "topology",
    text: bool = True,
) -> Topology:
    """Validate ``params`` against generator ``name``'s signature, call it, set link costs.

    Values may be native or, with ``text`` (the default), strings from the command line
    (``dims="5,7"``); values read from a file (``text=False``: TOML) must have their own types
    (an array, a boolean, a number). Errors name ``where.<param>`` and what was expected.
    """
    func = _lookup(name, f"{where}.generator")
    kwargs = _arguments(name, params, where, text, () if text else ("bandwidth", "alpha", "latency", "directed",
                                                                     "failed_nodes", "failed_links"))
    size.check_generator(name, kwargs, _nested_arguments, where)
    try:
        topo = func(**kwargs)
    except InputError as e:
        if e.where.startswith(where):
            raise
        raise InputError(f"{where}.{e.where}", e.what) from None
    except (ValueError, TypeError) as e:  # a generator rejecting a value it cannot build
        raise InputError(f"{where}", f"generator {name!r}: {e}") from None
    bw = DEFAULT_BANDWIDTH if bandwidth is None else coerce(bandwidth, float, f"{where}.bandwidth", text)
    al = DEFAULT_ALPHA if alpha is None else coerce(alpha, float, f"{where}.alpha", text)
    check_costs(bw, al, where)
    if "link_classes" in topo.meta and (bandwidth is not None or alpha is not None):
        key = "bandwidth" if bandwidth is not None else "alpha"
        raise InputError(f"{where}.{key}", f"generator {name!r} sets every link's bandwidth and alpha from its own "
                         f"parameters (see `collsynth topologies`); remove {key!r}")
    meta = dict(topo.meta)
    meta.setdefault("generator", name)
    meta.setdefault("params", {k: _plain(v) for k, v in kwargs.items()})
    topo = with_link_costs(topo, bw, al)
    object.__setattr__(topo, "meta", meta)
    return topo


def _arguments(name: str, params: dict[str, Any] | None, where: str, text: bool = True,
               also: tuple[str, ...] = ()) -> dict[str, Any]:
    """``params`` checked against generator ``name``'s signature and converted to its types
    (``text``: strings from the command line may be parsed, see :func:`coerce`); an unknown
    key's error suggests the closest parameter or key of ``also`` (the ``[topology]`` table's
    own keys, for a file)."""
    func = _lookup(name, f"{where}.generator")
    hints = typing.get_type_hints(func)
    sig = inspect.signature(func)
    kwargs = {}
    for key, value in dict(params or {}).items():
        if key not in sig.parameters:
            known = ", ".join(sig.parameters) or "none"
            hint = did_you_mean(key, [*sig.parameters, *also])
            raise InputError(f"{where}.{key}", f"unknown parameter for generator {name!r}{hint} (parameters: {known})")
        kwargs[key] = coerce(value, hints.get(key, str), f"{where}.{key}", text)
        if not text and isinstance(kwargs[key], dict):  # a nested table from a file: its values too
            _nested_arguments(kwargs[key], f"{where}.{key}", text)
    for p in sig.parameters.values():
        if p.default is inspect.Parameter.empty and p.name not in kwargs:
            raise InputError(f"{where}.{p.name}", f"generator {name!r} needs parameter {p.name!r} ({_type_name(hints.get(p.name, str))})")
    return kwargs


def _nested_arguments(table: dict, where: str, text: bool = True) -> tuple[str, dict[str, Any]]:
    """A nested base topology table as ``(generator name, checked parameters)``."""
    table = dict(table)
    gen = table.pop("generator", None)
    if not isinstance(gen, str):
        raise InputError(f"{where}.generator", "a nested topology needs 'generator = NAME'")
    for key in RESERVED:
        if key in table:
            raise InputError(f"{where}.{key}", "not allowed in a nested base topology (expansions are graph-only)")
    return gen, _arguments(gen, table, where, text)


def coerce(value: Any, typ: Any, where: str, text: bool = True) -> Any:
    """Convert ``value`` to the annotated type ``typ``.

    With ``text`` a string from the command line is parsed (``"5,7"`` a list, ``"yes"`` a
    boolean, ``"4"`` a number, ``"kautz:degree=2"`` a table); without it (a value read from a
    file) only a ``str`` parameter takes a string.

    >>> coerce("5,7", list[int], "topology.dims"), coerce([5, 7], list[int], "topology.dims", text=False)
    ([5, 7], [5, 7])
    >>> coerce("no", bool, "topology.bidirectional", text=False)
    Traceback (most recent call last):
    collsynth.InputError: topology.bidirectional: expected true or false (a boolean), got the string 'no'
    """
    origin = typing.get_origin(typ)
    if origin is typing.Union or origin is getattr(__import__("types"), "UnionType", None):
        args = [a for a in typing.get_args(typ) if a is not type(None)]
        if value is None:
            return None
        return coerce(value, args[0], where, text)
    if isinstance(value, str) and typ is not str and not text:
        raise InputError(where, f"expected {_expected(typ)}, got the string {value!r}")
    if origin is list:
        (item,) = typing.get_args(typ) or (str,)
        if isinstance(value, str):
            sep = ";" if typing.get_origin(item) is list else ","
            parts = value.replace(" ", "").split(sep)
            if "" in parts:
                raise InputError(where, f"expected {_plural(item)} separated by {sep!r}, got an empty element in {value!r}")
        elif isinstance(value, (list, tuple)):
            parts = list(value)
        else:
            raise InputError(where, f"expected {_expected(typ)}, got {value!r}")
        return [coerce(p, item, where, text) for p in parts]
    if typ is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "1", "yes"):
            return True
        if isinstance(value, str) and value.lower() in ("false", "0", "no"):
            return False
        raise InputError(where, f"expected true or false, got {value!r}")
    if typ in (int, float):
        return _number(value, typ, where)
    if typ is dict:
        if isinstance(value, dict):
            return dict(value)
        if isinstance(value, str):
            return _parse_table(value, where)
        raise InputError(where, f"expected a table (a nested topology), got {value!r}")
    if typ is str:
        if isinstance(value, str):
            return value
        raise InputError(where, f"expected a string, got {value!r}")
    return value


def _expected(typ: Any) -> str:
    """What a value of the annotated type ``typ`` is, for a message: ``an array of integers``."""
    if typing.get_origin(typ) is list:
        (item,) = typing.get_args(typ) or (str,)
        return f"an array of {_plural(item)}"
    return {bool: "true or false (a boolean)", int: "an integer", float: "a number", str: "a string",
            dict: "a table (a nested topology)"}.get(typ, _type_name(typ))


def _plural(item: Any) -> str:
    return {int: "integers", float: "numbers", str: "strings", bool: "booleans"}.get(item, "lists")


def _number(value: Any, typ: type, where: str) -> int | float:
    """``value`` as an int (integral floats and numeric strings too) or a float; never a bool."""
    what = "an integer" if typ is int else "a number"
    if not isinstance(value, bool):
        if typ is int and isinstance(value, int):
            return value
        if typ is int and isinstance(value, float) and value.is_integer():
            return int(value)
        if typ is float and isinstance(value, (int, float)):
            return float(value)
        if isinstance(value, str):
            try:
                return typ(value)
            except ValueError:
                pass
    raise InputError(where, f"expected {what}, got {value!r}")


def _parse_table(text: str, where: str) -> dict:
    """A nested topology written on the command line: JSON (``{"generator": "ring", ...}``)
    or ``GENERATOR:k=v:k=v`` (e.g. ``kautz:degree=2:diameter=2``, ``torus:dims=3,3``)."""
    text = text.strip()
    if text.startswith("{"):
        try:
            value = json.loads(text)
        except json.JSONDecodeError as e:
            raise InputError(where, f"expected a JSON table, {e}") from None
        if not isinstance(value, dict):
            raise InputError(where, "expected a JSON object")
        return value
    gen, *pairs = text.split(":")
    if not gen:
        raise InputError(where, f"expected GENERATOR:k=v:..., got {text!r}")
    table: dict[str, Any] = {"generator": gen}
    for pair in pairs:
        key, sep, val = pair.partition("=")
        if not sep or not key:
            raise InputError(where, f"expected k=v after {gen!r}, got {pair!r}")
        table[key] = val
    return table


def _lookup(name: str, where: str) -> Callable[..., Topology]:
    if name not in GENERATORS:
        raise InputError(where, f"unknown generator {name!r}{did_you_mean(name, GENERATORS)}; "
                                f"known: {', '.join(sorted(GENERATORS))}")
    return GENERATORS[name]


def _type_name(typ: Any) -> str:
    origin = typing.get_origin(typ)
    if origin is list:
        (item,) = typing.get_args(typ) or (str,)
        return f"list[{_type_name(item)}]"
    if origin is typing.Union or origin is getattr(__import__("types"), "UnionType", None):
        args = [a for a in typing.get_args(typ) if a is not type(None)]
        return _type_name(args[0])
    return getattr(typ, "__name__", str(typ))


def _plain(v: Any) -> Any:
    return list(v) if isinstance(v, tuple) else v


def _positive(value: int, where: str, minimum: int = 1) -> None:
    if value < minimum:
        raise InputError(where, f"expected an integer >= {minimum}, got {value}")


def grid_index(coords: tuple[int, ...], dims: list[int]) -> int:
    """Row-major id of ``coords`` in a grid of shape ``dims`` (last coordinate fastest)."""
    idx = 0
    for c, d in zip(coords, dims):
        idx = idx * d + c
    return idx


# ---- generators ----------------------------------------------------------------------------

@generator(size=lambda p: (p["nodes"], 2 * p["nodes"], "nodes"))
def ring(nodes: int, bidirectional: bool = True) -> Topology:
    """Ring of ``nodes`` NPUs: i -> i+1 (and i+1 -> i when bidirectional).

    nodes: number of NPUs (>= 2). bidirectional: links in both directions.
    """
    _positive(nodes, "nodes", 2)
    edges = [(i, (i + 1) % nodes) for i in range(nodes)]
    if bidirectional:
        edges += [(v, u) for u, v in edges if (v, u) not in edges]
    edges = list(dict.fromkeys(edges))
    return from_edges(nodes, edges, name=f"ring{nodes}{'' if bidirectional else '-uni'}",
                      meta={"cayley": [nodes]})


@generator(size=lambda p: (product(p["dims"]), 2 * len(p["dims"]) * product(p["dims"]), "dims"))
def mesh(dims: list[int]) -> Topology:
    """Mesh (grid without wrap-around) of any shape; links in both directions.

    dims: size of each dimension, e.g. [4, 4] (row-major ids, last coordinate fastest).
    """
    return _grid(dims, wrap=False, bidirectional=True)


@generator(size=lambda p: (product(p["dims"]), 2 * len(p["dims"]) * product(p["dims"]), "dims"))
def torus(dims: list[int], bidirectional: bool = True) -> Topology:
    """Torus (grid with wrap-around) of any shape and number of dimensions.

    dims: size of each dimension, e.g. [5, 7]. bidirectional: links both ways (default), else
    only +1 in each dimension.
    """
    return _grid(dims, wrap=True, bidirectional=bidirectional)


def _grid(dims: list[int], wrap: bool, bidirectional: bool) -> Topology:
    if not dims:
        raise InputError("dims", "expected at least one dimension")
    for d in dims:
        _positive(d, "dims", 1)
    size = 1
    for d in dims:
        size *= d
    if size < 2:
        raise InputError("dims", f"expected at least 2 nodes, got shape {dims}")
    edges = set()
    for coords in itertools.product(*(range(d) for d in dims)):
        u = grid_index(coords, dims)
        for axis, d in enumerate(dims):
            if d == 1:
                continue
            steps = (1, -1) if bidirectional else (1,)
            for s in steps:
                c = coords[axis] + s
                if not wrap and not 0 <= c < d:
                    continue
                nb = list(coords)
                nb[axis] = c % d
                v = grid_index(tuple(nb), dims)
                if v != u:
                    edges.add((u, v))
    kind = "torus" if wrap else "mesh"
    return from_edges(size, sorted(edges), name=f"{kind}{'x'.join(map(str, dims))}",
                      meta={"dims": list(dims), **({"cayley": list(dims)} if wrap else {})})


@generator(size=lambda p: (power(2, p["dim"]), p["dim"] * power(2, p["dim"]), "dim"))
def hypercube(dim: int) -> Topology:
    """Hypercube of dimension ``dim`` (2^dim nodes, bidirectional links along each bit).

    dim: number of dimensions (>= 1).
    """
    _positive(dim, "dim", 1)
    n = 1 << dim
    edges = [(u, u ^ (1 << b)) for u in range(n) for b in range(dim)]
    return from_edges(n, edges, name=f"hypercube{dim}", meta={"cayley": [2] * dim})


@generator(size=lambda p: (p["nodes"], p["nodes"] * (p["nodes"] - 1), "nodes"))
def complete(nodes: int) -> Topology:
    """Complete digraph K_n: a direct link between every ordered pair.

    nodes: number of NPUs (>= 2).
    """
    _positive(nodes, "nodes", 2)
    edges = [(u, v) for u in range(nodes) for v in range(nodes) if u != v]
    return from_edges(nodes, edges, name=f"complete{nodes}", meta={"cayley": [nodes]})


@generator(size=lambda p: (2 * p["degree"], 2 * p["degree"] ** 2, "degree"))
def complete_bipartite(degree: int) -> Topology:
    """Complete bipartite graph K_{d,d} (2d nodes, degree d), bidirectional links.

    degree: d (>= 1). The two sides are the even and the odd ids (node i is linked to every j
    with i - j odd), so K_{d,d} is the circulant C(2d, {1, 3, 5, ...}): a Cayley graph of
    Z_{2d} (``meta["cayley"] = [2d]``). Distance-regular (Zhao et al., NSDI 2025, Figure 1, §E.3).
    """
    _positive(degree, "degree", 1)
    n = 2 * degree
    edges = [(u, v) for u in range(n) for v in range(n) if (u - v) % 2 == 1]
    return from_edges(n, edges, name=f"K{degree},{degree}", meta={"cayley": [n]})


@generator(size=lambda p: (power(p["q"], p["dims"]), power(p["q"], p["dims"]) * p["dims"] * (p["q"] - 1),
                             larger(p, "q", "dims")))
def hamming(dims: int, q: int) -> Topology:
    """Hamming graph H(D, q): q^D nodes (words of length D over q symbols), bidirectional links
    between words that differ in exactly one position.

    dims: D, the word length (>= 1). q: alphabet size (>= 2). Degree D(q-1), diameter D.
    Ids are the words read as base-q numbers (row-major); a Cayley graph of Z_q^D
    (``meta["cayley"] = [q] * D``). H(2, 3) is the Paley graph P9; H(D, 2) the D-cube.
    """
    _positive(dims, "dims", 1)
    _positive(q, "q", 2)
    topo = hyperx([q] * dims)
    return _renamed(topo, f"hamming{dims},{q}")


@generator(size=lambda p: (p["nodes"], 2 * p["nodes"] * len(p["offsets"]), "nodes"))
def circulant(nodes: int, offsets: list[int], directed: bool = False) -> Topology:
    """Circulant graph C(N, {a_1, ..., a_k}): x -> x + a_i mod N (and x -> x - a_i unless directed).

    nodes: N (>= 2). offsets: the a_i, each in 1..N-1 (duplicates and a, N-a pairs collapse).
    directed: only the + arcs (a directed circulant). The graph must be connected:
    gcd(N, a_1, ..., a_k) = 1 (Zhao et al., NSDI 2025, §E.4). For degree 4 the best diameter is reached by
    C(N, {a, a+1}) with a = floor(sqrt((N-2)/2)) (Zhao et al., NSDI 2025, Theorem 23 / [17]).
    A Cayley graph of Z_N (``meta["cayley"] = [N]``).
    """
    _positive(nodes, "nodes", 2)
    if not offsets:
        raise InputError("offsets", "expected at least one offset")
    for a in offsets:
        if not 1 <= a < nodes:
            raise InputError("offsets", f"offset {a} is not in 1..{nodes - 1}")
    if math.gcd(nodes, *offsets) != 1:
        raise InputError("offsets", f"C({nodes}, {offsets}) is disconnected: gcd(N, offsets) must be 1")
    steps = sorted({a % nodes for a in offsets} | (set() if directed else {(-a) % nodes for a in offsets}))
    edges = [(x, (x + s) % nodes) for x in range(nodes) for s in steps]
    kind = "dcirculant" if directed else "circulant"
    return from_edges(nodes, edges, name=f"{kind}{nodes}({','.join(map(str, offsets))})",
                      meta={"cayley": [nodes], "offsets": list(offsets)})


@generator(size=lambda p: ((p["degree"] + 1) * power(p["degree"], p["diameter"] - 1),
                           (p["degree"] + 1) * power(p["degree"], p["diameter"]), larger(p, "degree", "diameter")))
def kautz(degree: int, diameter: int) -> Topology:
    """Kautz digraph K(d, D): d^D + d^(D-1) nodes, out-degree d, diameter D (Moore optimal).

    degree: d (>= 1). diameter: D (>= 1). Nodes are the words s_1..s_D over {0..d} with
    s_i != s_{i+1}, numbered in lexicographic order; arcs s_1..s_D -> s_2..s_D x for every
    x != s_D (Zhao et al., NSDI 2025, §E.2: Pi(d, d^D + d^(D-1)) is isomorphic to it).
    """
    _positive(degree, "degree", 1)
    _positive(diameter, "diameter", 1)
    words = [w for w in itertools.product(range(degree + 1), repeat=diameter)
             if all(a != b for a, b in zip(w, w[1:]))]
    index = {w: i for i, w in enumerate(words)}
    edges = [(index[w], index[w[1:] + (x,)]) for w in words for x in range(degree + 1) if x != w[-1]]
    return from_edges(len(words), edges, name=f"kautz{degree},{diameter}")


@generator(size=lambda p: (p["nodes"], p["nodes"] * p["degree"], larger(p, "nodes", "degree")))
def generalized_kautz(degree: int, nodes: int) -> Topology:
    """Generalized Kautz digraph Pi(d, N): arcs x -> (-d*x - a) mod N for a = 1..d.

    degree: d (>= 1). nodes: N (>= 2). Defined for every d and N (Zhao et al., NSDI 2025, Definition 16);
    its diameter is at most one above the Moore bound (Theorem 21). Self-loops (x with
    (d+1)x + a = 0 mod N) are dropped, so those nodes have out-degree d-1; their number is
    ``meta["self_loops_dropped"]``. Parallel arcs (possible when N < d) are kept.
    """
    _positive(degree, "degree", 1)
    _positive(nodes, "nodes", 2)
    arcs = [(x, (-degree * x - a) % nodes) for x in range(nodes) for a in range(1, degree + 1)]
    loops = sum(1 for u, v in arcs if u == v)
    return from_edges(nodes, arcs, name=f"gkautz{degree},{nodes}", meta={"self_loops_dropped": loops})


@generator(size=lambda p: (power(p["degree"], p["diameter"]), power(p["degree"], p["diameter"] + 1),
                           larger(p, "degree", "diameter")))
def de_bruijn(degree: int, diameter: int) -> Topology:
    """De Bruijn digraph B(d, D): d^D nodes, arcs x -> (d*x + a) mod d^D for a = 0..d-1.

    degree: d (>= 2). diameter: D (>= 1). Ids are the words of length D read in base d.
    Each a gives exactly one self-loop ((d-1)x + a = 0 mod d^D; e.g. at 0...0 and at the
    all-(d-1) word); the d self-loops are dropped (``meta["self_loops_dropped"]``), so those
    nodes have out-degree d-1. Diameter D.
    """
    _positive(degree, "degree", 2)
    _positive(diameter, "diameter", 1)
    n = degree ** diameter
    arcs = [(x, (degree * x + a) % n) for x in range(n) for a in range(degree)]
    loops = sum(1 for u, v in arcs if u == v)
    return from_edges(n, arcs, name=f"debruijn{degree},{diameter}", meta={"self_loops_dropped": loops})


@generator(size=lambda p: (2 * p["a"] ** 2, 8 * p["a"] ** 2, "a"))
def twisted_torus(a: int) -> Topology:
    """Rectangular twisted torus RTT(a): a 2a x a torus whose short-dimension wrap-around links
    are twisted by a (Cámara et al. [25] of Zhao et al., NSDI 2025, used by TPU v4; Zhao et al., NSDI 2025, §E, Table 9).

    a: the short side (>= 2); 2a^2 nodes, degree 4, diameter a (a plain 2a x a torus has
    a + floor(a/2)). Node (x, y), x in 0..2a-1, y in 0..a-1 has id x*a + y; links
    (x, y) <-> (x+1 mod 2a, y), (x, y) <-> (x, y+1) for y < a-1, and the twisted wrap-around
    (x, a-1) <-> (x+a mod 2a, 0).
    """
    _positive(a, "a", 2)
    rows, cols = 2 * a, a
    edges = set()
    for x in range(rows):
        for y in range(cols):
            u = x * cols + y
            edges.add((u, ((x + 1) % rows) * cols + y))
            v = x * cols + y + 1 if y < cols - 1 else ((x + a) % rows) * cols
            edges.add((u, v))
    return from_edges(rows * cols, sorted(edges), bidirectional=True, name=f"twisted_torus{a}",
                      meta={"dims": [rows, cols], "twist": a})


DGX1_NVLINKS = (
    (0, 2, 1, 1, 2, 0, 0, 0),
    (2, 0, 1, 2, 0, 1, 0, 0),
    (1, 1, 0, 2, 0, 0, 2, 0),
    (1, 2, 2, 0, 0, 0, 0, 1),
    (2, 0, 0, 0, 0, 2, 1, 1),
    (0, 1, 0, 0, 2, 0, 1, 2),
    (0, 0, 2, 0, 1, 1, 0, 2),
    (0, 0, 0, 1, 1, 2, 2, 0),
)


@generator(size=lambda p: (8, 48, "generator"))
def dgx1() -> Topology:
    """NVIDIA DGX-1 (8 V100 GPUs, hybrid cube-mesh NVLink): 6 NVLinks per GPU.

    No parameters. A pair joined by two NVLinks has two parallel directed links each way
    (``DGX1_NVLINKS`` is the count matrix of NVIDIA's DGX-1 with V100, as in the DGX-1 system architecture whitepaper); every link gets the instance
    bandwidth, so a double pair carries twice as much.
    """
    edges = [(i, j) for i, row in enumerate(DGX1_NVLINKS) for j, k in enumerate(row) for _ in range(k)]
    return from_edges(8, edges, name="dgx1")


def _dragonfly_size(p: dict) -> tuple[int, int, str]:
    a, h = p["group_size"], p.get("global_links", 1)
    g = p.get("groups") or a * h + 1
    return g * a, g * a * (a - 1) + g * (g - 1), "group_size"


@generator(size=_dragonfly_size)
def dragonfly(group_size: int, groups: int | None = None, global_links: int = 1,
              global_scale: float = 1.0) -> Topology:
    """Dragonfly of routers-as-NPUs: fully connected groups, one global link per group pair.

    group_size: a, NPUs per group (>= 1). global_links: h, global links per NPU (>= 1).
    groups: g in 2..a*h+1 (default a*h+1, the balanced dragonfly). global_scale: bandwidth
    of a global link relative to the instance bandwidth (TACOS VII-B's 4x5 dragonfly has
    400 GB/s local and 200 GB/s global links: a=4, h=1, bandwidth=400e9, global_scale=0.5).
    Node id = group*a + router. Group i reaches group j over its port k = j if j < i else
    j-1, on router k // h (the "absolute" arrangement); links are bidirectional.
    """
    _positive(group_size, "group_size", 1)
    _positive(global_links, "global_links", 1)
    most = group_size * global_links + 1
    g = most if groups is None else groups
    if not 2 <= g <= most:
        raise InputError("groups", f"expected 2..{most} (group_size*global_links+1), got {g}")
    if not global_scale > 0:
        raise InputError("global_scale", f"expected a positive number, got {global_scale}")
    a = group_size
    edges = []
    for grp in range(g):
        base = grp * a
        edges += [(base + i, base + j) for i in range(a) for j in range(a) if i != j]
    for i in range(g):
        for j in range(g):
            if i == j:
                continue
            ki, kj = (j if j < i else j - 1), (i if i < j else i - 1)
            edges.append((i * a + ki // global_links, j * a + kj // global_links, {"scale": global_scale}))
    return from_edges(g * a, edges, name=f"dragonfly{a}x{g}", meta={"dims": [g, a]})


@generator(size=lambda p: (product(p["dims"]), product(p["dims"]) * sum(d - 1 for d in p["dims"]) * p.get("trunking", 1),
                           "dims"))
def hyperx(dims: list[int], trunking: int = 1) -> Topology:
    """HyperX: a grid where every node links to every node that differs in one coordinate.

    dims: size of each dimension (each >= 1). trunking: K parallel links per connected pair
    (>= 1). Ids row-major; a Cayley graph of Z_{dims[0]} x ... (``meta["cayley"] = dims``).
    HyperX with equal dims is the Hamming graph; a 2D HyperX is HammingMesh with 1x1 boards
    (De Sensi et al., NSDI 2024, §5.4.2).
    """
    if not dims:
        raise InputError("dims", "expected at least one dimension")
    for d in dims:
        _positive(d, "dims", 1)
    _positive(trunking, "trunking", 1)
    size = math.prod(dims)
    if size < 2:
        raise InputError("dims", f"expected at least 2 nodes, got shape {dims}")
    edges = []
    for coords in itertools.product(*(range(d) for d in dims)):
        u = grid_index(coords, dims)
        for axis, d in enumerate(dims):
            for c in range(d):
                if c != coords[axis]:
                    v = grid_index(coords[:axis] + (c,) + coords[axis + 1:], dims)
                    edges += [(u, v)] * trunking
    return from_edges(size, edges, name=f"hyperx{'x'.join(map(str, dims))}",
                      meta={"dims": list(dims), "cayley": list(dims)})


@generator(size=lambda p: (product(p["board"]) * product(p["grid"]) + sum(p["board"]) * sum(p["grid"]),
                             2 * product(p["board"]) * product(p["grid"]) * (2 + sum(p["grid"])), "grid"))
def hammingmesh(board: list[int], grid: list[int], fabric: str = "direct") -> Topology:
    """HammingMesh HxMesh (De Sensi et al., NSDI 2024, §5.4.1, Hoefler et al. SC'22): 2D-mesh boards whose edge
    nodes are joined per global row and per global column.

    board: [a, b], the rows and columns of a board's 2D mesh. grid: [x, y], boards per
    column and per row; (a*x) x (b*y) NPUs, global coordinate (r, c) has id r*(b*y) + c.
    Inside a board the links are the mesh. A node on a board's west/east edge belongs to its
    global row's fabric, a node on a north/south edge to its global column's fabric.
    fabric: "direct" joins every two fabric members on different boards by a link (the fat
    tree as a full crossbar; board=[1,1] gives the 2D HyperX); "switch" puts one switch node
    per global row and column (ids after the NPUs) linked to its members.
    """
    if len(board) != 2 or len(grid) != 2:
        raise InputError("board" if len(board) != 2 else "grid", "expected two sizes [rows, columns]")
    for name, vals in (("board", board), ("grid", grid)):
        for v in vals:
            _positive(v, name, 1)
    if fabric not in ("direct", "switch"):
        raise InputError("fabric", f"expected 'direct' or 'switch', got {fabric!r}")
    a, b = board
    x, y = grid
    R, C = a * x, b * y
    n = R * C
    if n < 2:
        raise InputError("grid", "expected at least 2 NPUs")
    nid = lambda r, c: r * C + c  # noqa: E731
    edges = set()
    for r in range(R):
        for c in range(C):
            if c + 1 < C and c // b == (c + 1) // b:
                edges.add((nid(r, c), nid(r, c + 1)))
            if r + 1 < R and r // a == (r + 1) // a:
                edges.add((nid(r, c), nid(r + 1, c)))
    row_members = [[nid(r, c) for c in range(C) if c % b in (0, b - 1)] for r in range(R)]
    col_members = [[nid(r, c) for r in range(R) if r % a in (0, a - 1)] for c in range(C)]
    switches = []
    if fabric == "direct":
        for members, board_of in ((row_members, lambda v: (v % C) // b), (col_members, lambda v: (v // C) // a)):
            for group in members:
                for i, u in enumerate(group):
                    for v in group[i + 1:]:
                        if board_of(u) != board_of(v):
                            edges.add((u, v))
    else:
        for s, group in enumerate(row_members + col_members, start=n):
            edges.update((m, s) for m in group)
            switches.append(s)
    size = n + len(switches)
    return from_edges(size, sorted(edges), bidirectional=True, switches=switches,
                      name=f"hx{a}x{b}mesh{x}x{y}", meta={"dims": [R, C], "board": [a, b], "grid": [x, y]})


@generator(size=lambda p: (p["nodes"] + 1, 2 * p["nodes"] * max(1, p.get("unwind", 0)), "nodes"))
def switch(nodes: int, unwind: int = 0, reduce: bool = False, copy: bool = False) -> Topology:
    """A fully connected switch of ``nodes`` NPUs, kept or unwound (TACOS §IV-D).

    nodes: N NPUs (>= 2). unwind: 0 keeps the switch as node id N with a bidirectional link
    to every NPU; d in 1..N-1 unwinds it to point-to-point links n -> n+1, ..., n+d (mod N),
    each with 1/d of the link bandwidth (outgoing bandwidth is shared; alpha is unchanged).
    reduce, copy: the kept switch sums and multicasts (:mod:`collsynth.instances.switch_ops`).
    """
    from .switch_ops import with_switch_ops

    _positive(nodes, "nodes", 2)
    if not 0 <= unwind < nodes:
        raise InputError("unwind", f"expected 0 (keep the switch) or a degree in 1..{nodes - 1}, got {unwind}")
    if (reduce or copy) and unwind:
        raise InputError("reduce" if reduce else "copy", f"a computing switch must be kept; expected unwind = 0, got {unwind}")
    if unwind == 0:
        edges = [(i, nodes) for i in range(nodes)]
        kept = from_edges(nodes + 1, edges, bidirectional=True, switches=[nodes],
                          name=f"switch{nodes}" + "-reduce" * reduce + "-copy" * copy)
        return with_switch_ops(kept, [nodes] if reduce else [], [nodes] if copy else [])
    edges = [(n, (n + k) % nodes, {"scale": 1.0 / unwind}) for n in range(nodes) for k in range(1, unwind + 1)]
    return from_edges(nodes, edges, name=f"switch{nodes}-unwind{unwind}",
                      meta={"cayley": [nodes], "unwind": unwind})


HIERARCHY_KINDS = ("ring", "uniring", "line", "complete", "switch")


def _checked_hierarchy(levels: list[str], dims: list[int], scales: list[float] | None,
                       unwind: list[int] | None) -> tuple[list[float], list[int], int]:
    """(scales, unwind, NPU count) of :func:`hierarchical`'s arguments, defaults filled in, after
    checking one known kind, a positive size, a positive scale and an unwind degree per level."""
    if not levels or len(levels) != len(dims):
        raise InputError("dims", f"expected one size per level ({len(levels)} levels), got {dims}")
    for k in levels:
        if k not in HIERARCHY_KINDS:
            raise InputError("levels", f"unknown level kind {k!r}; expected one of {', '.join(HIERARCHY_KINDS)}")
    for d in dims:
        _positive(d, "dims", 1)
    scales = [1.0] * len(levels) if scales is None else list(scales)
    unwind = [0] * len(levels) if unwind is None else list(unwind)
    if len(scales) != len(levels) or not all(s > 0 for s in scales):
        raise InputError("scales", f"expected {len(levels)} positive numbers, got {scales}")
    if len(unwind) != len(levels):
        raise InputError("unwind", f"expected {len(levels)} integers, got {unwind}")
    n = math.prod(dims)
    if n < 2:
        raise InputError("dims", "expected at least 2 NPUs")
    return scales, unwind, n


@generator(size=lambda p: levels(p["dims"], "dims"))
def hierarchical(levels: list[str], dims: list[int], scales: list[float] | None = None,
                 unwind: list[int] | None = None) -> Topology:
    """A multi-dimensional hierarchical system such as Ring x FullyConnected x Switch (TACOS VII-B).

    levels: the kind of each dimension: ring (bidirectional), uniring, line (a 1D mesh),
    complete (fully connected), switch. dims: the size of each dimension. NPU ids are
    row-major over the coordinates (the last dimension varies fastest); NPUs that differ only
    in coordinate i form a group joined by level i's kind. scales: per-level link bandwidth
    relative to the instance bandwidth (TACOS VII-B: levels=ring,complete,switch,
    dims=2,4,K, bandwidth=50e9, scales=4,2,1 for 200/100/50 GB/s). unwind: per level, used
    only by switch levels: 0 keeps one switch node per group (ids after the NPUs), d >= 1
    unwinds it to degree d (each link gets 1/d of the level bandwidth; TACOS uses
    degree-max for scale-up and degree 1 for scale-out switches).
    """
    scales, unwind, n = _checked_hierarchy(levels, dims, scales, unwind)
    edges: list = []
    switches = []
    next_id = n
    for axis, (kind, d) in enumerate(zip(levels, dims)):
        if d == 1:
            continue
        u_deg = unwind[axis]
        if kind == "switch" and not 0 <= u_deg < d:
            raise InputError("unwind", f"level {axis} (switch of {d}): expected 0..{d - 1}, got {u_deg}")
        others = [range(s) if i != axis else range(1) for i, s in enumerate(dims)]
        for coords in itertools.product(*others):
            group = [grid_index(coords[:axis] + (c,) + coords[axis + 1:], dims) for c in range(d)]
            attrs = {"scale": scales[axis]}
            if kind == "ring" or kind == "uniring":
                pairs = {(group[i], group[(i + 1) % d]) for i in range(d)}
                if kind == "ring":
                    pairs |= {(v, u) for u, v in pairs}
            elif kind == "line":
                pairs = {(group[i], group[i + 1]) for i in range(d - 1)}
                pairs |= {(v, u) for u, v in pairs}
            elif kind == "complete":
                pairs = {(u, v) for u in group for v in group if u != v}
            elif u_deg == 0:
                pairs = {(u, next_id) for u in group} | {(next_id, u) for u in group}
                switches.append(next_id)
                next_id += 1
            else:
                pairs = {(group[i], group[(i + k) % d]) for i in range(d) for k in range(1, u_deg + 1)}
                attrs = {"scale": scales[axis] / u_deg}
            edges += [(u, v, attrs) for u, v in sorted(pairs)]
    name = "_".join(levels) + "-" + "x".join(map(str, dims))
    return from_edges(next_id, edges, switches=switches, name=name,
                      meta={"dims": list(dims), "levels": list(levels), "scales": scales, "unwind": unwind})


@generator(size=lambda p: (p["nodes"], 2 * p["nodes"], "nodes"))
def optical_ring(nodes: int, wavelengths: int, wavelength_bandwidth: float | None = None,
                 reconfig_s: float = 0.0, oeo_s: float = 0.0) -> Topology:
    """An optical (WDM) ring for OpTree and its peers (Dai et al., ICC 2023): a bidirectional ring whose
    ``meta["optical"]`` records the optical parameters.

    nodes: N (>= 2). wavelengths: w per fiber (>= 1). wavelength_bandwidth: bytes/s of one
    wavelength; when given, each ring link's bandwidth is w * wavelength_bandwidth (overriding
    the instance bandwidth), else links take the instance bandwidth. reconfig_s: optical
    switch reconfiguration time per step (s, >= 0). oeo_s: O/E/O conversion delay per step
    (s, >= 0). Step time T = reconfig_s + oeo_s + data / (w * wavelength_bandwidth).
    """
    _positive(nodes, "nodes", 2)
    _positive(wavelengths, "wavelengths", 1)
    if wavelength_bandwidth is not None and not wavelength_bandwidth > 0:
        raise InputError("wavelength_bandwidth", f"expected a positive number of bytes/s, got {wavelength_bandwidth}")
    for key, val in (("reconfig_s", reconfig_s), ("oeo_s", oeo_s)):
        if not val >= 0:
            raise InputError(key, f"expected a non-negative time in seconds, got {val}")
    attrs = {} if wavelength_bandwidth is None else {"bandwidth": wavelengths * wavelength_bandwidth}
    edges = [(i, (i + 1) % nodes, attrs) for i in range(nodes)]
    topo = from_edges(nodes, edges, bidirectional=True, name=f"optical_ring{nodes}w{wavelengths}",
                      meta={"cayley": [nodes], "optical": {
                          "wavelengths": wavelengths, "wavelength_bandwidth": wavelength_bandwidth,
                          "reconfig_s": reconfig_s, "oeo_s": oeo_s}})
    if nodes == 2:  # one link each way, like ring(2)
        g = topo.graph
        for u, v in ((0, 1), (1, 0)):
            while g.number_of_edges(u, v) > 1:
                g.remove_edge(u, v)
    return topo


@generator(size=None)  # a catalogue of small named graphs
def distance_regular(name: str) -> Topology:
    """A named distance-regular graph from the catalogue of Zhao et al., NSDI 2025, Table 7 (bidirectional).

    name: one of ``collsynth.instances.distance_regular.CATALOGUE`` (octahedron, paley9,
    k55_minus_matching, heawood_distance3, petersen_line, cube4, heawood_line,
    pg23_incidence, odd4, doubled_odd4, tutte8cage_line). ``meta`` records the expected
    intersection array and diameter.
    """
    from . import distance_regular as dr

    return dr.topology(name)


# ---- graph-only expansions (Zhao et al., NSDI 2025, §4; numbering in the module docstring of COMMON) ----

def _base(table: dict, where: str) -> Topology:
    """Build a nested base topology table ``{generator = ..., params...}`` (links only)."""
    gen, _ = _nested_arguments(table, where)
    topo = build(gen, {k: v for k, v in table.items() if k != "generator"}, where=where)
    if topo.switches:
        raise InputError(where, f"generator {gen!r} has switch nodes; expansions take point-to-point topologies")
    return topo


def _line_graph_size(p: dict) -> tuple[int, int, str]:
    n, links, _ = p["base"]
    for _ in range(p.get("times", 1)):
        n, links = links, (links * links) // max(n, 1)  # L(G): a node per arc, d arcs each
    return n, links, "times" if p.get("times", 1) > 1 else "base"


@generator(size=_line_graph_size)
def line_graph(base: dict, times: int = 1) -> Topology:
    """Line-graph expansion L(G) applied ``times`` times (Zhao et al., NSDI 2025, §4.1): N' = dN, d' = d.

    base: a nested topology table, e.g. {generator = "kautz", degree = 2, diameter = 2}
    (on the command line JSON or ``kautz:degree=2:diameter=2``). times: >= 1. Node id of
    L(G) = index of the arc in G's arcs sorted by (u, v, key); arcs e=(u,v) -> f=(v,w).
    Graph-only: link costs are the instance's.
    """
    _positive(times, "times", 1)
    return constructions.line_graph_topology(_base(base, "base"), times, keep_costs=False)


@generator(size=lambda p: (p["base"][0] * p["copies"], p["base"][1] * p["copies"] ** 2, "copies"))
def degree_expansion(base: dict, copies: int) -> Topology:
    """Degree expansion G*n (Zhao et al., NSDI 2025, §4.2): N' = nN, d' = nd.

    base: a nested topology table (see line_graph). copies: n >= 1. Node (v, i) has id
    v*n + i; arcs (u, i) -> (v, j) for every arc u -> v of G and all i, j.
    """
    _positive(copies, "copies", 1)
    return constructions.degree_topology(_base(base, "base"), copies, keep_costs=False)


def _cartesian_size(p: dict) -> tuple[int, int, str]:
    n, links, _ = p["base"]
    if p.get("other") is not None:
        m, other_links, _ = p["other"]
        return n * m, n * other_links + m * links, "base"
    t = p.get("times", 2)
    return power(n, t), t * power(n, t - 1) * links, "times"


@generator(size=_cartesian_size)
def cartesian(base: dict, times: int = 2, other: dict | None = None) -> Topology:
    """Cartesian power G^times, or the product G x H with ``other`` (Zhao et al., NSDI 2025, §4.3).

    base: a nested topology table (see line_graph). times: the power (>= 1; must stay 2
    when ``other`` is given). other: a second nested topology H. Node (g, h) has id
    g*|H| + h; arcs (g, h) -> (g', h) for g -> g' in G and (g, h) -> (g, h') for h -> h'.
    Cayley translation orders concatenate when both factors have them.
    """
    _positive(times, "times", 1)
    g = _base(base, "base")
    if other is not None:
        if times != 2:
            raise InputError("times", "give either times (a power) or other (a product), not both")
        factors = [g, _base(other, "other")]
    else:
        factors = [g] * times
    name = " x ".join(f.name for f in factors) if other is not None else f"({g.name})^{times}"
    return constructions.cartesian_topology(factors, name=name, keep_costs=False)


def _renamed(topo: Topology, name: str) -> Topology:
    from dataclasses import replace

    return replace(topo, name=name)
