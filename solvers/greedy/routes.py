"""Paths through kept switch nodes as the greedy matches them.

A switch node stores nothing and forwards what it receives (Liu et al., "Rethinking Machine
Learning Collective Communication as a Multi-Commodity Flow Problem", SIGCOMM 2024, Section 4;
:mod:`collsynth.tens.ten`): a chunk sent into a switch is useful only for the sends that leave
the switch in the timestep after it arrives (``switch_hop = "timestep"``) or, for an NPU, in the
timestep it arrives (``"instant"``: only a switch-to-NPU hop is instant, a switch-to-switch hop
never is, :func:`collsynth.tens.ten.instant_hops`). The greedy therefore never lets a switch hold a chunk: it matches
whole *routes* ``u -> s_1 -> ... -> s_k -> w`` from an NPU to an NPU through switches only,
one virtual in-link of ``w`` per route, and a route's send reserves each of its switch links
(the switch's ports) at the timesteps the chunk crosses them:

- hop ``j`` starts ``off[j]`` timesteps after the route's start (``off[0] = 0``) and occupies
  its link for ``busy[j]`` timesteps;
- it arrives ``lag[j] = busy[j] + latency[j]`` timesteps after its start, less one (end of its
  last timestep), at a switch that forwards it from the next timestep on, ``off[j + 1] = off[j]
  + lag[j]``, or, when hop ``j + 1`` is the last (into the NPU) and the hop is instant, in the
  same timestep: ``off[j + 1] = off[j] + lag[j] - 1``;
- the route delivers at ``w`` at the end of ``start + off[-1] + lag[-1] - 1``.

Every NPU-to-switch link starts one route to each NPU the switch chain reaches, along the
path of fewest timesteps (Dijkstra over the switches).

>>> from collsynth.instances.generators import build
>>> topo = build("switch", {"nodes": 3, "unwind": 0}, bandwidth=1.0, alpha=0.0)
>>> n = len(topo.link_arrays)
>>> r = switch_routes(topo, np.ones(n, np.int64), np.zeros(n, np.int64), instant=False)
>>> [(int(a), int(b)) for a, b in zip(r.src, r.dst)]
[(0, 1), (0, 2), (1, 0), (1, 2), (2, 0), (2, 1)]
>>> r.delay.tolist()[0], r.off.tolist()[:2]  # up in one timestep, down the next
(2, [0, 1])
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from ...instances.topology import ParallelArrays, Topology


@dataclass(frozen=True)
class Routes(ParallelArrays):
    """Routes through switches (see the module doc), one per ``(src[r], dst[r])`` NPU pair and
    first switch link.

    ``delay[r]``: timesteps from the route's start to its arrival at ``dst[r]``; its hops are
    ``hop_ptr[r] .. hop_ptr[r + 1] - 1`` with ``port`` (index into the topology's link pairs),
    ``off``, ``busy``, ``lag`` and ``enters`` (rank of the switch the hop enters among the
    switches, -1 for the last hop, which enters the NPU). ``ports`` lists the link pairs
    that touch a switch (``port_src -> port_dst``); ``hop_port`` indexes into it.
    ``is_switch[node]``: the node is a switch."""

    src: np.ndarray
    dst: np.ndarray
    delay: np.ndarray
    hop_ptr: np.ndarray
    hop_port: np.ndarray
    off: np.ndarray
    busy: np.ndarray
    lag: np.ndarray
    enters: np.ndarray
    ports: np.ndarray
    port_src: np.ndarray
    port_dst: np.ndarray
    is_switch: np.ndarray
    n_switches: int


def no_routes() -> Routes:
    """The routes of a topology without switch nodes: none."""
    e = np.zeros(0, np.int64)
    return Routes(src=e, dst=e, delay=e, hop_ptr=np.zeros(1, np.int64), hop_port=e, off=e, busy=e, lag=e,
                  enters=e, ports=e, port_src=e, port_dst=e,
                  is_switch=np.zeros(0, bool), n_switches=0)


def switch_mask(topology: Topology) -> np.ndarray:
    """bool ``[node]``: the live switch nodes."""
    mask = np.zeros(topology.size, bool)
    mask[[s for s in topology.switches if s in topology.graph]] = True
    return mask


def switch_routes(topology: Topology, busy: np.ndarray, latency: np.ndarray, instant: bool) -> Routes:
    """The routes of ``topology`` (module doc), given each link pair's occupancy ``busy`` and
    pipelined ``latency`` in timesteps; ``instant``: a switch forwards to an NPU in the arrival's
    own timestep (to another switch always in the next)."""
    la = topology.link_arrays
    sw = switch_mask(topology)
    if not sw.any():
        return no_routes()
    src, dst = la.src, la.dst
    lag = (np.asarray(busy, np.int64) + np.asarray(latency, np.int64))
    ports = np.flatnonzero(sw[src] | sw[dst])
    port_of = np.full(len(src), -1, np.int64)
    port_of[ports] = np.arange(len(ports))
    rank = np.cumsum(sw) - 1
    out: dict[int, list[int]] = {}
    for l in np.flatnonzero(sw[src]).tolist():
        out.setdefault(int(src[l]), []).append(l)
    paths = []
    for first in np.flatnonzero(~sw[src] & sw[dst]).tolist():
        paths += _paths_from(first, src, dst, lag, sw, out, int(instant))
    hop_ptr = np.zeros(len(paths) + 1, np.int64)
    hop_ptr[1:] = np.cumsum([len(p) for p, _ in paths])
    hops = np.array([l for p, _ in paths for l in p], np.int64)
    offs = np.array([o for _, o in paths for o in o], np.int64)
    last = hop_ptr[1:] - 1
    enters = np.where(sw[dst[hops]], rank[dst[hops]], -1)
    return Routes(src=src[hops[hop_ptr[:-1]]], dst=dst[hops[last]], delay=offs[last] + lag[hops[last]],
                  hop_ptr=hop_ptr, hop_port=port_of[hops], off=offs, busy=np.asarray(busy, np.int64)[hops],
                  lag=lag[hops], enters=enters.astype(np.int64), ports=ports.astype(np.int64),
                  port_src=src[ports].astype(np.int64), port_dst=dst[ports].astype(np.int64), is_switch=sw,
                  n_switches=int(sw.sum()))


def _paths_from(first: int, src, dst, lag, sw, out: dict, instant: int) -> list[tuple[list[int], list[int]]]:
    """From the NPU-to-switch link ``first``: per NPU reached through switches only, the hops
    and their start offsets of the fewest-timestep path (Dijkstra; ties: the first found).
    ``instant`` (0 or 1) is subtracted from the offset of the last hop only, the one into the
    NPU."""
    u, s0 = int(src[first]), int(dst[first])
    leave = {s0: int(lag[first])}  # switch -> offset from which the chunk may leave it for a switch
    prev: dict[int, tuple[int, int]] = {s0: (-1, first)}  # switch -> (previous switch, link into it)
    heap = [(leave[s0], s0)]
    best: dict[int, tuple[int, int, int]] = {}  # NPU -> (arrival offset, switch it leaves, link)
    while heap:
        at, s = heapq.heappop(heap)
        if at > leave[s]:
            continue
        for l in out.get(s, ()):
            x = int(dst[l])
            if sw[x]:
                if at + int(lag[l]) < leave.get(x, 1 << 62):
                    leave[x], prev[x] = at + int(lag[l]), (s, l)
                    heapq.heappush(heap, (leave[x], x))
            elif x != u and (x not in best or at - instant + int(lag[l]) < best[x][0]):
                best[x] = (at - instant + int(lag[l]), s, l)
    paths = []
    for w in sorted(best):
        _, s, l = best[w]
        hops = [l]
        while s != -1:
            s, into = prev[s]
            hops.append(into)
        hops.reverse()
        offs = [0]
        for h in hops[:-1]:
            offs.append(offs[-1] + int(lag[h]))
        offs[-1] -= instant  # the last hop, into the NPU, may leave in the arrival's timestep
        paths.append((hops, offs))
    return paths
