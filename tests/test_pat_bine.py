"""PAT (Jeaugey, arXiv 2506.20252) and Bine (De Sensi et al., SC'25) closed forms: step counts,
peers and bytes per step derived by hand on 8 ranks; verified and priced on several topologies;
the closed form met exactly where every peer is one link away."""

from __future__ import annotations

import math
from collections import defaultdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collsynth.instances import make_instance
from collsynth.instances.generators import build
from collsynth.solvers import pipeline
from collsynth.solvers.closed_form.bine import bine_schedule
from collsynth.solvers.closed_form.pat import pat_schedule
from collsynth.solvers.producers import Options, Unsupported
from collsynth.tens.cost_models import price
from collsynth.tens.verify import verify

from cli_errors import assert_one_error_line, run_cli

KINDS = ("allgather", "reduce_scatter", "allreduce")
ALPHA, BW = 1e-6, 1e9


def _inst(topo, kind, m=8e6):
    return make_instance(topo, kind, message_bytes=m, root=0 if kind in ("broadcast", "reduce") else None)


def _by_step(sched, src):
    """``{step: (destinations, sorted chunks)}`` of the sends out of ``src``."""
    out = defaultdict(lambda: (set(), []))
    for x in sched.sends():
        if x.src == src:
            out[x.step][0].add(x.dst)
            out[x.step][1].append(x.chunk)
    return {t: (d, sorted(c)) for t, (d, c) in sorted(out.items())}


def test_pat_on_8_ranks_by_hand():
    """p = 8, D = 3, dimensions 2, 1, 0: rank 0 sends its own block to 0 - 4 = 4; then blocks 0
    and 4 to 0 - 2 = 6; then blocks 0, 2, 4, 6 to 0 - 1 = 7: 1, 2, 4 blocks of M/8 per step."""
    inst = _inst(build("complete", {"nodes": 8}, alpha=ALPHA, bandwidth=BW), "allgather")
    s = pat_schedule(inst)
    assert s.num_steps == 3
    assert _by_step(s, 0) == {1: ({4}, [0]), 2: ({6}, [0, 4]), 3: ({7}, [0, 2, 4, 6])}
    # every link one hop: sync = 3 alpha + (1 + 2 + 4) M/8 / B
    assert math.isclose(price(s, inst, "sync").total_s, 3 * ALPHA + 7 * 1e6 / BW, rel_tol=1e-12)


def test_pat_on_6_ranks_and_with_aggregation_by_hand():
    """p = 6: dimension 2 carries offsets {0} (4 < 6), dimension 1 {0} (2 + 4 >= 6), dimension 0
    {0, 2, 4}: 1, 1, 3 blocks. With one block per transfer on 8 ranks: 1 + 2 + 4 = 7 steps (linear)."""
    s = pat_schedule(_inst(build("complete", {"nodes": 6}, alpha=ALPHA, bandwidth=BW), "allgather"))
    assert [len(c) for _, c in _by_step(s, 0).values()] == [1, 1, 3]
    inst8 = _inst(build("complete", {"nodes": 8}, alpha=ALPHA, bandwidth=BW), "allgather")
    one = pat_schedule(inst8, aggregation=1)
    assert one.num_steps == 7 and verify(one, inst8) is None


def test_bine_on_8_ranks_by_hand():
    """Distances halve: step 1 uses rho(2) = 3 (rank 0 -> 3, odd rank 1 -> 1 - 3 = 6), step 2
    rho(1) = -1 (0 -> 7, 1 -> 2), step 3 rho(0) = 1 (0 -> 1, 1 -> 0); rank 0 sends 1, 2, 4 blocks."""
    inst = _inst(build("complete", {"nodes": 8}, alpha=ALPHA, bandwidth=BW), "allgather")
    s = bine_schedule(inst)
    steps = _by_step(s, 0)
    assert [d for d, _ in steps.values()] == [{3}, {7}, {1}]
    assert [len(c) for _, c in steps.values()] == [1, 2, 4]
    assert [d for d, _ in _by_step(s, 1).values()] == [{6}, {2}, {0}]
    assert steps[2][1] == [0, 3] and steps[3][1] == [0, 3, 4, 7]  # 0's, then with 3's, then with 7's pair {7, 4}
    assert math.isclose(price(s, inst, "sync").total_s, 3 * ALPHA + 7 * 1e6 / BW, rel_tol=1e-12)


