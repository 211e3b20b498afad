"""Swing and recursive doubling (De Sensi et al., NSDI 2024): schedules verify, prices equal the closed forms where
the algorithm is congestion-free, peers follow pi(r, s), Xi approaches Table 2, Swing beats
recursive doubling on tori (Figure 6)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from collsynth.instances.generators import build
from collsynth.instances.instance import make_instance
from collsynth.solvers import pipeline
from collsynth.solvers.reports import deficiency as dfc
from collsynth.solvers.closed_form import swing as sw
from collsynth.solvers.producers import Options, Unsupported, producers
from collsynth.tens.cost_models import price
from collsynth.tens.verify import verify
from builders import instance_on

NAMES = ["swing-bw", "swing-lat", "recursive-doubling-bw", "recursive-doubling-lat",
         "recursive-doubling-bw-mirrored", "recursive-doubling-lat-mirrored"]
PROD = {p.name: p for p in sw.PRODUCERS}


def _run(name, topo, kind="allreduce", cpn=1, M=1 << 20, **params):
    inst = make_instance(topo, kind, chunks_per_node=cpn, message_bytes=M)
    return inst, PROD[name].run(inst, Options(params=params))


def _supported(name, dims, kind):
    return not ("lat" in name and kind != "allreduce")


# ---- peers ----------------------------------------------------------------------------------

def test_rho_delta_pi_follow_eq2():
    assert [sw.rho(s) for s in range(6)] == [1, -1, 3, -5, 11, -21]
    assert [sw.delta(s) for s in range(6)] == [1, 1, 3, 5, 11, 21]
    # closed form (1 - (-2)^(s+1)) / 3 and the bound delta(s) <= 2^s of section 3.1.1
    for s in range(20):
        assert 3 * sw.rho(s) == 1 - (-2) ** (s + 1)
        assert sw.delta(s) <= 2 ** s and sw.delta(s) % 2 == 1  # Lemma A.1
    # Fig. 1: node 0 of a 16-node ring talks to 1, 15 (= -1), 3, 11 (= -5)
    assert [sw.pi(0, s, 16) for s in range(4)] == [1, 15, 3, 11]


@given(st.integers(1, 40).map(lambda h: 2 * h), st.integers(0, 6), st.integers(0, 79))
def test_pi_is_a_perfect_matching_for_even_p(p, s, r):
    r %= p
    q = sw.pi(r, s, p)
    assert sw.pi(q, s, p) == r  # symmetric (Lemma A.2's even/odd pairing)
    assert (q - r) % 2 == 1 or p == 2 and q != r


def _sends_by_step(sched):
    out = {}
    for s, a, b in zip(sched.step.tolist(), sched.src.tolist(), sched.dst.tolist()):
        out.setdefault(s, set()).add((a, b))
    return out


@pytest.mark.parametrize("p", [16, 32, 12, 10])
def test_single_port_swing_peers_are_pi(p):
    topo = build("ring", {"nodes": p})
    inst, out = _run("swing-bw", topo, "reduce_scatter", multiport=False)
    by_step = _sends_by_step(out.schedule)
    for s in range(out.schedule.num_steps):
        assert by_step[s + 1] == {(r, sw.pi(r, s, p)) for r in range(p)}


def test_multiport_first_step_matches_figure4():
    """4x4 torus, step 0: node 0 talks to 1 and 4 (plain), 3 and 12 (mirrored)."""
    inst, out = _run("swing-bw", build("torus", {"dims": [4, 4]}), "reduce_scatter")
    first = {b for a, b in _sends_by_step(out.schedule)[1] if a == 0}
    assert first == {1, 4, 3, 12}
    assert out.schedule.meta["collectives"] == 4


def test_odd_p_extra_node_groups_match_figure3():
    """p = 7: the last node exchanges with 0-2 in step 0, 3-4 in step 1, 5 in step 2."""
    inst, out = _run("swing-bw", build("ring", {"nodes": 7}), "reduce_scatter", multiport=False)
    by_step = _sends_by_step(out.schedule)
    for step, group in ((1, {0, 1, 2}), (2, {3, 4}), (3, {5})):
        assert {b for a, b in by_step[step] if a == 6} == group
        assert {a for a, b in by_step[step] if b == 6} == group


def test_rectangular_torus_skips_the_exhausted_dimension():
    """2x4 torus (Fig. 5): 3 steps, the last one horizontal for all four collectives."""
    inst, out = _run("swing-bw", build("torus", {"dims": [2, 4]}), "reduce_scatter")
    assert out.schedule.num_steps == 3
    last = _sends_by_step(out.schedule)[3]
    assert all(a // 4 == b // 4 for a, b in last)


# ---- every schedule verifies ---------------------------------------------------------------

CASES = [("ring", {"nodes": p}) for p in (2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 16)] + [
    ("torus", {"dims": d}) for d in ([4, 4], [2, 4], [3, 5], [6, 4], [5, 5], [3, 3, 3], [4, 2, 6], [2, 2, 2])
] + [("complete", {"nodes": p}) for p in (5, 8)] + [("hypercube", {"dim": 3}), ("hyperx", {"dims": [3, 4]})]


@pytest.mark.parametrize("gen,params", CASES, ids=[f"{g}{list(p.values())[0]}" for g, p in CASES])
def test_every_producer_verifies(gen, params):
    topo = build(gen, params)
    dims, _ = sw.rank_space(topo)
    for name in NAMES:
        for kind in ("allreduce", "reduce_scatter", "allgather"):
            inst = make_instance(topo, kind, message_bytes=1 << 20)
            if not _supported(name, dims, kind):
                with pytest.raises(Unsupported):
                    PROD[name].run(inst, Options())
                continue
            out = PROD[name].run(inst, Options())
            assert out.status == "constructed"
            v = verify(out.schedule, inst)
            assert v is None, f"{name} {kind} on {topo.name}: {v}"


@given(
    st.lists(st.integers(1, 7), min_size=1, max_size=3).filter(lambda d: 2 <= math.prod(d) <= 64),
    st.sampled_from(["swing", "recursive_doubling"]),
    st.sampled_from(["bw", "lat"]),
    st.booleans(),
    st.integers(1, 2),
)
def test_any_torus_shape_verifies(dims, algorithm, variant, multiport, cpn):
    topo = build("torus", {"dims": dims})
    inst = make_instance(topo, "allreduce", chunks_per_node=cpn)
    for kind in (None, "allreduce"):  # complete reduce-scatter patterns, and the allreduce-only plan
        sched = sw.allreduce(sw.plan(dims, algorithm, variant, multiport, kind=kind), cpn)
        assert verify(sched, inst) is None
    if variant == "bw":
        rs = sw.reduce_scatter(sw.plan(dims, algorithm, variant, multiport), cpn)
        assert verify(rs, make_instance(topo, "reduce_scatter", chunks_per_node=cpn)) is None
        p = math.prod(dims)
        sent = np.bincount(rs.src, weights=(rs.hi - rs.lo) / rs.denom, minlength=p)
        if algorithm == "swing" or all(d & (d - 1) == 0 for d in dims):
            # bandwidth-optimal: every node sends exactly (p-1)/p of the vector
            assert np.allclose(sent, (p - 1) * cpn)
        elif len(dims) == 1:  # an extra rank only folds: every block but its own, once
            m = 1 << (p.bit_length() - 1)
            assert np.allclose(sent[m:], (p - 1) * cpn)


def test_verifier_catches_a_broken_swing_schedule():
    topo = build("torus", {"dims": [3, 4]})
    inst = make_instance(topo, "allreduce")
    s = sw.allreduce(sw.plan([3, 4], "swing", "bw", True))
    assert verify(s, inst) is None
    assert verify(s.select(np.arange(1, len(s))), inst) is not None  # dropped send
    assert verify(s.select(np.r_[np.arange(len(s)), 0]), inst) is not None  # duplicate reduction


def test_pipeline_runs_swing_end_to_end():
    inst = instance_on("torus", {"dims": [2, 4]}, "allreduce", message_bytes=1 << 16)
    row, sched = pipeline.run(inst, "swing-bw")
    assert row["verified"] and row["status"] == "constructed" and row["steps"] == 6
    assert set(NAMES) <= set(producers())


@pytest.mark.parametrize("gen,params,kind,msg", [
    ("mesh", {"dims": [4, 4]}, "allreduce", "tori"),
    ("torus", {"dims": [4, 4]}, "alltoall", "alltoall"),
    ("torus", {"dims": [4, 4]}, "broadcast", "broadcast"),
])
def test_unsupported_instances_are_refused(gen, params, kind, msg):
    topo = build(gen, params)
    inst = make_instance(topo, kind, root=0 if kind == "broadcast" else None)
    with pytest.raises(Unsupported, match=msg):
        PROD["swing-bw"].run(inst, Options())


def test_failed_nodes_are_refused():
    topo = build("torus", {"dims": [4, 4]}).with_failures(nodes=[5])
    inst = make_instance(topo, "allreduce")
    with pytest.raises(Unsupported, match="alive"):
        PROD["swing-lat"].run(inst, Options())


# ---- closed forms --------------------------------------------------------------------------

@pytest.mark.parametrize("p", range(2, 13))
def test_price_equals_closed_form_on_complete_graphs(p):
    """A complete graph is congestion-free: T_L = steps * alpha and T_B is the sum of the
    step's largest message over the bandwidth (Eq. 1 with Xi = 1), exactly."""
    topo = build("complete", {"nodes": p}, bandwidth=3e9, alpha=2e-6)
    for name in NAMES:
        for kind in ("allreduce", "reduce_scatter", "allgather"):
            if not _supported(name, [p], kind):
                continue
            inst, out = _run(name, topo, kind, M=6e6)
            c = price(out.schedule, inst, "sync")
            cf = out.extra["closed_form"]
            assert c.steps == cf["steps"]
            assert c.T_L_s == pytest.approx(cf["T_L_s"], rel=1e-12)
            assert c.T_B_s == pytest.approx(cf["T_B_s"], rel=1e-12)


