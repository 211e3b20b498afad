"""An instance whose optimum lies above the combinatorial lower bound, for tests that need a
search to prove a horizon impossible."""

from __future__ import annotations

from collsynth.instances.instance import make_instance
from collsynth.instances.topology import from_edges

GAP_LINKS = [(0, 1, 1.0), (0, 3, 0.5), (1, 0, 0.5), (1, 4, 0.5), (2, 0, 1.0), (2, 1, 0.5), (2, 5, 1.0), (3, 1, 1.0),
             (3, 5, 1.0), (4, 1, 1.0), (4, 2, 0.5), (4, 5, 1.0), (5, 0, 1.0), (5, 4, 0.5)]  # (u, v, bandwidth)


def gap_scatter():
    """A scatter of 2 chunks per node from node 0 on a 6-node digraph of 1- and 2-timestep
    links (found by searching random digraphs for an instance whose optimum is above the lower
    bound): the lower bound is 8 (the cut into {2, ..., 5}), the optimum 9."""
    links = from_edges(6, [(u, v, {"alpha": 0.0, "bandwidth": b}) for u, v, b in GAP_LINKS])
    return make_instance(links, "scatter", root=0, chunks_per_node=2, message_bytes=12.0)
