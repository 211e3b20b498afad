"""Which channel each send of the MSCCL export takes, so which thread block runs it: a link's
sends packed into few thread blocks, or one thread block per tree and edge (ForestColl's layout).

The default layout of :func:`collsynth.tens.export.to_msccl_xml` (:func:`link_channels`) packs a
link's sends into as few thread blocks as the executor's step limit allows (up to 64 steps of
one link in sequence in one thread block). ForestColl's published programs
(liangyuRain/mscclpp-public, branch ``msr``, ``pipeline_msccl_xml/``: Zhao et al., "ForestColl:
Throughput-Optimal Collective Communications on Heterogeneous Network Fabrics",
arXiv:2402.06787, Section 6) run every tree on channels of its own: each thread block holds
one edge of one tree (one ``s``, ``r``/``rrc`` step, or at a relay one ``rcs``/``rrs`` step
receiving from a child and sending to the parent), so a GPU's edges of different trees run side
by side and a relay forwards slice by slice. Their reduce-scatter on 2x8 A100 is 29 thread
blocks a GPU on 2 channels, each one step.

Here a *tree* is a connected component of the schedule's data dependencies (send ``j`` waits
for receive ``i``: a piece relayed or reduced on its way), and :func:`tree_channels` gives
each tree the lowest channel on which none of the rank pairs it uses is taken by another tree
(the executor keeps one connection per peer, channel and direction, so one thread block per
tree and edge means distinct channels on a link), and on which no GPU gets more than
``MAX_TB_PER_CHANNEL`` send (or receive) thread blocks. Receive and forward of one tree then
share a channel, so :mod:`collsynth.tens.export_fuse` makes them one step, as ForestColl's
relays. Refused (:class:`~collsynth.InputError`) when more channels than the executor has
would be needed, or a GPU more thread blocks than :data:`MAX_TREE_THREAD_BLOCKS`: then a
coarser grid (fewer, larger trees) or the default layout is the program.

A GPU running more thread blocks than it has streaming multiprocessors runs them in turns
(the A100 has 108; the ``runtime`` model prices that at half copy rate,
:func:`collsynth.tens.cost_models.runtime.shared_sms`), so a user exporting for that GPU keeps
within its SMs: :func:`fitted_channels` moves the trees' sends between two ranks onto one
channel, the two lightest of that rank pair first, on the GPU with the most thread blocks
first, until every GPU has at most a given number (layout ``fitted``). Each connection keeps
its program order, as the packed layout's thread blocks do.
"""

from __future__ import annotations

from collections import Counter, defaultdict

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from .. import InputError

__all__ = ["link_channels", "tree_channels", "fitted_channels", "trees_of", "MAX_TREE_THREAD_BLOCKS"]

# a dependency names its thread block in an int8_t (ids 0..127, msccl_format.MAX_DEPENDED_TB), so at
# most 128 thread blocks a GPU keep every one of them nameable; ForestColl's largest measured
# program on 2x8 A100 (reduce-scatter, 4 instances) has 116
MAX_TREE_THREAD_BLOCKS = 128


def trees_of(n_sends: int, deps: dict) -> np.ndarray:
    """The tree (connected component of data dependencies) of every send, numbered 0.. in
    order of each tree's first send. ``deps``: op -> the ops it waits for, where
    ``("S", j) -> ("R", i)`` is send ``j`` waiting for receive ``i`` (other waits, between
    receives or a receive for a send, are not data flow and do not join trees).

    >>> trees_of(4, {("S", 2): [("R", 0)], ("R", 3): [("S", 1)]}).tolist()
    [0, 1, 0, 2]
    """
    pairs = [(j, i) for (kind, j), ds in deps.items() if kind == "S" for (dkind, i) in ds if dkind == "R"]
    a = np.array([p[0] for p in pairs], dtype=np.int64)
    b = np.array([p[1] for p in pairs], dtype=np.int64)
    graph = coo_matrix((np.ones(len(a)), (a, b)), shape=(n_sends, n_sends))
    _, comp = connected_components(graph, directed=False)
    first = {}
    for c in comp.tolist():
        first.setdefault(c, len(first))
    return np.array([first[c] for c in comp.tolist()], dtype=np.int64)


def tree_channels(src_r, dst_r, path, tree: np.ndarray, max_channels: int, max_per_channel: int) -> np.ndarray:
    """Channel of every send: each tree (``tree[i]``) the lowest channel on which no rank pair
    it sends over carries another tree and no GPU exceeds ``max_per_channel`` send (or
    receive) thread blocks; trees in order of their number. ``src_r``/``dst_r``: the sends'
    ranks, ``path[i]``: the switches send ``i`` crosses (a tree crossing one rank pair by two
    paths would merge them on one connection: refused).

    >>> tree_channels([0, 1, 0, 1], [1, 2, 1, 2], [()] * 4, np.array([0, 0, 1, 1]), 32, 32).tolist()
    [0, 0, 1, 1]
    >>> tree_channels([0, 2], [1, 1], [()] * 2, np.array([0, 1]), 32, 32).tolist()  # different pairs share
    [0, 0]
    """
    members: dict[int, list[int]] = defaultdict(list)
    for i, t in enumerate(np.asarray(tree).tolist()):
        members[t].append(i)
    taken: dict[tuple[int, int], set[int]] = defaultdict(set)  # rank pair -> channels of trees on it
    out_use: dict[int, Counter] = defaultdict(Counter)
    in_use: dict[int, Counter] = defaultdict(Counter)
    chan = np.zeros(len(tree), dtype=np.int64)
    for t in sorted(members):
        pairs: dict[tuple[int, int], tuple] = {}
        for i in members[t]:
            pair = (int(src_r[i]), int(dst_r[i]))
            if pairs.setdefault(pair, path[i]) != path[i]:
                raise InputError("schedule", f"a tree crosses ranks {pair[0]}->{pair[1]} by two routes; "
                                 "one thread block per tree and edge cannot tell them apart")
        c = 0
        while any(c in taken[p] or out_use[p[0]][c] >= max_per_channel or in_use[p[1]][c] >= max_per_channel
                  for p in pairs):
            c += 1
        if c >= max_channels:
            raise InputError("schedule", f"one thread block per tree and edge needs more than {max_channels} channels "
                             "(trees sharing a link each need one of their own); export on a coarser grid")
        for p in pairs:
            taken[p].add(c)
            out_use[p[0]][c] += 1
            in_use[p[1]][c] += 1
        chan[members[t]] = c
    return chan