@pytest.mark.parametrize("p", range(2, 34))
def test_recursive_doubling_any_p_prices_to_the_closed_form(p):
    """Rabenseifner for any p on the congestion-free complete graph: the priced steps, T_L and
    T_B equal recursive_doubling_closed_form (2 extra whole-vector steps for the allreduce plus
    the power-of-two cost) and the plan's own alpha-beta closed form; on a ring of p nodes
    every kind verifies."""
    a, b, n = 2e-6, 3e9, 6e6
    topo = build("complete", {"nodes": p}, bandwidth=b, alpha=a)
    ring = build("ring", {"nodes": p})
    for kind in ("allreduce", "reduce_scatter", "allgather"):
        steps, tb = sw.recursive_doubling_closed_form(p, kind)
        inst, out = _run("recursive-doubling-bw", topo, kind, M=n)
        assert verify(out.schedule, inst) is None
        c = price(out.schedule, inst, "sync")
        assert c.steps == steps == out.extra["closed_form"]["steps"]
        assert c.T_L_s == pytest.approx(steps * a, rel=1e-12)
        assert c.T_B_s == pytest.approx(float(tb) * n / b, rel=1e-12)
        assert out.extra["closed_form"]["T_B_s"] == pytest.approx(float(tb) * n / b, rel=1e-12)
        rinst, rout = _run("recursive-doubling-bw", ring, kind)
        assert verify(rout.schedule, rinst) is None
        if kind == "allreduce":
            m = 1 << (p.bit_length() - 1)
            assert steps == 2 * (m.bit_length() - 1) + (0 if m == p else 2)
            if m != p:  # the two extra steps carry the whole vector: tb - 2 is the p' core
                assert tb - 2 == 2 * (sw.recursive_doubling_closed_form(p, "reduce_scatter")[1] - 1)


