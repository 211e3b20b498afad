"""Shallow trees for a rooted reduce (``collsynth.solvers.packing.shallow_rooted``, used by
``forests.shallow_rooted`` and the latency choice).

- TACOS's ring x complete x switch 4x2x2 (4 links into each GPU, 4 trees of a quarter each):
  the trees are 7 hops deep, the least any such forest has (by hand below), where the greedy
  packing's are 9; every link carries at most one tree; the reduce pipelined down them verifies
  and is within 1 % of the bound under ``event`` at 1,000 pieces.
"""

import pytest

from collsynth.instances import make_instance
from collsynth.instances.generators import build
from collsynth.solvers.packing import forests
from collsynth.solvers.packing.emission import price_pieces
from collsynth.solvers.packing.tree_hops import depth_of
from collsynth.tens.bounds import instance_bounds


def tacos_4x2x2():
    topo = build("hierarchical", {"levels": ["ring", "complete", "switch"], "dims": [4, 2, 2]},
                 bandwidth=100e9, alpha=0.5e-6)
    return make_instance(topo, "reduce", message_bytes=1e9, root=0)


def test_tacos_4x2x2_trees_seven_hops_deep_within_capacity():
    """GPU (r, c, s) is ``8 r + 2 c + s``. The root has 4 links in (two ring, one complete, one
    from its pair's switch) and a quarter of the buffer crosses each, so each tree enters the
    root by its own link; the one through the switch comes from GPU (0, 0, 1), 5 hops from
    (2, 1, 0) (2 ring, 1 complete, 2 through a switch), so that tree is at least 7 deep: no
    forest is shallower. The greedy packing's is 9; these are 7, and no link carries two."""
    inst = tacos_4x2x2()
    f = forests.forest(inst, "broadcast", True)
    assert depth_of(f.trees) == 9
    g = forests.shallow_rooted(inst, f)
    assert g is not None and (g.k, g.tau) == (f.k, f.tau) and len(g.trees) == 4
    assert depth_of(g.trees) == 7
    for t in g.trees:
        assert sorted(r[-1] for r in t.routes) == list(range(1, 16))  # spanning, each GPU once
    links = [(a, b) for t in g.trees for r in t.routes for a, b in zip(r[:-1], r[1:])]
    assert len(links) == len(set(links))


def test_tacos_4x2x2_reduce_within_one_percent_under_event():
    """Pipelined down trees ``D`` hops deep in ``P`` equal pieces, each link carrying one tree,
    the root's last piece arrives ``(P + D - 1)`` piece times and ``D`` alphas after the start
    (``T* = 2.5`` ms a quarter per link, 0.5 us a hop): at 1,000 pieces the shallow trees (D = 7)
    take ``2.5 x 1006 / 1000 + 0.0035`` ms = 2.5185 ms, within 1 % of the ``event`` bound (2.5005
    ms), the greedy packing's (D = 9) ``2.5 x 1008 / 1000 + 0.0045`` = 2.5245 ms; both verify."""
    inst = tacos_4x2x2()
    f = forests.forest(inst, "broadcast", True)
    g = forests.shallow_rooted(inst, f)
    bound = instance_bounds(inst).event.value
    shallow = price_pieces(inst, g, 1000, ("event",))
    greedy = price_pieces(inst, f, 1000, ("event",))
    assert shallow is not None and greedy is not None
    assert shallow["event"] == pytest.approx(2.5e-3 * 1006 / 1000 + 7 * 0.5e-6, rel=1e-9)
    assert greedy["event"] == pytest.approx(2.5e-3 * 1008 / 1000 + 9 * 0.5e-6, rel=1e-9)
    assert bound == pytest.approx(2.5005e-3) and shallow["event"] <= 1.01 * bound
