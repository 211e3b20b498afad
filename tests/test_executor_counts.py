"""Rows that ran the library's own algorithm (a manifest's ``executor_counts``): RCCL 2.18.3's
MSCCL scheduler takes a program only for a count that is a multiple of its chunks per loop
(``collsynth.tens.calibration.ran_program``), and the MI250 logs say which rows those are
independently of that rule: there the in-place column (the program's) equals the
out-of-place one (RCCL's own algorithm)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from collsynth.tens.calibration import load_rows, ran_program
from collsynth.tens.measurements import parse_nccl_tests, read_manifest, read_nccl_tests, read_program_text

MI250 = Path(__file__).resolve().parent.parent / "instances" / "measurements" / "forestcoll-mi250x2"


def _chunks(program: Path) -> int:
    return int(re.search(r'nchunksperloop="(\d+)"', read_program_text(program)[:1000]).group(1))


def test_the_count_column_is_read():
    text = ("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   "
            "busbw #wrong\n"
            "        2048            16     float    none      -1    276.2    0.01    0.01      0    274.5    0.01    "
            "0.01      0\n"
            "        4096            32     float    none      -1    276.2    0.01    0.01      0    101.6    0.04    "
            "0.04      0\n")
    rows = parse_nccl_tests(text, "t.txt")
    assert rows["count"].tolist() == [16, 32] and rows["in_place_us"].tolist() == [274.5, 101.6]


def test_by_hand():
    # 32 chunks a loop: 16 elements a rank refused, 32 and 64 taken; 64 chunks: 32 refused
    assert ran_program(np.array([16, 32, 64]), 32).tolist() == [False, True, True]
    assert ran_program(np.array([32, 64, 96]), 64).tolist() == [False, True, False]


def test_the_rows_left_out_are_those_where_rccl_ran_its_own():
    # every ForestColl MI250 allgather and reduce-scatter log below 64 KiB: a row is RCCL's own
    # where the in-place time is within 5 % of the out-of-place one, RCCL's ring (the program's
    # rows are 0.3-0.65 of it); the allreduce's out-of-place column is RCCL's tree, as fast as
    # the program at 16-64 KiB, and none of its rows is dropped (64 elements and up, 32 chunks)
    manifest = read_manifest(MI250 / "manifest.toml")
    seen = 0
    for m in manifest.measurements:
        if not m.name.startswith("amd_"):
            continue
        if "allreduce" in m.name:
            log = read_nccl_tests(m.log)
            assert ran_program(log["count"], _chunks(m.program)).all()
            continue
        log = read_nccl_tests(m.log)
        small = (log["size"] >= m.min_bytes) & (log["size"] < 1 << 16)
        own = np.abs(log["in_place_us"] / log["out_of_place_us"] - 1) < 0.05
        ran = ran_program(log["count"], _chunks(m.program))
        assert (ran[small] == ~own[small]).all(), m.name
        seen += int((~ran[small]).sum())
    assert seen == 112  # 3 / 4 sizes of each 32- / 64-chunk allgather and reduce-scatter, 8 buffers


def test_the_manifest_switch_drops_them(tmp_path):
    # the 64-chunk allgather at 4 MiB buffers: 512 B to 4 KiB (8-32 elements a rank) dropped
    name, d = "amd_allgather_split_k1_inst2", MI250
    entry = (f'[[measurement]]\nname = "a"\nprogram = "{d}/programs/{name}.xml.xz"\n'
             f'instance = "{d}/mi250x2-allgather.toml"\nlog = "{d}/logs/{name}.xmlbuff4194304.txt"\n'
             'buff_bytes = 4194304\ncolumn = "in-place"\nmin_bytes = 256\n')
    sizes = {}
    for flag in ("", "executor_counts = true\n"):
        path = tmp_path / f"m{len(flag)}.toml"
        path.write_text(f'system = "s"\nsource = "x"\n{flag}{entry}')
        rows = load_rows(read_manifest(path), check_programs=False)
        sizes[bool(flag)] = rows[0].sizes.tolist()
    assert sizes[False][:5] == [512, 1024, 2048, 4096, 8192]
    assert sizes[True] == sizes[False][4:]


def test_a_bad_manifest_switch_is_one_line(tmp_path, capsys):
    from cli_errors import assert_one_error_line, calibrate_with_setting
    path, code, out, err = calibrate_with_setting(tmp_path, capsys, 'executor_counts = "yes"')
    assert code == 2
    assert_one_error_line(err, [f"{path}.executor_counts"])