def test_recursive_doubling_fold_structure():
    """p = 6: ranks 4, 5 fold into 0, 1 in step 1 and get the result back in the last step."""
    inst, out = _run("recursive-doubling-bw", build("ring", {"nodes": 6}), "allreduce")
    by = _sends_by_step(out.schedule)
    T = out.schedule.num_steps
    assert T == 6 and by[1] == {(4, 0), (5, 1)} and by[T] == {(0, 4), (1, 5)}
    assert all(a < 4 and b < 4 for st in range(2, T) for a, b in by[st])
    plan = sw.plan([6], "recursive_doubling", "bw", False, False, kind="allreduce")
    with pytest.raises(ValueError, match="allreduce"):
        sw.reduce_scatter(plan)
    rs_inst, rs = _run("recursive-doubling-bw", build("ring", {"nodes": 6}), "reduce_scatter")
    by = _sends_by_step(rs.schedule)
    assert by[1] == {(4, 0), (5, 1)} and by[rs.schedule.num_steps] == {(0, 4), (1, 5)}


@pytest.mark.parametrize("dims", [[3, 5], [6, 4], [5, 5], [3, 4, 2], [7, 6]])
def test_recursive_doubling_bw_on_non_power_of_two_tori(dims):
    """Per dimension, as Swing: every producer variant verifies on 2D/3D tori with odd and even
    sides, and on a complete graph (congestion-free) the price equals the closed form."""
    topo = build("torus", {"dims": dims})
    for name in ("recursive-doubling-bw", "recursive-doubling-bw-mirrored"):
        for kind in ("allreduce", "reduce_scatter", "allgather"):
            inst, out = _run(name, topo, kind)
            assert verify(out.schedule, inst) is None, (name, kind)
            assert out.extra["closed_form"]["steps"] == out.schedule.num_steps


