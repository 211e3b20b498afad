"""Adding a formulation is adding one module: the README's worked example, end to end."""

from __future__ import annotations

import numpy as np
import pandas as pd

from collsynth.formulations import registry
from collsynth.results import render, store
from collsynth.solvers import producers
from collsynth.solvers.cli import main
from collsynth.solvers.pipeline import run
from collsynth.solvers.producers import Options
from builders import instance_on


def test_the_new_module_is_registered_and_becomes_a_producer():
    assert "ten-ilp-oneport" in registry()
    prod = producers.producers()["ten-ilp-oneport"]
    assert prod.uses_solver and "horizon" in prod.drivers


def test_one_port_allgather_on_a_ring_needs_n_minus_1_steps():
    # multi-port: each node receives from both neighbours, ceil(5/2) = 3 steps; one port: every
    # step moves at most 6 chunks and 30 must arrive, so 5 steps (and the ring achieves it)
    inst = instance_on("ring", {"nodes": 6})
    multi, _ = run(inst, "ten-ilp", Options(driver="horizon", time_limit=60))
    one, sched = run(inst, "ten-ilp-oneport", Options(driver="horizon", time_limit=60))
    assert multi["status"] == "optimal" and multi["steps"] == 3
    assert one["status"] == "optimal" and one["verified"] and one["steps"] == 5
    per_port = np.zeros((sched.num_steps + 1, 6), dtype=int)
    np.add.at(per_port, (sched.step, sched.src), 1)
    assert per_port.max() == 1


def test_bench_and_tables_pick_it_up(tmp_path, capsys):
    (tmp_path / "r.toml").write_text('name = "ring5"\n[topology]\ngenerator = "ring"\nnodes = 5\n[collective]\nkind = "allgather"\n')
    st = tmp_path / "store"
    assert main(["bench", "--no-progress", "--jobs", "1", "--instances", str(tmp_path / "r.toml"), "--producers",
                 "ten-ilp,ten-ilp-oneport", "--drivers", "horizon", "--store", str(st)]) == 0
    df = store.load(st)
    assert set(df["producer"]) == {"ten-ilp", "ten-ilp-oneport"} and df["verified"].all()
    table = render.steps_table(df)
    assert table.loc[0, "ten-ilp-oneport/highs/horizon"] == 4 and table.loc[0, "ten-ilp/highs/horizon"] == 2
    assert isinstance(table, pd.DataFrame)
