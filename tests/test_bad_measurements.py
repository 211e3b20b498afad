"""Malformed measurements and programs through the real command line (``collsynth calibrate``,
``collsynth price --from msccl-xml``): exit 2 and one line naming the file and the line at fault
(issue 42, "bad input"). Expected lines are found in the files by plain text search."""

from __future__ import annotations

import lzma
from pathlib import Path

import pytest

from cli_errors import assert_one_error_line, run_cli

DATA = Path(__file__).resolve().parents[1] / "instances" / "measurements" / "forestcoll-a100x2"
PROGRAM = DATA / "programs" / "msccl_allgather_k1_inst1_NVLINK300_IB25.xml.xz"
LOG = DATA / "logs" / "msccl_allgather_k1_inst1_NVLINK300_IB25.xmlbuff4194304.txt"
ALLGATHER, REDUCE_SCATTER = DATA / "a100x2-allgather.toml", DATA / "a100x2-reduce_scatter.toml"


def manifest(tmp_path, program=PROGRAM, instance=ALLGATHER, log=LOG, min_bytes=256) -> Path:
    m = tmp_path / "manifest.toml"
    m.write_text(f'system = "t"\nsource = "test"\n[[measurement]]\nname = "m"\nprogram = "{program}"\n'
                 f'instance = "{instance}"\nlog = "{log}"\nbuff_bytes = 4194304\nmin_bytes = {min_bytes}\n')
    return m


def program_text() -> str:
    return lzma.decompress(PROGRAM.read_bytes()).decode()


def line_of(text: str, needle: str) -> int:
    """The 1-based line of ``text`` where ``needle`` first occurs."""
    return text[:text.index(needle)].count("\n") + 1


def refused(capsys, argv, must) -> str:
    code, out, err = run_cli(argv, capsys)
    assert code == 2 and out == ""
    return assert_one_error_line(err, must)


def log_lines() -> list[str]:
    return LOG.read_text().splitlines()


def first_row(lines: list[str]) -> int:
    """Index of the first result row (the line after the ``# size count type`` header)."""
    return next(k for k, line in enumerate(lines) if line.split()[:1] and line.split()[0].isdigit())


def test_a_log_truncated_in_the_middle_of_a_row(tmp_path, capsys):
    lines = log_lines()
    k = first_row(lines) + 5
    log = tmp_path / "cut.log"
    log.write_text("\n".join(lines[:k] + [lines[k][:40]]))  # the run killed while printing row k
    refused(capsys, ["calibrate", manifest(tmp_path, log=log)], [f"{log}:{k + 1}:", "time algbw busbw"])


def test_a_log_truncated_before_its_first_row(tmp_path, capsys):
    lines = log_lines()
    log = tmp_path / "head.log"
    log.write_text("\n".join(lines[:first_row(lines)]) + "\n")
    refused(capsys, ["calibrate", manifest(tmp_path, log=log)], [str(log), "not nccl-tests output"])


def test_a_log_with_one_group_of_columns(tmp_path, capsys):
    """Only ``time algbw busbw #wrong`` once (a test run without the in-place column)."""
    lines = log_lines()
    k = first_row(lines)
    log = tmp_path / "nine.log"
    log.write_text("\n".join(lines[:k] + [" ".join(line.split()[:9]) for line in lines[k:] if line.strip()[:1].isdigit()]))
    refused(capsys, ["calibrate", manifest(tmp_path, log=log)], [f"{log}:{k + 1}:", "time algbw busbw #wrong time"])


def test_a_csv_file_is_not_nccl_tests_output(tmp_path, capsys):
    log = tmp_path / "bw.csv"
    log.write_text("size,time_us,algbw\n1048576,104.8,10.01\n")
    refused(capsys, ["calibrate", manifest(tmp_path, log=log)], [str(log), "not nccl-tests output"])


