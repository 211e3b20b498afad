"""Real GPU-cluster topologies, each link in a named class with a published bandwidth and alpha.

Every generator here sets ``bandwidth`` (bytes/s) and ``alpha`` (s) on each link itself, from
its parameters, whose defaults are the values of the public description its docstring cites;
an instance's ``bandwidth`` / ``alpha`` keys are therefore refused for these generators
(:func:`collsynth.instances.generators.build`). Each link also carries ``link_class`` (e.g.
``nvlink_x2``, ``ib``) and ``meta["link_classes"]`` maps every class to its physical
``bandwidth``, ``alpha`` and ``source``: the per-port figures before any switch unwinding, which
is what a peer's "fastest link" / "slowest link" epoch refers to
(:func:`collsynth.instances.instance.epoch_timestep`).

Switches (NVSwitch, InfiniBand leaf or fabric switches) are kept as switch nodes (ids after the
GPUs) with ``unwind = 0``, or unwound to point-to-point links of degree d (TACOS section IV-D:
member i links to members i+1..i+d of its group, each link with 1/d of the port bandwidth),
which is what the TEN formulations and the greedy need.

>>> from collsynth.instances.generators import build
>>> t = build("ndv2", {"chassis": 2})
>>> len(t.npus), t.num_links, sorted(t.meta["link_classes"])
(16, 66, ['ib', 'nvlink_x1', 'nvlink_x2'])
"""

from __future__ import annotations

import itertools
import math

from .. import InputError
from .generators import DGX1_NVLINKS, generator, hierarchical
from .size import levels
from .switch_ops import with_switch_ops
from .topology import SWITCH_HOPS, Topology, from_edges

TECCL = "Liu et al., SIGCOMM 2024 (TE-CCL), repository microsoft/TE-CCL teccl/topologies"
TACCL = "Shah et al., NSDI 2023 (TACCL), repository microsoft/taccl"
NCCL_LAT = "NCCL src/graph/tuning.cc hwLat, Ring/LL per-hop latency"
RCCL_LAT = "RCCL src/graph/tuning.cc hwLat, Ring/LL per-hop latency"
TACOS = "Won et al., TACOS, 2023"

# NVLink pairs of the V100 hybrid cube-mesh (DGX-1 / Azure NDv2): the number of NVLinks joining
# GPU i and GPU j (TACCL taccl/topologies/generic.py ndv2(), beta_m1 = 2 links, beta_m2 = 1;
# msccl-tools msccl/topologies/nvidia.py dgx1()).
CUBE_MESH = DGX1_NVLINKS  # the same hybrid cube-mesh as the DGX-1 generator's

# xGMI links between the 16 GCDs of an 8 x MI250 node (TE-CCL teccl/topologies/amd.py
# adjacency_list): GCDs 2k and 2k+1 are the two dies of one OAM package, joined by 4 links.
MI250_XGMI = {
    0: {1: 4, 4: 2, 8: 1}, 1: {0: 4, 5: 1, 9: 1, 10: 1}, 2: {3: 4, 6: 1, 10: 1, 9: 1},
    3: {2: 4, 7: 2, 11: 1}, 4: {6: 1, 5: 4, 0: 2}, 5: {1: 1, 4: 4, 7: 1, 6: 1},
    6: {4: 1, 7: 4, 2: 1, 5: 1}, 7: {5: 1, 6: 4, 3: 2}, 8: {0: 1, 9: 4, 12: 2},
    9: {1: 1, 2: 1, 8: 4, 13: 1}, 10: {1: 1, 2: 1, 11: 4, 14: 1}, 11: {3: 1, 10: 4, 15: 2},
    12: {8: 2, 13: 4, 14: 1}, 13: {9: 1, 12: 4, 15: 1, 14: 1}, 14: {10: 1, 12: 1, 13: 1, 15: 4},
    15: {11: 2, 13: 1, 14: 4},
}

INTER_CHASSIS = ("direct", "switch", "unwound")


# ---- building blocks -------------------------------------------------------------------------

def link_class(bandwidth: float, alpha: float, source: str) -> dict:
    """One class of physical link: per-port ``bandwidth`` (bytes/s), ``alpha`` (s), its source."""
    for key, val, ok in (("bandwidth", bandwidth, bandwidth > 0), ("alpha", alpha, alpha >= 0)):
        if not (ok and math.isfinite(val)):
            raise InputError(key, f"expected a {'positive' if key == 'bandwidth' else 'non-negative'} number, got {val}")
    return {"bandwidth": float(bandwidth), "alpha": float(alpha), "source": source}


