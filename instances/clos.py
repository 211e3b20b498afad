"""Multi-tier Clos fabrics as clusters are built: rail-optimised leaves, spines, cores, planes.

One mechanism, :func:`rail_clos`, builds every fabric here; :func:`fat_tree` and :func:`hpn`
are that mechanism with the parameters of their papers. The hierarchy, bottom up:

- a **box** of ``gpus_per_box`` GPUs behind its in-box switch (NVSwitch; none with one GPU);
- a **group** (NVIDIA's scalable unit, HPN's segment, a fat tree's edge switch) of
  ``boxes_per_group`` boxes: GPU g of every box of the group has one NIC port per plane on the
  group's leaf of rail ``g % rails`` in that plane (rail-optimised: same-index GPUs share a
  leaf);
- a **pod** of ``groups_per_pod`` groups whose leaves all reach the pod's ``spines`` spines
  (per plane); with one pod this is the two-tier Clos;
- ``pods`` pods joined by ``cores`` core switches (per plane) in ``spines`` core groups: spine
  s of every pod reaches every core of group s (Al-Fares et al.'s core wiring); the third tier.

A leaf's uplinks are as many ports as its GPU ports' bandwidth divided by the tier-1
``oversubscription`` needs (rounded up: the realised ratio is at most the one asked for),
spread evenly over the pod's spines; a spine's uplinks likewise with the tier-2 ratio over
its core group. ``radix`` counts a switch's ports at ``fabric_bandwidth`` (a GPU port of lower
speed takes its share of one: HPN's 200 Gb/s down-links on 400 Gb/s ports). The parallel
cables between two switches are one directed link each way carrying their summed bandwidth;
``meta["cables"]`` keeps the cable counts the cited descriptions list, ``meta["switch_counts"]``
the switch counts per tier and ``meta["bisection_bandwidth"]`` (bytes/s, one direction) what
crosses the cut between two halves of the cluster (halves of the pods, else of the groups,
else of the boxes; a box is never split).

Node ids: GPU g of box b of group q of pod p is ``((p * groups_per_pod + q) * boxes_per_group
+ b) * gpus_per_box + g``; after the GPUs, the in-box switches, then per plane the leaves
(pod, group, rail), the spines (pod, spine), the cores (group, core).

>>> from collsynth.instances.generators import build
>>> t = build("rail_clos", {})
>>> len(t.npus), t.meta["switch_counts"], t.meta["cables"]["leaf_spine"]
(1024, {'box': 128, 'leaf': 32, 'spine': 16, 'core': 0}, 1024)

References
----------
NVIDIA, "DGX SuperPOD: Next Generation Scalable Infrastructure for AI Leadership, Reference
Architecture featuring DGX H100 Systems", RA-11333-001, 2023 (scalable units of 32 DGX H100,
one QM9700 64-port NDR leaf per rail, two tiers to 4 SUs, three tiers beyond; its Table of
larger SuperPOD component counts).
M. Al-Fares, A. Loukissas, A. Vahdat, "A Scalable, Commodity Data Center Network
Architecture", SIGCOMM 2008, Section 3 (the k-ary fat tree).
K. Qian et al., "Alibaba HPN: A Data Center Network for Large Language Model Training",
SIGCOMM 2024, Sections 4-5 (rail-optimised segments, dual plane, tier-2 oversubscription).
A. Gangidi et al., "RDMA over Ethernet for Distributed AI Training at Meta Scale", SIGCOMM
2024, Section 3 (the AI zone: rack switches under a non-blocking spine, an oversubscribed
aggregation tier above zones).
"""

from __future__ import annotations

import inspect
import math

from .. import InputError
from .registry import generator
from .switch_ops import with_switch_ops
from .systems import NCCL_LAT, class_edge, classed_topology, link_class
from .topology import Topology

SUPERPOD = "NVIDIA DGX SuperPOD reference architecture, DGX H100 (RA-11333-001)"
HPN = "Qian et al., Alibaba HPN, SIGCOMM 2024"
FAT_TREE = "Al-Fares et al., SIGCOMM 2008, Section 3"
TIERS = ("leaf", "spine")  # the tiers an oversubscription ratio is given for, bottom up


# ---- the plan: counts from the parameters alone --------------------------------------------

def _defaults() -> dict:
    sig = inspect.signature(rail_clos)
    return {k: p.default for k, p in sig.parameters.items()}


