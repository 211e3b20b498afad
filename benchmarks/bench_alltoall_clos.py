"""All-to-all (``flow-alltoall``) on rail-optimised Clos fabrics against the instance's bound, 1 GB at alpha 0.

Run: ``python benchmarks/bench_alltoall_clos.py`` (``--only LABEL`` for one row, ``--time-limit S``
per row). Each row runs in its own process through the normal pipeline (verified, then priced)
and prints the columns of ``bench_alltoall.py``: the bound under the sync model and its
source, the largest cut, our time under the sync and event models and their ratios to the
bound, generation seconds, sends and peak memory. The fabrics are :func:`rail_clos` at 64 to
256 GPUs, 1:1 and 2:1 at the leaf tier (``over`` in the label), beside ``dgx_h100`` with one
switch per rail at 16 and 32 boxes.
"""

from __future__ import annotations

import argparse

from bench_alltoall import _row, table
from fresh_process import each_in_a_fresh_process

SMALL = {"pods": 1, "gpus_per_box": 8, "rails": 8}
ROWS = [
    ("rail_clos 64", "rail_clos", {**SMALL, "groups_per_pod": 2, "boxes_per_group": 4, "spines": 2}),
    ("rail_clos 64 over 2:1", "rail_clos", {**SMALL, "groups_per_pod": 2, "boxes_per_group": 4, "spines": 2,
                                            "oversubscription": [2.0, 1.0]}),
    ("rail_clos 128", "rail_clos", {**SMALL, "groups_per_pod": 2, "boxes_per_group": 8, "spines": 4}),
    ("rail_clos 128 over 2:1", "rail_clos", {**SMALL, "groups_per_pod": 2, "boxes_per_group": 8, "spines": 4,
                                             "oversubscription": [2.0, 1.0]}),
    ("rail_clos 256", "rail_clos", {**SMALL, "groups_per_pod": 4, "boxes_per_group": 8, "spines": 4}),
    ("rail_clos 256 over 2:1", "rail_clos", {**SMALL, "groups_per_pod": 4, "boxes_per_group": 8, "spines": 4,
                                             "oversubscription": [2.0, 1.0]}),
    ("dgx_h100 16", "dgx_h100", {"nodes": 16}),
    ("dgx_h100 32", "dgx_h100", {"nodes": 32}),
]


def main(only: str | None = None) -> list[dict]:
    """Every row (or the one labelled ``only``), each in a fresh process; prints the table."""
    rows = each_in_a_fresh_process(_row, [spec for spec in ROWS if not only or spec[0] == only],
                                   lambda r: f"{r['system']}: {r['status']} {r['message'] or ''}")
    print(table(rows))
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=None, help="one row label, e.g. 'rail_clos 64'")
    main(parser.parse_args().only)