@pytest.mark.parametrize("p", [2, 4, 8, 16])
def test_power_of_two_closed_form_is_the_textbook_one(p):
    """Single port on K_p: 2 log2 p alpha + 2 (p-1)/p n beta (bw), log2 p (alpha + n beta) (lat)."""
    a, b, n = 1e-6, 1e9, 1e6
    bw = sw.closed_form([p], n, a, b, multiport=False, network="direct")
    lat = sw.closed_form([p], n, a, b, variant="lat", multiport=False, network="direct")
    L = int(math.log2(p))
    assert bw["T_L_s"] == pytest.approx(2 * L * a) and bw["T_B_s"] == pytest.approx(2 * (p - 1) / p * n / b)
    assert lat["T_L_s"] == pytest.approx(L * a) and lat["T_B_s"] == pytest.approx(L * n / b)


@pytest.mark.parametrize("dims", [[4], [4, 4], [8, 8], [4, 4, 4], [16]])
def test_multiport_swing_price_equals_paper_model_on_power_of_two_tori(dims):
    """Plain + mirrored Swing on a power-of-two torus: the cost model's congestion is exactly
    the paper's delta(sigma(s)) per step (section 4.1) and T_L the per-hop latency."""
    topo = build("torus", {"dims": dims}, bandwidth=2e9, alpha=1e-6)
    for name in ("swing-bw",) + (("swing-lat",) if math.prod(dims) <= 64 else ()):
        inst, out = _run(name, topo, M=8e6)
        c = price(out.schedule, inst, "sync")
        cf = out.extra["closed_form"]
        assert c.T_B_s == pytest.approx(cf["T_B_s"], rel=1e-12)
        assert c.T_L_s == pytest.approx(cf["T_L_hops_s"], rel=1e-12)
        if all(d == 4 for d in dims):  # every peer is a neighbour: no congestion, 1 hop
            assert c.T_L_s == pytest.approx(cf["T_L_s"], rel=1e-12)