def link_channels(s, order: np.ndarray, count: np.ndarray, lane_steps: int, path, max_per_channel: int) -> np.ndarray:
    """Channel of every send: a link with ``k`` parallel links and ``m`` sends gets
    ``lanes = max(k, ceil(m / lane_steps))`` consecutive channels from a base chosen greedily so
    that no GPU has more than ``max_per_channel`` send (or receive) thread blocks on a
    channel; its sends take the lanes round-robin in program order (so the sends of one step
    over parallel links use different links). A route through switches (``path[i]``, the
    switches in order; ``()`` for a link) is a link of its own: the routes between two ranks
    through different switches, and their direct link, never share a channel."""
    n = len(s)
    chan = np.zeros(n, dtype=np.int64)
    if n == 0:
        return chan
    links: dict[tuple, list[int]] = defaultdict(list)
    for i in order.tolist():
        links[(int(s.src[i]), int(s.dst[i]), path[i])].append(i)
    out_use: dict[int, Counter] = defaultdict(Counter)
    in_use: dict[int, Counter] = defaultdict(Counter)
    taken: dict[tuple[int, int], set[int]] = defaultdict(set)  # channels of a rank pair's routes so far
    for (u, v, _), members in sorted(links.items()):
        lanes = max(int(count[members[0]]), -(-len(members) // lane_steps))
        base = 0
        while any(out_use[u][base + q] >= max_per_channel or in_use[v][base + q] >= max_per_channel
                  or base + q in taken[(u, v)] for q in range(lanes)):
            base += 1
        for q in range(lanes):
            out_use[u][base + q] += 1
            in_use[v][base + q] += 1
            taken[(u, v)].add(base + q)
        for m, i in enumerate(members):
            chan[i] = base + m % lanes
    return chan


def fitted_channels(chan: np.ndarray, src_r, dst_r, path, most: int, held=None) -> np.ndarray:
    """``chan`` with the sends of some channels of one rank pair (and route ``path[i]``) moved
    onto one channel, until no GPU runs more than ``most`` thread blocks (one per send peer and
    channel, one per receive peer and channel, and ``held[g]`` more: local copies). Each merge
    joins the two channels of a pair with the fewest sends, on a pair of a GPU with the most
    thread blocks, the lighter merge first (ties: the lower pair); the merged sends take the
    lower channel. Refused (:class:`~collsynth.InputError`) when no merge is left and a GPU
    still has more than ``most``.

    Two GPUs, three trees each sending 0 -> 1 on channels 0, 1, 2 (one send, one send, two):
    GPU 0 has three send thread blocks, GPU 1 three receive ones; within two, the two lightest
    (channels 0 and 1) merge onto channel 0:

    >>> fitted_channels(np.array([0, 1, 2, 2]), [0] * 4, [1] * 4, [()] * 4, 2).tolist()
    [0, 0, 2, 2]
    """
    chan = np.array(chan, dtype=np.int64)
    sends: dict[tuple, Counter] = defaultdict(Counter)  # (src, dst, route) -> channel -> sends
    for i, c in enumerate(chan.tolist()):
        sends[(int(src_r[i]), int(dst_r[i]), path[i])][c] += 1
    count = Counter()
    for (u, v, _), chans in sends.items():
        count[u] += len(chans)
        count[v] += len(chans)
    for g, k in (held or {}).items():
        count[g] += k
    merged: dict[tuple, dict[int, int]] = defaultdict(dict)  # pair -> channel -> channel it joined
    while count and max(count.values()) > most:
        worst = max(count, key=lambda g: (count[g], -g))
        options = [(sum(n for _, n in light), key, light) for key, chans in sorted(sends.items())
                   if worst in key[:2] and len(chans) > 1
                   for light in [sorted(chans.items(), key=lambda cn: (cn[1], cn[0]))[:2]]]
        if not options:
            raise InputError("schedule", f"GPU {worst} needs {count[worst]} thread blocks with every tree's sends "
                             f"to a peer on one channel; it has {most} SMs")
        _, key, ((a, na), (b, nb)) = min(options, key=lambda o: o[:2])
        keep, gone = min(a, b), max(a, b)
        sends[key][keep] = na + nb
        del sends[key][gone]
        merged[key][gone] = keep
        count[key[0]] -= 1
        count[key[1]] -= 1
    for i, c in enumerate(chan.tolist()):
        joined = merged.get((int(src_r[i]), int(dst_r[i]), path[i]), {})
        while c in joined:
            c = joined[c]
        chan[i] = c
    return chan