def test_bine_broadcast_on_8_ranks_by_hand():
    """From root 0: 0 -> 3; 0 -> 7, 3 -> 4; 0 -> 1, 3 -> 2, 7 -> 6, 4 -> 5: 3 steps of the whole buffer."""
    inst = _inst(build("complete", {"nodes": 8}, alpha=ALPHA, bandwidth=BW), "broadcast")
    s = bine_schedule(inst)
    pairs = defaultdict(set)
    for x in s.sends():
        pairs[x.step].add((x.src, x.dst))
    assert pairs == {1: {(0, 3)}, 2: {(0, 7), (3, 4)}, 3: {(0, 1), (3, 2), (7, 6), (4, 5)}}
    assert math.isclose(price(s, inst, "sync").total_s, 3 * (ALPHA + 8e6 / BW), rel_tol=1e-12)


def test_bine_allgather_moves_what_swing_moves_on_a_ring():
    """Bine's butterfly has Swing's peers (an independent implementation: swing.py's plan), so on a
    ring the two single-port allgathers send the same blocks between the same ranks in the same steps."""
    inst = _inst(build("ring", {"nodes": 16}, alpha=ALPHA, bandwidth=BW), "allgather")
    ours = {(x.chunk, x.src, x.dst, x.step) for x in bine_schedule(inst).sends()}
    row, theirs = pipeline.run(inst, "swing-bw", Options(params={"multiport": False}))
    assert row["verified"]
    assert ours == {(x.chunk, x.src, x.dst, x.step) for x in theirs.sends()}


@settings(max_examples=8, deadline=None)
@given(topo=st.sampled_from(["switch", "torus", "complete"]), log_p=st.integers(1, 5), kind=st.sampled_from(KINDS))
def test_pat_and_bine_verify_and_price(topo, log_p, kind):
    p = 1 << log_p
    params = {"switch": {"nodes": p, "unwind": 0}, "torus": {"dims": [2, p // 2] if p >= 4 else [p]},
              "complete": {"nodes": p}}[topo]
    inst = _inst(build(topo, params, alpha=ALPHA, bandwidth=BW), kind)
    for s in (pat_schedule(inst), bine_schedule(inst)):
        assert verify(s, inst) is None
        assert s.num_steps == (2 if kind == "allreduce" else 1) * log_p
        for model in ("sync", "ten", "event"):
            assert price(s, inst, model).total_s > 0


@pytest.mark.parametrize("gen,params", [("dgx_h100", {"nodes": 2}), ("forestcoll_mi250", {"nodes": 2})])
def test_pat_and_bine_on_systems(gen, params):
    for kind in KINDS:
        inst = _inst(build(gen, params), kind, m=16e6)
        for s in (pat_schedule(inst), bine_schedule(inst)):
            assert verify(s, inst) is None


def test_bine_refuses_a_non_power_of_two_in_one_line(tmp_path, capsys):
    with pytest.raises(Unsupported):
        bine_schedule(_inst(build("complete", {"nodes": 6}, alpha=ALPHA, bandwidth=BW), "allgather"))
    f = tmp_path / "s6.toml"
    f.write_text('name = "s6"\n[topology]\ngenerator = "switch"\nnodes = 6\nunwind = 0\nbandwidth = 1e9\nalpha = 1e-6\n'
                 '[collective]\nkind = "allgather"\nmessage_bytes = 6000\n')
    code, out, err = run_cli(["solve", f, "--producer", "bine", "--json"], capsys)
    assert code == 2 and out == ""
    assert_one_error_line(err, ["power-of-two", "not 6"])
    code, out, err = run_cli(["solve", f, "--producer", "pat", "--param", "aggregation=0", "--json"], capsys)
    assert code == 2 and out == ""
    assert_one_error_line(err, ["--param aggregation", "at least 1"])
