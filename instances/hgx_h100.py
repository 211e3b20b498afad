"""HGX H100 boxes with 1, 2, 4 or 8 NICs: GPUs sharing a NIC through a PCIe switch.

The 8-GPU HGX H100 board puts its GPUs behind NVSwitch and reaches the network through PCIe:
each GPU's host interface is PCIe Gen5 x16 (NVIDIA H100 Tensor Core GPU datasheet: 128 GB/s
bidirectional, so 64 GB/s per direction), and the NICs sit on the board's PCIe switches beside
the GPUs. How many NICs a box carries is the vendor's or the cloud's choice: NVIDIA DGX H100
fits eight ConnectX-7 NDR 400 Gb/s, one per GPU (DGX H100 datasheet; the DGX H100 user guide's
network-module table maps every ConnectX-7 port to one GPU); Google Cloud's A3 High
(``a3-highgpu-8g``) fits four GPU NICs, one per pair of GPUs on a PCIe switch (four NIC
networks beside the host's in GoogleCloudPlatform/container-engine-accelerators
``gpudirect-tcpx/nccl-test-latest.yaml``); servers with one or two NICs share each among four or
eight GPUs. ForestColl (Zhao et al., arXiv 2402.06787, Section 6; liangyuRain/ForestColl
``topologies.py``) has no H100 model: its ``a100_topology`` keeps each NIC as a node
(``mlx5``) between its GPU and the InfiniBand switches, and this generator follows that model,
with the NIC shared by the GPUs of its PCIe switch and kept as two nodes, one a direction (its
sending side takes the GPUs' PCIe links in and its port to the rail out, its receiving side the
reverse): the NIC carries what crosses boxes, not traffic between two of its GPUs, which
NVLink carries (PCIe peer-to-peer between GPUs of one switch is left out; NCCL ranks NVLink
paths above PCIe ones). One node would let a route run GPU -> NIC -> GPU on the PCIe links the
box's outbound and inbound data need, and under first-come-first-served links such relays wait
behind them (two boxes with two NICs each: 1.087x the optimum under ``event`` with one node).

>>> from collsynth.instances.generators import build
>>> t = build("hgx_h100", {"nodes": 2, "nics": 4})
>>> len(t.npus), len(t.switches), t.num_links
(16, 22, 80)
"""

from __future__ import annotations

from .. import InputError
from .registry import generator
from .systems import FORESTCOLL, NCCL_LAT, box_switches, class_edge, classed_topology, link_class
from .topology import Topology

NIC_COUNTS = (1, 2, 4, 8)  # the counts that split the 8 GPUs evenly among the NICs
PCIE = "NVIDIA H100 Tensor Core GPU datasheet (SXM5: PCIe Gen5, 128 GB/s bidirectional)"
NCCL_PCI_LAT = "NCCL src/graph/tuning.cc hwLat, PCI, Ring/LL per-hop latency"


def _size(p: dict) -> tuple[int, int, str]:
    """Node ids and directed links of :func:`hgx_h100` (module doc's layout) from its parameters."""
    n, nics = p.get("nodes", 2), p.get("nics", 8)
    if n == 1:
        return 9, 16, "nodes"
    if nics == 8:  # no NIC nodes: each GPU on its rail
        return 9 * n + 8, 32 * n, "nodes"
    return 9 * n + 2 * nics * n + nics, 32 * n + 2 * nics * n, "nodes"


