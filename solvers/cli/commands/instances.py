"""``collsynth topologies``, ``collsynth topology`` and ``collsynth instance`` (``docs/instances.md``, ``docs/topology-files.md``).

- ``collsynth topologies [--json]``: every generator, its one-line summary, parameters
  (type, default, required) and full docstring.
- ``collsynth topology GENERATOR k=v ... [--bandwidth B] [--alpha A] [--failed-nodes 7,9]
  [--failed-links 0-1,2-3] [--json]``: build a topology (GENERATOR may also be a .json,
  .graphml or .csv file) and print ``nodes, switches, links, in_degree, out_degree, degree,
  regular, diameter, moore_bound`` (links count parallel links; ``degree`` is the common degree
  of a regular topology, else null) plus ``generator, params, cayley, dims``.
- ``collsynth instance FILE.toml [--json]``: validate an instance file and print
  :meth:`Instance.summary` with ``valid: true``. ``--from teccl|taccl|msccl`` reads a peer's
  own input instead (:mod:`collsynth.instances.peers`), ``--peer k=v`` gives reader options.
- ``collsynth corpus [--suite S] [--json]``: the corpus ``instances/corpus/``: every instance
  file (name, suites and tags it is in, topology, collective kinds), the suites defined in
  ``suites.toml`` (default producers, solvers, drivers, time limit, instance count) and the
  tags instance files use without a definition there. ``--suite`` keeps the instances of one
  suite or tag. Files are read, not built (``collsynth instance FILE`` validates one).

Bad input raises :class:`~collsynth.InputError` (one ``error:`` line, exit 2).
"""

from __future__ import annotations

import argparse
import tomllib
from pathlib import Path

from .... import InputError
from ....limits import TooBig
from ....limits import DEFAULT_TIME_LIMIT_S
from ....instances import CORPUS, generators, peers, size
from ....instances.files import FORMATS, link_pairs, read_topology
from ....instances.instance import check_topology, load_instance
from ....instances.topology import Topology


def register(sub: argparse._SubParsersAction) -> None:
    """Add the topologies, topology and instance commands."""
    p = sub.add_parser("topologies", help="list the topology generators and their parameters")
    p.set_defaults(func=topologies)

    t = sub.add_parser("topology", help="build a topology and print its size, degree, diameter, Moore bound")
    t.add_argument("generator", help="generator name (see `collsynth topologies`) or a .json/.graphml/.csv file")
    t.add_argument("params", nargs="*", metavar="K=V", help="generator parameters; lists as 5,7")
    t.add_argument("--bandwidth", default=None, help="bytes/s of every link the generator leaves unset (default 100e9)")
    t.add_argument("--alpha", default=None, help="latency (s) of every link the generator leaves unset (default 0.5e-6)")
    t.add_argument("--failed-nodes", default="", help="comma-separated node ids to fail, ids are kept (default: none)")
    t.add_argument("--failed-links", default="", help="comma-separated directed links u-v to fail (default: none)")
    t.set_defaults(func=topology)

    i = sub.add_parser("instance", help="validate an instance TOML file (or a peer's input) and summarise it")
    i.add_argument("file", help="instance file (instances/corpus/*.toml), or a peer's input with --from")
    i.add_argument("--from", dest="peer_format", default="toml", choices=("toml",) + peers.FORMATS,
                   help="read a peer's input: TE-CCL input JSON, TACCL topology profile, msccl-tools topology")
    i.add_argument("--peer", action="append", default=[], metavar="K=V",
                   help="reader option (taccl: nodes, sketch, collective, chunk_bytes, time_unit_s, topology, unwind; "
                        "msccl: nodes, bandwidth, alpha, collective, message_bytes, unwind; default: none)")
    i.set_defaults(func=instance)

    c = sub.add_parser("corpus", help="list the corpus: instances with their suites and tags, suites, tags")
    c.add_argument("--suite", default=None, help="only the instances of this suite or tag (default: every instance)")
    c.set_defaults(func=corpus)


def topologies(args: argparse.Namespace) -> dict:
    """Every generator with its summary, parameters and docstring."""
    rows = generators.describe()
    import inspect

    for row in rows:
        row["doc"] = inspect.getdoc(generators.GENERATORS[row["name"]]) or ""
    lines = []
    for row in rows:
        params = ", ".join(
            f"{k}: {v['type']}" + ("" if v["required"] else f" = {v['default']!r}") for k, v in row["parameters"].items()
        )
        lines.append(f"{row['name']}({params})\n    {row['summary']}")
    return {"generators": rows, "text": "\n".join(lines)}


