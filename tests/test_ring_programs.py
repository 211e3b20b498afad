"""The ring programs written for MI250's RCCL ring (``benchmarks/ring_programs.py``): the generator
checked against ForestColl's published A100 ring programs, and RCCL's rings mapped onto
collsynth's MI250 numbering."""

from __future__ import annotations

import lzma
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from ring_programs import rccl_rings, ring_xml  # noqa: E402

from collsynth.instances.systems import MI250_XGMI  # noqa: E402

A100 = ROOT / "instances" / "measurements" / "forestcoll-a100x2" / "programs"
STEP = re.compile(r"<step [^>]*/>")


@pytest.mark.parametrize("kind, name", [("allgather", "allgather"), ("reduce_scatter", "reducescatter"),
                                        ("allreduce", "allreduce")])
def test_generator_writes_forestcolls_a100_ring_programs(kind, name):
    # the published program (liangyuRain/mscclpp-public, a100_rings/) is the expected value: its
    # rings are read off its thread blocks' send peers, and the generator must write its steps
    text = lzma.decompress((A100 / f"nccl_ring_{name}_n32_c32.xml.xz").read_bytes()).decode()
    send = {}
    for gpu, body in re.findall(r'<gpu id="(\d+)"(.*?)</gpu>', text, re.S):
        for peer, chan in re.findall(r'<tb id="\d+" send="(\d+)" recv="\d+" chan="(\d+)"', body):
            send[(int(chan), int(gpu))] = int(peer)
    rings = []
    for c in range(32):
        ring = [0]
        while len(ring) < 16:
            ring.append(send[(c, ring[-1])])
        rings.append(ring)
    assert STEP.findall(ring_xml(kind, rings)) == STEP.findall(text)


def test_rccl_rings_follow_xgmi_links_and_cross_boxes_once_each_way():
    rings = rccl_rings()
    assert len(rings) == 32
    for ring in rings:
        assert sorted(ring) == list(range(32))
        hops = list(zip(ring, ring[1:] + ring[:1]))
        inside = [(a, b) for a, b in hops if a // 16 == b // 16]
        assert len(inside) == 30  # two hops cross boxes, box 0 -> 1 and back
        assert all(MI250_XGMI[a % 16].get(b % 16) for a, b in inside)
