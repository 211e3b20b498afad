"""What a box is: its GPUs, the switch inside it, and the entries from every other box.

One model of a multi-box system, computed once per network (:func:`model`) and read by edge
splitting (:mod:`.splitting`: a switch's links are spread across boxes), two-level trees
(:mod:`.twolevel`: relays forward within their box) and ring trees (:mod:`.rings`: a ring per
box, entered from every other box). Zhao et al., "ForestColl: Throughput-Optimal Collective
Communications on Heterogeneous Network Fabrics" (arXiv 2402.06787), Section 6, evaluate on
such systems: boxes of GPUs joined inside by NVSwitch or by direct links (A100, MI250), and
joined to each other by NICs and InfiniBand switches.

On the network with parallel links pooled (:func:`pooled`, the one place links are pooled):

- a *link* joins two GPUs directly, or through a switch of exactly two ports linked both ways
  to two GPUs (TACOS's hierarchies, Won et al., "TACOS", Section VII-B; DGX H100's rail
  switches at two boxes), its route then through that switch;
- a *GPU switch* is a switch linked both ways to three or more GPUs and to nothing else;
- a GPU's *crossbar* is its GPU switch of the fastest port, when that port is faster than its
  other GPU switches' (DGX H100's NVSwitch at 450 GB/s beside a rail switch at 50).

The boxes are the crossbars' GPU sets when every GPU has one and they partition the GPUs
(one switch holding every GPU beside links is not a crossbar but the fabric joining boxes of
linked GPUs: ForestColl's MI250); else the components of the links. The *entries* from a box
into another are the links from one to the other and the GPU switches holding GPUs of both
(any GPU of the first on the switch to any of the second). A switch linked to other switches
(a NIC, an InfiniBand switch) is neither: routes through it are longer than one switch.

Adding a new box shape means changing :func:`model` alone (and its test,
``tests/test_packing_boxes.py``, with the expected boxes written by hand): the consumers read
the boxes, crossbars and entries, never the topology's shape.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import networkx as nx
import numpy as np


def pooled(src, dst, values) -> dict:
    """``(a, b) -> value`` of the links ``src -> dst``, parallel links added, self-loops and
    links of no value left out: the one place parallel links are pooled.

    >>> pooled([0, 0, 1, 2], [1, 1, 0, 2], [1, 2, 0, 5])
    {(0, 1): 3}
    """
    out: dict = {}
    for a, b, v in zip(np.asarray(src).tolist(), np.asarray(dst).tolist(), np.asarray(values).tolist()):
        if a != b and v > 0:
            out[(a, b)] = out.get((a, b), 0) + v
    return out


@dataclass(frozen=True)
class Entries:
    """The ways from one box into another: ``links``, routes ``(a, b)`` or ``(a, s, b)``
    (through a two-port switch) from a GPU of the first to one of the second, and
    ``switches``, GPU switches holding GPUs of both (any of the first's to any of the
    second's)."""

    links: tuple = ()
    switches: tuple = ()


@dataclass(frozen=True)
class Boxes:
    """The boxes of a network (module doc): each box's GPUs (sorted, boxes ordered by their
    first GPU), its crossbar (None when its GPUs are joined by links), every GPU's box, the
    links between GPUs with their units and routes, each GPU switch's GPUs, the entries
    ``(box, other) -> Entries`` and the pooled units of every link of the network."""

    gpus: tuple
    crossbars: tuple
    box_of: dict
    links: dict
    routes: dict
    switch_gpus: dict
    entries: dict
    units: dict = field(repr=False)

    def groups(self) -> dict | None:
        """Each GPU's box, or None when there is one box or every box is one GPU (no grouping)."""
        if len(self.gpus) < 2 or all(len(b) == 1 for b in self.gpus):
            return None
        return dict(self.box_of)


def _neighbours(units: dict) -> tuple[dict, dict]:
    """``(out, into)``: each node's out- and in-neighbours with the links' units."""
    out: dict = {}
    into: dict = {}
    for (a, b), u in units.items():
        out.setdefault(a, {})[b] = u
        into.setdefault(b, {})[a] = u
    return out, into


def _links(units: dict, compute: set, out: dict, into: dict) -> tuple[dict, dict, dict]:
    """``(links, routes, gpu_switches)``: the links between GPUs (direct or through a two-port
    switch, module doc) with their units and routes, and each GPU switch's ports
    ``{gpu: units}`` (the lesser of its two ways)."""
    links = {arc: u for arc, u in units.items() if arc[0] in compute and arc[1] in compute}
    routes = {arc: arc for arc in links}
    switches: dict = {}
    for s in sorted(set(out) | set(into)):
        if s in compute:
            continue
        o, i = out.get(s, {}), into.get(s, {})
        if set(o) != set(i) or not set(o) <= compute:
            continue
        if len(o) == 2:
            a, b = sorted(o)
            for x, y in ((a, b), (b, a)):
                if (x, y) not in links:
                    links[(x, y)], routes[(x, y)] = min(i[x], o[y]), (x, s, y)
        elif len(o) >= 3:
            switches[s] = {g: min(o[g], i[g]) for g in sorted(o)}
    return links, routes, switches


def _crossbars(switches: dict, compute: set, links: dict) -> dict | None:
    """``{switch: its GPUs}`` when every GPU's fastest GPU switch is unique and those switches
    partition the GPUs (not one switch holding them all beside links), else None."""
    best: dict = {}
    for s, ports in switches.items():
        for g, u in ports.items():
            best.setdefault(g, []).append((u, s))
    chosen: dict = {}
    for g in compute:
        ranked = sorted(best.get(g, ()), reverse=True)
        if not ranked or (len(ranked) > 1 and ranked[1][0] == ranked[0][0]):
            return None
        chosen.setdefault(ranked[0][1], set()).add(g)
    if any(set(switches[s]) != gpus for s, gpus in chosen.items()):
        return None
    if len(chosen) == 1 and links:
        return None
    return chosen


def model(nodes: int, src, dst, units, compute) -> Boxes:
    """The boxes (module doc) of the network of links ``src -> dst`` of ``units`` over node
    ids ``0..nodes-1`` whose GPUs are ``compute``.

    >>> m = model(5, [0, 4, 1, 4, 2, 4], [4, 0, 4, 1, 4, 2], [1] * 6, [0, 1, 2])
    >>> m.gpus, m.crossbars
    (((0, 1, 2),), (4,))
    """
    comp = set(int(c) for c in compute)
    pool = pooled(src, dst, units)
    out, into = _neighbours(pool)
    links, routes, switches = _links(pool, comp, out, into)
    cross = _crossbars(switches, comp, links)
    if cross is not None:
        found = sorted((tuple(sorted(g)), s) for s, g in cross.items())
        gpus, crossbars = tuple(b for b, _ in found), tuple(s for _, s in found)
    else:
        graph = nx.Graph(list(links))
        graph.add_nodes_from(comp)
        gpus = tuple(sorted(tuple(sorted(c)) for c in nx.connected_components(graph)))
        crossbars = (None,) * len(gpus)
    box_of = {g: i for i, box in enumerate(gpus) for g in box}
    entries: dict = {}
    for arc in sorted(links):
        x, y = box_of[arc[0]], box_of[arc[1]]
        if x != y:
            e = entries.setdefault((x, y), Entries())
            entries[(x, y)] = Entries(e.links + (routes[arc],), e.switches)
    for s, ports in sorted(switches.items()):
        if s in crossbars:
            continue
        held = sorted({box_of[g] for g in ports})
        for x in held:
            for y in held:
                if x != y:
                    e = entries.setdefault((x, y), Entries())
                    entries[(x, y)] = Entries(e.links, e.switches + (s,))
    inner = {arc: u for arc, u in links.items() if box_of[arc[0]] == box_of[arc[1]]}
    return Boxes(gpus, crossbars, box_of, inner, {a: routes[a] for a in inner},
                 {s: tuple(p) for s, p in switches.items()}, entries, pool)


def of_flow_net(net0) -> Boxes:
    """:func:`model` of a flow network (:class:`collsynth.tens.cut_optimum.FlowNet`), its
    links in units."""
    return model(net0.nodes, net0.src, net0.dst, net0.units, net0.compute)