def class_edge(u: int, v: int, classes: dict, cls: str, share: float = 1.0) -> tuple:
    """A directed link of class ``cls`` carrying ``share`` of the class's port bandwidth."""
    c = classes[cls]
    return (u, v, {"bandwidth": c["bandwidth"] * share, "alpha": c["alpha"], "link_class": cls})


def switch_group(members: list[int], classes: dict, cls: str, unwind: int, switch_id: int,
           where: str) -> tuple[list[tuple], list[int]]:
    """Links of ``members`` joined by one switch: kept as node ``switch_id`` (``unwind = 0``,
    a link each way per member) or unwound to degree d (member i -> i+1..i+d, each link 1/d of
    the port bandwidth; TACOS section IV-D). Returns (edges, switch ids)."""
    n = len(members)
    if unwind == 0:
        edges = [class_edge(m, switch_id, classes, cls) for m in members]
        edges += [class_edge(switch_id, m, classes, cls) for m in members]
        return edges, [switch_id]
    if not 1 <= unwind <= n - 1:
        raise InputError(where, f"expected 0 (keep the switch) or a degree in 1..{n - 1}, got {unwind}")
    edges = [class_edge(members[i], members[(i + k) % n], classes, cls, 1.0 / unwind)
             for i in range(n) for k in range(1, unwind + 1)]
    return edges, []


def box_switches(nodes: int, classes: dict, per_box: int = 8) -> tuple[list[tuple], list[int]]:
    """Each box's ``per_box`` GPUs (ids ``per_box * b ..``) on its own kept switch of class
    ``nvswitch`` (id ``per_box * nodes + b``): the links and the switch ids."""
    edges, switches = [], []
    for b in range(nodes):
        e, s = switch_group(list(range(per_box * b, per_box * b + per_box)), classes, "nvswitch", 0,
                            per_box * nodes + b, "nodes")
        edges += e
        switches += s
    return edges, switches


def classed_topology(size: int, edges: list, switches: list[int], name: str, classes: dict, **meta) -> Topology:
    """A topology of :func:`class_edge` links whose ``meta["link_classes"]`` is ``classes``."""
    return from_edges(size, edges, switches=switches, name=name,
                      meta={"link_classes": classes, **meta})


def _count(value: int, where: str, lo: int, hi: int | None = None) -> None:
    if value < lo or (hi is not None and value > hi):
        raise InputError(where, f"expected an integer in {lo}..{hi if hi is not None else 'inf'}, got {value}")


# ---- Azure NDv2 ------------------------------------------------------------------------------

