"""``collsynth store check`` and ``collsynth store repair``: list a results store's damage and
rebuild what can be rebuilt (:mod:`collsynth.results.repair`, ``docs/results.md``)."""

from __future__ import annotations

import argparse

from ..checks import RESULTS


def register(sub: argparse._SubParsersAction) -> None:
    """Add the store command."""
    p = sub.add_parser("store", help="check a results store for damage, or repair a damaged one")
    p.add_argument("action", choices=["check", "repair"],
                   help="check: list every damaged file (exit 1 if any); repair: rebuild the database from its "
                        "readable rows, drop runs whose schedule file is damaged (bench runs them again)")
    p.add_argument("--store", default=str(RESULTS / "store"), help="results store folder")
    p.set_defaults(func=store)


def store(args) -> dict:
    """Check or repair the store ``--store``."""
    from ....results import repair

    if args.action == "check":
        found = repair.check(args.store)
        lines = [f"{d['file']}: {d['what']}" for d in found] or [f"{args.store}: no damage found"]
        return {"store": str(args.store), "damaged": found, "exit": 1 if found else 0, "text": "\n".join(lines)}
    done = repair.repair(args.store)
    if not done["damage"]:
        return {**done, "text": f"{args.store}: no damage found; nothing changed"}
    text = [f"{args.store}: kept {done['kept']} run(s); dropped {len(done['dropped'])} whose schedule file is damaged"]
    if done["damaged_database"]:
        text.append(f"the damaged database is kept as {done['damaged_database']}")
    if done["damaged_files"] or done["orphaned_files"]:
        text.append(f"moved {len(done['damaged_files'])} damaged and {len(done['orphaned_files'])} orphaned "
                    "schedule file(s) under schedules/damaged and schedules/orphaned")
    text.append("`collsynth bench` runs the dropped and lost runs again")
    return {**done, "text": "\n".join(text)}
