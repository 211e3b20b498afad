"""Rows of the A100 logs that ran NCCL's own algorithm instead of the program (the manifest's
``executor_counts`` with ``count_scope``): MSCCL 0.7.4 (microsoft/msccl, NCCL 2.12.12) takes an
XML program only for a call whose whole collective's count is a multiple of its chunks per loop,
an allgather's count in bytes (``collsynth.tens.calibration.scheduler_counts``);
msccl-executor-nccl 2.19.4, which ran the rings, tests the count per rank. The logs say which
rows those are independently of that rule: where NCCL's own ran, the in-place column (the
program's) is the out-of-place one (NCCL's own, 37-41 us at these sizes)."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

import numpy as np

from collsynth.instances.instance import load_instance
from collsynth.tens.calibration import load_rows, ran_program, scheduler_counts
from collsynth.tens.measurements import read_manifest, read_nccl_tests, read_program_text

A100 = Path(__file__).resolve().parent.parent / "instances" / "measurements" / "forestcoll-a100x2"


@lru_cache(maxsize=None)
def _chunks(program: Path) -> int:
    return int(re.search(r'nchunksperloop="(\d+)"', read_program_text(program)[:1000]).group(1))


@lru_cache(maxsize=None)
def _collective(instance: Path) -> tuple[str, int]:
    c = load_instance(instance).collectives[0]
    return c.kind, len(c.nodes)


def _ran(manifest, m, log) -> np.ndarray:
    counts = scheduler_counts(log, *_collective(m.instance), m.count_scope or manifest.count_scope)
    return ran_program(counts, _chunks(m.program))


def test_by_hand():
    # 16 ranks, floats. An allgather of 1,024 chunks a loop at 256 / 512 / 1,024 B (4 / 8 / 16
    # floats a rank): MSCCL 0.7.4 tests the bytes, 256 / 512 / 1,024, and takes only the last;
    # tested per rank (msccl-executor, RCCL) none of the three
    log = {"size": np.array([256, 512, 1024]), "count": np.array([4, 8, 16])}
    assert ran_program(scheduler_counts(log, "allgather", 16, "collective"), 1024).tolist() == [False, False, True]
    assert ran_program(scheduler_counts(log, "allgather", 16, "rank"), 1024).tolist() == [False, False, False]
    # a reduce-scatter of 64 chunks at 256 B: 4 floats a rank, 64 in the whole collective
    assert ran_program(scheduler_counts(log, "reduce_scatter", 16, "collective"), 64).tolist() == [True] * 3
    assert ran_program(scheduler_counts(log, "reduce_scatter", 16, "rank"), 64).tolist() == [False] * 3
    # an allreduce's count is the whole collective's in either
    ar = {"size": np.array([256]), "count": np.array([64])}
    assert scheduler_counts(ar, "allreduce", 16, "collective").tolist() == [64]
    assert scheduler_counts(ar, "allreduce", 16, "rank").tolist() == [64]


def test_the_a100_rows_left_out_are_those_where_nccl_ran_its_own():
    # every MSCCL 0.7.4 log (no `runtime`) from 256 B to 4 KiB. A row the rule keeps is more than
    # 5 % from NCCL's own time; a row it leaves out is within 10 % of it, or (two rows, at 4 MiB
    # buffers and 256 B: 195.5 and 198.5 us against NCCL's 37) under half of the program's own
    # time at 4 KiB: not the program
    manifest = read_manifest(A100 / "manifest.toml")
    assert manifest.executor_counts and manifest.count_scope == "collective"
    left_out = {}
    for m in manifest.measurements:
        if m.runtime:
            continue
        log = read_nccl_tests(m.log)
        ip, op, size = log["in_place_us"], log["out_of_place_us"], log["size"]
        small = (size >= m.min_bytes) & (size <= 4096)
        ran = _ran(manifest, m, log)
        own = (np.abs(ip / op - 1) < 0.10) | (ip < ip[size == 4096][0] / 2)
        assert (np.abs(ip / op - 1)[small & ran] > 0.05).all(), m.name
        assert own[small & ~ran].all(), m.name
        assert ran[size > 4096].all(), m.name
        key = m.held_out_set if m.held_out else "fitted"
        left_out[key] = left_out.get(key, 0) + int((~ran[small]).sum())
    # TACCL's allgathers of 512 chunks a loop at 256 B, of 1,024 at 256 and 512 B; no fitted row
    assert left_out == {"fitted": 0, "": 56, "blind": 32}


def test_the_rings_follow_the_executor_rule():
    # the rings (msccl-executor-nccl 2.19.4, 512 chunks a loop): NCCL's own below 512 floats a
    # rank (32 KiB for allgather and reduce-scatter, 2 KiB for allreduce), in-place within 5 % of
    # out-of-place there and 1.5-4x it from there to 1 MiB (the program's flat 400-800 us)
    manifest = read_manifest(A100 / "manifest.toml")
    rings = [m for m in manifest.measurements if m.runtime]
    assert len(rings) == 3 and all(m.count_scope == "rank" for m in rings)
    first = {}
    for m in rings:
        log = read_nccl_tests(m.log)
        ip, op, size = log["in_place_us"], log["out_of_place_us"], log["size"]
        ran = _ran(manifest, m, log)
        below = size < 1 << 20
        assert (np.abs(ip / op - 1)[below & ~ran] < 0.05).all(), m.name
        assert (ip / op)[below & ran].min() > 1.15, m.name
        first[_collective(m.instance)[0]] = int(size[ran].min())
        assert m.min_bytes >= first[_collective(m.instance)[0]]
    assert first == {"allgather": 32768, "reduce_scatter": 32768, "allreduce": 2048}


def test_load_rows_tests_the_whole_collective(tmp_path):
    # TACCL's chunks4 i8 allgather (512 chunks a loop) at 1 MiB buffers: 256 B left out under
    # MSCCL 0.7.4's rule; tested per rank (the manifest's default, or the measurement's own
    # count_scope over the manifest's) it would lose every size below 32 KiB (512 floats a rank)
    name = "original-Allgather.n16.chunks4-DGXA100-steps8.chunks4-tacclsol-improve-1704996483_i8_scRemote1_IBContig.sccl"
    entry = (f'[[measurement]]\nname = "a"\nprogram = "{A100}/programs/{name}.xml.xz"\n'
             f'instance = "{A100}/a100x2-allgather.toml"\nlog = "{A100}/logs/{name}.xmlbuff1048576.txt"\n'
             'buff_bytes = 1048576\ncolumn = "in-place"\nmin_bytes = 256\nheld_out = true\n')
    first = {}
    cases = [("", ""), ("executor_counts = true\n", ""), ('executor_counts = true\ncount_scope = "collective"\n', ""),
             ('executor_counts = true\ncount_scope = "collective"\n', 'count_scope = "rank"\n')]
    for k, (flags, own) in enumerate(cases):
        path = tmp_path / f"m{k}.toml"
        path.write_text(f'system = "s"\nsource = "x"\n{flags}{entry}{own}')
        first[k] = load_rows(read_manifest(path), check_programs=False)[0].sizes[:2].tolist()
    assert first == {0: [256, 512], 1: [32768, 65536], 2: [512, 1024], 3: [32768, 65536]}


def test_a_bad_count_scope_is_one_line(tmp_path, capsys):
    from cli_errors import assert_one_error_line, calibrate_with_setting, run_cli
    path, code, out, err = calibrate_with_setting(tmp_path, capsys, 'count_scope = "total"')
    assert code == 2
    assert_one_error_line(err, [f"{path}.count_scope", "rank, collective"])
    path = tmp_path / "m2.toml"
    path.write_text('system = "s"\nsource = "x"\n[[measurement]]\nname = "a"\nprogram = "p.xml"\n'
                    'instance = "i.toml"\nlog = "l.txt"\ncount_scope = 1\n')
    code, out, err = run_cli(["calibrate", str(path)], capsys)
    assert code == 2
    assert_one_error_line(err, [f"{path}: measurement[0].count_scope"])