def test_an_infinite_time_names_its_row(tmp_path, capsys):
    lines = log_lines()
    k = first_row(lines) + 2
    fields = lines[k].split()
    fields[-4] = "inf"  # the in-place time
    lines[k] = "  ".join(fields)
    log = tmp_path / "inf.log"
    log.write_text("\n".join(lines) + "\n")
    refused(capsys, ["calibrate", manifest(tmp_path, log=log)], [f"{log}:{k + 1}:", "positive finite times"])


def test_a_log_with_no_row_from_min_bytes_on(tmp_path, capsys):
    # the log's largest size is 8 GiB (8589934592 bytes)
    refused(capsys, ["calibrate", manifest(tmp_path, min_bytes=1 << 40)], [str(LOG), "no result row", "8589934592"])


@pytest.fixture
def bad_programs(tmp_path):
    """Broken copies of ForestColl's 16-GPU allgather program, each with the line at fault."""
    text = program_text()
    out = {}
    more = text.replace('ngpus="16"', 'ngpus="32"', 1)
    out["more-ranks"] = (more, line_of(more, 'ngpus="32"'), "32 GPUs")
    peer = text.replace('send="1"', 'send="20"', 1)
    out["peer-outside"] = (peer, line_of(peer, 'send="20"'), "20 is outside")
    cut = "\n".join(text.splitlines()[:600]) + "\n"  # 600 lines, then nothing: the parser stops on line 601
    out["truncated"] = (cut, 601, "not well formed")
    paths = {}
    for name, (t, line, what) in out.items():
        p = tmp_path / f"{name}.xml"
        p.write_text(t)
        paths[name] = (p, line, what)
    return paths


@pytest.mark.parametrize("case", ["more-ranks", "peer-outside", "truncated"])
def test_calibrate_names_the_program_line(tmp_path, capsys, bad_programs, case):
    path, line, what = bad_programs[case]
    refused(capsys, ["calibrate", manifest(tmp_path, program=path)], [f"{path}:{line}:", what])


@pytest.mark.parametrize("case", ["more-ranks", "peer-outside", "truncated"])
def test_price_names_the_program_line(capsys, bad_programs, case):
    path, line, what = bad_programs[case]
    refused(capsys, ["price", path, ALLGATHER, "--from", "msccl-xml", "--json"], [f"{path}:{line}:", what])


def test_a_program_of_another_collective_names_its_algo_line(tmp_path, capsys):
    path = tmp_path / "allgather.xml"
    text = program_text()
    path.write_text(text)
    line = line_of(text, "<algo ")
    must = [f"{path}:{line}:", "algo.coll", "'allgather'"]
    refused(capsys, ["calibrate", manifest(tmp_path, program=path, instance=REDUCE_SCATTER)], must)
    refused(capsys, ["price", path, REDUCE_SCATTER, "--from", "msccl-xml"], must)


def test_a_held_out_set_is_read_and_a_bad_one_refused(tmp_path, capsys):
    from collsynth.tens.measurements import read_manifest
    m = manifest(tmp_path)
    m.write_text(m.read_text() + 'held_out = true\nheld_out_set = "blind"\n')
    assert [(x.held_out, x.held_out_set) for x in read_manifest(m).measurements] == [(True, "blind")]
    m.write_text(m.read_text().replace('held_out_set = "blind"', "held_out_set = 1"))
    refused(capsys, ["calibrate", m], [f"{m}: measurement[0].held_out_set:", "expected a str, got 1"])


def test_the_shipped_blind_set_is_held_out_and_never_fitted():
    # the A100 manifest's blind set: TACCL's 16 parsed-* programs x 8 buffer sizes, all held out
    from collsynth.tens.measurements import read_manifest
    blind = [x for x in read_manifest(DATA / "manifest.toml").measurements if x.held_out_set == "blind"]
    assert len(blind) == 128 and all(x.held_out and x.program.name.startswith("parsed-") for x in blind)
