"""Hypothesis strategies for small topologies with kept switch nodes, shared by the switch
tests of the TEN models and of the greedy."""

from __future__ import annotations

from hypothesis import strategies as st

from collsynth.instances.topology import from_edges

FAST = {"alpha": 0.0, "bandwidth": 1.0}  # one timestep for a 1-byte chunk
SLOW = {"alpha": 1.0, "bandwidth": 1.0}  # two


@st.composite
def switch_topologies(draw, slow_between_switches: bool = False, timing: bool = False):
    """2-4 NPUs, one or two switches (ids after the NPUs), every NPU on some switch, optional
    direct NPU links and links between the two switches (fast both ways, or either class one
    way with ``slow_between_switches``); link classes of 1 or 2 timesteps for 1-byte chunks.
    With ``timing`` the switch hop (timestep or instant) and the latency model (serial or
    pipelined) are drawn too."""
    n = draw(st.integers(2, 4))
    k = draw(st.integers(1, 2))
    classes = st.sampled_from([FAST, SLOW])
    edges = []
    for v in range(n):
        s = n + draw(st.integers(0, k - 1))
        edges += [(v, s, draw(classes)), (s, v, draw(classes))]
    if k == 2 and draw(st.booleans()):
        edges += [(n, n + 1, draw(classes) if slow_between_switches else FAST), (n + 1, n, FAST)]
    for u in range(n):
        for v in range(n):
            if u != v and draw(st.integers(0, 4)) == 0:
                edges.append((u, v, SLOW))
    meta = {}
    if timing:
        meta["switch_hop"] = draw(st.sampled_from(["timestep", "instant"]))
        if draw(st.booleans()):
            meta["latency"] = "pipelined"
    return from_edges(n + k, edges, switches=range(n, n + k), meta=meta or None)


@st.composite
def switched(draw):
    """2-4 GPUs and 1-2 switches (joined both ways when two); each GPU linked both ways to
    some switches, maybe to another GPU, random bandwidths and latencies (1e9, 5e8 or 2.5e8 B/s;
    alpha 0 or 10 us), for the allreduce bound and the combining TEN ILP's checks."""
    n, s = draw(st.integers(2, 4)), draw(st.integers(1, 2))
    bw = st.sampled_from([1e9, 5e8, 2.5e8])
    edges = []

    def both(u, v):
        data = {"bandwidth": draw(bw), "alpha": draw(st.sampled_from([0.0, 1e-5]))}
        edges.extend([(u, v, dict(data)), (v, u, dict(data))])

    for g in range(n):
        for w in draw(st.lists(st.sampled_from(range(n, n + s)), min_size=1, max_size=s, unique=True)):
            both(g, w)
    if s == 2:
        both(n, n + 1)
    if n > 2 and draw(st.booleans()):
        both(0, 1)
    return from_edges(n + s, edges, switches=range(n, n + s))