@generator(size=lambda p: (8 * p.get("chassis", 2) + 1, 48 * p.get("chassis", 2) + 2 * p.get("chassis", 2) ** 2, "chassis"))
def ndv2(chassis: int = 2, inter_chassis: str = "direct", nvlink_bandwidth: float = 25e9,
         nvlink_alpha: float = 0.7e-6, nic_bandwidth: float = 12.5e9, nic_alpha: float = 1.3e-6,
         switch_hop: str = "timestep") -> Topology:
    """Azure NDv2: 8 V100 per chassis in the hybrid cube-mesh, InfiniBand between chassis.

    chassis: 1..4. GPU g of chassis c has id 8c + g. NVLink pairs (``CUBE_MESH``, TACCL
    generic.py ndv2()): 8 pairs joined by two NVLinks (class ``nvlink_x2``, 2 x
    nvlink_bandwidth) and 8 by one (``nvlink_x1``), one directed link each way per pair.
    nvlink_bandwidth: bytes/s of one NVLink per direction (TE-CCL ndv2.py: 50 GB/s for a
    two-link pair, 25 GB/s for a single link). nvlink_alpha: 0.7 us (TE-CCL ndv2.py).
    One NIC per chassis (TACCL ndv2 profile ``nics_per_node = 1``): GPU 0 sends, GPU 1
    receives (TE-CCL ndv2.py; TACCL sketch ``internode_conn {"0": [1]}``), class ``ib``,
    nic_bandwidth 12.5 GB/s and nic_alpha 1.3 us (TE-CCL ndv2.py; TACCL's ndv2 profile has
    beta 105 us/MB and alpha 2.6 us). inter_chassis: ``direct`` links GPU 0 of every chassis
    to GPU 1 of every other at the full NIC bandwidth (TE-CCL's 2-chassis wiring, TACCL's
    relay sketch); ``switch`` keeps one InfiniBand switch node (id 8 * chassis; TE-CCL's
    wiring for more than 2 chassis); ``unwound`` is that switch unwound at degree
    chassis - 1 (GPU 0 of c to GPU 1 of c+1..c+chassis-1, each 1/(chassis-1) of the NIC).
    switch_hop (``switch`` only): ``"timestep"`` (a chunk leaves the InfiniBand switch in the
    timestep after it arrived) or ``"instant"`` (in the same timestep: TE-CCL's default
    ``switch_to_gpu_link_on = False``; :func:`collsynth.tens.ten.switch_hop_instant`).
    """
    _count(chassis, "chassis", 1, 4)
    if inter_chassis not in INTER_CHASSIS:
        raise InputError("inter_chassis", f"expected one of {', '.join(INTER_CHASSIS)}, got {inter_chassis!r}")
    if switch_hop not in SWITCH_HOPS:
        raise InputError("switch_hop", f"expected one of {', '.join(SWITCH_HOPS)}, got {switch_hop!r}")
    classes = {
        "nvlink_x1": link_class(nvlink_bandwidth, nvlink_alpha, f"{TECCL}/ndv2.py; {TACCL}, generic.py ndv2()"),
        "nvlink_x2": link_class(2 * nvlink_bandwidth, nvlink_alpha, f"{TECCL}/ndv2.py; {TACCL}, generic.py ndv2()"),
        "ib": link_class(nic_bandwidth, nic_alpha, f"{TECCL}/ndv2.py"),
    }
    edges = [class_edge(8 * c + i, 8 * c + j, classes, f"nvlink_x{k}")
             for c in range(chassis) for i, row in enumerate(CUBE_MESH) for j, k in enumerate(row) if k]
    switches: list[int] = []
    if chassis > 1:
        senders, receivers = [8 * c for c in range(chassis)], [8 * c + 1 for c in range(chassis)]
        if inter_chassis == "direct":
            edges += [class_edge(senders[a], receivers[b], classes, "ib") for a, b in itertools.permutations(range(chassis), 2)]
        elif inter_chassis == "switch":
            sw = 8 * chassis
            edges += [class_edge(s, sw, classes, "ib") for s in senders] + [class_edge(sw, r, classes, "ib") for r in receivers]
            switches = [sw]
        else:
            d = chassis - 1
            edges += [class_edge(senders[c], receivers[(c + k) % chassis], classes, "ib", 1.0 / d)
                      for c in range(chassis) for k in range(1, d + 1)]
    size = 8 * chassis + len(switches)
    hop = {"switch_hop": switch_hop} if switches and switch_hop != "timestep" else {}
    return classed_topology(size, edges, switches, f"ndv2x{chassis}{'' if chassis == 1 else '-' + inter_chassis}",
                     classes, gpus_per_chassis=8, **hop)


# ---- NVIDIA DGX-2 ----------------------------------------------------------------------------

@generator(size=lambda p: (17 * p.get("chassis", 2), 32 * p.get("chassis", 2) * max(1, p.get("unwind", 0))
                      + 16 * p.get("chassis", 2) ** 2, "chassis"))
def dgx2(chassis: int = 2, unwind: int = 0, nvswitch_bandwidth: float = 125e9, nvswitch_alpha: float = 0.35e-6,
         nic_bandwidth: float = 12.5e9, nic_alpha: float = 2.6e-6, switch_hop: str = "timestep") -> Topology:
    """NVIDIA DGX-2: 16 V100 behind NVSwitch per chassis, 8 InfiniBand NICs per chassis.

    chassis: 1..4; GPU g of chassis c has id 16c + g. NVSwitch (class ``nvswitch``): one
    switch node per chassis (ids after the GPUs) with a link each way per GPU at
    nvswitch_bandwidth 125 GB/s and nvswitch_alpha 0.35 us (TE-CCL dgx2.py), or unwound to
    degree ``unwind`` (1..15) inside the chassis. NICs (class ``ib``, TACCL dgx2 profile
    ``nics_per_node = 8``): odd GPU 2k+1 of a chassis sends to even GPU 2k of every other
    chassis (TE-CCL dgx2.py; TACCL sketch sk1-dgx2-n2 ``internode_conn``), nic_bandwidth
    12.5 GB/s, nic_alpha 2.6 us (TE-CCL dgx2.py; TACCL dgx2 profile remote_alpha 2.6 us).
    switch_hop (kept switches only): ``"timestep"`` (a chunk leaves the NVSwitch in the
    timestep after it arrived) or ``"instant"`` (in the same timestep: TE-CCL's default
    ``switch_to_gpu_link_on = False``; :func:`collsynth.tens.ten.switch_hop_instant`).
    """
    _count(chassis, "chassis", 1, 4)
    if switch_hop not in SWITCH_HOPS:
        raise InputError("switch_hop", f"expected one of {', '.join(SWITCH_HOPS)}, got {switch_hop!r}")
    classes = {
        "nvswitch": link_class(nvswitch_bandwidth, nvswitch_alpha, f"{TECCL}/dgx2.py"),
        "ib": link_class(nic_bandwidth, nic_alpha, f"{TECCL}/dgx2.py; {TACCL}, examples/sketch/sk1-dgx2-n2.json"),
    }
    edges, switches = [], []
    gpus = 16 * chassis
    for c in range(chassis):
        e, s = switch_group(list(range(16 * c, 16 * c + 16)), classes, "nvswitch", unwind, gpus + c, "unwind")
        edges += e
        switches += s
    edges += [class_edge(16 * a + 2 * k + 1, 16 * b + 2 * k, classes, "ib")
              for a, b in itertools.permutations(range(chassis), 2) for k in range(8)]
    hop = {"switch_hop": switch_hop} if switches and switch_hop != "timestep" else {}
    return classed_topology(gpus + len(switches), edges, switches, f"dgx2x{chassis}" + (f"-unwind{unwind}" if unwind else ""),
                     classes, gpus_per_chassis=16, **hop)


