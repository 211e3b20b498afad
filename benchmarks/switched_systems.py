"""The switched multi-box GPU systems the tree-packing, all-to-all and switch-reduction
benchmarks share, each as (label, generator, parameters) at alpha 0: bandwidth only, the link
model of L. Zhao et al., "ForestColl: Throughput-Optimal Collective Communications on
Heterogeneous Network Fabrics" (arXiv 2402.06787), Section 6.

>>> [s[0] for s in systems("A100 x2", "DGX-H100 x2")]
['A100 x2', 'DGX-H100 x2']
>>> systems("H100 4-NIC x2")[0][2]["nics"]  # HGX H100, 4 NICs a box (instances/hgx_h100.py)
4
"""

from __future__ import annotations

_ALPHA0 = {  # each generator's latency parameters, all set to 0
    "forestcoll_a100": {"nvlink_alpha": 0.0, "nic_alpha": 0.0},
    "forestcoll_mi250": {"xgmi_alpha": 0.0, "nic_alpha": 0.0},
    "dgx_h100": {"nvlink_alpha": 0.0, "nic_alpha": 0.0},
    "dgx2": {"nvswitch_alpha": 0.0, "nic_alpha": 0.0},
    "hgx_h100": {"nvlink_alpha": 0.0, "pcie_alpha": 0.0, "nic_alpha": 0.0},
}
_BOXES = {"A100": ("forestcoll_a100", "nodes"), "MI250": ("forestcoll_mi250", "nodes"),
          "DGX-H100": ("dgx_h100", "nodes"), "DGX-2": ("dgx2", "chassis"),
          **{f"H100 {n}-NIC": ("hgx_h100", "nodes", {"nics": n}) for n in (1, 2, 4, 8)}}


def systems(*labels: str) -> list[tuple[str, str, dict]]:
    """(label, generator, parameters) of each ``"<system> x<boxes>"`` label, at alpha 0."""
    out = []
    for label in labels:
        name, boxes = label.rsplit(" x", 1)
        generator, field, *fixed = _BOXES[name]
        out.append((label, generator, {field: int(boxes), **(fixed[0] if fixed else {}), **_ALPHA0[generator]}))
    return out
