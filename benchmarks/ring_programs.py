"""RCCL's ring as an MSCCL XML program, for ForestColl's 2x16 MI250, where the ring ran as
RCCL's own algorithm (the out-of-place column of its logs; ``docs/fidelity.md``).

Run: ``python benchmarks/ring_programs.py`` writes ``programs/nccl_ring_<kind>_c32.xml.xz`` in
``instances/measurements/forestcoll-mi250x2/`` for its three instances.

The rings are RCCL's for this machine: ``rome_model_59`` of ROCm/rccl ``src/graph/rome_models.cc``
(16 MI250 GCDs, 8 NICs, the xGMI matrix below; the same at tag ``rocm-6.0.0``, RCCL 2.18.3 as in
the logs, and ``rome_model_65`` has the same rings), 32
rings, each entering its box on one NIC and leaving on another. Its GCD numbering is RCCL's, so
its matrix is matched to collsynth's (``MI250_XGMI``, ForestColl's ``MI250_ADJ_MAT``) by a graph
isomorphism that keeps each pair's link count (networkx ``GraphMatcher``); with two boxes a ring
runs its GCD order in box 0, then in box 1, and back (RCCL's ``connectRings`` chains one box's
exit to the next box's entry). The program is written as NCCL's ring as MSCCL XML is written
in ForestColl's A100 programs (liangyuRain/mscclpp-public, branch ``msr``, ``a100_rings/``; the
generator reproduces their steps exactly from their rings): one thread block per channel,
chunk ``rank * C + channel``; allgather ``s``, ``rcs`` ... ``r``; reduce-scatter ``s``, ``rrs`` ...
``rrc``; allreduce ``s``, ``rrs`` ..., ``rrcs``, ``rcs`` ... ``r`` (Patarasuk and Yuan, "Bandwidth
optimal all-reduce algorithms for clusters of workstations", JPDC 2009). Each program is read
back as a schedule and verified before it is written.
"""

from __future__ import annotations

import lzma
from pathlib import Path

import networkx as nx

from collsynth.instances.instance import load_instance
from collsynth.instances.systems import MI250_XGMI
from collsynth.tens.peer_schedules import read_msccl_xml
from collsynth.tens.verify import check

COLL = {"allgather": "allgather", "reduce_scatter": "reducescatter", "allreduce": "allreduce"}
FOLDER = Path(__file__).resolve().parents[1] / "instances" / "measurements" / "forestcoll-mi250x2"
# rome_model_59 (ROCm/rccl src/graph/rome_models.cc): connMatrix rows (xGMI links per GCD pair), ringBase
RCCL_XGMI = ("0410200000000000 4011010000000000 1104001000000000 0140000200000000 2000040000001000 "
             "0100400000000110 0010000400000110 0002004000000001 0000000004102000 0000000040110100 "
             "0000000011040010 0000000001400002 0000100020000400 0000011001004000 0000011000100004 "
             "0000000100020040").split()
RCCL_RINGS = (
    "9 8 12 13 5 4 0 1 3 2 6 7 15 14 10 11|3 2 6 7 15 14 10 11 9 8 12 13 5 4 0 1|7 6 2 3 1 0 4 5 13 12 8 9 11 10 14 15|"
    "15 14 10 11 9 8 12 13 5 4 0 1 3 2 6 7|11 10 14 15 7 6 2 3 1 0 4 5 13 12 8 9|1 0 4 5 13 12 8 9 11 10 14 15 7 6 2 3|"
    "6 7 3 2 1 0 4 5 14 15 11 10 9 8 12 13|14 15 11 10 9 8 12 13 6 7 3 2 1 0 4 5|5 4 0 1 2 3 7 6 13 12 8 9 10 11 15 14|"
    "13 12 8 9 10 11 15 14 5 4 0 1 2 3 7 6|8 9 13 12 4 5 1 0 2 3 7 6 14 15 11 10|10 11 15 14 6 7 3 2 0 1 5 4 12 13 9 8|"
    "12 13 9 8 10 11 15 14 6 7 3 2 0 1 5 4|4 5 1 0 2 3 7 6 14 15 11 10 8 9 13 12|2 3 7 6 14 15 11 10 8 9 13 12 4 5 1 0|"
    "0 1 5 4 12 13 9 8 10 11 15 14 6 7 3 2|10 11 9 8 12 13 5 4 0 1 3 2 6 7 15 14|6 7 15 14 10 11 9 8 12 13 5 4 0 1 3 2|"
    "2 3 1 0 4 5 13 12 8 9 11 10 14 15 7 6|14 15 7 6 2 3 1 0 4 5 13 12 8 9 11 10|0 1 2 3 7 6 13 12 8 9 10 11 15 14 5 4|"
    "8 9 10 11 15 14 5 4 0 1 2 3 7 6 13 12|7 6 13 12 8 9 10 11 15 14 5 4 0 1 2 3|3 2 1 0 4 5 14 15 11 10 9 8 12 13 6 7|"
    "12 13 6 7 3 2 1 0 4 5 14 15 11 10 9 8|4 5 14 15 11 10 9 8 12 13 6 7 3 2 1 0|1 0 2 3 7 6 14 15 11 10 8 9 13 12 4 5|"
    "13 12 4 5 1 0 2 3 7 6 14 15 11 10 8 9|11 10 8 9 13 12 4 5 1 0 2 3 7 6 14 15|5 4 12 13 9 8 10 11 15 14 6 7 3 2 0 1|"
    "15 14 6 7 3 2 0 1 5 4 12 13 9 8 10 11|9 8 10 11 15 14 6 7 3 2 0 1 5 4 12 13")


