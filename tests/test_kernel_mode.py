"""One compile-or-interpret decision per run (collsynth.solvers.compiling.prepare_run), cached by
mode, and the numba internals collsynth.tens.interpreted hooks into, checked here so that a numba
that changes them fails these tests by name rather than a run silently compiling (or not).

The hook relies on: numba's C dispatcher calling ``Dispatcher._compile_for_args`` for a
signature it has not got; the ``numba:compile`` event firing when numba compiles and not when it
loads a kernel from its on-disk cache; ``py_func`` on every dispatcher.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import numpy as np
from numba import njit
from numba.core import event
from numba.core.dispatcher import Dispatcher

from cli_errors import run_cli

from collsynth.instances import CORPUS
from collsynth.solvers import compiling, pipeline
from collsynth.tens import interpreted


class _Count(event.Listener):
    def __init__(self):
        self.starts = 0

    def on_start(self, ev):
        self.starts += 1

    def on_end(self, ev):
        pass


def test_the_dispatcher_hook_is_in_place():
    assert Dispatcher._compile_for_args is interpreted._compile_or_interpret
    assert interpreted._compile_for_args.__name__ == "_compile_for_args"  # numba's own, kept
    assert "numba:compile" in event._builtin_kinds


def test_a_new_kernel_runs_as_python_while_interpreting_and_compiles_otherwise():
    @njit
    def triangle(n):
        s = 0
        for i in range(n):
            s += i
        return s

    assert callable(triangle.py_func)
    count = _Count()
    event.register("numba:compile", count)
    try:
        with interpreted.interpreting():
            assert triangle(np.int64(5)) == 10
        assert triangle.signatures == []  # the compile numba started was refused
        before = count.starts
        assert triangle(np.int64(5)) == 10
        assert len(triangle.signatures) == 1 and count.starts == before + 1  # this one went through
    finally:
        event.unregister("numba:compile", count)


def test_the_compile_notice_ignores_a_refused_compile_whatever_the_listeners_order():
    notice = compiling._FirstCompile()
    with interpreted.interpreting():
        notice.on_start(None)
    assert not notice.seen


CACHE_CHILD = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, sys.argv[1])
    from numba.core import event
    from collsynth.solvers import compiling  # its notice listener, as in a run
    import cached_kernel
    cached_kernel.total(3)
    print(json.dumps({"compiled": compiling.compiled_in_this_process()}))
""")


def test_a_kernel_loaded_from_numbas_cache_fires_no_compile_event(tmp_path):
    (tmp_path / "cached_kernel.py").write_text(
        "from numba import njit\n\n@njit(cache=True)\ndef total(n):\n    return n * (n + 1) // 2\n")
    env_dir = tmp_path / "cache"
    runs = []
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", CACHE_CHILD, str(tmp_path)], capture_output=True, text=True,
                              timeout=300, env={**__import__("os").environ, "NUMBA_CACHE_DIR": str(env_dir)})
        assert done.returncode == 0, done.stderr[-2000:]
        runs.append(json.loads(done.stdout.splitlines()[-1])["compiled"])
    assert runs == [True, False]  # compiled the first time, loaded the second


def test_the_producer_kernels_are_cached_per_mode(monkeypatch):
    """Prepared for a small run (interpreting) and then for a big one, a producer's kernels are
    compiled for the big one: the cache is keyed by mode."""
    modes = []
    fake = SimpleNamespace(warm=lambda: modes.append(interpreted.refusing()))
    monkeypatch.setattr(compiling.registry, "get", lambda name: fake)
    compiling.compile_producer.cache_clear()
    try:
        for mode in (compiling.INTERPRET, compiling.INTERPRET, compiling.COMPILE, compiling.COMPILE):
            compiling.compile_producer("stand-in", mode)
    finally:
        compiling.compile_producer.cache_clear()
    assert modes == [True, False]


def test_solve_decides_once(monkeypatch, capsys):
    calls = []
    real = compiling.prepare_run

    def counted(instance, producer):
        calls.append(producer)
        return real(instance, producer)

    monkeypatch.setattr(compiling, "prepare_run", counted)
    monkeypatch.setattr(pipeline, "prepare_run", counted)
    code, out, _ = run_cli(["solve", str(CORPUS / "ring8-allgather.toml"), "--producer", "ring", "--json"], capsys)
    assert code == 0 and json.loads(out)["rows"][0]["verified"]
    assert calls == ["ring"]
