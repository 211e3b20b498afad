"""Every exported MSCCL program and MSCCL++ plan is read back by our own readers and verified
before it is written (collsynth.tens.export.verified_msccl_xml,
collsynth.tens.export_mscclpp.verified_mscclpp_plan), and both exporters pair a switch's
forwards with its arrivals by the one rule of ``docs/schedules.md``, "Switch nodes".

The schedule below is written by hand: a reduce-scatter on three GPUs around switch 3 where
GPUs 0 and 1 both send their part of GPU 2's chunk into the switch in step 1 and the switch
forwards two sends to GPU 2 in step 2 (the first forward takes the first arrival, the second
the second). The former MSCCL++ rule (a forward takes the latest arrival covering its piece,
the earliest listed among ties) pairs both forwards with GPU 0's arrival: GPU 0's part is
added twice and GPU 1's never. Mutant exporters (that rule; a dropped transfer; a dropped
send in the MSCCL program) must be caught by the read-back, the unchanged exporters must not.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from mscclpp_sim import run_plan

import collsynth as cs
from collsynth.instances.generators import build
from collsynth.instances.instance import make_instance
from collsynth.tens import export, export_mscclpp
from collsynth.tens.peer_schedules import read_peer_text
from collsynth.tens.schedule import from_sends
from collsynth.tens.switch_routes import SwitchRoutes, switch_routes
from collsynth.tens.verify import VerificationError, verify


def switch_reduce_scatter():
    """(schedule, instance): GPUs 0, 1, 2 around switch 3; chunk g is GPU g's result. Step 1:
    every GPU sends its two other chunks into the switch; step 2: the switch forwards every
    chunk to its owner twice (one send per contribution), each a reduce."""
    inst = make_instance(build("switch", {"nodes": 3, "unwind": 0}), "reduce_scatter", message_bytes=1 << 20)
    sends = [(c, 0, 1, g, 3, 1) for c in range(3) for g in range(3) if g != c]
    sends += [(c, 0, 1, 3, c, 2) for c in range(3) for _ in range(2)]
    return from_sends(sends, "reduce_scatter", 4, 3), inst


def latest_covering_transfers(s, instance, through, flow):
    """The former MSCCL++ rule, kept here as a mutant: a send out of a switch forwards the
    latest send into it (step <= its own) covering its piece, the earliest listed among ties."""
    switches = set(instance.topology.switches)
    rchunk = export_mscclpp._rank_chunks(s, instance)
    out = []
    for i in range(len(s)):
        u, v = int(s.src[i]), int(s.dst[i])
        if v in switches:
            continue
        via, j = [], i
        while u in switches:
            via.insert(0, u)
            cands = [k for k in range(len(s)) if int(s.dst[k]) == u and s.chunk[k] == s.chunk[j]
                     and s.step[k] <= s.step[j] and s.lo[k] <= s.lo[i] and s.hi[k] >= s.hi[i]]
            j = max(cands, key=lambda k: (int(s.step[k]), -k))
            u = int(s.src[j])
        out.append(export_mscclpp.Transfer(int(rchunk[i]), int(s.lo[i]), int(s.hi[i]), u, v, int(s.step[i]),
                                           True, tuple(via), bool(through[i]), int(flow[i])))
    return out


def test_the_hand_built_schedule_verifies_and_pairs_by_position():
    s, inst = switch_reduce_scatter()
    assert verify(s, inst) is None
    routes = switch_routes(s, inst).schedule
    # GPU 2's two deliveries come from GPU 0 and GPU 1, one each (written out by hand)
    assert sorted((int(u), int(v)) for u, v in zip(routes.src, routes.dst) if v == 2) == [(0, 2), (1, 2)]


def test_both_exports_of_it_read_back_and_verify():
    s, inst = switch_reduce_scatter()
    plan = export_mscclpp.verified_mscclpp_plan(s, inst)
    run_plan(json.loads(plan), "reducescatter", 3, seeds=(0, 1))  # the independent interpreter agrees
    assert verify(read_peer_text(plan, "mscclpp-json", inst), inst) is None
    xml = export.verified_msccl_xml(s, inst)
    assert verify(read_peer_text(xml, "msccl-xml", inst), inst) is None


def test_the_former_forwarding_rule_is_caught(monkeypatch):
    s, inst = switch_reduce_scatter()
    monkeypatch.setattr(export_mscclpp, "_transfers", latest_covering_transfers)
    with pytest.raises(VerificationError, match="twice"):
        export_mscclpp.verified_mscclpp_plan(s, inst)


def test_an_exporter_dropping_a_transfer_is_caught(monkeypatch):
    r = cs.solve(cs.make_instance({"generator": "ring", "nodes": 4}, "allgather"), "ring")
    original = export_mscclpp._transfers
    monkeypatch.setattr(export_mscclpp, "_transfers", lambda *a: original(*a)[:-1])
    with pytest.raises(VerificationError):
        export_mscclpp.verified_mscclpp_plan(r.schedule, r.instance)


def test_a_program_missing_a_send_is_caught(monkeypatch):
    s, inst = switch_reduce_scatter()

    def fewer(schedule, instance):
        r = switch_routes(schedule, instance)
        keep = np.arange(len(r.schedule)) != len(r.schedule) - 1
        return SwitchRoutes(r.schedule.select(keep), [p for p, k in zip(r.path, keep) if k], None)

    monkeypatch.setattr(export, "switch_routes", fewer)
    with pytest.raises(VerificationError):
        export.verified_msccl_xml(s, inst)


@pytest.mark.parametrize("kind", ["reduce_scatter", "allreduce"])
def test_relays_of_a_reduction_read_back_as_routes(kind):
    """A shortest-path reduction on a torus is relayed link by link, the relays passing partial
    sums on untouched: read back, each is one routed send that verifies."""
    r = cs.solve(cs.make_instance({"generator": "torus", "dims": [3, 3]}, kind), "recursive-doubling")
    assert r.schedule.routing == "shortest-path"
    back = read_peer_text(export_mscclpp.verified_mscclpp_plan(r.schedule, r.instance), "mscclpp-json", r.instance)
    assert back.routing == "shortest-path" and verify(back, r.instance) is None