# ---- DGX A100 / H100 with rail-optimised leaf switches -----------------------------------

def _dgx_rails(nodes: int, unwind_nvswitch: int, unwind_rail: int, classes: dict, name: str, nvls: bool = False,
               sharp: bool = False) -> Topology:
    """8 GPUs per node behind NVSwitch, GPU g's NIC on rail (leaf switch) g shared by all nodes.

    Switch ids after the GPUs: the nodes' NVSwitches first, then the rails' leaf switches.
    ``nvls``: the NVSwitches reduce and multicast; ``sharp``: the rail switches do
    (:mod:`collsynth.instances.switch_ops`); both need the switches kept as nodes.
    """
    for flag, on, unwound in (("nvls", nvls, unwind_nvswitch), ("sharp", sharp, unwind_rail)):
        if on and unwound:
            raise InputError(flag, f"a reducing switch must be kept as a node; expected unwind_"
                                   f"{'nvswitch' if flag == 'nvls' else 'rail'} = 0, got {unwound}")
    _count(nodes, "nodes", 1)
    gpus = 8 * nodes
    edges, switches = [], []
    for n in range(nodes):
        e, s = switch_group(list(range(8 * n, 8 * n + 8)), classes, "nvswitch", unwind_nvswitch, gpus + n, "unwind_nvswitch")
        edges += e
        switches += s
    if nodes > 1:
        base = gpus + len(switches)
        for g in range(8):
            e, s = switch_group([8 * n + g for n in range(nodes)], classes, "rail", unwind_rail, base + g, "unwind_rail")
            edges += e
            switches += s
    suffix = "".join(f"-{k}{v}" for k, v in (("nvs", unwind_nvswitch), ("rail", unwind_rail)) if v)
    suffix += "".join(f"-{k}" for k, v in (("nvls", nvls), ("sharp", sharp and nodes > 1)) if v)
    topo = classed_topology(gpus + len(switches), edges, switches, f"{name}x{nodes}{suffix}", classes, gpus_per_node=8)
    computing = ([gpus + n for n in range(nodes)] if nvls else []) + \
        ([gpus + nodes + g for g in range(8)] if sharp and nodes > 1 else [])
    return with_switch_ops(topo, reduce=computing, copy=computing)


def _rails_size(p: dict) -> tuple[int, int, str]:
    """Counts of :func:`dgx_a100` and :func:`dgx_h100`: 8 GPUs and an NVSwitch per node, 8 rail switches."""
    n = p.get("nodes", 2)
    unwound = max(1, p.get("unwind_nvswitch", 0)) + max(1, p.get("unwind_rail", 0))
    return 9 * n + 8, 16 * n * unwound, "nodes"


