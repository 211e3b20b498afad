"""The time-expanded network (TEN) of a topology (TACOS, seed 001, section IV).

A TEN copies the node set once per timestep and joins ``u`` at time ``s-1`` to ``v`` at time
``s + k - 1`` when a chunk sent over ``u -> v`` in timestep ``s`` needs ``k`` timesteps
(section IV-A); "stay" arcs ``u_t -> u_{t+1}`` let a chunk remain where it is. Heterogeneous
links are discretised (section IV-C): with a timestep (discretisation factor) ``f`` seconds, a
link of cost ``c = alpha + chunk_bytes / bandwidth`` spans ``ceil(c / f)`` timesteps. Switches
must be unwound into point-to-point links first (section IV-D, :func:`unwind_switches`).

Time conventions (shared with :mod:`.schedule`): timesteps are numbered ``1..horizon``; TEN
vertex ``(v, t)`` (``t = 0..horizon``) is node ``v`` at the END of timestep ``t`` (``t = 0`` is
the precondition). A send on link pair ``l`` that starts in timestep ``s`` occupies the link in
timesteps ``s .. s + delay[l] - 1`` and arrives at the end of ``e = s + delay[l] - 1``; its
schedule step is ``e`` (a send's step is the step in which it completes). Only arcs with
``e <= horizon`` exist.

Arcs are indexed link-major: the arcs of pair ``l`` are ``arc_offset[l] + (s - 1)`` for
``s = 1 .. horizon - delay[l] + 1``, so "at most ``capacity[l]`` chunks on link ``l`` in
timestep ``t``" is a sum over the contiguous slice :meth:`TEN.active` returns.

>>> from collsynth.instances.generators import build
>>> ten = build_ten(build("ring", {"nodes": 3, "bidirectional": False}, bandwidth=1.0, alpha=0.0), 3, 1.0)
>>> ten.num_arcs, len(ten.stay_node), ten.delay.tolist()
(9, 9, [1, 1, 1])
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import cached_property

import networkx as nx
import numpy as np

from .. import InputError
from ..instances.topology import Topology

REL_TOL = 1e-9  # costs within this relative distance of a multiple of the timestep round down


@dataclass(frozen=True, eq=False)
class TEN:
    """Time-expanded network over ``horizon`` timesteps of ``timestep`` seconds.

    Per directed link pair ``l`` (the order of ``topology.link_arrays``): ``src``, ``dst``,
    ``cost_s`` (alpha + chunk_bytes / per-link bandwidth), ``delay`` (timesteps, >= 1) and
    ``capacity`` (parallel links = chunks per timestep). Per arc ``a``: ``arc_link``,
    ``arc_start`` (first timestep on the link) and ``arc_end`` (arrival timestep = schedule
    step). ``stay_node``/``stay_time``: stay arcs ``(v, t) -> (v, t + 1)`` for t = 0..horizon-1.
    """

    topology: Topology
    horizon: int
    chunk_bytes: float
    timestep: float
    src: np.ndarray
    dst: np.ndarray
    cost_s: np.ndarray
    delay: np.ndarray
    capacity: np.ndarray
    arc_offset: np.ndarray
    arc_link: np.ndarray
    arc_start: np.ndarray
    arc_end: np.ndarray
    stay_node: np.ndarray
    stay_time: np.ndarray

    @property
    def num_links(self) -> int:
        """Number of directed link pairs."""
        return len(self.src)

    @property
    def num_arcs(self) -> int:
        """Number of link arcs (stay arcs not counted)."""
        return len(self.arc_link)

    @property
    def nodes(self) -> tuple[int, ...]:
        """Live node ids (every one has a column in the TEN)."""
        return self.topology.nodes

    @property
    def arc_src(self) -> np.ndarray:
        """Source node of every arc."""
        return self.src[self.arc_link]

    @property
    def arc_dst(self) -> np.ndarray:
        """Destination node of every arc."""
        return self.dst[self.arc_link]

    def arc(self, l: int, start: int) -> int:
        """Index of the arc of pair ``l`` starting in timestep ``start`` (-1 if it does not exist)."""
        if 1 <= start <= self.horizon - int(self.delay[l]) + 1:
            return int(self.arc_offset[l]) + start - 1
        return -1

    @cached_property
    def _by_start(self) -> tuple[np.ndarray, np.ndarray]:
        order = np.argsort(self.arc_start, kind="stable")
        return order, np.searchsorted(self.arc_start[order], np.arange(1, self.horizon + 2))

    @cached_property
    def _by_end(self) -> tuple[np.ndarray, np.ndarray]:
        order = np.argsort(self.arc_end, kind="stable")
        return order, np.searchsorted(self.arc_end[order], np.arange(1, self.horizon + 2))

    def arcs_starting(self, t: int) -> np.ndarray:
        """Arcs whose send starts in timestep ``t`` (it reads the state at the end of ``t - 1``)."""
        if not 1 <= t <= self.horizon:
            return np.zeros(0, dtype=np.int64)
        order, pos = self._by_start
        return order[pos[t - 1]:pos[t]]

    def arcs_arriving(self, t: int) -> np.ndarray:
        """Arcs that arrive at the end of timestep ``t`` (schedule step ``t``)."""
        if not 1 <= t <= self.horizon:
            return np.zeros(0, dtype=np.int64)
        order, pos = self._by_end
        return order[pos[t - 1]:pos[t]]

    def active(self, l: int, t: int) -> np.ndarray:
        """Arcs of pair ``l`` that occupy the link during timestep ``t`` (start in t-delay+1..t).

        A capacity constraint is ``sum(sent[arcs]) <= capacity[l]`` over these arcs.
        """
        d = int(self.delay[l])
        lo = max(1, t - d + 1)
        hi = min(t, self.horizon - d + 1)
        if hi < lo:
            return np.zeros(0, dtype=np.int64)
        base = int(self.arc_offset[l])
        return np.arange(base + lo - 1, base + hi, dtype=np.int64)

    def vertex(self, node, t):
        """Id of TEN vertex (node, t) for t = 0..horizon: ``t * size + node`` (vectorised)."""
        return np.asarray(t) * self.topology.size + np.asarray(node)

    def to_networkx(self) -> nx.MultiDiGraph:
        """The TEN as a graph on ``(node, t)`` vertices (small cases, figures and tests).

        Link arcs carry ``link``, ``arc`` and ``kind="link"``; stay arcs ``kind="stay"``.
        """
        g = nx.MultiDiGraph()
        g.add_nodes_from((v, t) for t in range(self.horizon + 1) for v in self.nodes)
        for a, (l, s, e) in enumerate(zip(self.arc_link.tolist(), self.arc_start.tolist(), self.arc_end.tolist())):
            g.add_edge((int(self.src[l]), s - 1), (int(self.dst[l]), e), kind="link", link=l, arc=a)
        for v, t in zip(self.stay_node.tolist(), self.stay_time.tolist()):
            g.add_edge((v, t), (v, t + 1), kind="stay")
        return g


def link_costs(topology: Topology, chunk_bytes: float) -> np.ndarray:
    """Seconds to move one chunk over each directed link pair: ``alpha + chunk_bytes / b``.

    ``b`` is the bandwidth of ONE of the pair's parallel links (their summed bandwidth divided
    by their count); parallel links add capacity, not speed (TACOS section IV-A/IV-C).
    """
    la = topology.link_arrays
    per_link = la.bandwidth / np.maximum(la.count, 1)
    return la.alpha + float(chunk_bytes) / per_link


def discretize(cost_s: np.ndarray, timestep: float) -> np.ndarray:
    """Timesteps of each link: ``ceil(cost / timestep)`` (TACOS section IV-C), at least 1.

    Costs within a relative ``1e-9`` of a multiple of the timestep are not rounded up (float
    noise such as 3 * 0.1 / 0.1 must give 3, not 4).
    """
    ratio = np.asarray(cost_s, dtype=np.float64) / float(timestep)
    return np.maximum(1, np.ceil(ratio * (1 - REL_TOL))).astype(np.int64)


def build_ten(topology: Topology, horizon: int, chunk_bytes: float, timestep: float | None = None) -> TEN:
    """The TEN of ``topology`` for ``horizon`` timesteps (TACOS section IV-A, IV-C).

    ``timestep`` (the discretisation factor f, seconds) defaults to the smallest link cost, so
    the fastest link takes exactly one timestep. Topologies with switches must be unwound first
    (:func:`unwind_switches`): a TEN has point-to-point links only (section IV-D).
    """
    if isinstance(horizon, bool) or not isinstance(horizon, (int, np.integer)) or horizon < 1:
        raise InputError("horizon", f"expected a positive number of timesteps, got {horizon!r}")
    if not chunk_bytes > 0:
        raise InputError("chunk_bytes", f"expected a positive size, got {chunk_bytes!r}")
    if topology.switches & set(topology.nodes):
        raise InputError("topology", "a TEN needs point-to-point links: unwind the switches first (unwind_switches)")
    la = topology.link_arrays
    if len(la) == 0:
        raise InputError("topology", "the topology has no live links")
    cost = link_costs(topology, chunk_bytes)
    if timestep is None:
        timestep = float(cost.min())
    if not timestep > 0 or not math.isfinite(timestep):
        raise InputError("timestep", f"expected a positive number of seconds, got {timestep!r}")
    delay = discretize(cost, timestep)
    horizon = int(horizon)
    n_arcs = np.maximum(0, horizon - delay + 1)
    offset = np.concatenate([[0], np.cumsum(n_arcs)[:-1]]).astype(np.int64)
    arc_link = np.repeat(np.arange(len(la), dtype=np.int64), n_arcs)
    arc_start = np.arange(len(arc_link), dtype=np.int64) - np.repeat(offset, n_arcs) + 1
    arc_end = arc_start + delay[arc_link] - 1
    nodes = np.asarray(topology.nodes, dtype=np.int64)
    stay_time = np.repeat(np.arange(horizon, dtype=np.int64), len(nodes))
    stay_node = np.tile(nodes, horizon)
    return TEN(
        topology=topology, horizon=horizon, chunk_bytes=float(chunk_bytes), timestep=float(timestep),
        src=la.src.copy(), dst=la.dst.copy(), cost_s=cost, delay=delay, capacity=la.count.copy(),
        arc_offset=offset, arc_link=arc_link, arc_start=arc_start, arc_end=arc_end,
        stay_node=stay_node, stay_time=stay_time,
    )


def unwind_switches(topology: Topology, degree: int) -> Topology:
    """Replace every switch by its degree-``d`` point-to-point unwinding (TACOS section IV-D).

    The N NPUs attached to a switch (its neighbours, sorted by id) are numbered 0..N-1 in that
    order; NPU ``n`` gets links ``n -> n+1, ..., n -> n+d (mod N)``. Each new link keeps the
    latency ``alpha`` of the NPU's link to the switch and gets ``1/d`` of its bandwidth (the
    NPU's outgoing bandwidth is shared by ``d`` links). The switch node disappears from the
    graph; node ids are kept (the switch id is left unused), and ``meta["unwound"]`` records
    ``{switch: degree}``. ``degree`` must be in ``1..N-1``; switches joined to other switches
    are not supported (there is no NPU order to unwind them by).
    """
    if isinstance(degree, bool) or not isinstance(degree, (int, np.integer)) or degree < 1:
        raise InputError("unwind", f"expected a positive unwinding degree, got {degree!r}")
    switches = sorted(s for s in topology.switches if s in topology.graph)
    if not switches:
        return topology
    g = topology.graph.copy()
    unwound = dict(topology.meta.get("unwound", {}))
    for s in switches:
        attached = sorted(set(g.predecessors(s)) | set(g.successors(s)))
        others = [n for n in attached if n in topology.switches]
        if others:
            raise InputError("unwind", f"switch {s} is linked to switch {others[0]}; only NPU-attached switches can be unwound")
        N = len(attached)
        if not 1 <= degree <= N - 1:
            raise InputError("unwind", f"degree {degree} is not in 1..{N - 1} for the {N}-NPU switch {s}")
        for i, n in enumerate(attached):
            up = [data for _, v, data in g.out_edges(n, data=True) if v == s]
            if not up:
                raise InputError("unwind", f"NPU {n} has no link to switch {s}")
            bw = sum(float(d["bandwidth"]) for d in up)
            alpha = max(float(d["alpha"]) for d in up)
            for k in range(1, degree + 1):
                m = attached[(i + k) % N]
                g.add_edge(n, m, bandwidth=bw / degree, alpha=alpha, unwound_from=s)
        g.remove_node(s)
        unwound[s] = int(degree)
    meta = dict(topology.meta)
    meta["unwound"] = unwound
    return replace(
        topology,
        graph=g,
        switches=frozenset(x for x in topology.switches if x not in unwound),
        name=f"{topology.name}-unwound{degree}" if topology.name else f"unwound{degree}",
        meta=meta,
    )
