"""The ``collsynth`` command line (``collsynth --help``; README.md).

Every command takes ``--json`` and then prints exactly one JSON object on stdout. Errors go to
stderr as one line ``error: <where>: <what>`` with exit code 2 for bad input
(:class:`~collsynth.InputError`) and 1 for a failure. Commands live in
:mod:`collsynth.solvers.cli.commands`, one module per group; each module has
``register(subparsers)`` that adds its parsers with ``set_defaults(func=...)``; a command
function takes the parsed arguments and returns a dict (plus ``"exit": 1`` to fail).
:data:`COMMANDS` names each module's commands, so that a command line imports the module of
its own command only (``--help`` and an unknown command import them all).

While a command runs, anything written to ``sys.stdout`` (library log messages, solver
chatter) goes to stderr instead: stdout carries only the command's result.

``collsynth --version`` prints the version (with ``--json``: ``{"version": ..., "python": ...}``).
Every command's ``--help`` lists ``--json`` and shows each option's default.

Every command also takes ``--max-memory SIZE`` (e.g. ``8G``): instances whose estimated
memory exceeds it (default: the machine's memory) are refused before anything is allocated
(:mod:`collsynth.instances.size`), and ``--min-chunk-bytes B`` refuses instances whose chunks
are smaller than B bytes (default one byte). An interrupt (SIGINT, or SIGTERM where a command handles it)
ends with one line ``error: interrupted...`` and exit code 130.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import json
import os
import platform
import sys
from typing import NoReturn, Sequence

from ... import InputError, __version__
from ...limits import MEMORY_ENV, set_memory_budget
from .. import import_if_present

COMMANDS = {  # module: the commands its register() adds (tests/test_startup.py checks both agree)
    "collsynth.solvers.cli.commands.instances": ("topologies", "topology", "instance", "corpus"),
    "collsynth.solvers.cli.commands.schedules": ("verify", "price", "export", "show"),
    "collsynth.solvers.cli.commands.producers": ("producers", "warmup"),
    "collsynth.solvers.cli.commands.solve": ("solve",),
    "collsynth.solvers.cli.commands.finder": ("finder",),
    "collsynth.solvers.cli.commands.bench": ("bench", "tables", "report", "draw"),
    "collsynth.solvers.cli.commands.stores": ("store",),
    "collsynth.solvers.cli.commands.calibrate": ("calibrate",),
}
COMMAND_MODULES = tuple(COMMANDS)
MIN_CHUNK_ENV = "COLLSYNTH_MIN_CHUNK_BYTES"  # collsynth.instances.size.MIN_CHUNK_ENV (not imported: it loads networkx)

SUMMARIES = {  # each command's one-line help, for `collsynth --help` without importing the command modules
    "topologies": "list the topology generators and their parameters",
    "topology": "build a topology and print its size, degree, diameter, Moore bound",
    "instance": "validate an instance TOML file (or a peer's input) and summarise it",
    "corpus": "list the corpus: instances with their suites and tags, suites, tags",
    "verify": "check that a schedule implements its instance's collective",
    "price": "the cost of a verified schedule under one cost model",
    "calibrate": "fit the runtime cost model to nccl-tests measurements of known programs",
    "export": "export a verified schedule (MSCCL XML, MSCCL++ execution plan or schedule JSON)",
    "show": "print a schedule step by step: sends per link, bytes, per-step time",
    "producers": "list producers, drivers and solver backends (with availability)",
    "warmup": "compile every numba kernel ahead (first run on a machine only; cached on disk)",
    "solve": "synthesize, verify and price a schedule for an instance",
    "finder": "Pareto frontier of (T_L, T_B) topologies for N nodes of degree d, and the best pick",
    "bench": "run a batch: instances x producers x solvers x drivers x seeds (resumable)",
    "tables": "regenerate every table and plot from the results store",
    "report": "write a static HTML report of the results store (open index.html)",
    "draw": "draw a schedule: on its TEN, step by step, or its per-step link loads",
    "store": "check a results store for damage, or repair a damaged one",
}

_RING8 = "instances/corpus/ring8-allgather.toml"
EXAMPLES = {  # two examples per command, the end of its --help
    "topologies": ("collsynth topologies", "collsynth topologies --json"),
    "topology": ("collsynth topology torus dims=5,7", "collsynth topology ndv2 chassis=2 --json"),
    "instance": ("collsynth instance instances/corpus/mesh4x4-failed-allgather.toml",
                 "collsynth instance teccl_input.json --from teccl --json"),
    "corpus": ("collsynth corpus", "collsynth corpus --suite quick --json"),
    "verify": (f"collsynth verify s.json {_RING8}", f"collsynth verify s.json {_RING8} --json"),
    "price": (f"collsynth price s.json {_RING8}", f"collsynth price s.json {_RING8} --model event --json"),
    "export": (f"collsynth export s.json {_RING8} --format msccl-xml --out s.xml",
               f"collsynth export s.json {_RING8} --format json --out copy.json"),
    "show": (f"collsynth show s.json {_RING8}", f"collsynth show s.json {_RING8} --steps 1-3"),
    "producers": ("collsynth producers", "collsynth producers --json"),
    "warmup": ("collsynth warmup", "collsynth warmup --producers greedy,ring --jobs 1"),
    "solve": (f"collsynth solve {_RING8} --producer greedy,ten-ilp,ring",
              f"collsynth solve {_RING8} --producer ten-ilp --time-limit 30 --out s.json --json"),
    "finder": ("collsynth finder --nodes 1024 --degree 4", "collsynth finder --nodes 64 --degree 4 --json"),
    "bench": ("collsynth bench --suite quick", "collsynth bench --suite quick --producers ring,greedy --store my-store"),
    "tables": ("collsynth tables", "collsynth tables --store my-store --out my-tables --plots my-plots"),
    "report": ("collsynth report", "collsynth report --store results/quick-store --out quick-report"),
    "calibrate": ("collsynth calibrate instances/measurements/forestcoll-a100x2/manifest.toml",
                  "collsynth calibrate instances/measurements/forestcoll-mi250x2/manifest.toml --out mi250.json --json"),
    "store": ("collsynth store check --store collsynth-results/store",
              "collsynth store repair --store collsynth-results/store --json"),
    "draw": (f"collsynth draw s.json {_RING8} --out s.png", f"collsynth draw s.json {_RING8} --kind heatmap --out s.pdf"),
}


class HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """Help that shows each option's default, unless the help text already says it or there is
    none to show (no value, or a flag that is off)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.default is None or action.default is False or action.default in ([], "") or "default" in text:
            return text
        return super()._get_help_string(action)


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str):  # one line, exit 2 (argparse's own errors are bad input)
        import re

        from ... import did_you_mean

        choice = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
        if choice:
            hint = did_you_mean(choice[1], re.findall(r"'([^']*)'", choice[2]))
            message = message.replace(f"'{choice[1]}'", f"'{choice[1]}'{hint}", 1)
        raise InputError(self.prog, message)