@generator(size=_rails_size)
def dgx_a100(nodes: int = 2, unwind_nvswitch: int = 0, unwind_rail: int = 0, nvlink_bandwidth: float = 300e9,
             nvlink_alpha: float = 0.47e-6, nic_bandwidth: float = 25e9, nic_alpha: float = 2.7e-6) -> Topology:
    """NVIDIA DGX A100 nodes: 8 A100 behind NVSwitch, one 200 Gb/s NIC per GPU on rail-optimised leaves.

    nodes: >= 1; GPU g of node n has id 8n + g. NVSwitch (class ``nvswitch``): 12 NVLink3 per
    GPU, 600 GB/s bidirectional (NVIDIA DGX A100 datasheet / A100 whitepaper), so
    nvlink_bandwidth = 300 GB/s per direction; nvlink_alpha 0.47 us (NCCL tuning.cc hwLat,
    NVLink, Ring/LL). Kept as a switch node per node or unwound to degree unwind_nvswitch
    (1..7). NICs (class ``rail``): 8 single-port ConnectX-6 HDR 200 Gb/s per node (DGX A100
    datasheet), nic_bandwidth 25 GB/s, nic_alpha 2.7 us (NCCL hwLat, network, Ring/LL); GPU g's
    NIC is on leaf switch g (rail g) of the DGX SuperPOD rail-optimised fabric, kept as a
    switch node per rail or unwound to degree unwind_rail (1..nodes-1) among the nodes.
    """
    classes = {
        "nvswitch": link_class(nvlink_bandwidth, nvlink_alpha, "NVIDIA DGX A100 datasheet (NVLink3, 600 GB/s per GPU bidirectional); " + NCCL_LAT),
        "rail": link_class(nic_bandwidth, nic_alpha, "NVIDIA DGX A100 datasheet (8 x ConnectX-6 200 Gb/s); DGX SuperPOD rail-optimised fabric; " + NCCL_LAT),
    }
    return _dgx_rails(nodes, unwind_nvswitch, unwind_rail, classes, "dgx_a100")


@generator(size=_rails_size)
def dgx_h100(nodes: int = 2, unwind_nvswitch: int = 0, unwind_rail: int = 0, nvlink_bandwidth: float = 450e9,
             nvlink_alpha: float = 0.47e-6, nic_bandwidth: float = 50e9, nic_alpha: float = 2.7e-6,
             nvls: bool = False, sharp: bool = False) -> Topology:
    """NVIDIA DGX H100 nodes: 8 H100 behind NVSwitch, one 400 Gb/s NIC per GPU on rail-optimised leaves.

    As :func:`dgx_a100` with the DGX H100 datasheet's figures: 18 NVLink4 per GPU, 900 GB/s
    bidirectional (nvlink_bandwidth 450 GB/s per direction), 8 single-port ConnectX-7 NDR
    400 Gb/s per node (nic_bandwidth 50 GB/s); alphas from NCCL tuning.cc hwLat (Ring/LL:
    NVLink 0.47 us, network 2.7 us).

    nvls: the third-generation NVSwitch reduces (sum, min, max) and multicasts (NVLink SHARP:
    each GPU's ``multimem.ld_reduce`` / ``multimem.st`` through it, at the NVLink figures above;
    NCCL's NVLS allreduce measures about 480 GB/s bus bandwidth on 8 H100 against about 370 for
    its ring, NVIDIA/nccl issue 1455 and NVIDIA/nccl-tests issue 212). sharp: the rail switches
    (InfiniBand Quantum-2, SHARPv3) reduce and multicast too, at the NIC figures. Both need the
    switches kept (unwind 0).
    """
    classes = {
        "nvswitch": link_class(nvlink_bandwidth, nvlink_alpha, "NVIDIA DGX H100 datasheet (NVLink4, 900 GB/s per GPU bidirectional); " + NCCL_LAT),
        "rail": link_class(nic_bandwidth, nic_alpha, "NVIDIA DGX H100 datasheet (8 x ConnectX-7 400 Gb/s); DGX SuperPOD rail-optimised fabric; " + NCCL_LAT),
    }
    return _dgx_rails(nodes, unwind_nvswitch, unwind_rail, classes, "dgx_h100", nvls, sharp)


# ---- AMD MI250 -------------------------------------------------------------------------------

