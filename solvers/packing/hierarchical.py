"""Hierarchical trees on a rail Clos whose switches copy nothing: a tier at a time, GPUs relaying.

A reduce-scatter on switches that do not reduce is the time reversal of an allgather on the
transposed links whose switches copy nothing (:mod:`collsynth.tens.pipelined_trees`), so every
route of a tree carries the whole of its pieces over every link it crosses. The translated
trees (:mod:`.translated`) send most of a root's data over the full depth of the fabric (GPU,
leaf, spine, core and back): every tier is loaded as heavily as the NICs, a pipeline of that
many stages whose fill the ``sync`` model charges. Reducing a tier at a time instead (the
hierarchical reduce-scatter of rail-optimised fabrics: within the box, then among the boxes of
a leaf, then across leaves and pods; Jeaugey, "Massively Scale Your Deep Learning Training
with NCCL 2.4", NVIDIA 2019, for the trees; Cho et al., "BlueConnect", SysML 2019, Section 3,
for reduce-scatter by tiers) leaves the upper tiers lightly loaded, since only one
representative a pod, group or box relays what crosses them: read as an allgather from root
``r`` (pod ``P``, group ``G``, box ``B``, GPU ``L``), the tree

1. crosses the cores to GPU ``(q, G, B, L)`` of every other pod ``q`` (six hops);
2. from each of those (and ``r``), crosses the spines to ``(q, g, B, L)`` of every other
   group ``g`` of its pod (four hops);
3. from each of those, crosses its leaf to ``(q, g, b, L)`` of every other box ``b`` (two);
4. from each of those, crosses its box switch to every other GPU of its box (two).

Every GPU is reached once, and the NICs carry what the cut optimum needs of them (each GPU's
NIC takes one copy a root from outside its box), so the bandwidth is the translated trees';
what changes is the depth the heavy loads sit at: a pipeline of two heavy stages (NIC up and
down) and the box switch, with the light tiers' hops only adding steps. With ``planes`` NICs a
GPU, tree ``i`` of a root carries ``1 / planes`` of its shard over plane ``i``.

GPU ids are read as the Clos generators lay them out (:mod:`collsynth.instances.clos`: pods,
groups, boxes, GPUs, in that order), with the counts read from the links: a box is a box
switch's GPUs, a group the boxes of GPU 0's first leaf, a pod the groups whose leaves share
its spines. The trees are kept with the translated trees' box shifts (the listed roots moved
onto every root), and every schedule is verified before it is used; a fabric laid out
otherwise gets no trees (None), never wrong ones.

>>> from collsynth.instances import make_instance
>>> from collsynth.instances.generators import build
>>> from collsynth.tens.pipelined_trees import verify
>>> inst = make_instance(build("fat_tree", {"k": 4}), "reduce_scatter", message_bytes=1 << 20)
>>> from collsynth.solvers.packing.translated import translated
>>> from collsynth.tens.cut_optimum import flow_net, optimum
>>> tau = optimum(flow_net(inst.topology, inst.collective.nodes, [1] * 16, transpose=True)).tau
>>> f = hierarchical(inst, translated(inst, "allgather", True, 1, tau))
>>> verify(f, inst), f.depth, len(f.src)  # 3 core routes of 6 hops, 4 spine routes of 4, 8 leaf routes of 2
(None, 12, 50)
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ...tens.pipelined_trees import PipelinedTrees, verify


def hierarchical(instance, listed: PipelinedTrees | None) -> PipelinedTrees | None:
    """The hierarchical trees (module doc) of ``listed``'s roots, kept with its shifts and
    pieces; None where ``listed`` is None or the fabric is not laid out as a rail Clos."""
    if listed is None:
        return None
    topo = instance.topology.transpose() if listed.reversed else instance.topology
    fabric = _Fabric.read(topo, sorted(int(v) for v in instance.collective.nodes))
    if fabric is None:
        return None
    trees = [fabric.tree(int(r), plane) for r in np.unique(listed.root) for plane in range(fabric.planes)]
    if any(t is None for t in trees):
        return None
    roots = np.repeat(np.unique(listed.root), fabric.planes)
    planes = np.tile(np.arange(fabric.planes), len(roots) // fabric.planes)
    sizes = [len(t) for t in trees]
    hops = np.array([h for t in trees for h in t], np.int64).reshape(-1, 3)
    return replace(listed, k=fabric.planes, root=roots, lo=planes, hi=planes + 1,
                   ptr=np.r_[0, np.cumsum(sizes)].astype(np.int64), src=hops[:, 0], dst=hops[:, 1],
                   before=hops[:, 2], cuts=None)


class _Fabric:
    """A rail Clos's GPU coordinates and switches (module doc), read from its links."""

    def __init__(self, graph, switches: set, gpus: list[int], box: int, group: int, pod: int):
        self.graph, self.switches = graph, switches
        self.box, self.group, self.pod, self.count = box, group, pod, len(gpus)
        self.box_switch = {v: self._box_switch(v) for v in gpus} if box > 1 else {}
        self.leaves = {v: sorted(s for s in graph.successors(v) if s in switches and s != self.box_switch.get(v))
                       for v in gpus}
        self.planes = len(self.leaves[gpus[0]])

    @classmethod
    def read(cls, topo, gpus: list[int]) -> "_Fabric | None":
        """The fabric of ``topo``, or None when its GPUs are not ids ``0 .. N - 1`` laid out
        as pods of groups of boxes with every GPU on as many leaves."""
        g, switches = topo.graph, set(topo.switches)
        if gpus != list(range(len(gpus))) or not all(s in switches for v in gpus for s in g.successors(v)):
            return None
        box = 1
        for s in g.successors(0):
            below = sorted(u for u in g.successors(s))
            if below == list(range(len(below))) and 1 < len(below) < len(gpus):
                box = len(below)  # a box switch: GPUs 0 .. box - 1 and nothing else
        probe = cls(g, switches, gpus, box, 1, 1)
        first = probe.leaves[0][0] if probe.leaves[0] else None
        if first is None or any(len(probe.leaves[v]) != probe.planes for v in gpus):
            return None
        group = (max(u for u in g.successors(first) if u not in switches) // box + 1) * box
        spines = [s for s in g.successors(first) if s in switches]
        under = {u for s in spines for leaf in g.successors(s) if leaf in switches
                 for u in g.successors(leaf) if u not in switches}
        pod = (max(under, default=group - 1) // group + 1) * group
        if len(gpus) % pod or pod % group or group % box:
            return None
        return cls(g, switches, gpus, box, group, pod)

    def _box_switch(self, v: int) -> int | None:
        first = v - v % self.box
        for s in self.graph.successors(v):
            if sorted(self.graph.successors(s)) == list(range(first, first + self.box)):
                return s
        return None

    def tree(self, root: int, plane: int) -> list[tuple[int, int, int]] | None:
        """The hops ``(src, dst, before)`` of ``root``'s tree over ``plane`` (module doc)."""
        hops: list = []
        reached = {root: 0}
        levels = [(self.pod, self.count), (self.group, self.pod), (self.box, self.group)]
        for unit, span in levels:  # the pods, then the groups of a pod, then the boxes of a group
            for x in sorted(reached):
                base = x - x % span
                for y in range(base + x % unit, base + span, unit):
                    if y == x or y in reached:
                        continue
                    path = self._route(x, y, plane, y % span // unit)
                    if path is None:
                        return None
                    reached[y] = self._add(hops, path, reached[x])
        for x in sorted(reached):
            for y in range(x - x % self.box, x - x % self.box + self.box):
                if y not in reached:
                    reached[y] = self._add(hops, [x, self.box_switch[x], y], reached[x])
        return hops if len(reached) == self.count else None

    @staticmethod
    def _add(hops: list, path: list[int], start: int) -> int:
        for i in range(len(path) - 1):
            hops.append((path[i], path[i + 1], start + i))
        return start + len(path) - 1

    def _route(self, x: int, y: int, plane: int, index: int) -> list[int] | None:
        """A shortest route ``x``, leaf, ..., leaf, ``y`` over ``plane``'s leaves; among equal
        ones the ``index``-th spine (and core) in id order, spreading the routes."""
        a, b = self.leaves[x][plane], self.leaves[y][plane]
        if a == b:
            return [x, a, y]
        up = sorted(s for s in self.graph.successors(a) if s in self.switches)
        down = set(s for s in self.graph.predecessors(b) if s in self.switches)
        shared = [s for s in up if s in down]
        if shared:
            return [x, a, shared[index % len(shared)], b, y]
        if not up:
            return None
        spine = up[index % len(up)]
        cores = sorted(c for c in self.graph.successors(spine) if c in self.switches and c != a)
        for c in cores[index // len(up) % max(1, len(cores)):] + cores:
            back = [s for s in self.graph.successors(c) if s in down]
            if back:
                return [x, a, spine, c, back[0], b, y]
        return None


def tier_by_tier(instance, trees) -> PipelinedTrees | None:
    """The hierarchical trees of ``trees``' roots (:func:`hierarchical`) where they verify,
    else None."""
    tiers = hierarchical(instance, trees) if trees.shift is not None else None
    return tiers if tiers is not None and verify(tiers, instance) is None else None