JSON_HELP = "print exactly one JSON object on stdout instead of text"


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The argument parser with every command group that is installed, or, for a ``command``
    that :data:`COMMANDS` names, with that command's group only: a command imports only what
    it runs (``collsynth solve`` with a greedy producer loads neither Pyomo nor pandas); with no
    command (``collsynth --help``), the commands' summaries (:data:`SUMMARIES`) and no command
    module. Each command's help ends with two examples (:data:`EXAMPLES`)."""
    parser = _Parser(prog="collsynth", description="Synthesize and compare collective-communication schedules.",
                     epilog="examples:\n  collsynth bench --suite quick && collsynth tables\n"
                            f"  collsynth solve {_RING8} --producer greedy,ten-ilp,ring")
    parser.add_argument("--version", action="store_true", help="print collsynth's version and exit")
    parser.add_argument("--json", action="store_true", help=JSON_HELP)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    owners = [module for module, names in COMMANDS.items() if command in names]
    for name in owners:
        module = import_if_present(name)
        if module is not None:
            module.register(sub)
    if not owners:  # no command named (--help, --version, a typo): each command's summary, no module imported
        for name, summary in SUMMARIES.items():
            sub.add_parser(name, help=summary)
    for name, command in sub.choices.items():
        command.epilog = "examples:\n" + "\n".join(f"  {e}" for e in EXAMPLES.get(name, ()))
        command.add_argument("--json", action="store_true", help=JSON_HELP)
        command.add_argument("--max-memory", metavar="SIZE", default=None,
                             help="refuse instances estimated to need more memory (e.g. 8G; default: the machine's)")
        command.add_argument("--min-chunk-bytes", metavar="B", default=None,
                             help="refuse instances whose chunks are smaller (default: 1 byte)")
    return parser