def parse_pairs(pairs: list[str], where: str = "topology") -> dict[str, str]:
    """``k=v`` command-line strings to a dict of strings (the generator coerces them)."""
    out: dict[str, str] = {}
    for item in pairs:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InputError(where, f"expected a parameter as k=v, got {item!r}")
        if key in out:
            raise InputError(f"{where}.{key}", "given twice")
        out[key] = value
    return out


def _ids(text: str, where: str) -> list[int]:
    try:
        return [int(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        raise InputError(where, f"expected comma-separated node ids, got {text!r}") from None


def topology_fields(topo: Topology) -> dict:
    """The ``collsynth topology --json`` object of a built topology."""
    out = topo.summary()
    lo, hi = topo.out_degree_range
    out["degree"] = lo if topo.regular else None
    out["generator"] = topo.meta["format"] if "file" in topo.meta else topo.meta.get("generator")
    out["params"] = topo.meta.get("params", {})
    out["cayley"] = topo.meta.get("cayley")
    out["dims"] = topo.meta.get("dims")
    for key in ("self_loops_dropped", "optical", "file", "intersection_array", "link_classes"):
        if key in topo.meta:
            out[key] = topo.meta[key]
    return out


def topology(args: argparse.Namespace) -> dict:
    """Build the topology of the command line and summarise it."""
    params = parse_pairs(args.params)
    if Path(args.generator).suffix.lower() in FORMATS:
        if params:
            raise InputError(f"topology.{next(iter(params))}", "a topology file takes no k=v parameters")
        topo = read_topology(args.generator, bandwidth=args.bandwidth, alpha=args.alpha)
    else:
        topo = generators.build(args.generator, params, bandwidth=args.bandwidth, alpha=args.alpha)
    failed_nodes = _ids(args.failed_nodes, "--failed-nodes")
    failed_links = link_pairs(args.failed_links, "--failed-links")
    if failed_nodes or failed_links:
        try:
            topo = topo.with_failures(failed_nodes, failed_links)
        except InputError as e:
            raise InputError(f"--{e.where.replace('_', '-')}", e.what) from None
    check_topology(topo, args.generator if Path(args.generator).suffix.lower() in FORMATS else "topology")
    out = topology_fields(topo)
    deg = out["degree"] if out["degree"] is not None else f"{topo.out_degree_range[0]}..{topo.out_degree_range[1]}"
    out["text"] = (
        f"{topo.name}: {out['nodes']} nodes"
        + (f" + {out['switches']} switches" if out["switches"] else "")
        + f", {out['links']} links, degree {deg}, regular {out['regular']}, diameter {out['diameter']},"
        f" Moore bound {out['moore_bound']}"
    )
    return out


def instance(args: argparse.Namespace) -> dict:
    """Validate an instance file (or read a peer's input) and summarise it."""
    if args.peer_format == "toml":
        if args.peer:
            raise InputError("--peer", "reader options need --from teccl|taccl|msccl")
        inst = load_instance(args.file)
    else:
        inst = peers.read_peer(args.file, args.peer_format, parse_pairs(args.peer, "--peer"))
    try:
        size.check_run(inst)  # what `solve` refuses before any producer starts, refused alike
        compact = None
    except TooBig as e:
        compact = _kept_smaller(inst)  # a producer keeping its schedule in another form may still run it
        if compact is None:
            raise InputError(f"{args.file}: {e.where}", e.what) from None
    out = {"valid": True, **inst.summary()}
    est = size.estimate(inst)
    out["size"] = {"sends_at_least": est.sends, "bytes_at_least": est.bytes, "ten_variables": est.variables,
                   "ten_horizon": est.horizon, "ten_bytes": est.ten_bytes, "field": est.field,
                   "explicit_fits": compact is None, "kept_smaller": compact or []}
    topo = out["topology"]
    colls = "; ".join(
        f"{c['kind']}" + (f" root {c['root']}" if c["root"] is not None else "")
        + f" over {c['nodes']} nodes, {c['chunks']} chunks of {c['chunk_bytes']:g} B"
        for c in out["collectives"]
    )
    out["text"] = (
        f"{inst.name} ({inst.source}): valid\n"
        f"  topology {topo['name']}: {topo['nodes']} nodes, {topo['links']} links, diameter {topo['diameter']}\n"
        f"  {colls}\n"
        + (f"  epoch {inst.epoch}: TEN timestep {out['epoch_timestep_s']:.6g} s\n" if inst.epoch else "")
        + f"  expect {inst.expect or '{}'}\n"
        + f"  size: {est.describe()}"
        + "".join(f"\n  explicit sends exceed the memory budget; {c['producer']} runs in about "
                  f"{size.human_bytes(c['bytes'])}: {c['what']}" for c in compact or [])
    )
    return out


def _kept_smaller(inst) -> list[dict] | None:
    """The producers whose declared build (:attr:`Producer.estimate`, default parameters) fits
    the memory budget where the fewest explicit sends do not: ``[{"producer", "what",
    "bytes"}]``, or None when there is none (the instance is then refused as ``solve``
    refuses it)."""
    from ...producers import planned, producers

    fits = []
    for name, prod in sorted(producers().items()):
        try:
            build = planned(prod, inst, {})
            if build is None:
                continue
            size.check_run(inst, build)
        except (TooBig, InputError):  # over the budget, or a form it does not keep for this instance
            continue
        fits.append({"producer": name, "what": build.what, "bytes": int(build.bytes)})
    return fits or None


def corpus_entry(path: Path) -> dict:
    """What an instance file says about itself, read without building it."""
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as e:
        raise InputError(str(path), f"malformed TOML: {e}") from None
    topo = data.get("topology", {})
    if "file" in topo:
        where = f"file {topo['file']}"
    else:
        params = " ".join(f"{k}={v}" for k, v in topo.items() if k not in generators.RESERVED)
        where = f"{topo.get('generator', '?')} {params}".strip()
    failed = len(topo.get("failed_nodes", [])) + len(topo.get("failed_links", []))
    colls = data.get("collective", [])
    colls = colls if isinstance(colls, list) else [colls]
    return {"name": data.get("name", path.stem), "file": str(path.relative_to(CORPUS)),
            "suites": list(data.get("suites", [])), "topology": where + (f" ({failed} failed)" if failed else ""),
            "collectives": [c.get("kind", "?") for c in colls], "description": data.get("description", "")}


def _count(n: int) -> str:
    return f"{n:>3} instance{'s' if n != 1 else ' '}"


def corpus(args: argparse.Namespace) -> dict:
    """The corpus's instances, suites and tags (``--suite``: one suite's instances)."""
    import pandas as pd  # imported when the command runs: --help stays light

    from ... import batch as runner

    defined, tags = runner.suites(), runner.suite_tags()
    files = runner.select_instances(args.suite) if args.suite else sorted(
        p for p in CORPUS.glob("*.toml") if p.name != runner.SUITES_FILE.name)
    entries = [corpus_entry(p) for p in files]
    suites = [{"name": name, **spec, "instances": len(tags.get(name, []))} for name, spec in defined.items()]
    undefined = [{"name": name, "instances": len(paths)} for name, paths in sorted(tags.items()) if name not in defined]
    table = pd.DataFrame([{**e, "suites": ",".join(e["suites"]), "collectives": "+".join(e["collectives"])}
                          for e in entries], columns=["name", "suites", "topology", "collectives"])
    lines = [f"instances ({len(entries)}{f' in {args.suite}' if args.suite else ''}; "
             f"files under {CORPUS}; `collsynth instance FILE` validates one):",
             table.to_markdown(index=False, tablefmt="plain"), "",
             f"suites (defined in {runner.SUITES_FILE.name}; `collsynth bench --suite NAME` runs one):"]
    for row in suites:
        lines.append(f"  {row['name']:<14} {_count(row['instances'])}  producers: {', '.join(row.get('producers', []))}"
                     f"  time limit {row.get('time_limit', DEFAULT_TIME_LIMIT_S)} s")
    lines.append("tags (in instance files' suites lists, without a definition: bench them with --producers):")
    lines += [f"  {row['name']:<18} {_count(row['instances'])}" for row in undefined]
    return {"instances": entries, "suites": suites, "tags": undefined, "text": "\n".join(lines)}
