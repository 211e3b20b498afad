"""Tree packing at scale and per message size: the bulk edge splitting keeps the cut condition
(the split network's optimum equals the original's), trees moved box by box fit the capacities,
and the latency choice (trees per shard, pipeline pieces) against the fixed-depth pipelining
ForestColl uses (Zhao et al., "ForestColl", arXiv 2402.06787)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from collsynth.instances.box_shift import box_shift
from collsynth.instances.generators import build
from collsynth.instances.instance import make_instance, topology_from_dict
from collsynth.solvers import pipeline
from collsynth.solvers.packing import latency
from collsynth.solvers.packing.producer import auto_pieces, forest, packed_seconds, pick
from collsynth.solvers.packing.tree_hops import depth_of
from collsynth.solvers.packing.splitting import network, remove_relays, split_all_evenly
from collsynth.solvers.packing.trees import pack_by_translation, translation
from collsynth.solvers.producers import Options
from collsynth.tens.cut_optimum import FlowNet, capacities, flow_net, optimum

from test_packing import switched_graphs


def _split_network(topo):
    """The original flow network, its optimum, and the unsplit tree-capacity network at the
    optimum's own k (capacities ``k tau units``, integers), with the topology's box shift."""
    net0 = flow_net(topo, topo.npus, [1] * len(topo.npus))
    opt = optimum(net0)
    caps = capacities(net0, opt.k, opt.tau)
    roots = {c: opt.k for c in net0.compute}
    shift = box_shift(topo)
    return net0, opt, network(net0.nodes, net0.src, net0.dst, caps, net0.compute, roots, opt.k * net0.total_weight,
                              shift.step if shift is not None else None), caps


def _cap_optimum(net0, arcs: dict) -> Fraction:
    """The cut optimum of a network whose arcs carry integer capacities ``arcs`` (in trees)."""
    keys = sorted(arcs)
    units = np.asarray([arcs[k] for k in keys], dtype=np.int64)
    src = np.asarray([k[0] for k in keys], dtype=np.int64)
    dst = np.asarray([k[1] for k in keys], dtype=np.int64)
    return optimum(FlowNet(net0.nodes, src, dst, units, units.astype(float), 1.0, net0.compute, net0.weight)).tau


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(switched_graphs(symmetric=True))
def test_bulk_splitting_keeps_the_optimum(topo):
    """Whichever way the relays go (the bulk split when its check passes, else pair by pair),
    only compute nodes are left and the split network's optimum equals the original's."""
    net0, opt, net, caps = _split_network(topo)
    before = {}
    for u, v, c in zip(net0.src, net0.dst, caps):
        if c > 0:
            before[(int(u), int(v))] = before.get((int(u), int(v)), 0) + int(c)
    remove_relays(net)
    after = {k: c for k, c in net.cap.items() if k[0] != net.source}
    assert {x for k in after for x in k} <= set(net0.compute)
    assert _cap_optimum(net0, after) == _cap_optimum(net0, before)


@pytest.mark.parametrize("gen, params", [("dgx_h100", {"nodes": 4}), ("forestcoll_a100", {"nodes": 2}),
                                         ("forestcoll_mi250", {"nodes": 2})])
def test_bulk_splitting_takes_uniform_systems_in_one_pass(gen, params):
    """On identical boxes and rails the bulk split passes its check (no pair-by-pair fallback)
    and keeps the optimum."""
    net0, opt, net, caps = _split_network(build(gen, {**params, "nvlink_alpha": 0.0} if gen != "forestcoll_mi250" else params))
    before = {}
    for u, v, c in zip(net0.src, net0.dst, caps):
        if c > 0:
            before[(int(u), int(v))] = before.get((int(u), int(v)), 0) + int(c)
    assert split_all_evenly(net)
    assert _cap_optimum(net0, {k: c for k, c in net.cap.items() if k[0] != net.source}) == _cap_optimum(net0, before)


def test_trees_moved_box_by_box_span_and_fit():
    """DGX-H100 with 8 boxes: the split network is the same from every box, the first box's
    trees moved box by box span every GPU and use no arc beyond its capacity."""
    net0, opt, net, _ = _split_network(build("dgx_h100", {"nodes": 8}))
    assert split_all_evenly(net)
    roots = {c: opt.k for c in net0.compute}
    assert translation(net, roots) == 8
    trees = pack_by_translation(net, roots, 8)
    assert trees is not None and len(trees) == 64 * opt.k
    assert sorted(t.root for t in trees) == sorted(c for c in net0.compute for _ in range(opt.k))
    load: dict = {}
    for t in trees:
        reached = {t.root}
        for a, b in t.arcs:
            assert a in reached and b not in reached  # an out-tree, each tail reached before
            reached.add(b)
            load[(a, b)] = load.get((a, b), 0) + 1
        assert reached == set(net0.compute)
    assert all(used <= net.cap[arc] for arc, used in load.items())


def test_box_by_box_schedule_verifies():
    inst = make_instance(build("dgx_h100", {"nodes": 4, "nvlink_alpha": 0.0, "nic_alpha": 0.0}), "allgather",
                         message_bytes=1e9)
    row, sched = pipeline.run(inst, "tree-packing", Options(params={"pieces": 8}, time_limit=300))
    assert row["verified"] and sched is not None, row["message"]
    assert row["time_sync_s"] >= row["extra"]["optimum_s"] * (1 - 1e-9)


@pytest.fixture(scope="module")
def switch8():
    """Eight GPUs on one switch, 100 GB/s ports, 2 us per hop."""
    return topology_from_dict({"generator": "switch", "nodes": 8, "unwind": 0, "bandwidth": 100e9, "alpha": 2e-6})


def _choice(topo, size: float):
    inst = make_instance(topo, "allgather", message_bytes=size)
    f = forest(inst, "allgather", False)
    alpha = float(topo.link_arrays.alpha.max())
    g, pieces, choice = pick(inst, f, 1, alpha, Options())
    return inst, f, g, pieces, choice, alpha


def _priced_sum(inst, f, pieces: int) -> float:
    """Sync + event time of ``f`` cut into ``pieces``, verified then priced here by the cost
    models themselves (not through the producer's choice)."""
    from collsynth.solvers.packing.producer import _with_header, emit
    from collsynth.tens.cost import price_event, price_sync
    from collsynth.tens.verify import verify

    sched = _with_header(emit(inst, f, pieces), inst)
    assert verify(sched, inst) is None
    return price_sync(sched, inst).total_s + price_event(sched, inst).total_s


def check_fewer_pieces_for_small_messages(topo, small_log: int, large_log: int) -> dict:
    """A message of ``2**small_log`` bytes is cut into fewer pieces than one of
    ``2**large_log``, and at each size the choice, priced (sync + event) here, is at most the
    fixed-depth pipelining at the optimum's k priced the same way (its depth recomputed from
    the trees, not read from the choice); the choice says it was priced. Returns each size's
    pieces and summed prices (``benchmarks/bench_latency_choice.py`` sweeps every pair)."""
    picked = {}
    for log in (small_log, large_log):
        inst, f, g, pieces, choice, alpha = _choice(topo, 2.0 ** log)
        fixed = auto_pieces(f.trees, 1)
        assert choice.as_dict()["how"] == "priced" and choice.priced["baseline_objective_s"] is not None
        ours, theirs = _priced_sum(inst, g, pieces), _priced_sum(inst, f, fixed)
        assert ours <= theirs * (1 + 1e-12), (log, ours, theirs)
        assert choice.k == g.k and choice.pieces == pieces
        picked[log] = {"pieces": pieces, "fixed_pieces": fixed, "ours_s": ours, "fixed_s": theirs}
    assert picked[small_log]["pieces"] < picked[large_log]["pieces"]
    return picked


def test_latency_choice_fewer_pieces_for_small_messages_never_worse_than_fixed(switch8):
    """256 KB and 256 MB, the closest pair of the sweep's small (64 KB-1 MB) and large
    (256 MB-4 GB) sizes: :func:`check_fewer_pieces_for_small_messages`. Every pair of the
    sweep: ``python benchmarks/bench_latency_choice.py --only fewer-pieces``."""
    check_fewer_pieces_for_small_messages(switch8, 18, 28)


_FIXED_DEPTH_RUNS: dict = {}  # (kind, log, pieces) -> the row of that run (the same run in both checks below)


def _fixed_depth_run(kind: str, log: int, pieces: int) -> dict:
    """The pipeline's row for tree packing at ``pieces`` (set: no latency choice) of a
    ``2**log``-byte ``kind`` on :func:`_two_boxes`, run once a module: the 16 KB allgather's
    fixed-depth run is the baseline of both :func:`check_priced_choice_through_the_pipeline`
    and :func:`check_one_model_objective` (the same deterministic run both made before; about
    a third of the 16 KB ``event`` check's CPU, profiled)."""
    key = (kind, log, pieces)
    if key not in _FIXED_DEPTH_RUNS:
        root = 0 if kind in ("broadcast", "reduce") else None
        inst = make_instance(_two_boxes(), kind, message_bytes=2.0 ** log, root=root)
        _FIXED_DEPTH_RUNS[key], _ = pipeline.run(inst, "tree-packing", Options(params={"pieces": pieces},
                                                                               time_limit=300))
    return _FIXED_DEPTH_RUNS[key]


def check_priced_choice_through_the_pipeline(log: int, kind: str) -> dict:
    """Through the pipeline (verified, priced): the chosen schedule's sync + event time is at
    most that of the same run at the fixed depth (``pieces`` set: the optimum's trees), on two
    boxes of four GPUs behind a switch each, joined by a third switch, for a ``2**log``-byte
    ``kind``; the row's prices are the ones its choice recorded. Returns both runs' pieces and
    summed prices."""
    topo = _two_boxes()
    root = 0 if kind in ("broadcast", "reduce") else None
    inst = make_instance(topo, kind, message_bytes=2.0 ** log, root=root)
    ours, _ = pipeline.run(inst, "tree-packing", Options(time_limit=300))
    choice = ours["extra"]["forests"][0]["latency_choice"]
    fixed = _fixed_depth_run(kind, log, choice["baseline_pieces"])
    assert ours["verified"] and fixed["verified"], (ours["message"], fixed["message"])
    assert choice["how"] == "priced" and choice["priced"]["schedules"] >= 2 and choice["priced"]["unverified"] == 0
    assert choice["priced"]["sync_s"] == pytest.approx(ours["time_sync_s"], rel=1e-9)
    assert choice["priced"]["event_s"] == pytest.approx(ours["time_event_s"], rel=1e-9)
    summed = {name: row["time_sync_s"] + row["time_event_s"] for name, row in (("ours", ours), ("fixed", fixed))}
    assert summed["ours"] <= summed["fixed"] * (1 + 1e-9), summed
    return {"pieces": choice["pieces"], "fixed_pieces": choice["baseline_pieces"], **summed}


@pytest.mark.parametrize("log, kind", [(14, "allgather"), (30, "broadcast"), (17, "reduce_scatter"), (24, "reduce")])
def test_priced_choice_is_never_above_fixed_pipelining_through_the_pipeline(log, kind):
    """:func:`check_priced_choice_through_the_pipeline` once for each single-forest collective:
    at 16 KB and 128 KB, where latency rules, and at 16 MB and 1 GB, where fewer pieces than
    the fixed depth's price above it, so that a choice other than the least priced fails the
    comparison (taking the most priced instead fails both). Every size from 16 KB to 4 GB and
    every such collective: ``python benchmarks/bench_latency_choice.py --only through-pipeline``."""
    check_priced_choice_through_the_pipeline(log, kind)


def check_one_model_objective(log: int, model: str) -> dict:
    """``--param objective=sync|event``: the choice minimises that model's priced time alone, is
    priced under it alone, and the row's time in that model is at most the same run's at the
    fixed depth (``pieces`` set) through the pipeline, on the two boxes behind switches, for a
    ``2**log``-byte allgather. Returns both runs' pieces and times in that model."""
    inst = make_instance(_two_boxes(), "allgather", message_bytes=2.0 ** log)
    ours, _ = pipeline.run(inst, "tree-packing", Options(params={"objective": model}, time_limit=300))
    choice = ours["extra"]["forests"][0]["latency_choice"]
    fixed = _fixed_depth_run("allgather", log, choice["baseline_pieces"])
    assert ours["verified"] and fixed["verified"], (ours["message"], fixed["message"])
    assert choice["how"] == "priced" and choice["priced"]["models"] == [model] and choice["model"] == model
    assert choice["priced"][f"{model}_s"] == pytest.approx(ours[f"time_{model}_s"], rel=1e-9)
    got = {"pieces": choice["pieces"], "fixed_pieces": choice["baseline_pieces"], "ours": ours[f"time_{model}_s"],
           "fixed": fixed[f"time_{model}_s"]}
    assert got["ours"] <= got["fixed"] * (1 + 1e-9), got
    return got


@pytest.mark.parametrize("log, model", [(28, "sync"), (14, "event")])
def test_one_model_objective_is_never_above_fixed_pipelining_in_that_model(log, model):
    """:func:`check_one_model_objective` once for each model: 16 KB under ``event`` (the choice
    takes 400 pieces against the fixed depth's 1,600), 256 MB under ``sync`` (where fewer
    pieces than the fixed depth's price above it). Every size from 16 KB to 1 GB in both:
    ``python benchmarks/bench_latency_choice.py --only one-model``."""
    check_one_model_objective(log, model)


def _two_boxes():
    """Two boxes of four GPUs, each GPU on its box's switch (100 GB/s, 1 us) and the two box
    switches on a third (25 GB/s, 3 us): relays and latency both matter."""
    from collsynth.instances.topology import from_edges

    edges = []
    for box, sw in ((range(0, 4), 8), (range(4, 8), 9)):
        for g in box:
            edges += [(g, sw, {"bandwidth": 100e9, "alpha": 1e-6}), (sw, g, {"bandwidth": 100e9, "alpha": 1e-6})]
        edges += [(sw, 10, {"bandwidth": 25e9, "alpha": 3e-6}), (10, sw, {"bandwidth": 25e9, "alpha": 3e-6})]
    return from_edges(11, edges, switches=(8, 9, 10))


class _Expiring:
    """A deadline that has expired after ``n`` checks of :meth:`expired` (a share is itself)."""

    def __init__(self, n: int):
        self.n = n

    def share(self, fraction: float):
        return self

    def expired(self) -> bool:
        self.n -= 1
        return self.n < 0


@pytest.mark.parametrize("checks", [0, 1, 3])
def test_priced_choice_stops_at_the_deadline(switch8, checks):
    """Pricing stops at the first check after the deadline: with it expired from the start
    nothing is priced and the estimate's pick stands (said so); after ``n`` checks exactly
    ``n`` schedules were priced and the record says pricing stopped."""
    from collsynth.solvers.packing.producer import priced_choice, shallow

    inst = make_instance(switch8, "allgather", message_bytes=2.0 ** 20)
    f = forest(inst, "allgather", False)
    alpha = float(switch8.link_arrays.alpha.max())
    alts = [f, shallow(inst, f)]
    cands = [latency.Candidate(g.k, packed_seconds(inst, g), depth_of(g.trees), 1, 400, 1, name)
             for g, name in zip(alts, ("packed", "shortest paths"))]
    est = latency.choose(cands, alpha, (0, auto_pieces(f.trees, 1)))
    got = priced_choice(inst, alts, cands, alpha, est, _Expiring(checks))
    assert "stopped" in got.priced
    if checks == 0:
        assert (got.name, got.pieces, got.as_dict()["how"]) == (est.name, est.pieces, "estimate")
    else:
        assert got.priced["schedules"] == checks and got.as_dict()["how"] == "priced"


def test_latency_choice_beats_fixed_pipelining_in_the_sync_model_at_64_kb(switch8):
    """Priced by the pipeline (verified, synchronous model), not by the estimate."""
    inst = make_instance(switch8, "allgather", message_bytes=65536)
    ours, _ = pipeline.run(inst, "tree-packing", Options())
    choice = ours["extra"]["forests"][0]["latency_choice"]
    fixed, _ = pipeline.run(inst, "tree-packing", Options(params={"pieces": choice["baseline_pieces"]}))
    assert ours["verified"] and fixed["verified"]
    assert choice["pieces"] < choice["baseline_pieces"]
    assert ours["time_sync_s"] < fixed["time_sync_s"]
    assert ours["time_event_s"] <= fixed["time_event_s"] * 1.05


@pytest.mark.parametrize("gen, params, nodes", [
    ("mesh", {"dims": [3, 3], "bandwidth": 50e9, "alpha": 1e-6}, [0, 2, 4, 6, 8]),
    ("forestcoll_a100", {"nodes": 2}, None),
])
def test_shortest_path_trees_are_the_shallowest_and_verify(gen, params, nodes):
    """One shortest-path tree per root spans every participant, is no deeper than the packed
    trees, and at 64 KB (where latency rules) its schedule verifies through the pipeline."""
    from collsynth.solvers.packing.producer import shallow

    topo = topology_from_dict({"generator": gen, **params})
    inst = make_instance(topo, "allgather", message_bytes=65536, nodes=nodes)
    f = forest(inst, "allgather", False)
    g = shallow(inst, f)
    want = set(inst.collective.nodes)
    assert sorted(t.root for t in g.trees) == sorted(want)
    assert all({r[-1] for r in t.routes} | {t.root} == want for t in g.trees)
    assert depth_of(g.trees) <= depth_of(f.trees)
    assert packed_seconds(inst, g) >= packed_seconds(inst, f) * (1 - 1e-9)  # never below the optimum
    row, sched = pipeline.run(inst, "tree-packing", Options(time_limit=300))
    assert row["verified"] and sched is not None, row["message"]
    names = ("shortest paths", "packed k=1", f"packed k={f.k}", "packed k=1 at 2x time", "packed k=1 at 4x time")
    assert row["extra"]["forests"][0]["latency_choice"]["trees"] in names


def test_latency_choice_falls_back_to_the_estimate_where_the_event_model_cannot_price():
    """A DGX-2 chassis behind a switch whose hop to an NPU is instant: the event model refuses
    such schedules, so the choice is the estimate's and says why; the schedule still verifies."""
    from collsynth.instances import generators

    topo = generators.build("dgx2", {"chassis": 1, "switch_hop": "instant"})
    inst = make_instance(topo, "allgather", message_bytes=65536)
    row, sched = pipeline.run(inst, "tree-packing", Options(time_limit=300))
    assert row["verified"] and sched is not None, row["message"]
    choice = row["extra"]["forests"][0]["latency_choice"]
    assert choice["how"] == "estimate" and choice["priced"]["schedules"] == 0
    assert "instant" in choice["priced"]["why"]


def test_allreduce_prices_each_of_its_forests_as_its_own_collective():
    """An allreduce is a reduce-scatter then an allgather: each forest's choice is priced on the
    collective it makes alone, and the concatenated schedule verifies."""
    inst = make_instance(_two_boxes(), "allreduce", message_bytes=2.0 ** 20)
    row, sched = pipeline.run(inst, "tree-packing", Options(time_limit=300))
    assert row["verified"] and sched is not None, row["message"]
    choices = [f["latency_choice"] for f in row["extra"]["forests"]]
    assert [c["how"] for c in choices] == ["priced", "priced"]
    assert all(c["priced"]["schedules"] >= 2 and c["priced"]["unverified"] == 0 for c in choices)


def test_mi250_two_boxes_at_1_mb_at_or_below_greedy_in_both_models():
    """The size sweep's cell that the estimate alone lost (2x16 MI250, 1 MB, its own latencies):
    with the priced choice among looser-capacity trees, tree packing is at or below greedy
    under both ``event`` and ``sync``, both priced by the pipeline."""
    from collsynth.instances.generators import build

    inst = make_instance(build("forestcoll_mi250", {"nodes": 2}), "allgather", message_bytes=2 ** 20)
    ours, _ = pipeline.run(inst, "tree-packing", Options(time_limit=600))
    greedy, _ = pipeline.run(inst, "greedy", Options(time_limit=60))
    assert ours["verified"] and greedy["verified"], (ours["message"], greedy["message"])
    assert ours["time_event_s"] <= greedy["time_event_s"]
    assert ours["time_sync_s"] <= greedy["time_sync_s"]


def _least_shift_by_scan(net, roots):
    """The least d dividing N (d < N) whose move of every compute node d places on maps the
    split network and the roots onto themselves, every divisor tried (independent of the
    topology's box shifts)."""
    comp = sorted(net.compute)
    n = len(comp)
    at = {v: i for i, v in enumerate(comp)}
    for d in (d for d in range(1, n // 2 + 1) if n % d == 0):
        move = {v: comp[(at[v] + d) % n] for v in comp}
        if all(roots.get(move[v], 0) == roots.get(v, 0) for v in comp) and all(
                net.cap.get((move[a], move[b])) == c for (a, b), c in net.cap.items() if a != net.source):
            return d
    return None


@pytest.mark.parametrize("gen, params, step, least", [
    ("dgx_h100", {"nodes": 2}, 8, 8), ("dgx_h100", {"nodes": 4}, 8, 16), ("forestcoll_a100", {"nodes": 2}, 8, 8),
    ("forestcoll_a100", {"nodes": 4}, 8, None)])
def test_translation_reads_the_box_shift_and_finds_what_a_scan_of_every_divisor_finds(gen, params, step, least):
    """The topology's box shift moves one box (8 GPUs) on; edge splitting need not keep it: on
    four DGX H100 boxes each GPU's rail is split unevenly over the other three boxes, so two
    boxes on is the least move of the split network; on four A100 boxes none is.
    :func:`translation`, trying the multiples of the box shift only, finds what trying every
    divisor finds."""
    topo = build(gen, {**params, "nvlink_alpha": 0.0})
    net0, opt, net, _ = _split_network(topo)
    remove_relays(net)
    roots = {c: opt.k for c in net0.compute}
    assert net.shift == step and translation(net, roots) == _least_shift_by_scan(net, roots) == least