def clos_plan(p: dict) -> dict:
    """Every count of a :func:`rail_clos` fabric from its parameters, checked, before any
    link exists: switches per tier, ports and uplinks per switch, links per switch pair.

    Raises :class:`collsynth.InputError` naming the parameter when a switch's radix cannot hold
    its ports, an oversubscription is below 1, or uplinks do not spread evenly.

    >>> plan = clos_plan({"pods": 1, "groups_per_pod": 2, "boxes_per_group": 4, "spines": 2,
    ...                   "radix": 64})
    >>> plan["gpus"], plan["leaf_up"], plan["leaf_to_spine"], plan["leaves"]
    (64, 4, 2, 16)
    """
    p = {**_defaults(), **p}
    for key in ("gpus_per_box", "rails", "boxes_per_group", "groups_per_pod", "pods", "planes", "spines", "radix"):
        if int(p[key]) < 1:
            raise InputError(key, f"expected an integer >= 1, got {p[key]}")
    if p["gpus_per_box"] % p["rails"]:
        raise InputError("rails", f"expected a divisor of gpus_per_box = {p['gpus_per_box']}, got {p['rails']}")
    ratios = list(p["oversubscription"])
    if len(ratios) != len(TIERS) or any(not (r >= 1 and math.isfinite(r)) for r in ratios):
        raise InputError("oversubscription", f"expected {len(TIERS)} ratios (down / up bandwidth at the "
                         f"{' and '.join(TIERS)} tiers), each >= 1, got {ratios}")
    nic, fabric = float(p["nic_bandwidth"]), float(p["fabric_bandwidth"] or p["nic_bandwidth"])
    leaf_down = p["boxes_per_group"] * p["gpus_per_box"] // p["rails"]
    leaf_up = _uplinks(leaf_down * nic, ratios[0], fabric) if p["groups_per_pod"] * p["pods"] > 1 else 0
    leaf_to_spine = _spread(leaf_up, p["spines"], "spines", "leaf")
    _fits(leaf_down * nic / fabric + leaf_up, p["radix"], "boxes_per_group",
          f"a leaf holds {leaf_down} GPU ports and {leaf_up} uplinks", "raise radix or lower boxes_per_group")
    spine_down = p["groups_per_pod"] * p["rails"] * leaf_to_spine if leaf_up else 0
    spine_up, cores = 0, int(p["cores"])
    if p["pods"] > 1:
        if cores < 1 or cores % p["spines"]:
            raise InputError("cores", f"expected a multiple of spines = {p['spines']} (one core group per spine) "
                             f"with pods > 1, got {cores}")
        spine_up = _uplinks(spine_down * fabric, ratios[1], fabric)
    spine_to_core = _spread(spine_up, cores // p["spines"], "cores", "spine") if spine_up else 0
    _fits(spine_down + spine_up, p["radix"], "spines", f"a spine holds {spine_down} down-links and {spine_up} uplinks",
          "raise spines or radix")
    _fits(p["pods"] * spine_to_core, p["radix"], "cores", f"a core holds {p['pods'] * spine_to_core} down-links",
          "raise cores or radix")
    gpus = p["pods"] * p["groups_per_pod"] * p["boxes_per_group"] * p["gpus_per_box"]
    leaves = p["planes"] * p["pods"] * p["groups_per_pod"] * p["rails"]
    return {**p, "gpus": gpus, "boxes": gpus // p["gpus_per_box"], "nic": nic, "fabric": fabric,
            "leaf_down": leaf_down, "leaf_up": leaf_up, "leaf_to_spine": leaf_to_spine,
            "spine_down": spine_down, "spine_up": spine_up, "spine_to_core": spine_to_core, "leaves": leaves,
            "spine_count": p["planes"] * p["pods"] * p["spines"] if leaf_up else 0,
            "core_count": p["planes"] * cores if spine_up else 0}


def _uplinks(down_bandwidth: float, ratio: float, fabric: float) -> int:
    """Uplink ports for ``down_bandwidth`` at oversubscription ``ratio`` (rounded up)."""
    return max(1, math.ceil(down_bandwidth / (ratio * fabric) - 1e-9))


def _spread(uplinks: int, targets: int, field: str, tier: str) -> int:
    if uplinks % targets:
        raise InputError(field, f"expected a divisor of the {uplinks} uplinks of a {tier} (they spread evenly), got {targets}")
    return uplinks // targets


def _fits(used: float, radix: int, field: str, what: str, remedy: str) -> None:
    if used > radix + 1e-9:
        raise InputError(field, f"{what}: more than its radix of {radix} ports allows ({remedy})")


def _size(p: dict) -> tuple[int, int, str]:
    """The registry's size formula: node ids and directed links of :func:`rail_clos`
    (parameters it refuses count as nothing here: the generator then says what is wrong)."""
    try:
        plan = clos_plan(p)
    except InputError:
        return 0, 0, "pods"
    box = plan["boxes"] if plan["gpus_per_box"] > 1 else 0
    nodes = plan["gpus"] + box + plan["leaves"] + plan["spine_count"] + plan["core_count"]
    links = 2 * (plan["gpus"] * (plan["planes"] + (1 if box else 0)) + plan["leaves"] * plan["spines"]
                 + plan["spine_count"] * max(1, plan["cores"] // plan["spines"]))
    return nodes, links, "pods" if plan["pods"] > 1 else "groups_per_pod"


# ---- the generators ------------------------------------------------------------------------

@generator(size=_size)
def rail_clos(pods: int = 1, groups_per_pod: int = 4, boxes_per_group: int = 32, gpus_per_box: int = 8,
              rails: int = 8, planes: int = 1, spines: int = 16, cores: int = 0, radix: int = 64,
              oversubscription: list[float] = [1.0, 1.0], nvlink_bandwidth: float = 450e9,
              nvlink_alpha: float = 0.47e-6, nic_bandwidth: float = 50e9, nic_alpha: float = 2.7e-6,
              fabric_bandwidth: float = 0.0, fabric_copy: bool = True) -> Topology:
    """A rail-optimised two- or three-tier Clos of GPU boxes (the module docstring's hierarchy).

    Defaults: NVIDIA's DGX SuperPOD with DGX H100, 4 scalable units (RA-11333-001): 32 boxes
    per SU of 8 H100 behind NVSwitch (nvlink_bandwidth 450 GB/s per direction, DGX H100
    datasheet), 8 rails, one 400 Gb/s ConnectX-7 per GPU (nic_bandwidth 50 GB/s), QM9700
    leaves and spines of radix 64, 1:1 at both tiers: 32 leaves, 16 spines, 1,024 node-leaf
    and 1,024 leaf-spine cables. Its 16-SU, three-tier configuration (4,096 GPUs; 128 leaves,
    128 spines, 64 cores, 4,096 cables per tier) is ``pods=16 groups_per_pod=1 spines=8
    cores=64``. Meta's AI zone (Gangidi et al., SIGCOMM'24, Section 3: a rack switch serving
    the GPUs of its rack, a non-blocking spine) is ``rails=1 boxes_per_group=2``.
    fabric_bandwidth: bytes/s of a switch-to-switch port (0: nic_bandwidth). Alphas: NCCL
    tuning.cc hwLat (Ring/LL: NVLink 0.47 us, network 2.7 us), charged per link.
    fabric_copy: false declares the leaves, spines and cores to forward each arrival once
    (``copy = false``, :mod:`collsynth.instances.switch_ops`): InfiniBand and RoCE reliable
    connections, NCCL's transport, are point to point, multicast being a datagram service
    only (NVIDIA, "RDMA Aware Networks Programming User Manual", v1.7, "Transport Modes");
    true (default) leaves it to the schedule (``switch_copy``), as TE-CCL does.
    """
    plan = clos_plan({k: v for k, v in locals().items() if k != "fabric_copy"})
    classes = {
        "nvswitch": link_class(nvlink_bandwidth, nvlink_alpha, f"DGX H100 datasheet (NVLink4); {NCCL_LAT}"),
        "nic": link_class(plan["nic"], nic_alpha, f"{SUPERPOD}; {NCCL_LAT}"),
        "fabric": link_class(plan["fabric"], nic_alpha, f"{SUPERPOD}; {NCCL_LAT}"),
    }
    return _build(plan, classes, f"rail_clos-{plan['gpus']}", fabric_copy)


def _build(plan: dict, classes: dict, name: str, fabric_copy: bool = True) -> Topology:
    """The links and switches of ``plan`` (:func:`clos_plan`); the fabric's switches (leaves,
    spines, cores) declared to copy nothing unless ``fabric_copy``."""
    g, gpus, boxes = plan["gpus_per_box"], plan["gpus"], plan["boxes"]
    edges = []
    next_id = gpus
    if g > 1:
        for box in range(boxes):
            edges += _both(range(box * g, box * g + g), next_id + box, classes, "nvswitch")
        next_id += boxes
    per_plane = plan["leaves"] // plan["planes"]
    groups = plan["pods"] * plan["groups_per_pod"]
    spines_per_plane, cores_per_plane = plan["spine_count"] // plan["planes"], plan["core_count"] // plan["planes"]
    for plane in range(plan["planes"]):
        leaf0, spine0 = next_id, next_id + per_plane
        core0 = spine0 + spines_per_plane
        for group in range(groups):
            for gpu in range(group * plan["boxes_per_group"] * g, (group + 1) * plan["boxes_per_group"] * g):
                edges += _both([gpu], leaf0 + group * plan["rails"] + gpu % g % plan["rails"], classes, "nic")
        edges += _tier_links(plan, leaf0, spine0, core0, classes)
        next_id = core0 + cores_per_plane
    switches = range(gpus, next_id)
    counts = {"box": boxes if g > 1 else 0, "leaf": plan["leaves"], "spine": plan["spine_count"], "core": plan["core_count"]}
    cables = {"gpu_leaf": gpus * plan["planes"], "leaf_spine": plan["leaves"] * plan["leaf_up"],
              "spine_core": plan["spine_count"] * plan["spine_up"]}
    topo = classed_topology(next_id, edges, list(switches), name, classes, gpus_per_node=g, switch_counts=counts,
                            cables=cables, bisection_bandwidth=bisection_bandwidth(plan))
    return topo if fabric_copy else with_switch_ops(topo, no_copy=range(gpus + counts["box"], next_id))


def _tier_links(plan: dict, leaf0: int, spine0: int, core0: int, classes: dict) -> list:
    """One plane's leaf-spine and spine-core links (parallel cables summed into one link)."""
    edges = []
    rails, spines = plan["rails"], plan["spines"]
    if plan["leaf_to_spine"]:
        for pod in range(plan["pods"]):
            for leaf in range(pod * plan["groups_per_pod"] * rails, (pod + 1) * plan["groups_per_pod"] * rails):
                for s in range(spines):
                    edges += _both([leaf0 + leaf], spine0 + pod * spines + s, classes, "fabric", plan["leaf_to_spine"])
    if plan["spine_to_core"]:
        per_group = plan["cores"] // spines
        for pod in range(plan["pods"]):
            for s in range(spines):
                for c in range(per_group):
                    edges += _both([spine0 + pod * spines + s], core0 + s * per_group + c, classes, "fabric",
                                   plan["spine_to_core"])
    return edges


def _both(members, switch: int, classes: dict, cls: str, cables: int = 1) -> list:
    """A link each way between every member and ``switch``, ``cables`` ports wide."""
    return [e for m in members for e in (class_edge(m, switch, classes, cls, cables), class_edge(switch, m, classes, cls, cables))]


def bisection_bandwidth(plan: dict) -> float:
    """Bytes/s (one direction) across the cut between two halves of a :func:`clos_plan`
    fabric: halves of the pods (through the cores), else of the groups (through the spines),
    else of the boxes (through the leaves); the least capacity of a tier on the way up from
    one half. Zero when the cluster is one box.

    >>> bisection_bandwidth(clos_plan({}))  # SuperPOD 4 SU: 512 GPUs x 50 GB/s, 1:1
    25600000000000.0
    """
    half_gpus = plan["gpus"] // 2
    nic_up = half_gpus * plan["planes"] * plan["nic"]
    if plan["boxes"] < 2:
        return 0.0
    if plan["pods"] > 1:
        return min(nic_up, plan["leaf_up"] * plan["fabric"] * plan["leaves"] / 2,
                   plan["spine_up"] * plan["fabric"] * plan["spine_count"] / 2)
    if plan["groups_per_pod"] > 1:
        return min(nic_up, plan["leaf_up"] * plan["fabric"] * plan["leaves"] / 2)
    return nic_up


@generator(size=lambda p: (*_size(_fat_tree_params(p.get("k", 4), 0.0, 0.0))[:2], "k"))
def fat_tree(k: int = 4, link_bandwidth: float = 50e9, link_alpha: float = 2.7e-6, fabric_copy: bool = True) -> Topology:
    """Al-Fares et al.'s k-ary fat tree (SIGCOMM'08, Section 3): k^3/4 hosts (one GPU each).

    k even, >= 2: k pods of k/2 edge and k/2 aggregation switches, (k/2)^2 cores, every switch
    of radix k; edge switch e of a pod serves k/2 hosts and reaches every aggregation switch of
    its pod; aggregation switch j reaches the k/2 cores of core group j. Every link
    link_bandwidth (default one 400 Gb/s port) and link_alpha (NCCL hwLat, network, Ring/LL).
    The :func:`rail_clos` with pods = k, groups_per_pod = boxes_per_group = spines = k/2,
    cores = (k/2)^2, one GPU per box, one rail; fabric_copy as there.
    """
    if k < 2 or k % 2:
        raise InputError("k", f"expected an even integer >= 2, got {k}")
    plan = clos_plan(_fat_tree_params(k, link_bandwidth, link_alpha))
    link = link_class(link_bandwidth, link_alpha, f"{FAT_TREE}; {NCCL_LAT}")
    return _build(plan, {"nic": link, "fabric": link}, f"fat_tree-{k}", fabric_copy)


def _fat_tree_params(k: int, bandwidth: float, alpha: float) -> dict:
    half = max(k // 2, 1)
    return {"pods": k, "groups_per_pod": half, "boxes_per_group": half, "gpus_per_box": 1, "rails": 1,
            "spines": half, "cores": half * half, "radix": k, "nic_bandwidth": bandwidth or 1.0, "nic_alpha": alpha}


@generator(size=lambda p: (*_size(_hpn_params({**_hpn_defaults(), **p}))[:2],
                           "pods" if p.get("pods", 1) > 1 else "segments"))
def hpn(segments: int = 15, hosts_per_segment: int = 128, pods: int = 1, aggregations: int = 60,
        cores: int = 0, nvlink_bandwidth: float = 450e9, nvlink_alpha: float = 0.47e-6,
        port_bandwidth: float = 25e9, fabric_bandwidth: float = 50e9, nic_alpha: float = 2.7e-6,
        oversubscription: list[float] = [1.067, 15.0], fabric_copy: bool = True) -> Topology:
    """Alibaba HPN (Qian et al., SIGCOMM'24, Sections 4-5): rail-optimised, dual-plane, two tiers per pod.

    Hosts of 8 GPUs behind NVSwitch; each GPU's NIC has two 200 Gb/s ports (port_bandwidth
    25 GB/s), port p on the ToR of its rail in plane p of its segment (dual-ToR, dual-plane):
    hosts_per_segment 128 hosts (1,024 GPUs) per segment, segments 15 per pod (15K GPUs).
    A ToR (51.2 Tb/s, 128 ports of 400 Gb/s: fabric_bandwidth 50 GB/s, radix 128) has 128
    200 Gb/s down-links and 60 400 Gb/s uplinks, one to each of the plane's aggregations
    aggregation switches (1.067:1, the first oversubscription); with pods > 1 an aggregation
    switch has 8 uplinks to the plane's cores cores (15:1, the second). NVLink and alphas as
    :func:`rail_clos`, and fabric_copy. The :func:`rail_clos` with planes = 2.
    """
    plan = clos_plan(_hpn_params(dict(locals())))
    classes = {
        "nvswitch": link_class(nvlink_bandwidth, nvlink_alpha, f"DGX H100 datasheet (NVLink4); {NCCL_LAT}"),
        "nic": link_class(port_bandwidth, nic_alpha, f"{HPN}; {NCCL_LAT}"),
        "fabric": link_class(fabric_bandwidth, nic_alpha, f"{HPN}; {NCCL_LAT}"),
    }
    return _build(plan, classes, f"hpn-{plan['gpus']}", fabric_copy)


def _hpn_defaults() -> dict:
    return {k: p.default for k, p in inspect.signature(hpn).parameters.items()}


def _hpn_params(p: dict) -> dict:
    return {"pods": p["pods"], "groups_per_pod": p["segments"], "boxes_per_group": p["hosts_per_segment"],
            "gpus_per_box": 8, "rails": 8, "planes": 2, "spines": p["aggregations"], "cores": p["cores"],
            "radix": 128, "oversubscription": p["oversubscription"], "nvlink_bandwidth": p["nvlink_bandwidth"],
            "nic_bandwidth": p["port_bandwidth"], "fabric_bandwidth": p["fabric_bandwidth"]}