@generator(size=lambda p: (25 * p.get("nodes", 1) + 1, p.get("nodes", 1) * (100 + 32 * max(1, p.get("unwind", 0))), "nodes"))
def mi250(nodes: int = 1, unwind: int = 0, xgmi_bandwidth: float = 50e9, xgmi_alpha: float = 2.3e-6,
          nic_bandwidth: float = 25e9, nic_alpha: float = 2.0e-6) -> Topology:
    """AMD MI250 nodes: 16 GCDs (8 OAMs) in an xGMI mesh, one NIC per GCD pair.

    nodes: >= 1; GCD g of node n has id 16n + g. xGMI (``MI250_XGMI``, TE-CCL amd.py):
    7 links per GCD, 4 between the two GCDs of an OAM; a GCD pair joined by k links is one
    directed link each way of class ``xgmi_x{k}`` with k x xgmi_bandwidth (50 GB/s per link,
    TE-CCL amd.py), xgmi_alpha 2.3 us (RCCL tuning.cc hwLat, xGMI, Ring/LL). NICs (class
    ``nic``): GCDs 2k and 2k+1 share NIC k (TE-CCL amd.py: one switch per GCD pair at
    25 GB/s), nic_alpha 2.0 us (RCCL hwLat, network, Ring/LL). With nodes > 1, unwind = 0
    keeps each NIC as a switch node (both GCDs and the fabric switch linked to it) and one
    fabric switch joining the NICs (TE-CCL amd.py's chassis switch); unwind = d in
    1..nodes-1 replaces them by links from GCD g of node n to GCD g of nodes n+1..n+d, each
    nic_bandwidth / (2d) (two GCDs share a NIC, the NIC's bandwidth unwound at degree d).
    """
    _count(nodes, "nodes", 1)
    classes = {f"xgmi_x{k}": link_class(k * xgmi_bandwidth, xgmi_alpha, f"{TECCL}/amd.py; {RCCL_LAT}") for k in (1, 2, 4)}
    classes["nic"] = link_class(nic_bandwidth, nic_alpha, f"{TECCL}/amd.py; {RCCL_LAT}")
    edges = [class_edge(16 * n + i, 16 * n + j, classes, f"xgmi_x{k}")
             for n in range(nodes) for i, row in MI250_XGMI.items() for j, k in row.items()]
    switches: list[int] = []
    gcds = 16 * nodes
    if nodes > 1 and unwind == 0:
        fabric = gcds + 8 * nodes
        for n in range(nodes):
            for k in range(8):
                nic = gcds + 8 * n + k
                e, _ = switch_group([16 * n + 2 * k, 16 * n + 2 * k + 1, fabric], classes, "nic", 0, nic, "unwind")
                edges += e
                switches.append(nic)
        switches.append(fabric)
    elif nodes > 1:
        _count(unwind, "unwind", 0, nodes - 1)
        edges += [class_edge(16 * n + g, 16 * ((n + k) % nodes) + g, classes, "nic", 1.0 / (2 * unwind))
                  for n in range(nodes) for g in range(16) for k in range(1, unwind + 1)]
    return classed_topology(gcds + len(switches), edges, switches, f"mi250x{nodes}" + (f"-unwind{unwind}" if unwind else ""),
                     classes, gpus_per_node=16)


# ---- ForestColl's A100 and MI250 systems -------------------------------------------------

FORESTCOLL = ("Zhao, Maleki, Yang, Pourreza, Krishnamurthy, ForestColl, arXiv 2402.06787, Section 6; "
              "repository liangyuRain/ForestColl topologies.py")


@generator(size=lambda p: (17 * p.get("nodes", 2) + 2, 48 * p.get("nodes", 2), "nodes"))
def forestcoll_a100(nodes: int = 2, nvlink_bandwidth: float = 300e9, nvlink_alpha: float = 0.47e-6,
                    nic_bandwidth: float = 25e9, nic_alpha: float = 2.7e-6) -> Topology:
    """ForestColl's 8 x A100 boxes: NVSwitch in each box, a NIC per GPU, two InfiniBand switches.

    As ForestColl's ``a100_topology`` (liangyuRain/ForestColl topologies.py; Zhao et al.,
    arXiv 2402.06787, Section 6): GPU g of box n (id 8n + g) has a link each way to its box's
    NVSwitch at nvlink_bandwidth 300 GB/s (``NVLINK_BW``) and, with nodes > 1, to its own NIC
    (a switch node) at nic_bandwidth 25 GB/s (``A100_IB_BW``, one 200 Gb/s HDR NIC); NIC g
    links each way to InfiniBand switch g mod 2 ("separate IBs for odd/even channel") at the
    same 25 GB/s. Ids after the GPUs: the NVSwitches, then the NICs (8n + g), then the two IB
    switches. ForestColl ignores latency; the alphas default to NCCL's (tuning.cc hwLat,
    Ring/LL: NVLink 0.47 us, network 2.7 us; set them to 0 for ForestColl's model).
    """
    _count(nodes, "nodes", 1)
    classes = {"nvswitch": link_class(nvlink_bandwidth, nvlink_alpha, f"{FORESTCOLL} NVLINK_BW; {NCCL_LAT}"),
               "nic": link_class(nic_bandwidth, nic_alpha, f"{FORESTCOLL} A100_IB_BW; {NCCL_LAT}")}
    gpus = 8 * nodes
    edges, switches = box_switches(nodes, classes)
    if nodes > 1:
        nic0, ib0 = gpus + nodes, gpus + nodes + gpus
        for g in range(gpus):
            nic, ib = nic0 + g, ib0 + g % 2
            edges += [class_edge(g, nic, classes, "nic"), class_edge(nic, g, classes, "nic"),
                      class_edge(nic, ib, classes, "nic"), class_edge(ib, nic, classes, "nic")]
        switches += list(range(nic0, nic0 + gpus)) + [ib0, ib0 + 1]
    return classed_topology(gpus + len(switches), edges, switches, f"forestcoll_a100x{nodes}", classes,
                            gpus_per_node=8)


