"""The instance corpus: every file loads, names match, coverage of kinds and families, and every
``[expect]`` step count is consistent with lower bounds computed here from the topology."""

import math
import tomllib

import numpy as np
import pytest

from collsynth.instances import CORPUS, KINDS, load_instance

FILES = sorted(p for p in CORPUS.glob("*.toml") if p.name != "suites.toml")


def hop_and_count_bound(inst) -> int:
    """max over collectives of (hop bound, link-count bound) in comm steps (one chunk per link per step).

    Hop bound: a needed (chunk, node) is at least as far as its nearest holder (non-combining) or
    its farthest contributor (combining). Count bound: a node receiving k chunks it lacks over
    d in-links needs ceil(k/d) steps; a node whose contribution to k chunks must leave it
    (combining, except allreduce) needs ceil(k/d_out) steps.
    """
    topo = inst.topology
    dist = topo.distances
    best = 0
    for coll in inst.collectives:
        pre, post = coll.precondition, coll.postcondition
        for c in coll.used_chunks:
            holders = np.flatnonzero(pre[c])
            needers = np.flatnonzero(post[c])
            if len(needers) == 0:
                continue
            d = dist[np.ix_(holders, needers)]
            assert (d >= 0).all()
            best = max(best, int(d.max() if coll.combining else d.min(axis=0).max()))
        if not coll.combining:
            lacking = (post & ~pre).sum(axis=0)
            for v in coll.nodes:
                if lacking[v]:
                    best = max(best, math.ceil(lacking[v] / topo.in_degrees[v]))
        elif coll.kind != "allreduce":
            leaving = (pre & ~post).sum(axis=0)
            for v in coll.nodes:
                if leaving[v]:
                    best = max(best, math.ceil(leaving[v] / topo.out_degrees[v]))
    return best


def test_corpus_size_and_coverage():
    assert len(FILES) >= 25
    kinds, generators, concurrent, files, quick = set(), set(), False, False, 0
    for path in FILES:
        inst = load_instance(path)
        kinds |= {c.kind for c in inst.collectives}
        generators.add(inst.topology.meta.get("generator", "file"))
        concurrent |= inst.concurrent
        files |= "file" in inst.topology.meta
        quick += "quick" in inst.suites
    assert kinds == set(KINDS)
    assert concurrent and files and quick >= 15
    assert {"ring", "mesh", "torus", "hypercube", "dgx1", "complete_bipartite", "switch", "hierarchical",
            "distance_regular", "kautz", "generalized_kautz", "circulant"} <= generators


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_corpus_file_loads_and_expectations_are_consistent(path):
    inst = load_instance(path)
    assert inst.name == path.stem
    raw = tomllib.loads(path.read_text())
    assert set(raw.get("expect", {})) == set(inst.expect)
    bound = hop_and_count_bound(inst)
    if "optimal_steps" in inst.expect:
        assert inst.expect["optimal_steps"] >= bound
        assert inst.expect["optimal_steps"] >= inst.expect.get("lower_bound_steps", 0)
    if "lower_bound_steps" in inst.expect:
        # a claimed lower bound must be implied by (at most) the computed one
        assert 1 <= inst.expect["lower_bound_steps"] <= bound
    if inst.expect.get("moore_optimal"):
        assert inst.expect["optimal_steps"] == inst.topology.moore_bound == inst.topology.diameter


def test_tacos_failed_mesh_is_as_in_the_paper():
    inst = load_instance(CORPUS / "mesh4x4-failed-allreduce.toml")
    assert inst.topology.failed_nodes == {7, 9} and len(inst.topology.npus) == 14
    assert inst.collective.kind == "allreduce" and inst.collective.nodes == tuple(sorted(set(range(16)) - {7, 9}))
