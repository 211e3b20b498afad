"""Routes the runtime model gives P2P sends (``tens/runtime_program.py`` ``endpoint_links``):
between two GCDs of an MI250 box that no xGMI link joins, over the xGMI links of the GCDs
between them (RCCL connects them with P2P/IPC and the GCDs' xGMI hive carries the writes), not
through the NIC; checked by hand on ``MI250_XGMI`` (TE-CCL / ForestColl's matrix)."""

from __future__ import annotations

import numpy as np

from collsynth.instances import make_instance
from collsynth.instances.generators import build
from collsynth.tens.runtime_program import endpoint_links, link_classes


def _route(inst, u, v):
    first, hop_send, hop_link = endpoint_links(np.array([u]), np.array([v]), inst)
    la = inst.topology.link_arrays
    assert hop_send.tolist() == [0] * len(hop_link) and first[0] == hop_link[0]
    return [(int(la.src[k]), int(la.dst[k])) for k in hop_link], link_classes(inst)[hop_link].tolist()


def test_gcds_without_an_xgmi_link_route_over_xgmi():
    inst = make_instance(build("forestcoll_mi250", {"nodes": 2}), "allgather", message_bytes=1 << 20)
    # 0 -> 5: two 2-hop paths, 0 -> 1 -> 5 (x4 then x1: 50 GB/s) and 0 -> 4 -> 5 (x2 then x4:
    # 100 GB/s); the wider is taken
    assert _route(inst, 0, 5) == ([(0, 4), (4, 5)], ["xgmi_x2", "xgmi_x4"])
    # 0 -> 2: 0's neighbours {1, 4, 8} and 2's {3, 6, 9, 10} share none, so 3 single-link-wide hops
    links, classes = _route(inst, 0, 2)
    assert len(links) == 3 and links[0][0] == 0 and links[-1][1] == 2
    assert all(b == c for (_, b), (c, _) in zip(links, links[1:])) and all(x < 16 for link in links for x in link)
    assert "nic" not in classes
    # a direct link is the route; between boxes the NIC switch (id 32) as before
    assert _route(inst, 0, 1) == ([(0, 1)], ["xgmi_x4"])
    assert _route(inst, 0, 16) == ([(0, 32), (32, 16)], ["nic", "nic"])


def test_nvswitch_boxes_keep_their_switch_route():
    """A100 boxes have no GPU-to-GPU links: two GPUs of a box go through their NVSwitch (id 16)."""
    inst = make_instance(build("forestcoll_a100", {"nodes": 2}), "allgather", message_bytes=1 << 20)
    assert _route(inst, 0, 3) == ([(0, 16), (16, 3)], ["nvswitch", "nvswitch"])


def test_gcds_sharing_a_nic_route_through_its_fabric_port():
    """``mi250 nodes=2`` (TE-CCL's topology): GCDs 2k and 2k+1 share NIC switch k (id 32 + k in
    box 0, 40 + k in box 1), the NICs hang off one fabric switch (id 48). GCD 0 to GCD 17 (box 1's
    GCD 1): 0 -> NIC 32 -> fabric 48 -> NIC 40 -> 17, four `nic` links; GCD 1 to GCD 16 loads the
    same NIC-to-fabric link 32 -> 48."""
    inst = make_instance(build("mi250", {"nodes": 2}), "allgather", message_bytes=1 << 20)
    assert _route(inst, 0, 17) == ([(0, 32), (32, 48), (48, 40), (40, 17)], ["nic"] * 4)
    assert _route(inst, 1, 16)[0][1] == (32, 48)
    assert _route(inst, 0, 5)[0] == [(0, 4), (4, 5)]  # in the box over xGMI, as on ForestColl's topology
