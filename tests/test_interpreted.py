"""Kernels run as Python (``collsynth.tens.interpreted``) compute what the compiled kernels do.

A child process with an empty numba cache runs random small cases with every kernel as Python
(it must compile nothing); this process runs the same cases compiled. The rows' prices, bounds,
statuses and the schedules themselves (the greedy's random choices included) must be equal, and
so must the verdict on a schedule broken on purpose and the prices with grouped dependencies.
The cases reach the kernels of the lower bounds, verification, the three cost models (sync, ten
and event: dependencies, page table, event queue and layout, routing), the greedy, earliest
arrival and TEN recovery.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collsynth.instances import generators
from collsynth.instances.instance import make_instance

TOPOLOGIES = (
    ("ring", {"nodes": 3}), ("ring", {"nodes": 5}), ("ring", {"nodes": 6, "bidirectional": False}),
    ("mesh", {"dims": [2, 3]}), ("torus", {"dims": [3, 3]}), ("complete", {"nodes": 4}),
    ("hypercube", {"dim": 3}), ("switch", {"nodes": 4}),
)
KINDS = ("allgather", "reduce_scatter", "allreduce", "broadcast", "reduce", "gather", "scatter", "alltoall")
PRODUCERS = ("greedy", "ring", "direct", "recursive-doubling", "earliest-arrival")
TINY = (("ring", {"nodes": 3}), ("complete", {"nodes": 4}))  # the TEN ILP's cases (TEN recovery): solved at once

OUTCOMES = """
import json, sys
import numpy as np
from collsynth.instances import generators
from collsynth.instances.instance import make_instance
from collsynth.solvers import compiling, pipeline
from collsynth.solvers.producers import Options
from collsynth.tens import cost_models, verify
from collsynth.tens.interpreted import interpreting
from collsynth.tens.schedule import to_json


def outcome(case, mode):
    gen, params, kind, chunks, producer, seed = case
    inst = make_instance(generators.build(gen, params), kind, chunks_per_node=chunks,
                         root=0 if kind in ("broadcast", "reduce", "gather", "scatter") else None)
    kernels = compiling.prepare(inst, producer, mode)  # before the clock, as every run
    row, sched = pipeline.run(inst, producer, Options(seed=seed, time_limit=20), kernels)
    kept = {k: row[k] for k in ("status", "verified", "steps", "time_sync_s", "time_ten_s", "time_event_s",
                                "lower_bound_s", "lower_bound_ten_s", "lower_bound_event_s", "lower_bound_steps",
                                "lower_bound_timesteps", "bound_source", "sends")}
    if sched is None:
        return kept
    kept["schedule"] = to_json(sched)
    kept["grouped"] = [cost_models.price(sched, inst, m, exact_deps=False).as_dict() for m in cost_models.names()]
    if len(sched.chunk) > 1:  # the last send dropped: the verdict on a schedule that fails
        keep = np.ones(len(sched.chunk), bool)
        keep[-1] = False
        kept["broken"] = str(verify.verify(sched.select(keep), inst))
    return kept


if __name__ == "__main__":
    cases = json.loads(sys.stdin.read())
    with interpreting():  # the checks outside the run too
        out = [outcome(c, compiling.INTERPRET) for c in cases]
    print(json.dumps({"outcomes": out, "compiled": compiling.compiled_in_this_process()}, default=str))
"""


def _case():
    any_run = st.tuples(st.sampled_from(TOPOLOGIES), st.sampled_from(KINDS), st.integers(1, 2),
                        st.sampled_from(PRODUCERS), st.integers(0, 3))
    ten_ilp = st.tuples(st.sampled_from(TINY), st.sampled_from(("allgather", "broadcast")), st.just(1),
                        st.just("ten-ilp"), st.just(0))
    return st.one_of(any_run, ten_ilp).map(lambda t: (t[0][0], t[0][1], *t[1:]))


@settings(max_examples=2, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(_case(), min_size=12, max_size=16))
def test_kernels_as_python_compute_what_the_compiled_kernels_compute(tmp_path_factory, cases):
    """Every outcome of the cases, interpreted in a child that compiles nothing, equals the
    compiled outcome here. Two children of 12-16 cases each (a child's start and imports cost
    about as much as ten cases; five of 6-10 before)."""
    import importlib.util

    cache = tmp_path_factory.mktemp("numba-cache")
    done = subprocess.run([sys.executable, "-c", OUTCOMES], input=json.dumps(cases), capture_output=True, text=True,
                          timeout=1800, env={**os.environ, "NUMBA_CACHE_DIR": str(cache)})
    assert done.returncode == 0, done.stderr[-3000:]
    child = json.loads(done.stdout)
    assert child["compiled"] is False  # every kernel ran as Python
    spec = importlib.util.spec_from_loader("outcomes", loader=None)
    here = importlib.util.module_from_spec(spec)
    exec(OUTCOMES.split("if __name__")[0], here.__dict__)  # the same code, compiled kernels
    for case, theirs in zip(cases, child["outcomes"]):
        mine = json.loads(json.dumps(here.outcome(case, here.compiling.COMPILE), default=str))
        assert mine == theirs, case


QUICK_CHILD = """
import json, sys
from collsynth.instances import load_instance
from collsynth.solvers import batch, compiling
for f in batch.suite_tags()["quick"]:
    for producer in ("greedy", "ring", "bfb-lp", "ten-ilp"):
        compiling.prepare_run(load_instance(f), producer)
print(json.dumps({"compiled": compiling.compiled_in_this_process()}))
"""


def test_the_quick_suite_interprets_and_a_big_run_compiles(tmp_path):
    """Every quick-suite instance is small enough to run as Python: ``prepare_run`` on each,
    in a child with an empty numba cache, compiles nothing (it loads only what the cache holds);
    a 12x12 torus allgather, past :data:`SMALL_SENDS`, is compiled for."""
    from collsynth.instances import load_instance
    from collsynth.solvers import batch, compiling

    quick = [load_instance(f) for f in batch.suite_tags()["quick"]]
    big = make_instance(generators.build("torus", {"dims": [12, 12]}), "allgather")  # 20,592 sends at the fewest
    assert quick and all(compiling.interprets(i) for i in quick) and not compiling.interprets(big)
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "empty-cache")}
    done = subprocess.run([sys.executable, "-c", QUICK_CHILD], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.splitlines()[-1]) == {"compiled": False}


def test_a_pipelining_run_compiles_where_its_pieces_make_it_big():
    """Tree packing cuts each chunk into pipeline pieces, so a run with few sends at the fewest
    can emit millions: at 1 GB (two A100 boxes, 960 sends at the fewest, tens of pieces a chunk
    against the links' 2.7 us latency) the run compiles its kernels, where the instance alone would be
    interpreted (before, ForestColl's MI250 x3 allreduce ran its first 460,800 sends as Python
    on a cold cache, 122 s, and at the rate so measured only that first pair, 8 pieces a half, fit: 1.78x the
    bound). A 4 KB message is cut into one piece, and interprets; so does a producer that does not
    pipeline."""
    from collsynth.solvers import compiling

    big = make_instance(generators.build("forestcoll_a100", {"nodes": 2}), "allreduce", message_bytes=2 ** 30)
    assert compiling.interprets(big) and not compiling.interprets(big, "tree-packing")
    assert compiling.kernel_mode(big, "tree-packing") == compiling.COMPILE
    small = make_instance(generators.build("forestcoll_a100", {"nodes": 2}), "allreduce", message_bytes=4096)
    assert compiling.interprets(small, "tree-packing") and compiling.interprets(big, "ring")