@generator(size=_size)
def hgx_h100(nodes: int = 2, nics: int = 8, nvlink_bandwidth: float = 450e9, nvlink_alpha: float = 0.47e-6,
             pcie_bandwidth: float = 64e9, pcie_alpha: float = 1.0e-6, nic_bandwidth: float = 50e9,
             nic_alpha: float = 2.7e-6) -> Topology:
    """HGX H100 boxes of 8 GPUs behind NVSwitch with ``nics`` NICs each, on rail-optimised leaves.

    nodes: >= 1; GPU g of box b has id 8b + g. NVSwitch (class ``nvswitch``): 18 NVLink4 per
    GPU, 900 GB/s bidirectional (DGX H100 datasheet), nvlink_bandwidth 450 GB/s per direction,
    nvlink_alpha 0.47 us (NCCL tuning.cc hwLat, NVLink, Ring/LL). nics: 1, 2, 4 or 8; NIC k of
    a box is shared by GPUs 8k/nics .. 8(k+1)/nics - 1 (the GPUs of one PCIe switch, or of one
    CPU socket's switches), each linked each way to it at pcie_bandwidth 64 GB/s (class
    ``pcie``: PCIe Gen5 x16, H100 datasheet; pcie_alpha 1.0 us, NCCL hwLat, PCI, Ring/LL), its
    GPUs into its sending side, its receiving side out to them (module doc). NIC k links each
    way to leaf switch k (rail k, the DGX SuperPOD's rail-optimised fabric)
    at nic_bandwidth 50 GB/s (class ``rail``: ConnectX-7 NDR 400 Gb/s, DGX H100 datasheet;
    nic_alpha 2.7 us, NCCL hwLat, network, Ring/LL). As ForestColl's ``a100_topology``, a box
    alone has no NICs. Ids after the GPUs: the NVSwitches (one per box), then the NICs' sending
    sides (9 nodes + nics * b + k), their receiving sides (the same + nics * nodes), then the
    rails. With 8 NICs a NIC serves one GPU and is no node: nothing else enters or leaves it, so
    the GPU links each way to its rail directly (class ``rail``) at the lesser of the two
    bandwidths with the two alphas added, the same cuts as the NIC's (``dgx_h100``'s wiring with
    these figures; pass-through nodes would only hide from the box model,
    :mod:`collsynth.solvers.packing.boxes`, that the rails join GPUs).

    One box pair with two NICs each, every count written out:

    >>> from collsynth.instances.generators import build
    >>> t = build("hgx_h100", {"nodes": 2, "nics": 2})
    >>> sorted(t.switches)  # 2 NVSwitches, 4 NICs' sending and receiving sides, 2 rails
    [16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27]
    >>> from collsynth.instances.systems import class_counts
    >>> class_counts(t)  # 16 GPUs x 2 ways on NVSwitch and on PCIe, 4 NICs x 2 ways to a rail
    {'nvswitch': 32, 'pcie': 32, 'rail': 8}
    """
    if nodes < 1:
        raise InputError("nodes", f"expected an integer in 1..inf, got {nodes}")
    if nics not in NIC_COUNTS:
        raise InputError("nics", f"expected one of {', '.join(map(str, NIC_COUNTS))} (NICs a box, each "
                                 f"shared by 8 / nics GPUs), got {nics}")
    classes = {
        "nvswitch": link_class(nvlink_bandwidth, nvlink_alpha, "NVIDIA DGX H100 datasheet (NVLink4, 900 GB/s per GPU bidirectional); " + NCCL_LAT),
        "pcie": link_class(pcie_bandwidth, pcie_alpha, f"{PCIE}; {NCCL_PCI_LAT}"),
        "rail": link_class(nic_bandwidth, nic_alpha, "NVIDIA DGX H100 datasheet (ConnectX-7 400 Gb/s); DGX SuperPOD rail-optimised fabric; "
                           f"{FORESTCOLL} (a NIC node between GPUs and switches); " + NCCL_LAT),
    }
    gpus = 8 * nodes
    edges, switches = box_switches(nodes, classes)
    if nodes > 1:
        e, s = (_own_nics if nics == 8 else _shared_nics)(nodes, nics, classes)
        edges += e
        switches += s
    return classed_topology(gpus + len(switches), edges, switches, f"hgx_h100x{nodes}-nics{nics}", classes,
                            gpus_per_node=8)


def _own_nics(nodes: int, nics: int, classes: dict) -> tuple[list, list]:
    """Each GPU on its rail (a NIC of one GPU, no node): links at the lesser of the PCIe and
    NIC bandwidths, alphas added; ``classes["rail"]`` becomes that class, ``"pcie"`` goes."""
    gpus, rail0 = 8 * nodes, 9 * nodes
    pcie, rail = classes.pop("pcie"), classes["rail"]
    classes["rail"] = link_class(min(pcie["bandwidth"], rail["bandwidth"]), pcie["alpha"] + rail["alpha"],
                                 f"{pcie['source']}; {rail['source']}")
    edges = [e for g in range(gpus) for e in (class_edge(g, rail0 + g % 8, classes, "rail"),
                                              class_edge(rail0 + g % 8, g, classes, "rail"))]
    return edges, list(range(rail0, rail0 + nics))


def _shared_nics(nodes: int, nics: int, classes: dict) -> tuple[list, list]:
    """NIC k of each box as its sending side (its GPUs' PCIe links in, the rail out) and its
    receiving side (the rail in, PCIe out to its GPUs), on rail k; ids as :func:`hgx_h100` says."""
    share, tx0 = 8 // nics, 9 * nodes
    rx0, rail0 = tx0 + nics * nodes, tx0 + 2 * nics * nodes
    edges = []
    for b in range(nodes):
        for k in range(nics):
            tx, rx, rail = tx0 + nics * b + k, rx0 + nics * b + k, rail0 + k
            for g in range(8 * b + share * k, 8 * b + share * (k + 1)):
                edges += [class_edge(g, tx, classes, "pcie"), class_edge(rx, g, classes, "pcie")]
            edges += [class_edge(tx, rail, classes, "rail"), class_edge(rail, rx, classes, "rail")]
    return edges, list(range(tx0, rail0 + nics))


__all__ = ["hgx_h100", "NIC_COUNTS"]