def rccl_rings(boxes: int = 2) -> list[list[int]]:
    """RCCL's 32 rings on ``boxes`` boxes of 16 GCDs, in collsynth's GCD numbering (module doc)."""
    rccl, ours = nx.Graph(), nx.Graph()
    for i in range(16):
        for j in range(16):
            if RCCL_XGMI[i][j] != "0":
                rccl.add_edge(i, j, k=int(RCCL_XGMI[i][j]))
            if MI250_XGMI.get(i, {}).get(j):
                ours.add_edge(i, j, k=MI250_XGMI[i][j])
    to_ours = next(nx.isomorphism.GraphMatcher(rccl, ours, edge_match=lambda a, b: a["k"] == b["k"]).isomorphisms_iter())
    orders = [[to_ours[int(g)] for g in ring.split()] for ring in RCCL_RINGS.split("|")]
    return [[16 * b + g for b in range(boxes) for g in order] for order in orders]


def ring_steps(kind: str, ring: list[int], g: int, channel: int, C: int) -> list[tuple[str, int]]:
    """``(type, chunk)`` of rank ``g``'s steps on ``channel``'s ring ``ring`` (ranks in order)."""
    n = len(ring)
    at = ring.index(g)
    prev = lambda k: ring[(at - k) % n] * C + channel  # noqa: E731  the chunk of the rank k hops back
    gather = [("rcs", prev(k)) for k in range(1, n - 1)] + [("r", prev(n - 1))]
    if kind == "allgather":
        return [("s", prev(0))] + gather
    scatter = [("s", prev(1))] + [("rrs", prev(k + 1)) for k in range(1, n - 1)]
    if kind == "reduce_scatter":
        return scatter + [("rrc", prev(0))]
    return scatter + [("rrcs", prev(0))] + gather


def ring_xml(kind: str, rings: list[list[int]]) -> str:
    """The MSCCL XML program of NCCL's ring on ``rings`` (one per channel) for ``kind``."""
    n, C = len(rings[0]), len(rings)
    buf = "o" if kind == "allgather" else "i"
    chunks = n * C
    io = f'i_chunks="0" o_chunks="{chunks}"' if kind == "allgather" else f'i_chunks="{chunks}" o_chunks="0"'
    out = [f'<algo name="ring_ngpus{n}_nchan{C}" proto="Simple" nchunksperloop="{chunks}" ngpus="{n}" '
           f'coll="{COLL[kind]}" inplace="1" outofplace="0" minBytes="0" maxBytes="1099511627776" nchannels="{C}">']
    for g in range(n):
        out.append(f'  <gpu id="{g}" {io} s_chunks="0">')
        for c, ring in enumerate(rings):
            at = ring.index(g)
            out.append(f'    <tb id="{c}" send="{ring[(at + 1) % n]}" recv="{ring[at - 1]}" chan="{c}">')
            out += [f'      <step s="{s}" type="{t}" srcbuf="{buf}" srcoff="{k}" dstbuf="{buf}" dstoff="{k}" cnt="1" '
                    'depid="-1" deps="-1" hasdep="0"/>' for s, (t, k) in enumerate(ring_steps(kind, ring, g, c, C))]
            out.append("    </tb>")
        out.append("  </gpu>")
    out.append("</algo>")
    return "\n".join(out) + "\n"


def main() -> None:
    """Write the ring programs (see the module doc)."""
    rings = rccl_rings()
    for kind in COLL:
        inst = load_instance(FOLDER / f"mi250x2-{kind}.toml")
        text = ring_xml(kind, rings)
        check(read_msccl_xml(text, inst), inst)
        path = FOLDER / "programs" / f"nccl_ring_{kind}_c{len(rings)}.xml.xz"
        path.write_bytes(lzma.compress(text.encode()))
        print(f"{path}: {len(rings)} channels, verified")


if __name__ == "__main__":
    main()
