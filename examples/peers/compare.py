"""The peers' schedules beside ours: one row per peer schedule in a results store, with our
best schedule for the same instance (least synchronous time among the producers that are not
``peer:``), both priced under the same cost models. A peer row that did not verify shows its
first violation instead of a price.

    python examples/peers/compare.py STORE
"""

from __future__ import annotations

import sys

import collsynth as cs


def main(store: str) -> None:
    """Print a Markdown table of each peer schedule's row in ``store`` (``peer:FOLDER``: its
    steps and prices, or why it did not verify) beside our fastest verified row of its instance
    under the sync model."""
    df = cs.open_store(store).runs()
    peers = df[df["producer"].str.startswith("peer:") & (df["status"] != "skipped")]
    ours = df[~df["producer"].str.startswith("peer:") & (df["verified"] == True)]  # noqa: E712
    cols = "| instance | peer schedule | verified | steps | sync ms | event ms | our best | steps | sync ms | event ms | lower bound ms |"
    print(cols)
    print("|" + "---|" * (cols.count("|") - 1))
    for _, p in peers.sort_values(["instance", "producer"]).iterrows():
        mine = ours[ours["instance"] == p["instance"]].sort_values("time_sync_s")
        best = mine.iloc[0] if len(mine) else None
        if p["verified"]:
            peer = f"yes | {int(p['steps'])} | {p['time_sync_s'] * 1e3:.3f} | {p['time_event_s'] * 1e3:.3f}"
        else:
            peer = f"no: {p['message']} | | |"
        mine_txt = (f"{best['producer']} | {int(best['steps'])} | {best['time_sync_s'] * 1e3:.3f} | {best['time_event_s'] * 1e3:.3f}"
                    if best is not None else "none | | |")
        print(f"| {p['instance']} | {p['producer'][5:]} | {peer} | {mine_txt} | {p['lower_bound_s'] * 1e3:.3f} |")


if __name__ == "__main__":
    main(sys.argv[1])