@generator(size=lambda p: (16 * p.get("nodes", 2) + 1, 96 * p.get("nodes", 2), "nodes"))
def forestcoll_mi250(nodes: int = 2, xgmi_bandwidth: float = 50e9, xgmi_alpha: float = 2.3e-6,
                     nic_bandwidth: float = 16e9, nic_alpha: float = 2.0e-6) -> Topology:
    """ForestColl's 16-GCD MI250 boxes: the xGMI mesh, every GCD on one InfiniBand switch.

    As ForestColl's ``mi250_topology`` (liangyuRain/ForestColl topologies.py; Zhao et al.,
    arXiv 2402.06787, Section 6): GCD g of box n (id 16n + g) has the xGMI links of
    ``MI250_XGMI`` (ForestColl's ``MI250_ADJ_MAT``, the same matrix), a pair joined by k links
    one directed link each way of k x xgmi_bandwidth 50 GB/s (``xGMI_BW``); with nodes > 1 every
    GCD links each way to one InfiniBand switch (id 16 * nodes) at nic_bandwidth 16 GB/s
    (``MI250_IB_BW``). ForestColl ignores latency; the alphas default to RCCL's (tuning.cc
    hwLat, Ring/LL: xGMI 2.3 us, network 2.0 us; set them to 0 for ForestColl's model).
    """
    _count(nodes, "nodes", 1)
    classes = {f"xgmi_x{k}": link_class(k * xgmi_bandwidth, xgmi_alpha, f"{FORESTCOLL} xGMI_BW; {RCCL_LAT}")
               for k in (1, 2, 4)}
    classes["nic"] = link_class(nic_bandwidth, nic_alpha, f"{FORESTCOLL} MI250_IB_BW; {RCCL_LAT}")
    edges = [class_edge(16 * n + i, 16 * n + j, classes, f"xgmi_x{k}")
             for n in range(nodes) for i, row in MI250_XGMI.items() for j, k in row.items()]
    switches: list[int] = []
    gcds = 16 * nodes
    if nodes > 1:
        ib = gcds
        edges += [e for g in range(gcds) for e in (class_edge(g, ib, classes, "nic"), class_edge(ib, g, classes, "nic"))]
        switches = [ib]
    return classed_topology(gcds + len(switches), edges, switches, f"forestcoll_mi250x{nodes}", classes,
                            gpus_per_node=16)


# ---- TACOS's multi-dimensional hierarchical systems --------------------------------------

def _hierarchy(levels: list[str], dims: list[int], bandwidths: list[float], alpha: float,
               unwind: list[int], name: str) -> Topology:
    """A :func:`hierarchical` system with absolute per-level bandwidths and one class per level.

    Link classes are ``level{i}_{kind}``; an NPU-NPU link's level is the coordinate its ends
    differ in, a switch link's level is the one of the switch's group.
    """
    if len(bandwidths) != len(levels):
        raise InputError("bandwidths", f"expected {len(levels)} bandwidths (one per level), got {bandwidths}")
    classes = {f"level{i}_{k}": link_class(b, alpha, f"{TACOS}, section VII-B") for i, (k, b) in enumerate(zip(levels, bandwidths))}
    base = hierarchical(levels, dims, [1.0] * len(levels), unwind)
    n = math.prod(dims)
    coords = list(itertools.product(*(range(d) for d in dims)))
    switch_level = _switch_levels(levels, dims, unwind, n)
    edges = []
    for u, v, data in base.graph.edges(data=True):
        if u < n and v < n:
            level = next(i for i, (a, b) in enumerate(zip(coords[u], coords[v])) if a != b)
        else:
            level = switch_level[max(u, v)]
        cls = f"level{level}_{levels[level]}"
        edges.append(class_edge(u, v, classes, cls, float(data.get("scale", 1.0))))
    return classed_topology(base.size, edges, sorted(base.switches), name, classes, dims=list(dims), levels=list(levels))


