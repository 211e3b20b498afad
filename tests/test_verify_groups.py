"""The verifier simulates a collective's chunks a group at a time, and follows a relayed
reduction's routes through switches a group of chunks at a time (tens/verify.py, GROUP_SENDS):
whatever the group size, tree packing's explicit sends on small Clos fabrics, whole or with a
send dropped, moved, doubled or its op flipped, get the same verdict as in one group (the
single pass over every chunk), violation for violation (index, step and message)."""

from dataclasses import replace
from unittest.mock import patch

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from compact_checks import SMALL_CLOS
from collsynth.instances.generators import build
from collsynth.instances.instance import make_instance
from collsynth.solvers.packing.compact import at_pieces
from collsynth.solvers.packing.producer import _with_header, run_compact
from collsynth.solvers.producers import Options
from collsynth.tens import verify
from collsynth.tens.pipelined_trees import expand

_TREES: dict = {}


def _explicit(fabric, kind, pieces):
    """Tree packing's explicit sends (``pieces`` pieces at most) and the instance."""
    key = (repr(fabric), kind)
    if key not in _TREES:
        inst = make_instance(build(*fabric), kind)
        _TREES[key] = inst, run_compact(inst, Options(time_limit=60, params={"form": "compact"})).schedule
    inst, trees = _TREES[key]
    return _with_header(expand(at_pieces(trees, min(pieces, trees.pieces))), inst), inst


def _broken(s, how: int, seed: int, switches: np.ndarray):
    """``s`` with one send dropped (0), moved a step (1), its op flipped (2) or doubled (3),
    two routes through a switch doubled (4: a switch forwards each copy, the piece reaches its
    GPU twice), or every send of one chunk in the last step dropped (5)."""
    rng = np.random.default_rng(seed)
    i = int(rng.integers(len(s)))
    if how == 4:  # the second route ends in the first's step, in another chunk: two refusals in one step
        i = int(rng.choice(np.flatnonzero(~switches[s.dst])))
        other = np.flatnonzero((s.step == s.step[i]) & (s.chunk != s.chunk[i]) & ~switches[s.dst])
        j = int(rng.choice(other)) if len(other) else i
        return s.select(np.r_[np.arange(len(s)), _route(s, i, switches), _route(s, j, switches)])
    if how == 5:
        return s.select(np.flatnonzero((s.chunk != s.chunk[i]) | (s.step < s.step.max())))
    if how == 0:
        return s.select(np.flatnonzero(np.arange(len(s)) != i))
    if how == 3:
        return s.select(np.r_[np.arange(len(s)), i])
    step, op = s.step.copy(), s.op.copy()
    if how == 1:
        step[i] = max(1, int(step[i]) + int(rng.choice([-1, 1, 2])))
    else:
        op[i] = 3 - op[i] if op[i] in (1, 2) else 1
    return replace(s, step=step, op=op)


def _route(s, x: int, switches: np.ndarray) -> np.ndarray:
    """The hops of the route into a GPU that send ``x`` ends: ``x`` out of a switch and the
    arrival there it forwards (one step before, of the same chunk and covering its piece), or
    ``x`` alone between GPUs."""
    if not switches[s.src[x]]:
        return np.array([x])
    came = np.flatnonzero((s.dst == s.src[x]) & (s.chunk == s.chunk[x]) & (s.step == s.step[x] - 1)
                          & (s.lo <= s.lo[x]) & (s.hi >= s.hi[x]))
    return np.r_[came[:1], x]


@settings(max_examples=60, deadline=None)
@given(SMALL_CLOS, st.sampled_from(["reduce_scatter", "allgather"]), st.integers(1, 2), st.integers(-1, 5),
       st.integers(0, 2**31), st.sampled_from([1, 3, 17, 200]))
def test_groups_of_chunks_verify_as_one_pass(fabric, kind, pieces, how, seed, group):
    s, inst = _explicit(fabric, kind, pieces)
    if how >= 0:
        switches = np.zeros(inst.topology.size, bool)
        switches[list(inst.topology.switches)] = True
        s = _broken(s, how, seed, switches)
    with patch.object(verify, "GROUP_SENDS", 1 << 40):
        want = verify.verify(s, inst)
    with patch.object(verify, "GROUP_SENDS", group):
        got = verify.verify(s, inst)
    assert repr(got) == repr(want)
    if how < 0:
        assert want is None


def test_a_wrong_simulation_in_a_later_group_is_found():
    """A reduce-scatter through switches whose last chunk loses a delivery: refused at that
    chunk whatever the group size, by the simulation of the relayed routes."""
    s, inst = _explicit(("dgx_h100", {"nodes": 2}), "reduce_scatter", 1)
    last = int(s.chunk.max())
    into = np.flatnonzero((s.chunk == last) & np.isin(s.src, list(inst.topology.switches)))
    s = s.select(np.flatnonzero(np.arange(len(s)) != into[-1]))
    for group in (1, 5, 1 << 40):
        with patch.object(verify, "GROUP_SENDS", group):
            v = verify.verify(s, inst)
        assert v is not None and v.index is None and f"chunk {last} " in v.reason


@pytest.mark.parametrize("nodes", [2, 3])
@pytest.mark.parametrize("how", [4, 5])
def test_refused_routes_in_groups_of_one_chunk_are_the_single_pass_refusals(nodes, how):
    """Reduce-scatters on DGX H100 boxes with two routes doubled (a duplicate reduction in
    the simulation of the routes) or a chunk's last step dropped (its postcondition fails,
    after the schedule's last step): the same violation with chunks one or three sends a group
    as in one pass, for eight draws; most draws are refused."""
    s0, inst = _explicit(("dgx_h100", {"nodes": nodes}), "reduce_scatter", 1)
    switches = np.zeros(inst.topology.size, bool)
    switches[list(inst.topology.switches)] = True
    refused = 0
    for seed in range(8):
        s = _broken(s0, how, seed, switches)
        with patch.object(verify, "GROUP_SENDS", 1 << 40):
            want = verify.verify(s, inst)
        refused += want is not None
        for group in (1, 3):
            with patch.object(verify, "GROUP_SENDS", group):
                assert repr(verify.verify(s, inst)) == repr(want)
    assert refused >= 4