def _command_word(argv: list[str]) -> str | None:
    """The command a command line asks for: its first word that is not an option (the
    top-level options take no value).

    >>> _command_word(["--version"]), _command_word(["solve", "x.toml", "--producer", "ring"])
    (None, 'solve')
    """
    return next((a for a in argv if not a.startswith("-")), None)


def version() -> dict:
    """``collsynth --version``."""
    return {"version": __version__, "python": platform.python_version(), "text": f"collsynth {__version__}"}


def render(result: dict) -> str:
    """A plain human-readable rendering of a command's result (when ``--json`` is not given)."""
    if "text" in result:
        return str(result["text"])
    lines = []
    for key, value in result.items():
        if key in ("exit",):
            continue
        if isinstance(value, (dict, list)):
            value = json.dumps(value, default=str)
        lines.append(f"{key}: {value}")
    return "\n".join(lines)


def run() -> NoReturn:
    """The ``collsynth`` console script and ``python -m collsynth.solvers.cli``: :func:`main`,
    then the exit handlers (:mod:`atexit`: logging, pools, temporary files) and a flush of
    stdout and stderr, then the process ends with main's exit code without the interpreter's
    teardown. That teardown clears every loaded module and collects their objects one by one:
    about 0.3 s of every command here (Pyomo, SciPy, numba), for memory the process is about
    to give back whole. mypy ends the same way (``mypy.util.hard_exit``)."""
    code = main()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe or stream has nothing left to flush
            stream.flush()
    os._exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default: this process's) and return its exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    as_json = "--json" in argv
    argv = [a for a in argv if a != "--json"]
    budget, least = os.environ.get(MEMORY_ENV), os.environ.get(MIN_CHUNK_ENV)
    try:
        args = build_parser(_command_word(argv)).parse_args(argv)
        if args.version:
            result = version()
        elif args.command is None:
            raise InputError("collsynth", "expected a command (`collsynth --help` lists them)")
        else:
            args.command_line = ["collsynth", *argv, *(["--json"] if as_json else [])]
            if args.max_memory is not None:
                set_memory_budget(args.max_memory)
            if args.min_chunk_bytes is not None:
                from ...instances.size import min_chunk_bytes

                os.environ[MIN_CHUNK_ENV] = str(args.min_chunk_bytes)
                try:
                    min_chunk_bytes()
                except InputError as e:
                    raise InputError("--min-chunk-bytes", e.what) from None
            with contextlib.redirect_stdout(sys.stderr):
                result = args.func(args)
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:
        print(f"error: interrupted{f' by {e}' if str(e) else ''}", file=sys.stderr)
        return 130
    except Exception as e:  # a failure, not bad input: one line, exit 1
        print(f"error: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    finally:  # --max-memory and --min-chunk-bytes hold for this command only
        os.environ.pop(MEMORY_ENV, None) if budget is None else os.environ.update({MEMORY_ENV: budget})
        os.environ.pop(MIN_CHUNK_ENV, None) if least is None else os.environ.update({MIN_CHUNK_ENV: least})
    code = int(result.pop("exit", 0)) if isinstance(result, dict) else 0
    result.pop("text", None) if as_json else None
    try:
        if as_json:
            print(json.dumps(result, default=_json_default))
        else:
            print(render(result))
    except BrokenPipeError:  # e.g. piped into `head`
        sys.stderr.close()
    return code


def _json_default(obj):
    import numpy as np
    from fractions import Fraction

    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (np.floating,)):
        return float(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Fraction):
        return str(obj)
    return str(obj)