def _switch_levels(levels: list[str], dims: list[int], unwind: list[int], n: int) -> dict[int, int]:
    """The level of every switch node :func:`hierarchical` creates (ids in creation order)."""
    out, next_id = {}, n
    for axis, (kind, d) in enumerate(zip(levels, dims)):
        if kind == "switch" and d > 1 and unwind[axis] == 0:
            for _ in range(n // d):
                out[next_id] = axis
                next_id += 1
    return out


@generator(size=lambda p: levels([p.get("ring", 2), p.get("fully_connected", 4), p["nodes"]], "nodes"))
def ring_fc_switch(nodes: int, ring: int = 2, fully_connected: int = 4, ring_bandwidth: float = 200e9,
                   fc_bandwidth: float = 100e9, switch_bandwidth: float = 50e9, alpha: float = 0.5e-6,
                   unwind: int = 1) -> Topology:
    """TACOS's Ring x FullyConnected x Switch system (Table I): nodes of ring x fully_connected NPUs.

    nodes: number of nodes (the scale-out switch dimension, 1..64 in Table I: 8..512 NPUs).
    ring, fully_connected: the node's 2 x 4 shape (TACOS VII-B). Bandwidths per level
    200/100/50 GB/s (TACOS VII-B, "Network BW is set to 200_100_50 GB/s"). unwind: the
    scale-out switch's unwinding degree (TACOS VII-B: degree-1 for scale-out; 0 keeps it).
    alpha: every link's latency; TACOS does not state it, 0.5 us is the corpus default.
    NPU ids row-major over (ring, fully_connected, node), the node coordinate fastest.
    """
    _count(nodes, "nodes", 1)
    return _hierarchy(["ring", "complete", "switch"], [ring, fully_connected, nodes],
                      [ring_bandwidth, fc_bandwidth, switch_bandwidth], alpha, [0, 0, unwind],
                      f"ring_fc_switch-{ring}x{fully_connected}x{nodes}")


@generator(size=lambda p: levels(p["dims"], "dims"))
def ring_ring(dims: list[int], bandwidths: list[float] | None = None, alpha: float = 0.5e-6) -> Topology:
    """TACOS's Ring x Ring system (Table II: 8x8, 10x10, 12x12): a 2D torus, one class per ring level.

    dims: [a, b]. bandwidths: per level (default 100 GB/s each: TACOS does not state Table
    II's bandwidths; 100 GB/s is its mesh link bandwidth, VII-B). alpha: as in
    :func:`ring_fc_switch` (not stated by TACOS; corpus default 0.5 us).
    """
    if len(dims) != 2:
        raise InputError("dims", f"expected two ring sizes, got {dims}")
    return _hierarchy(["ring", "ring"], list(dims), list(bandwidths or [100e9, 100e9]), alpha, [0, 0],
                      f"ring_ring-{dims[0]}x{dims[1]}")


@generator(size=lambda p: levels(p.get("dims", [8, 4]), "dims"))
def switch_switch(dims: list[int] = [8, 4], bandwidths: list[float] = [300e9, 25e9], alpha: float = 0.5e-6,
                  unwind: list[int] | None = None) -> Topology:
    """TACOS's two-level Switch x Switch system (Fig. 19: 8 x 4, 32 NPUs, 300_25 GB/s), DGX-like.

    dims: [scale-up, scale-out] group sizes. bandwidths: per level. unwind: per level, default
    degree-max for the scale-up switch and degree 1 for the scale-out one (TACOS VII-B);
    0 keeps a switch node. alpha: not stated by TACOS (corpus default 0.5 us).
    """
    if len(dims) != 2:
        raise InputError("dims", f"expected two switch sizes, got {dims}")
    unwind = list(unwind) if unwind is not None else [max(dims[0] - 1, 0), 1 if dims[1] > 1 else 0]
    return _hierarchy(["switch", "switch"], list(dims), list(bandwidths), alpha, unwind,
                      f"switch_switch-{dims[0]}x{dims[1]}")


def class_counts(topology: Topology) -> dict[str, int]:
    """Live directed links per ``link_class`` (for tests and summaries).

    >>> from collsynth.instances.generators import build
    >>> class_counts(build("ndv2", {"chassis": 1}))
    {'nvlink_x1': 16, 'nvlink_x2': 16}
    """
    out: dict[str, int] = {}
    for _, _, cls in topology.graph.edges(data="link_class"):
        out[cls] = out.get(cls, 0) + 1
    return dict(sorted(out.items()))


__all__ = ["ndv2", "dgx2", "dgx_a100", "dgx_h100", "mi250", "forestcoll_a100", "forestcoll_mi250", "ring_fc_switch", "ring_ring", "switch_switch",
           "class_counts", "link_class", "class_edge", "switch_group", "box_switches", "classed_topology", "CUBE_MESH",
           "MI250_XGMI"]
