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
from collsynth.solvers.packing.emission import pipelined, price_pieces
from collsynth.solvers.packing.staggered import tree_depths
from collsynth.solvers.packing.tree_hops import depth_of
from collsynth.tens.bounds import instance_bounds


def tacos_4x2x2():
    topo = build("hierarchical", {"levels": ["ring", "complete", "switch"], "dims": [4, 2, 2]},
                 bandwidth=100e9, alpha=0.5e-6)
    return make_instance(topo, "reduce", message_bytes=1e9, root=0)


def test_tacos_4x2x2_trees_seven_hops_deep_within_capacity():
    """GPU (r, c, s) is ``4 r + 2 c + s``. The root has 4 links in (two ring, one complete, one
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


def test_tacos_4x2x2_trees_each_as_shallow_as_its_in_link_allows():
    """The tree entering the root over its complete link (from (0, 1, 0), GPU 2) reaches (2, 0, 1)
    in no fewer than 2 ring, 1 complete and 2 switch hops without the root, and those entering
    over a ring link (from (1, 0, 0) or (3, 0, 0), GPUs 4 and 12) reach (3, 1, 1) or (1, 1, 1)
    in as many: each is at least 6 deep, the one through the switch at least 7 (above). The
    forest gets exactly those depths and is emitted staggered."""
    inst = tacos_4x2x2()
    g = forests.shallow_rooted(inst, forests.forest(inst, "broadcast", True))
    pt = pipelined(inst, g, 1)
    entry = {t.routes[0][-1]: d for t, d in zip(g.trees, tree_depths(pt.before, pt.ptr))}
    assert g.staggered and entry == {1: 7, 2: 6, 4: 6, 12: 6}


def test_tacos_4x2x2_reduce_within_one_percent_under_event():
    """Pipelined down trees ``D`` hops deep in ``P`` equal pieces, each link carrying one tree,
    the root's last piece arrives ``(P + D - 1)`` piece times and ``D`` alphas after the start
    (``T* = 2.5`` ms a quarter per link, 0.5 us a hop): at 1,000 pieces the greedy packing's
    (D = 9) take ``2.5 x 1008 / 1000 + 0.0045`` = 2.5245 ms. The shallow trees (one 7 deep, three
    6) are staggered: 1,000 pieces for the deep one, 1,001 for the others, each piece 1 / 4,003
    of the buffer, all done in 1,006 piece times: ``10 x 1006 / 4003 + 0.0035`` ms = 2.5166 ms,
    within 1 % of the ``event`` bound (2.5005 ms); both verify."""
    inst = tacos_4x2x2()
    f = forests.forest(inst, "broadcast", True)
    g = forests.shallow_rooted(inst, f)
    bound = instance_bounds(inst).event.value
    shallow = price_pieces(inst, g, 1000, ("event",))
    greedy = price_pieces(inst, f, 1000, ("event",))
    assert shallow is not None and greedy is not None
    assert shallow["event"] == pytest.approx(10e-3 * 1006 / 4003 + 7 * 0.5e-6, rel=1e-9)
    assert greedy["event"] == pytest.approx(2.5e-3 * 1008 / 1000 + 9 * 0.5e-6, rel=1e-9)
    assert bound == pytest.approx(2.5005e-3) and shallow["event"] <= 1.01 * bound
