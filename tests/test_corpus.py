"""The instance corpus: every file loads, names are unique, coverage of kinds and families, and every
``[expect]`` step count is consistent with lower bounds computed here from the topology."""

import functools
import math
import tomllib

import numpy as np
import pytest

from collsynth.instances import CORPUS, KINDS, load_instance

FILES = sorted(p for p in CORPUS.glob("*.toml") if p.name != "suites.toml")


@functools.lru_cache(maxsize=None)
def load(path):
    """Each corpus file is loaded once per session (the scale instances take seconds)."""
    return load_instance(path)


TEN_UNITS = "steps: TEN timesteps"  # an [expect] note starting so counts one chunk per link per step


def hop_bound(inst) -> int:
    """Comm steps needed by distance alone (valid in every step model).

    A needed (chunk, node) is at least as far as its nearest holder (non-combining) or its
    farthest contributor (combining). Chunks with equal (pre, post) columns are grouped, so
    this stays cheap on the 4096-node scale instances.
    """
    dist = inst.topology.distances
    best = 0
    for coll in inst.collectives:
        used = coll.used_chunks
        pre, post = coll.precondition[used], coll.postcondition[used]
        patterns = np.unique(np.concatenate([pre, post], axis=1), axis=0)
        n = pre.shape[1]
        for row in patterns:
            holders, needers = np.flatnonzero(row[:n]), np.flatnonzero(row[n:])
            if len(needers) == 0 or len(holders) == 0:
                continue
            if coll.combining:
                d = dist[np.ix_(holders, needers)]
                assert (d >= 0).all()
                best = max(best, int(d.max()))
            else:
                d = np.where(dist[np.ix_(holders, needers)] < 0, np.iinfo(np.int32).max, dist[np.ix_(holders, needers)])
                best = max(best, int(d.min(axis=0).max()))
    return best


def count_bound(inst) -> int:
    """TEN timesteps needed by link counts (one chunk per link per step).

    A node receiving k chunks it lacks over d in-links needs ceil(k/d) steps; a node whose
    contribution to k chunks must leave it (reduce, reduce_scatter) needs ceil(k/d_out); an
    allreduce node receives a piece of each of its k chunks: ceil(k/d).
    """
    topo = inst.topology
    best = 0
    for coll in inst.collectives:
        pre, post = coll.precondition, coll.postcondition
        if not coll.combining:
            k, deg = (post & ~pre).sum(axis=0), topo.in_degrees
        elif coll.kind != "allreduce":
            k, deg = (pre & ~post).sum(axis=0), topo.out_degrees
        else:  # every chunk's result at v needs at least one piece from another node
            k, deg = post.sum(axis=0), topo.in_degrees
            best = max(best, gossip_volume(inst, coll))
        best = max([best] + [math.ceil(k[v] / deg[v]) for v in coll.nodes if k[v]])
    return best


def gossip_volume(inst, coll) -> int:
    """TEN timesteps an allreduce needs by link volume: one-way gossip among ``P`` ranks takes
    ``2P - 2`` calls (Harary and Schwenk, "The communication problem on graphs and digraphs",
    J. Franklin Institute, 1974): every rank but the first to hold the full sum sends before
    it, every rank but it receives after it, so each chunk crosses ``2P - 2`` links, and all
    links together carry their total capacity per step."""
    P = len(coll.nodes)
    links = int(inst.topology.link_arrays.count.sum())
    return math.ceil(len(coll.used_chunks) * (2 * P - 2) / links) if P > 1 else 0


def test_corpus_size_and_coverage():
    assert len(FILES) >= 25
    kinds, generators, concurrent, files, quick = set(), set(), False, False, 0
    for path in FILES:
        inst = load(path)
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
    inst = load(path)
    raw = tomllib.loads(path.read_text())
    assert set(raw.get("expect", {})) == set(inst.expect)
    if not inst.expect:
        return
    bound = hop_bound(inst)
    if str(inst.expect.get("note", "")).startswith(TEN_UNITS):
        bound = max(bound, count_bound(inst))
    if "upper_bound_steps" in inst.expect:
        assert inst.expect["upper_bound_steps"] >= max(bound, inst.expect.get("lower_bound_steps", 0))
    if "optimal_steps" in inst.expect:
        assert inst.expect["optimal_steps"] >= bound
        assert inst.expect["optimal_steps"] >= inst.expect.get("lower_bound_steps", 0)
    if "lower_bound_steps" in inst.expect:
        # a claimed lower bound must be implied by (at most) the computed one
        assert 1 <= inst.expect["lower_bound_steps"] <= bound
    if inst.expect.get("moore_optimal"):
        assert inst.expect["optimal_steps"] == inst.topology.moore_bound == inst.topology.diameter


def test_instance_names_are_unique():
    names = [tomllib.loads(p.read_text()).get("name") for p in FILES]
    assert len(names) == len(set(names))


def test_mutated_expectations_are_caught():
    """The consistency check can fail: an optimum below the bound, a lower bound above it."""
    ring = load_instance(CORPUS / "ring8-allgather.toml")
    assert max(hop_bound(ring), count_bound(ring)) == 4  # diameter 4; 7 chunks over 2 in-links
    uni = load_instance(CORPUS / "ring8-uni-allgather.toml")
    assert count_bound(uni) == 7 and hop_bound(uni) == 7
    failed = load_instance(CORPUS / "mesh4x4-failed-allreduce.toml")
    assert count_bound(failed) == 14 and hop_bound(failed) == 6
    rs = load_instance(CORPUS / "petersen-line-reduce-scatter.toml")
    assert count_bound(rs) == 4 and hop_bound(rs) == 3


def test_tacos_failed_mesh_is_as_in_the_paper():
    inst = load_instance(CORPUS / "mesh4x4-failed-allreduce.toml")
    assert inst.topology.failed_nodes == {7, 9} and len(inst.topology.npus) == 14
    assert inst.collective.kind == "allreduce" and inst.collective.nodes == tuple(sorted(set(range(16)) - {7, 9}))
