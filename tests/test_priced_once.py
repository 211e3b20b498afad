"""Tree packing verifies and prices each schedule once a run: a choice that meets a schedule it has
already priced (the same sends) takes the price it found then, the same floats.

- the allreduce's joint choice (solvers/packing/joint.py, ``certified_price``): the packed halves
  kept first and the fill's copies of them priced as "as picked" are the same sends, and so are
  pairs of content-identical forests (:meth:`.incumbent.Kept.known`);
- the FIFO reduction probe (solvers/packing/fifo_reduce.py): its extrapolation's ``4 q`` pieces
  are the probe's own pieces (``cheaper_at_its_pieces``' ``at_probe``);
- the latency choice under one model's objective (solvers/packing/latency_choice.py): the
  default objective's pick, and every pair both choices list, priced once under ``sync`` +
  ``event`` (``_priced_once``).

Each test counts the verifications or prices and checks the prices taken against the schedule
priced directly.
"""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

from collsynth.instances.instance import make_instance
from collsynth.solvers.packing import fifo_reduce, forests, incumbent, joint, latency_choice
from collsynth.solvers.packing.emission import auto_pieces, price_pieces
from collsynth.solvers.packing.packed import part_instance, plan
from collsynth.solvers.producers import Options
from collsynth.tens import certified

from test_fifo_reduce import _chain
from test_fixed_depth_candidate import _boxes

MODELS = ("sync", "event")


def _counting_certify(monkeypatch) -> list:
    """Every schedule :func:`collsynth.tens.certified.certify` verifies, by content digest."""
    verified: list = []
    certify = certified.certify

    def counted(schedule, instance):
        verified.append(certified.digest(schedule))
        return certify(schedule, instance)

    monkeypatch.setattr(certified, "certify", counted)
    return verified


def _halves(inst):
    return [forests.forest(inst, kind, transposed) for kind, transposed in plan(inst.collective.kind)]


def test_a_pair_of_the_same_sends_is_verified_and_priced_once_in_a_run(monkeypatch):
    """Two boxes of two GPUs, 1 MB allreduce at alpha 0: the packed halves at 8 pieces a half,
    then copies of the same forests (other objects, as the fill's ``replace`` makes them) at
    the same pieces: one verification, the same prices, the kept schedule still the first
    pair's; at 4 pieces a half (other sends) a second verification, and its prices are those
    of the schedule verified and priced directly (no ``kept``)."""
    inst = make_instance(_boxes(2, 0.0, 0.0), "allreduce", message_bytes=2 ** 20)
    pair = _halves(inst)
    copies = [replace(f) for f in pair]
    assert all(f is not g for f, g in zip(pair, copies))
    verified = _counting_certify(monkeypatch)
    kept = incumbent.Kept(MODELS)
    first = joint.certified_price(inst, pair, [8, 8], MODELS, kept)
    again = joint.certified_price(inst, copies, [8, 8], MODELS, kept)
    assert first is not None and again == first and len(verified) == 1
    assert kept.pair == tuple(pair) and kept.pieces == [8, 8] and kept.prices == first
    other = joint.certified_price(inst, copies, [4, 4], MODELS, kept)
    assert len(verified) == 2 and len(set(verified)) == 2
    assert other == joint.certified_price(inst, copies, [4, 4], MODELS, None)  # priced afresh: the same floats
    assert first == joint.certified_price(inst, pair, [8, 8], MODELS, None)


def test_the_fifo_probe_is_not_priced_again_for_its_extrapolation():
    """Stand-in prices ``a + b / P`` (test_fifo_reduce's): one tree a shard wins the probe at
    200 pieces, so both forests are priced at 50, 100 and 200 for the extrapolation; 200 is
    the probe's, so each (forest, pieces) is priced once, and the choice is the one the prices
    give (the optimum's 20-hop chain kept at its run's pieces)."""
    f = SimpleNamespace(trees=_chain(20), transposed=True, shape="rings", k=2)
    one = SimpleNamespace(trees=_chain(2), transposed=True, shape="two-level", k=1)
    asked: list = []

    def price(g, pieces):
        asked.append((id(g), pieces))
        y = 1 + 3 / pieces if g is f else 1.005 + 1 / pieces
        return {"sync": y, "event": y}

    assert fifo_reduce.choose(f, lambda: one, price, MODELS, 1) is f
    assert sorted(asked) == sorted({(id(g), q) for g in (f, one) for q in (50, 100, 200)}), asked


def test_the_one_model_latency_choice_prices_each_pair_once(monkeypatch):
    """Two boxes of two GPUs with link latencies, 64 KB allgather, ``objective=event``: the
    default objective's pick is priced under ``sync`` + ``event`` and taken among the ``event``
    choice's pairs; no (trees, pieces) pair is priced twice, and the choice's ``event`` price
    is that of its schedule priced directly."""
    inst = make_instance(_boxes(2, 2e-6, 5e-6), "allgather", message_bytes=2 ** 16)
    f = forests.forest(inst, "allgather", False)
    alpha = float(inst.topology.link_arrays.alpha.max())
    asked: list = []

    def counted(part, g, pieces, models=MODELS):
        asked.append((id(g), pieces))
        return price_pieces(part, g, pieces, models)

    monkeypatch.setattr(latency_choice, "price_pieces", counted)
    g, q, choice = latency_choice.latency_pick(inst, f, 1, alpha, Options(params={"objective": "event"}), None,
                                               auto_pieces(f.trees, inst.collective.chunks_per_node))
    assert choice.default is not None and choice.priced.get("schedules")
    assert len(asked) == len(set(asked)), sorted(asked)
    assert (id(choice.default[0]), choice.default[1]) in asked
    assert choice.priced["event_s"] == price_pieces(part_instance(inst, g), g, q, ("event",))["event"]


def test_the_price_warmup_loads_what_an_allreduce_emission_and_its_event_price_run():
    """A run compiles (or loads) its kernels before its clock from the warmup's tasks, and a run
    too small to repay a compile interprets the ones numba's cache lacks
    (:mod:`collsynth.tens.interpreted`): the warmup's ``price`` task must load the
    reduce-scatter's listing by owner and the chaining of a declared link order, which no tiny
    schedule reaches. In a fresh process, after the task, an allreduce of
    two boxes of two GPUs emitted and priced under ``event`` compiles no signature of theirs
    that the task did not load (before, neither kernel had one: the run chained its links in
    Python, 134 s of HGX H100 four-NIC x2's 280 s)."""
    import subprocess
    import sys
    from pathlib import Path

    code = f"""
import sys
sys.path.insert(0, {str(Path(__file__).parent)!r})
from collsynth.instances.instance import make_instance
from collsynth.solvers import compiling
from collsynth.solvers.packing import forests, joint
from collsynth.solvers.packing.packed import plan
from collsynth.tens import cost_models, dependencies, event_layout
from test_fixed_depth_candidate import _boxes
compiling.compile_task("price")
kernels = (event_layout.chain_on_links, dependencies.counting_order_of)
warmed = [list(k.signatures) for k in kernels]
inst = make_instance(_boxes(2, 0.0, 0.0), "allreduce", message_bytes=2 ** 20)
pair = [forests.forest(inst, kind, transposed) for kind, transposed in plan("allreduce")]
cost_models.price(joint.listed(inst, pair, [8, 8]), inst, "event")
print(repr([len(w) for w in warmed]), repr([list(k.signatures) == w for k, w in zip(kernels, warmed)]))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=3000)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == "[1, 1] [True, True]", out.stdout