def test_multiport_swing_price_equals_paper_model_on_8x8x8():
    """The same at message level (equal to chunk level, tested below) on a 512-node 3D torus."""
    topo = build("torus", {"dims": [8, 8, 8]}, bandwidth=2e9, alpha=1e-6)
    m, T = sw.message_schedule(sw.plan([8, 8, 8], "swing", "bw", True), "allreduce")
    pm = dfc.price_messages(topo, m, 8e6)
    cf = sw.closed_form([8, 8, 8], 8e6, 1e-6, 2e9)
    assert pm.T_B_s == pytest.approx(cf["T_B_s"], rel=1e-12)
    assert pm.T_L_s == pytest.approx(cf["T_L_hops_s"], rel=1e-12)


def test_message_level_price_equals_chunk_level_price():
    for dims, name in (([8, 8], "swing-bw"), ([6, 5], "swing-lat"), ([4, 4, 4], "recursive-doubling-bw"),
                       ([7], "swing-bw"), ([4, 8], "recursive-doubling-lat-mirrored")):
        topo = build("torus", {"dims": dims}, bandwidth=1e9, alpha=1e-6)
        inst, out = _run(name, topo, M=3e6)
        c = price(out.schedule, inst, "sync")
        a, v, mp, mi = dfc.ALGORITHMS[name]
        m, T = sw.message_schedule(sw.plan(dims, a, v, mp, mi), "allreduce")
        for batch in (512, 7):  # through cost.price, and batched through cost.routes
            pm = dfc.price_messages(topo, m, 3e6, source_batch=batch)
            assert pm.T_L_s == pytest.approx(c.T_L_s, rel=1e-12)
            assert pm.T_B_s == pytest.approx(c.T_B_s, rel=1e-12)


# ---- Table 2 deficiencies --------------------------------------------------------------------

