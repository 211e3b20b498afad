"""``collsynth verify``, ``collsynth price`` and ``collsynth export`` (``docs/schedules.md``, ``docs/cost-models.md``).

- ``verify SCHED.json INSTANCE.toml``: exit 0 and ``{"verified": true}``, or exit 1 with the
  first violation (send, step, reason).
- ``verify``/``price`` take ``--from msccl-xml|teccl-output|mscclpp-json``: the file is a
  peer's schedule (an MSCCL XML program, a TE-CCL output JSON, an MSCCL++ plan) read onto the instance
  (:mod:`collsynth.tens.peer_schedules`); it is verified and priced like ours, and one that
  does not verify gets its first violation, never a price.
- ``price SCHED.json INSTANCE.toml --model sync|ten|event``: the cost under one model
  (``model, verified, steps, T_L_s, T_B_s, total_s`` plus the model's extras and the lower
  bounds); an unverified schedule is refused (exit 1).
- ``export SCHED.json INSTANCE.toml --format msccl-xml|mscclpp-json|json [--out F] [--msccl-dialect D]
  [--layout packed|trees|auto] [--calibration C]``:
  a verified schedule as MSCCL XML, an MSCCL++ execution plan
  (:mod:`collsynth.tens.export_mscclpp`; ``--min-bytes``, ``--max-bytes``,
  ``--max-threadblocks``; a schedule the executor cannot run is refused in one line, exit 2)
  or schedule JSON, to stdout or to ``F``. The XML uses the
  collective names of ``D`` (``msccl-executor``, the default, or ``msccl-tools``) and is read
  back and verified before it is written (where no grid and layout gives a program that
  implements the collective, that is said in one line, exit 2: :func:`~collsynth.tens.export_choice.chosen_export`). When the MSCCL ranks are not the node ids (failed nodes), the map
  ``node -> rank`` is in the XML (a comment), in the output (``ranks``) and, with ``--out``,
  in ``F.ranks.json``. The XML's thread blocks (``--layout``, :mod:`collsynth.tens.export_choice`):
  ``packed`` (default) a link's sends in few thread blocks; ``trees`` one thread block per tree
  and edge with receive-and-send steps at relays (ForestColl's programs); ``auto`` every way,
  the cheapest under the runtime model with ``--calibration C``, else ``packed``. A grid MSCCL
  does not take is coarsened (halving; to 1/16 packed, 1/1 trees); the output says which
  layout, grid, thread blocks and, with ``--calibration``, the written program's price. With
  ``--layout auto --calibration C --fewer-trees``, tree-packing's forests of at most 1 and 2
  trees a root on the instance (:mod:`collsynth.solvers.packing.few_trees`, verified) are
  exported beside the schedule and the cheapest program of them all is written
  (``trees_per_root``: which forest, None for the schedule given).
- ``show SCHED.json INSTANCE.toml [--steps A-B] [--max-sends K]``: the schedule step by step
  (:mod:`collsynth.results.steps`): each step's sends by link with chunk, piece, operation and
  bytes, and, for a verified schedule, the step's synchronous alpha-beta time. A schedule that
  does not verify is shown up to the step of its first violation, which is printed (exit 1);
  it is not priced. A malformed one (an id out of range, ...) is not shown: its violation is
  printed as ``verify`` prints it (exit 1). When the range holds more than
  :data:`MAX_EMPTY_STEPS` empty steps, only the steps with sends are listed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
from pathlib import Path

from .... import InputError
from ....outputs import replaced_file
from ....tens.choices import DEFAULT_MSCCL_DIALECT, MAX_THREADBLOCKS, MSCCL_DIALECTS, PEER_SCHEDULE_FORMATS, \
    cost_model_names
from ..checks import out_file

FORMATS = ("msccl-xml", "mscclpp-json", "json")
LAYOUTS = {"packed": "links", "trees": "trees"}  # --layout -> collsynth.tens.export's layout; and auto


def register(sub: argparse._SubParsersAction) -> None:
    """Add the verify, price and export commands."""
    v = sub.add_parser("verify", help="check that a schedule implements its instance's collective")
    v.add_argument("schedule", help="schedule JSON file")
    v.add_argument("instance", help="instance TOML file")
    _from_argument(v)
    v.set_defaults(func=verify)

    p = sub.add_parser("price", help="the cost of a verified schedule under one cost model")
    p.add_argument("schedule", help="schedule JSON file")
    p.add_argument("instance", help="instance TOML file")
    p.add_argument("--model", default="sync", choices=cost_model_names(), help="cost model (default sync)")
    p.add_argument("--timestep", type=float, default=None, help="TEN timestep in seconds, ten model (default: the cheapest link's cost per chunk)")
    p.add_argument("--calibration", default=None, help="calibration JSON of the runtime model (collsynth calibrate; default: none)")
    _from_argument(p)
    p.set_defaults(func=price)

    e = sub.add_parser("export", help="export a verified schedule (MSCCL XML, MSCCL++ execution plan or schedule JSON)")
    e.add_argument("schedule", help="schedule JSON file")
    e.add_argument("instance", help="instance TOML file")
    e.add_argument("--format", default="msccl-xml", choices=FORMATS, help="what to write")
    e.add_argument("--out", help="output file (default: stdout)")
    e.add_argument("--name", default="collsynth", help="MSCCL algorithm name")
    e.add_argument("--proto", default="Simple", choices=["Simple", "LL", "LL128"], help="MSCCL protocol")
    e.add_argument("--msccl-dialect", default=DEFAULT_MSCCL_DIALECT, choices=MSCCL_DIALECTS,
                   help="collective names of the MSCCL runtime (default: msccl-executor)")
    e.add_argument("--min-bytes", type=int, default=0, help="MSCCL++ plan: smallest message size it is chosen for")
    e.add_argument("--max-bytes", type=int, default=2**64 - 1, help="MSCCL++ plan: largest message size it is chosen for")
    e.add_argument("--max-threadblocks", type=int, default=MAX_THREADBLOCKS,
                   help="MSCCL++ plan: thread blocks per GPU that can be resident at once (default: 108, an A100's SMs)")
    e.add_argument("--layout", default=None, choices=(*LAYOUTS, "auto"),
                   help="MSCCL XML thread blocks: packed (a link's sends in few thread blocks; default), trees (one "
                        "per tree and edge, relays receive-and-send, as ForestColl's programs) or auto (the cheapest "
                        "under --calibration's runtime model, else packed)")
    e.add_argument("--calibration", default=None,
                   help="MSCCL XML: calibration JSON of the runtime model; prices what is written and lets "
                        "--layout auto choose (default: none)")
    e.add_argument("--fewer-trees", action="store_true",
                   help="MSCCL XML with --layout auto and --calibration: also offer tree-packing's forests of at "
                        "most 1 and 2 trees a root on the instance; the cheapest program of them all is written")
    e.set_defaults(func=export_cmd)

    w = sub.add_parser("show", help="print a schedule step by step: sends per link, bytes, per-step time")
    w.add_argument("schedule", help="schedule JSON file")
    w.add_argument("instance", help="instance TOML file")
    w.add_argument("--steps", default=None, metavar="A-B", help="only steps A to B, or only step A (default: every step)")
    w.add_argument("--max-sends", type=int, default=50, metavar="K", help="sends listed per step (the others are counted)")
    w.set_defaults(func=show)


def _from_argument(parser) -> None:
    parser.add_argument("--from", dest="peer_from", default="json", choices=("json",) + PEER_SCHEDULE_FORMATS,
                        help="the schedule file's format: ours (json, default), an MSCCL XML program "
                             "(msccl-tools, TACCL, ForestColl), a TE-CCL output JSON or an MSCCL++ plan")


def _load(args) -> tuple:
    """The instance and the schedule file, whose header must describe that instance; a peer's
    schedule (``--from``) is read onto the instance (:mod:`collsynth.tens.peer_schedules`)."""
    from ....instances.instance import load_instance
    from ....tens import peer_schedules
    from ....tens.schedule import check_header, read_json

    instance = load_instance(args.instance)
    fmt = getattr(args, "peer_from", "json")
    if fmt != "json":
        return peer_schedules.read_peer_schedule(args.schedule, fmt, instance), instance
    schedule = read_json(args.schedule)
    check_header(schedule, instance, args.schedule)
    return schedule, instance


def load_verified(args, verb: str, **fields) -> tuple:
    """The schedule and instance of ``args``, and ``None`` if the schedule verifies, else the
    command's refusal (exit 1, the first violation): nothing unverified is priced, exported
    or drawn."""
    from ....tens.verify import verify as verify_schedule

    schedule, instance = _load(args)
    v = verify_schedule(schedule, instance)
    if v is None:
        return schedule, instance, None
    return schedule, instance, {**fields, "verified": False, "violation": _violation(v), "exit": 1,
                                "text": f"refusing to {verb} an unverified schedule: {v}"}


def _violation(v) -> dict:
    out = {"step": v.step, "reason": v.reason, "index": v.index}
    if v.send is not None:
        s = v.send
        out["send"] = [s.chunk, str(s.lo), str(s.hi), s.src, s.dst, s.step] + ([s.op] if s.op else [])
    return out


def verify(args) -> dict:
    """``collsynth verify``: ``{"verified": true}`` or the first violation (exit 1)."""
    from ....tens.verify import verify as verify_schedule

    schedule, instance = _load(args)
    v = verify_schedule(schedule, instance)
    if v is None:
        return {"verified": True, "sends": len(schedule), "steps": schedule.num_steps,
                "text": f"verified: {len(schedule)} sends in {schedule.num_steps} steps"}
    return {"verified": False, "violation": _violation(v), "exit": 1, "text": f"not verified: {v}"}


def price(args) -> dict:
    """``collsynth price``: the cost of a verified schedule under ``--model``."""
    from ....tens import bounds, cost_models

    schedule, instance, refusal = load_verified(args, "price", model=args.model)
    if refusal:
        return refusal
    model = cost_models.get(args.model)
    extra = {"calibration": args.calibration} if args.calibration is not None or args.model == "runtime" else {}
    if extra and args.model != "runtime":
        from .... import InputError
        raise InputError("--calibration", f"only the runtime model takes a calibration, not {args.model!r}")
    c = model.price(schedule, instance, timestep=args.timestep, **extra)
    bnds = bounds.instance_bounds(instance)
    own = (model.bound_of(bnds, schedule) if model.bound else
           bounds.not_computed(model.name, "none", "no lower bound is known for this model"))
    if args.model == "ten" and args.timestep is not None:
        own = bounds.not_computed("ten", "ten", "the bound is for the TEN cost model's own timestep")
    out = {"model": c.model, "verified": True, **{k: val for k, val in c.as_dict().items() if k != "model"}}
    out["lower_bound_s"] = cost_models.get("sync").bound_of(bnds, schedule).value
    out["lower_bound_steps"] = bnds.steps.value
    out["lower_bound_model_s"] = own.value
    out["bound_source"] = own.label() if own.computed else own.note
    shown = f"{own.value:.6g} s ({own.label()})" if own.computed else own.note
    under = f" under calibration {c.extra['calibration']}" if c.extra.get("calibration") else ""
    out["text"] = (f"{c.model}{under}: {c.total_s:.6g} s (T_L {c.T_L_s:.6g} s + T_B {c.T_B_s:.6g} s) in {c.steps} steps; "
                   f"lower bound under this model {shown}")
    if c.extra.get("grid"):
        out["text"] += f"; {c.extra['grid']}"
    return out


def export_cmd(args) -> dict:
    """``collsynth export``: MSCCL XML or schedule JSON of a verified schedule."""
    from ....tens import msccl_format, readback
    from ....tens.schedule import to_json
    from ....tens.verify import VerificationError

    if args.out:
        out_file("--out", args.out)  # before the schedule is read and verified
    for option, given in (("--layout", args.layout), ("--calibration", args.calibration),
                          ("--fewer-trees", args.fewer_trees or None)):
        if given is not None and args.format != "msccl-xml":
            raise InputError(option, f"only --format msccl-xml takes it (its thread blocks), not {args.format}")
    if args.fewer_trees and (args.layout != "auto" or args.calibration is None):
        raise InputError("--fewer-trees", "expected --layout auto and --calibration C: the runtime model chooses "
                                          "between the schedule and the forests of fewer trees")
    schedule, instance, refusal = load_verified(args, "export", format=args.format)
    if refusal:
        return refusal
    out = {"format": args.format, "verified": True, "sends": len(schedule)}
    if args.format == "mscclpp-json":
        try:
            content = readback.verified_mscclpp_plan(
                schedule, instance, name=args.name, min_message_size=args.min_bytes,
                max_message_size=args.max_bytes, max_threadblocks=args.max_threadblocks)
        except VerificationError as e:
            return {**out, "exit": 1, "violation": _violation(e.violation),
                    "text": f"refusing to write an MSCCL++ plan of a schedule that does not implement the collective: {e}"}
        except InputError as e:
            raise InputError(args.schedule, f"the MSCCL++ executor cannot run it: {e.what}") from None
        out["ranks_renumbered"] = msccl_format.ranks_renumbered(instance)
        out["ranks"] = {str(node): rank for node, rank in msccl_format.rank_map(instance).items()}
    elif args.format == "msccl-xml":
        content, written = _msccl_program(args, schedule, instance)
        out.update(written)
        out["dialect"] = args.msccl_dialect
        out["ranks_renumbered"] = msccl_format.ranks_renumbered(instance)
        out["ranks"] = {str(node): rank for node, rank in msccl_format.rank_map(instance).items()}
    else:
        content = json.dumps(to_json(schedule)) + "\n"
    if not args.out:
        out["content"] = content
        out["text"] = content.rstrip("\n")
        return out
    return _write_export(args, schedule, content, out)


def _msccl_program(args, schedule, instance) -> tuple[str, dict]:
    """The MSCCL XML ``collsynth export`` writes (``--layout``, ``--calibration``; module doc),
    read back and verified, and what the output says of it: layout, grid, thread blocks,
    channels, receive-and-send steps and, with a calibration, its runtime price. The program
    is exported once, with ``--name`` and ``--proto``: the one chosen (and, with ``--layout
    auto``, priced) is the one written (:func:`~collsynth.tens.export_choice.chosen_export`)."""
    from ....tens.cost_models.runtime import seconds_under, usable_calibration
    from ....tens.export_choice import chosen_export, program_shape
    from ....tens.switch_runtime import is_switch_calibration

    layout = args.layout or "packed"
    cal = None
    if args.calibration is not None:
        if is_switch_calibration(args.calibration):
            raise InputError("--calibration", f"{args.calibration} prices MSCCL++ switch-channel plans, not MSCCL XML")
        cal = usable_calibration(args.calibration, instance)
    sms = cal.sms if layout == "auto" and cal is not None else 0  # auto also fits the trees within the GPU's SMs
    if layout == "auto" and cal is not None:
        layouts, fuses, seconds = ("links", "trees", *(("fitted",) if sms else ())), (False, True), seconds_under(cal, instance)
    else:
        chosen = "packed" if layout == "auto" else layout
        layouts, fuses, seconds = (LAYOUTS[chosen],), (chosen == "trees",), None
    fewer = _fewer_trees(instance) if args.fewer_trees else []
    found = chosen_export(schedule, instance, seconds, layouts, fuses, dialects=[args.msccl_dialect], name=args.name,
                          proto=args.proto, max_thread_blocks=sms, alternatives=[s for _, s in fewer])
    content = found.text
    name = next((k for k, v in LAYOUTS.items() if v == found.layout), found.layout)  # fitted: auto only
    written = {"layout": name, "layout_asked": layout, "grid": found.grid, "schedule_grid": schedule.denom,
               **program_shape(content)}
    note = f"{name} layout on a 1/{found.grid} grid"
    if args.fewer_trees:
        k = fewer[found.source - 1][0] if found.source else None
        written["trees_per_root"] = k
        note = (f"tree-packing's forest of at most {k} tree(s) a root, not the schedule given, " if k else
                "the schedule given (cheaper than its forests of fewer trees), ") + note
    if found.grid != schedule.denom:
        note += f" (the schedule's pieces are 1/{schedule.denom})"
    if cal is not None:
        price = found.seconds if found.seconds is not None else seconds_under(cal, instance)(content)
        written.update(calibration=cal.name, runtime_s=price)
        note += f", runtime {written['runtime_s']:.6g} s under calibration {cal.name}"
    elif layout == "auto":
        note += " (auto without --calibration: the default layout)"
    written["layout_note"] = f"{note}, {written['thread_blocks']} thread blocks a GPU"
    return content, written


def _fewer_trees(instance) -> list[tuple]:
    """``(k, schedule)``: tree-packing's verified forest of at most ``k`` trees a root on
    ``instance`` for each ``k`` of :data:`~collsynth.solvers.packing.few_trees.KS` it packs."""
    from ...packing.few_trees import KS, limited
    from ...producers import Unsupported
    out = []
    for k in KS:
        try:
            out.append((k, limited(instance, k)))
        except Unsupported:
            continue
    if not out:
        raise InputError("--fewer-trees", "tree-packing packs no forest of fewer trees a root on this instance")
    return out


def _write_export(args, schedule, content: str, out: dict) -> dict:
    """Write an export to ``--out`` (and the node -> rank map beside it when the ranks are
    renumbered), both or neither; ``out`` completed with the files written."""
    from ....tens.schedule import write_json

    path = Path(args.out)
    ranks_path = Path(f"{path}.ranks.json") if out.get("ranks_renumbered") else None
    try:
        with replaced_file(path) as staged, contextlib.ExitStack() as more:  # both files or neither
            if args.format == "json":
                write_json(schedule, staged)
            else:
                staged.write_text(content)
            if ranks_path is not None:
                ranks = more.enter_context(replaced_file(ranks_path))
                ranks.write_text(json.dumps({("xml" if args.format == "msccl-xml" else "plan"): path.name, "ranks": out["ranks"]}, indent=1) + "\n")
    except OSError as e:
        raise InputError(str(path), f"cannot write: {e.strerror}") from None
    out["out"] = str(path)
    out["text"] = f"wrote {path} ({args.format}, {len(schedule)} sends" + (
        f"; {out['layout_note']})" if "layout_note" in out else ")")
    if ranks_path is not None:
        out["ranks_out"] = str(ranks_path)
        pairs = " ".join(f"{node}->{rank}" for node, rank in out["ranks"].items())
        out["text"] += f"; gpu ids are ranks, not node ids (node->rank: {pairs}), written to {ranks_path}"
    return out


def _step_range(text: str | None, num_steps: int) -> tuple[int, int]:
    """``A-B`` or ``A`` (steps from 1) as ``(first, last)``; None: every step."""
    if text is None:
        return 1, num_steps
    a, sep, b = text.partition("-")
    if not a.strip().isdigit() or (sep and not b.strip().isdigit()):
        raise InputError("--steps", f"expected A-B or A (steps from 1), got {text!r}")
    first, last = int(a), int(b) if sep else int(a)
    if not 1 <= first <= last:
        raise InputError("--steps", f"expected 1 <= A <= B, got {text!r}")
    return first, last


MAX_EMPTY_STEPS = 1000  # more empty steps than this in the range shown: only the steps with sends are listed


def _shown_steps(schedule, chunk_bytes, per_step, first: int, last: int, max_sends: int) -> tuple[list[dict], int]:
    """The rows of :func:`collsynth.results.steps.steps` for ``first..last``, and how many
    empty steps were left out: none, unless the range holds more than :data:`MAX_EMPTY_STEPS`
    of them (a send at step 10**9), when only the steps with sends are listed."""
    import numpy as np

    from ....results import steps as step_view

    last = min(last, schedule.num_steps)
    used = np.unique(schedule.step)
    used = used[(used >= first) & (used <= last)]
    empty = max(0, last - first + 1) - len(used)
    if empty <= MAX_EMPTY_STEPS:
        return step_view.steps(schedule, chunk_bytes, per_step=per_step, first=first, last=last,
                               max_sends=max_sends), 0
    rows = [row for t in used.tolist()
            for row in step_view.steps(schedule, chunk_bytes, per_step=per_step, first=t, last=t, max_sends=max_sends)]
    return rows, empty


def show(args) -> dict:
    """``collsynth show``: the schedule step by step (only those with sends when most are
    empty, :func:`_shown_steps`); priced only when it verifies. A malformed schedule (an id
    out of range, ...) is not shown: its violation is reported as ``verify`` reports it (exit 1)."""
    from ....results import steps as step_view
    from ....tens import cost
    from ....tens.verify import malformed, verify as verify_schedule

    schedule, instance = _load(args)
    first, last = _step_range(args.steps, schedule.num_steps)
    if args.max_sends < 0:
        raise InputError("--max-sends", f"expected a number of sends >= 0, got {args.max_sends}")
    bad = malformed(schedule, instance)
    if bad is not None:
        return {"verified": False, "violation": _violation(bad), "exit": 1, "text": f"not verified: {bad}"}
    v = verify_schedule(schedule, instance, well_formed=True)
    out: dict = {"instance": instance.name, "collective": schedule.collective, "nodes": schedule.nodes,
                 "chunks": schedule.chunks, "sends": len(schedule), "steps": schedule.num_steps,
                 "verified": v is None}
    per_step = None
    if v is None:
        sync = cost.price_sync(schedule, instance)
        per_step = sync.extra.get("per_step")
        out.update(T_L_s=sync.T_L_s, T_B_s=sync.T_B_s, time_sync_s=sync.total_s)
    else:
        last = min(last, v.step)
        out.update(violation=_violation(v), exit=1)
    rows, empty = _shown_steps(schedule, cost.chunk_bytes_of(instance), per_step, first, last, args.max_sends)
    out["by_step"] = rows
    legend = step_view.CHUNK_IDS.get(schedule.collective, "chunk ids of the merged concurrent collectives")
    head = (f"{schedule.collective} on {instance.name}: {len(schedule)} sends in {schedule.num_steps} steps "
            f"over {schedule.nodes} node ids ({legend}; c = {instance.collectives[0].chunks_per_node})")
    if v is None:
        tail = (f"verified; sync {out['time_sync_s']:.4g} s = T_L {out['T_L_s']:.4g} + T_B {out['T_B_s']:.4g} "
                "(collsynth price --model ten|event for the other cost models)")
    else:
        tail = f"not verified: {v}"
    if empty:
        head += f"; {empty} step{'s' if empty != 1 else ''} with no sends not listed"
    out["text"] = "\n".join([head, step_view.render(rows), tail])
    return out
