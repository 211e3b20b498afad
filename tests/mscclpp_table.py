"""Print the kind x producer table of MSCCL++ plans for every verified schedule stored for the
quick suite (results/quick-store): how many export and pass tests/mscclpp_sim.py, how many the
exporter refuses (with why), how many the interpreter rejects (must be none).

    PYTHONPATH=... python tests/mscclpp_table.py
"""

from __future__ import annotations

import sys
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mscclpp_sim import Rejected  # noqa: E402
from test_mscclpp_export import export_and_run, stored_runs  # noqa: E402

from collsynth.instances.instance import load_instance  # noqa: E402
from collsynth.tens.schedule import read_json  # noqa: E402


def main() -> int:
    table: dict[tuple[str, str], Counter] = defaultdict(Counter)
    why: Counter = Counter()
    for _, producer, sched, inst_file in stored_runs():
        inst = load_instance(inst_file)
        kind = "concurrent" if inst.concurrent else inst.collective.kind
        try:
            outcome = export_and_run(read_json(sched), inst)
        except Rejected as e:
            outcome = "REJECTED"
            print(f"REJECTED {inst.name} {producer}: {e}")
        if outcome.startswith("refused"):
            why[outcome.split(";")[0][:90]] += 1
            outcome = "refused"
        table[(kind, producer)][outcome] += 1
    producers = sorted({p for _, p in table})
    kinds = sorted({k for k, _ in table})
    print("| kind | " + " | ".join(producers) + " |")
    print("|---" * (len(producers) + 1) + "|")
    for k in kinds:
        cells = []
        for p in producers:
            c = table.get((k, p), Counter())
            cells.append(" ".join(f"{n} {o}" for o, n in sorted(c.items())) or "-")
        print(f"| {k} | " + " | ".join(cells) + " |")
    for reason, n in why.most_common():
        print(f"{n:4d} x {reason}")
    return 1 if any(c["REJECTED"] for c in table.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