def test_xi_limits_of_table2():
    assert [sw.xi_swing_limit(D) for D in (2, 3, 4)] == [Fraction(6, 5), Fraction(28, 27), Fraction(120, 119)]
    # the closed form is the limit of the series
    for D in (2, 3, 4):
        partial = sum(Fraction(sw.delta(s // D), 2 ** (s + 1)) for s in range(40 * D))
        assert abs(float(partial) - float(sw.xi_swing_limit(D))) < 1e-9


def _tail_bound(D, p):
    """|Xi_p - limit| <= (limit - S_L) + S_L 2^-L / (1 - 2^-L) with S_L the partial sum over
    L = log2 p steps: the measured Xi is S_L normalised by (p-1)/p = 1 - 2^-L."""
    L = int(math.log2(p))
    S = sum(Fraction(sw.delta(s // D), 2 ** (s + 1)) for s in range(L))
    lim = sw.xi_swing_limit(D)
    return float((lim - S) + S * Fraction(1, 2 ** L - 1))


@pytest.mark.parametrize("D,sides", [(2, [4, 8, 16]), (3, [4, 8]), (4, [4])])  # 8^4: bench_swing.py
def test_measured_xi_of_bandwidth_optimal_swing_approaches_table2(D, sides):
    """Measured Xi (cost-model T_B over the congestion-free T_B) equals the paper's model at
    each p, grows with p and is within the series' tail bound of 6/5, 28/27, 120/119."""
    lim = float(sw.xi_swing_limit(D))
    prev_gap = math.inf
    for n in sides:
        topo = build("torus", {"dims": [n] * D}, bandwidth=1.0, alpha=0.0)
        r = dfc.measure(topo, "swing-bw")
        p = r["p"]
        assert r["Lambda"] == 2 and r["Psi"] == pytest.approx(1.0, rel=1e-12)
        assert r["Xi"] == pytest.approx(sw.xi_table2("swing", "bw", D, p), rel=1e-12)
        gap = abs(r["Xi"] - lim)
        assert gap <= _tail_bound(D, p) + 1e-12
        assert gap < prev_gap
        prev_gap = gap
    assert prev_gap < {2: 0.06, 3: 0.01, 4: 0.01}[D]


def test_recursive_doubling_deficiencies_match_table2():
    topo = build("torus", {"dims": [8, 8]}, bandwidth=1.0, alpha=0.0)
    bw = dfc.measure(topo, "recursive-doubling-bw")
    lat = dfc.measure(topo, "recursive-doubling-lat")
    assert bw["Lambda"] == 2 and bw["Psi"] == pytest.approx(2 * 2)  # Psi = 2D (one port)
    assert lat["Lambda"] == 1 and lat["Psi"] == pytest.approx(2 * 6 * 64 / 63)  # D log2 p, (p-1)/p
    # routing distance-d/2 peers on one of their two shortest paths can only add congestion
    assert bw["Xi"] >= sw.xi_table2("recursive_doubling", "bw", 2, 64) - 1e-12


# ---- Figure 6: Swing beats recursive doubling -----------------------------------------------

@pytest.mark.parametrize("dims", [[16], [8, 8], [16, 16], [16, 4], [32, 8], [8, 8, 8], [4, 4, 4, 4], [6, 6]])
def test_swing_beats_recursive_doubling_at_medium_sizes(dims):
    """Best Swing (lat or bw) against the best recursive doubling (lat, bw, mirrored) at 2 MiB
    with the paper's parameters (400 Gb/s, 400 ns per hop), priced by the sync model."""
    topo = dfc.paper_topology("torus", {"dims": dims})
    n = 2 << 20
    names = [k for k in dfc.ALGORITHMS if _supported(k, dims, "allreduce")]
    t = {k: (lambda r: r["T_L_s"] + n * r["T_B_s_per_byte"])(dfc.measure(topo, k)) for k in names}
    swing = min(t["swing-bw"], t["swing-lat"])
    rd = min(v for k, v in t.items() if k.startswith("recursive"))
    assert swing < rd, t


def test_report_writes_tables_and_plots(tmp_path):
    from collsynth.results import swing_report

    df = dfc.deficiency_table(tori={1: [8], 2: [4, 4]})
    assert set(df.algorithm) >= set(NAMES) | {"ring", "bucket"}
    conv = dfc.xi_convergence(2, [4, 8])
    paths = swing_report.write_deficiency(df, conv, tmp_path / "tables")
    curves = dfc.goodput_curves("fig11a_torus8x8", sizes=[32, 1 << 20, 1 << 28])
    assert (curves["goodput_Gbps"] > 0).all()
    peak = curves["peak_Gbps"].iloc[0]
    assert (curves[curves.source.str.startswith("measured")]["goodput_Gbps"] < peak).all()
    paths += swing_report.write_goodput(curves, tmp_path / "tables", tmp_path / "plots")
    assert all(p.exists() and p.stat().st_size > 0 for p in paths)
    assert (tmp_path / "plots" / "swing_goodput_fig11a_torus8x8.png").exists()


def test_swing_has_no_congestion_on_hyperx():
    """Section 5.4.2: every Swing peer shares a row or column, a direct HyperX link, so Xi = 1
    and the price equals the congestion-free closed form; recursive doubling neither."""
    topo = build("hyperx", {"dims": [8, 8]}, bandwidth=1e9, alpha=1e-6)
    rows = {r["algorithm"]: r for r in dfc.measure_many(topo, ["swing-bw", "recursive-doubling-bw"])}
    assert rows["swing-bw"]["Xi"] == pytest.approx(1.0, rel=1e-12)
    assert rows["swing-bw"]["T_B_s_per_byte"] == pytest.approx(rows["swing-bw"]["closed_form_T_B_s_per_byte"], rel=1e-12)
    assert rows["recursive-doubling-bw"]["Xi"] == pytest.approx(1.0, rel=1e-12)
