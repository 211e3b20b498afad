"""Topology generators: plain functions returning a :class:`Topology`, registered by name.

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
import typing
from typing import Any, Callable

from .. import InputError
from .topology import Topology, from_edges, with_link_costs

GENERATORS: dict[str, Callable[..., Topology]] = {}

DEFAULT_BANDWIDTH = 100e9  # bytes/s of a link, unless the instance says otherwise
DEFAULT_ALPHA = 0.5e-6  # seconds of a link, unless the instance says otherwise
RESERVED = ("bandwidth", "alpha", "failed_nodes", "failed_links", "generator", "file")


def generator(func: Callable[..., Topology]) -> Callable[..., Topology]:
    """Register ``func`` under its own name (decorator)."""
    GENERATORS[func.__name__] = func
    return func


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
) -> Topology:
    """Validate ``params`` against generator ``name``'s signature, call it, set link costs.

    Values may be native (TOML) or strings (``dims="5,7"`` from the command line). Errors name
    ``where.<param>`` and what was expected.
    """
    func = _lookup(name, f"{where}.generator")
    hints = typing.get_type_hints(func)
    sig = inspect.signature(func)
    params = dict(params or {})
    kwargs = {}
    for key, value in params.items():
        if key not in sig.parameters:
            known = ", ".join(sig.parameters) or "none"
            raise InputError(f"{where}.{key}", f"unknown parameter for generator {name!r} (parameters: {known})")
        kwargs[key] = coerce(value, hints.get(key, str), f"{where}.{key}")
    for p in sig.parameters.values():
        if p.default is inspect.Parameter.empty and p.name not in kwargs:
            raise InputError(f"{where}.{p.name}", f"generator {name!r} needs parameter {p.name!r} ({_type_name(hints.get(p.name, str))})")
    try:
        topo = func(**kwargs)
    except InputError as e:
        if e.where.startswith(where):
            raise
        raise InputError(f"{where}.{e.where}", e.what) from None
    except (ValueError, TypeError) as e:  # a generator rejecting a value it cannot build
        raise InputError(f"{where}", f"generator {name!r}: {e}") from None
    bw = DEFAULT_BANDWIDTH if bandwidth is None else coerce(bandwidth, float, f"{where}.bandwidth")
    al = DEFAULT_ALPHA if alpha is None else coerce(alpha, float, f"{where}.alpha")
    if not bw > 0:
        raise InputError(f"{where}.bandwidth", f"expected a positive number of bytes/s, got {bw}")
    if not al >= 0:
        raise InputError(f"{where}.alpha", f"expected a non-negative latency in seconds, got {al}")
    meta = dict(topo.meta)
    meta.setdefault("generator", name)
    meta.setdefault("params", {k: _plain(v) for k, v in kwargs.items()})
    topo = with_link_costs(topo, bw, al)
    object.__setattr__(topo, "meta", meta)
    return topo


def coerce(value: Any, typ: Any, where: str) -> Any:
    """Convert ``value`` (native or a command-line string) to the annotated type ``typ``."""
    origin = typing.get_origin(typ)
    if origin is typing.Union or origin is getattr(__import__("types"), "UnionType", None):
        args = [a for a in typing.get_args(typ) if a is not type(None)]
        if value is None:
            return None
        return coerce(value, args[0], where)
    if origin is list:
        (item,) = typing.get_args(typ) or (str,)
        if isinstance(value, str):
            inner = typing.get_origin(item) is list
            parts = [p for p in value.replace(" ", "").split(";" if inner else ",") if p]
        elif isinstance(value, (list, tuple)):
            parts = list(value)
        else:
            raise InputError(where, f"expected a list of {_type_name(item)}, got {value!r}")
        return [coerce(p, item, where) for p in parts]
    if typ is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "1", "yes"):
            return True
        if isinstance(value, str) and value.lower() in ("false", "0", "no"):
            return False
        raise InputError(where, f"expected true or false, got {value!r}")
    if typ is int:
        if isinstance(value, bool):
            raise InputError(where, f"expected an integer, got {value!r}")
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str):
            try:
                return int(value)
            except ValueError:
                pass
        raise InputError(where, f"expected an integer, got {value!r}")
    if typ is float:
        if isinstance(value, bool):
            raise InputError(where, f"expected a number, got {value!r}")
        if isinstance(value, (int, float)):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
        raise InputError(where, f"expected a number, got {value!r}")
    if typ is dict:
        if isinstance(value, dict):
            return dict(value)
        raise InputError(where, f"expected a table (a nested topology), got {value!r}")
    if typ is str:
        if isinstance(value, str):
            return value
        raise InputError(where, f"expected a string, got {value!r}")
    return value


def _lookup(name: str, where: str) -> Callable[..., Topology]:
    if name not in GENERATORS:
        raise InputError(where, f"unknown generator {name!r}; known: {', '.join(sorted(GENERATORS))}")
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

@generator
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


@generator
def mesh(dims: list[int]) -> Topology:
    """Mesh (grid without wrap-around) of any shape; links in both directions.

    dims: size of each dimension, e.g. [4, 4] (row-major ids, last coordinate fastest).
    """
    return _grid(dims, wrap=False, bidirectional=True)


@generator
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


@generator
def hypercube(dim: int) -> Topology:
    """Hypercube of dimension ``dim`` (2^dim nodes, bidirectional links along each bit).

    dim: number of dimensions (>= 1).
    """
    _positive(dim, "dim", 1)
    n = 1 << dim
    edges = [(u, u ^ (1 << b)) for u in range(n) for b in range(dim)]
    return from_edges(n, edges, name=f"hypercube{dim}", meta={"cayley": [2] * dim})


@generator
def complete(nodes: int) -> Topology:
    """Complete digraph K_n: a direct link between every ordered pair.

    nodes: number of NPUs (>= 2).
    """
    _positive(nodes, "nodes", 2)
    edges = [(u, v) for u in range(nodes) for v in range(nodes) if u != v]
    return from_edges(nodes, edges, name=f"complete{nodes}")
