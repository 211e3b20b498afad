"""The runtime cost model on programs whose time is worked out by hand, its lower bound, and the
nccl-tests parser on real and malformed logs."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collsynth import InputError
from collsynth.instances.generators import build
from collsynth.instances.instance import load_instance, make_instance
from collsynth.instances.topology import from_edges
from collsynth.tens import bounds
from collsynth.tens.cost_models.runtime import Calibration, runtime_times
from collsynth.tens.measurements import parse_nccl_tests, read_nccl_tests, read_program_text
from collsynth.tens.runtime_program import program_features

DATA = Path(__file__).resolve().parents[1] / "instances" / "measurements" / "forestcoll-a100x2"


def cal(**kw) -> Calibration:
    base = dict(name="hand", system="test", source="", efficiency={"link": 0.5, "nic": 0.5},
                hop_s={"link": 1e-6, "nic": 1e-6}, gpu_op_s={"link": 0.0, "nic": 0.0}, tb_rate=1e15,
                reduce_rate=1e15, step_s=2e-6, launch_s=10e-6,
                tb_s=0.0, buff_bytes=1 << 30)
    return Calibration(**{**base, **kw})


def xml(ngpus: int, nchunks: int, gpus: list[list[tuple[int, int, int, list[tuple[str, int]]]]]) -> str:
    """A program: per GPU, thread blocks ``(send, recv, chan, [(type, offset), ...])``."""
    out = [f'<algo name="t" proto="Simple" nchannels="2" nchunksperloop="{nchunks}" ngpus="{ngpus}" '
           f'coll="allgather" inplace="1" outofplace="0" minBytes="0" maxBytes="1099511627776">']
    for g, tbs in enumerate(gpus):
        out.append(f'<gpu id="{g}" i_chunks="0" o_chunks="{nchunks}" s_chunks="0">')
        for t, (send, recv, chan, steps) in enumerate(tbs):
            out.append(f'<tb id="{t}" send="{send}" recv="{recv}" chan="{chan}">')
            for k, (typ, off) in enumerate(steps):
                out.append(f'<step s="{k}" type="{typ}" srcbuf="o" srcoff="{off}" dstbuf="o" dstoff="{off}" '
                           f'cnt="1" depid="-1" deps="-1" hasdep="0"/>')
            out.append("</tb>")
        out.append("</gpu>")
    return "\n".join(out + ["</algo>"])


# Two GPUs, one link each way (1 GB/s), one channel: each GPU sends its chunk and receives the other.
PAIR = xml(2, 2, [[(1, 1, 0, [("s", 0), ("r", 1)])], [(0, 0, 0, [("s", 1), ("r", 0)])]])


def pair_instance():
    return make_instance(build("ring", {"nodes": 2}, bandwidth=1e9, alpha=0.0), "allgather", message_bytes=1.0)


def test_one_channel_by_hand():
    # per iteration each thread block: 2 steps (2 x 2 us) + one send's credit (1 us) = 5 us; its
    # link carries one chunk of s bytes at half of 1 GB/s: 2e-9 s per byte. The critical path:
    # a send then the receive it feeds, 2 steps + 1 hop = 5 us (+ s bytes at the copy rate, ~0).
    f = program_features(PAIR, pair_instance())
    t = runtime_times(f, [2e3, 2e4], cal())
    # 2 KB: s = 1 KB, the link needs 2 us < 5 us: launch 10 + 5 = 15 us.
    # 20 KB: s = 10 KB, the link needs 20 us: launch 10 + 20 = 30 us.
    assert t == pytest.approx([15e-6, 30e-6])


def test_shared_cost_per_operation_by_hand():
    # each GPU sends one chunk and receives one per iteration: 2 operations x 10 us of its shared
    # cost = 20 us, above the thread block's 5 us and the link's 2 us (2 KB): launch 10 + 20 us.
    f = program_features(PAIR, pair_instance())
    assert runtime_times(f, [2e3], cal(gpu_op_s={"link": 10e-6}))[0] == pytest.approx(30e-6)


def test_pipelined_iterations_by_hand():
    # buff 8 KB: slices of at most 4 KB; 20 KB is 10 KB a chunk, 3 iterations of 10/3 KB:
    # period max(5 us, 2e-9 * 10/3 KB = 6.67 us); first iteration's path 5 us + forwarded 0 -> the
    # first iteration costs a period (6.67 us), then 2 periods: 10 + 3 * 6.67 = 30 us.
    f = program_features(PAIR, pair_instance())
    t = runtime_times(f, [2e4], cal(buff_bytes=8000))
    assert t[0] == pytest.approx(10e-6 + 3 * (2e-9 * 2e4 / 2 / 3))


def test_a_call_past_the_smallest_slice_sends_two_fenced_slices_by_hand():
    # buff 64 KB: the smallest slice is buff / 128 = 500 B (prims_simple.h genericOp). At 800 B a
    # chunk is 400 B, one slice a call: each GPU's 2 operations x 10 us of shared cost = 20 us,
    # launch 10 + 20 = 30 us. At 2 KB a chunk is 1000 B, two non-empty slices a call, each
    # fenced and credited: 2 operations x 2 slices x 10 us = 40 us, launch 10 + 40 = 50 us.
    f = program_features(PAIR, pair_instance())
    c = cal(gpu_op_s={"link": 10e-6}, buff_bytes=64000)
    assert runtime_times(f, [800.0, 2000.0], c) == pytest.approx([30e-6, 50e-6])
    # without the shared cost: a thread block's 2 steps (4 us) and its send's credit per slice,
    # 1 us at 800 B, 2 us at 2 KB (the link needs 0.8 and 2 us): 10 + 5 and 10 + 6 us.
    assert runtime_times(f, [800.0, 2000.0], cal(buff_bytes=64000)) == pytest.approx([15e-6, 16e-6])


def test_a_step_of_many_chunks_runs_as_several_calls_by_hand():
    # GPU 0 sends chunks 0-1 in one step (cnt 2) and receives chunk 2; GPU 1 the other way. buff
    # 8 KB: an iteration moves at most 4 KB a chunk (buff / 2), so 16 KB (4 KB a chunk) is one
    # iteration, and a call carries at most 4 KB / 4 KB = 1 chunk (mscclSetupCount): the cnt 2
    # send and its receive are 2 calls each. GPU 0's thread block: 3 calls x 10 us + its send's
    # 2 calls x 2 slices x 1 us = 34 us; GPU 1's: 30 + 2 = 32 us; the link 0 -> 1 carries 8 KB at
    # 0.5 GB/s, 16 us: launch 10 + 34 us.
    head = ('<algo name="t" proto="Simple" nchannels="1" nchunksperloop="4" ngpus="2" coll="allgather" inplace="1" '
            'outofplace="0" minBytes="0" maxBytes="1099511627776">')
    step = ('<step s="{k}" type="{t}" srcbuf="o" srcoff="{o}" dstbuf="o" dstoff="{o}" cnt="{c}" depid="-1" deps="-1" '
            'hasdep="0"/>')
    gpus = [('<gpu id="0" i_chunks="2" o_chunks="4" s_chunks="0"><tb id="0" send="1" recv="1" chan="0">'
             + step.format(k=0, t="s", o=0, c=2) + step.format(k=1, t="r", o=2, c=1) + "</tb></gpu>"),
            ('<gpu id="1" i_chunks="2" o_chunks="4" s_chunks="0"><tb id="0" send="0" recv="0" chan="0">'
             + step.format(k=0, t="s", o=2, c=1) + step.format(k=1, t="r", o=0, c=2) + "</tb></gpu>")]
    f = program_features("\n".join([head, *gpus, "</algo>"]), pair_instance())
    assert runtime_times(f, [16e3], cal(step_s=10e-6, buff_bytes=8000))[0] == pytest.approx(44e-6)


def two_box_instance():
    """GPUs 0, 1 (box A) and 2, 3 (box B); each GPU a NIC (switches 4..7, 1 GB/s), NICs on one
    IB switch (8); no NVLink, so every send crosses NICs."""
    edges = []
    for g in range(4):
        nic = 4 + g
        for u, v in ((g, nic), (nic, g), (nic, 8), (8, nic)):
            edges.append((u, v, {"bandwidth": 1e9, "alpha": 0.0, "link_class": "nic"}))
    topo = from_edges(9, edges, switches=[4, 5, 6, 7, 8], name="two-box")
    return make_instance(topo, "allgather", message_bytes=1.0)


def test_two_channels_on_two_nics_by_hand():
    # channel 0: GPU 0 -> 2; channel 1: GPU 1 -> 3; each through its own NIC: each NIC link
    # carries one chunk per iteration, 2e-9 s per byte at half of 1 GB/s.
    two = xml(4, 4, [[(2, -1, 0, [("s", 0)])], [(3, -1, 1, [("s", 1)])],
                     [(-1, 0, 0, [("r", 0)])], [(-1, 1, 1, [("r", 1)])]])
    # the same two sends both from GPU 0 (two thread blocks, two channels): one NIC carries both.
    one = xml(4, 4, [[(2, -1, 0, [("s", 0)]), (3, -1, 1, [("s", 1)])], [],
                     [(-1, 0, 0, [("r", 0)])], [(-1, 0, 1, [("r", 1)])]])
    inst = two_box_instance()
    M = 4e5  # 100 KB chunks: 200 us per chunk at 0.5 GB/s, far above the 5 us of steps
    t_two = runtime_times(program_features(two, inst), [M], cal(tb_s=0.0))[0]
    t_one = runtime_times(program_features(one, inst), [M], cal(tb_s=0.0))[0]
    assert t_two == pytest.approx(10e-6 + 2e-9 * M / 4)
    assert t_one == pytest.approx(10e-6 + 2 * 2e-9 * M / 4)


@lru_cache(maxsize=None)
def a100_features(name: str, kind: str):
    inst = load_instance(DATA / f"a100x2-{kind}.toml")
    return program_features(read_program_text(DATA / "programs" / name), inst)


@lru_cache(maxsize=None)
def scaled_bound(eff_nv: float, eff_nic: float, size: float) -> float:
    """The event-model lower bound of a 2x8 A100 allgather with every link at its calibrated
    share of nominal bandwidth and no latency (collsynth.tens.bounds, independent of the model)."""
    topo = build("forestcoll_a100", {"nodes": 2, "nvlink_bandwidth": 300e9 * eff_nv, "nic_bandwidth": 25e9 * eff_nic,
                                     "nvlink_alpha": 0.0, "nic_alpha": 0.0})
    inst = make_instance(topo, "allgather", message_bytes=size, nodes=range(16))
    return bounds.instance_bounds(inst).event.value


@settings(max_examples=25, deadline=None)
@given(program=st.sampled_from(["msccl_allgather_k1_inst1_NVLINK300_IB25.xml.xz",
                                "msccl_allgather_split2_k1_inst4_NVLINK300_IB25.xml.xz",
                                "nccl_ring_allgather_n32_c32.xml.xz",
                                "original-Allgather.n16-DGXA100-steps8-tacclsol-improve-1704690792_i8_scRemote1_"
                                "IBContig.sccl.xml.xz"]),
       eff_nv=st.sampled_from([0.3, 0.6, 1.0]), eff_nic=st.sampled_from([0.4, 0.87, 1.0]),
       log_size=st.integers(16, 33), log_buff=st.integers(16, 23),
       rate=st.floats(1e9, 4e11), step=st.floats(0, 2e-5), hop=st.floats(0, 3e-5), op=st.floats(0, 2e-6),
       share=st.floats(0, 1), handshake=st.floats(0, 1), fair=st.booleans(), fences=st.booleans(),
       sms=st.sampled_from([0, 108]), waves=st.booleans(), credit=st.sampled_from([None, 0.0, 5e-6, 3e-5]),
       nic=st.booleans(), credit_s=st.floats(0, 1e-5))
def test_never_faster_than_the_scaled_link_bound(program, eff_nv, eff_nic, log_size, log_buff, rate, step, hop, op,
                                                 share, handshake, fair, fences, sms, waves, credit, nic, credit_s):
    c = cal(efficiency={"nvswitch": eff_nv, "nic": eff_nic}, hop_s={"nvswitch": hop, "nic": hop},
            gpu_op_s={"nvswitch": op, "nic": op}, round_share=share, handshake_share=handshake,
            tb_rate=rate, reduce_rate=rate, step_s=step, launch_s=0.0, buff_bytes=1 << log_buff, fair_links=fair, fences=fences,
            sms=sms, block_waves=waves, net_credit={} if credit is None else {"nic": credit}, nic_credit=nic,
            credit_s=credit_s)
    size = float(1 << log_size)
    t = runtime_times(a100_features(program, "allgather"), [size], c)[0]
    assert t >= scaled_bound(eff_nv, eff_nic, size) * (1 - 1e-9)


def test_parser_reads_a_published_log():
    # the values are the log's own text (tree k=1 inst1, NCCL_BUFFSIZE 1 MiB): 1 GiB row
    rows = read_nccl_tests(DATA / "logs" / "msccl_allgather_k1_inst1_NVLINK300_IB25.xmlbuff1048576.txt")
    k = int(np.flatnonzero(rows["size"] == 1073741824)[0])
    assert (rows["out_of_place_us"][k], rows["in_place_us"][k]) == (6466.0, 6025.9)
    assert rows["size"][0] == 256 and rows["size"][-1] == 8589934592 and len(rows["size"]) == 26


def test_parser_refuses_what_is_not_nccl_tests_output():
    with pytest.raises(InputError, match="not nccl-tests output") as e:
        parse_nccl_tests("mpirun -np 16 ./all_gather_perf\nSegmentation fault\n", "run.log")
    assert e.value.where == "run.log"


def test_parser_names_the_line_of_a_malformed_row():
    text = ("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"
            "         256             4     float    none      -1    38.71    0.01    0.01    N/A    158.8    0.00    0.00    N/A\n"
            "         512             8     float    none      -1    38.78\n")
    with pytest.raises(InputError) as e:
        parse_nccl_tests(text, "cut.txt")
    assert e.value.where == "cut.txt:3"
    with pytest.raises(InputError) as e:
        parse_nccl_tests(text.replace("38.78\n", "38.78 x 0.01 N/A 114.5 0.00 0.00 N/A\n"), "bad.txt")
    assert e.value.where == "bad.txt:3"


MI250 = DATA.parent / "forestcoll-mi250x2"
# Lines 1002-1005, 1035-1037, 1055-1056, 1079-1081, 1574-1576 and 1589-1591 of TE-CCL's
# amd_32.txt (microsoft/TE-CCL c128bf2): mpirun's rank tags on every line, RCCL's INFO and
# WARN lines between the rows, the 0 B and 8 KiB rows cut by an INFO message.
EXCERPT = Path(__file__).resolve().parent / "data" / "teccl_amd_32_excerpt.txt"


def test_parser_reads_a_log_tagged_by_mpirun_with_rows_cut_by_info_lines():
    rows = parse_nccl_tests(EXCERPT.read_text(), "amd_32.txt")
    # read off the excerpt by hand: a cut row's in-place time is on its continuation line
    assert rows["size"].tolist() == [0, 0, 8192, 16384, 32768, 268435456]
    assert rows["out_of_place_us"].tolist() == [13.41, 10.10, 106.5, 102.8, 101.9, 31908.0]
    assert rows["in_place_us"].tolist() == [9.95, 10.11, 2040.1, 104.1, 104.3, 18263.0]


def test_parser_reads_the_shipped_teccl_log():
    rows = read_nccl_tests(MI250 / "logs" / "teccl_amd_32.txt.xz")
    # the log's last row: "1073741824 8388608 float none -1 127776 8.40 8.14 0 63096 17.02 16.49 0"
    assert (rows["size"][-1], rows["out_of_place_us"][-1], rows["in_place_us"][-1]) == (1073741824, 127776.0, 63096.0)
    # six 0 B rows, then 512 B to 1 GiB doubling
    assert len(rows["size"]) == 6 + 22 and rows["size"][6] == 512


def test_parser_still_refuses_tagged_output_without_a_result_table():
    text = "".join(line for line in EXCERPT.read_text().splitlines(keepends=True) if "NCCL" in line)
    with pytest.raises(InputError, match="not nccl-tests output") as e:
        parse_nccl_tests(text, "info.log")
    assert e.value.where == "info.log"


def test_parser_names_the_line_of_a_cut_row_that_is_never_or_badly_completed():
    lines = EXCERPT.read_text().splitlines()
    k = next(i for i, line in enumerate(lines) if line.startswith("[1,0]<stdout>:        8192"))
    with pytest.raises(InputError, match="never completed") as e:
        parse_nccl_tests("\n".join(lines[:k + 1]), "cut.txt")
    assert e.value.where == f"cut.txt:{k + 1}"
    bad = lines[:k + 2] + ["[1,0]<stdout>:   2040.1    x.00    0.00      0"]
    with pytest.raises(InputError, match="numbers") as e:
        parse_nccl_tests("\n".join(bad), "bad.txt")
    assert e.value.where == f"bad.txt:{k + 1}"
    # a cut row followed by a whole row would be one 17-field line: refused, not read as one row
    whole = "[1,0]<stdout>:       16384           128     float    none      -1    102.8    0.16    0.15      0    104.1    0.16    0.15      0"
    with pytest.raises(InputError, match="joined") as e:
        parse_nccl_tests("\n".join(lines[:k + 2] + [whole]), "two.txt")
    assert e.value.where == f"two.txt:{k + 1}"


def manifest(tmp_path, log: Path, instance: Path) -> Path:
    prog = DATA / "programs" / "msccl_allgather_k1_inst1_NVLINK300_IB25.xml.xz"
    m = tmp_path / "manifest.toml"
    m.write_text(f'system = "t"\nsource = "test"\n[[measurement]]\nname = "m"\nprogram = "{prog}"\n'
                 f'instance = "{instance}"\nlog = "{log}"\nbuff_bytes = 1048576\n')
    return m


@pytest.mark.parametrize("text", ["mpirun: command not found\n",
                                  "[1,0]<stdout>:mi2:1:1 [0] NCCL INFO Bootstrap : Using eth0\n[1,0]<stdout>:# size\n"])
def test_calibrate_refuses_a_log_that_is_not_nccl_tests_output(tmp_path, capsys, text):
    from cli_errors import assert_one_error_line, run_cli
    log = tmp_path / "run.log"
    log.write_text(text)
    code, out, err = run_cli(["calibrate", manifest(tmp_path, log, DATA / "a100x2-allgather.toml")], capsys)
    assert code == 2
    assert_one_error_line(err, [str(log), "not nccl-tests output"])


def test_calibrate_names_the_line_of_a_malformed_row(tmp_path, capsys):
    from cli_errors import assert_one_error_line, run_cli
    good = (DATA / "logs" / "msccl_allgather_k1_inst1_NVLINK300_IB25.xmlbuff1048576.txt").read_text().splitlines()
    k = next(i for i, line in enumerate(good) if line.split()[:1] == ["1024"])
    good[k] = "        1024            16     float    none      -1    38.62"
    log = tmp_path / "cut.txt"
    log.write_text("\n".join(good) + "\n")
    code, out, err = run_cli(["calibrate", manifest(tmp_path, log, DATA / "a100x2-allgather.toml")], capsys)
    assert code == 2
    assert_one_error_line(err, [f"{log}:{k + 1}"])


def test_calibrate_refuses_a_program_that_does_not_match_the_instance(tmp_path, capsys):
    from cli_errors import assert_one_error_line, run_cli
    one_box = tmp_path / "a100x1.toml"
    one_box.write_text('name = "a100x1"\n[topology]\ngenerator = "forestcoll_a100"\nnodes = 1\n'
                       '[collective]\nkind = "allgather"\nmessage_bytes = 1e6\n')
    log = DATA / "logs" / "msccl_allgather_k1_inst1_NVLINK300_IB25.xmlbuff1048576.txt"
    code, out, err = run_cli(["calibrate", manifest(tmp_path, log, one_box)], capsys)
    assert code == 2
    assert_one_error_line(err, ["msccl_allgather_k1_inst1_NVLINK300_IB25.xml.xz", "16 GPUs"])


def test_solve_carries_the_runtime_column_and_its_calibration(tmp_path, capsys):
    import json

    from cli_errors import run_cli
    c = cal(name="ring-links", efficiency={"link": 0.5}, hop_s={"link": 1e-6})
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(c.as_json()))
    inst = Path(__file__).resolve().parents[1] / "instances" / "corpus" / "ring8-allgather.toml"
    code, out, err = run_cli(["solve", inst, "--producer", "ring", "--calibration", path, "--json"], capsys)
    assert code == 0, err
    row = json.loads(out)["rows"][0]
    assert row["calibration"] == "ring-links" and row["time_runtime_s"] > 0
    other = tmp_path / "other.json"
    other.write_text(json.dumps(cal(name="a100", efficiency={"nic": 0.9}, hop_s={"nic": 1e-6}).as_json()))
    code, out, err = run_cli(["solve", inst, "--producer", "ring", "--calibration", other, "--json"], capsys)
    row = json.loads(out)["rows"][0]
    assert row["time_runtime_s"] is None and "fitted on link classes nic" in row["runtime_note"]


def chain_xml(forward: bool) -> str:
    """Three GPUs on a line 0 -> 1 -> 2, chunk 0 (3 chunks a loop) sent on from GPU 1: by a
    receive that forwards (``rcs``) or by a receive and a send in another thread block that
    waits for it (``depid``)."""
    head = ('<algo name="t" proto="Simple" nchannels="1" nchunksperloop="3" ngpus="3" coll="allgather" '
            'inplace="1" outofplace="0" minBytes="0" maxBytes="1099511627776">')
    step = '<step s="{k}" type="{t}" srcbuf="o" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="{d}" deps="{ds}" hasdep="{h}"/>'
    g0 = '<gpu id="0" i_chunks="1" o_chunks="3" s_chunks="0"><tb id="0" send="1" recv="-1" chan="0">' + \
        step.format(k=0, t="s", d=-1, ds=-1, h=0) + "</tb></gpu>"
    if forward:
        g1 = '<gpu id="1" i_chunks="1" o_chunks="3" s_chunks="0"><tb id="0" send="2" recv="0" chan="0">' + \
            step.format(k=0, t="rcs", d=-1, ds=-1, h=0) + "</tb></gpu>"
    else:
        g1 = ('<gpu id="1" i_chunks="1" o_chunks="3" s_chunks="0"><tb id="0" send="-1" recv="0" chan="0">'
              + step.format(k=0, t="r", d=-1, ds=-1, h=1) + '</tb><tb id="1" send="2" recv="-1" chan="0">'
              + step.format(k=0, t="s", d=0, ds=0, h=0) + "</tb></gpu>")
    g2 = '<gpu id="2" i_chunks="1" o_chunks="3" s_chunks="0"><tb id="0" send="-1" recv="1" chan="0">' + \
        step.format(k=0, t="r", d=-1, ds=-1, h=0) + "</tb></gpu>"
    return "\n".join([head, g0, g1, g2, "</algo>"])


def line_instance():
    return make_instance(build("ring", {"nodes": 3}, bandwidth=1e9, alpha=0.0), "allgather", message_bytes=1.0)


def test_one_iteration_in_rounds_by_hand():
    # GPU 1 sends chunk 0 on only when its receive has finished (depid): two rounds, each one
    # chunk of s bytes over one link at half of 1 GB/s, 2e-9 s per byte. buff 64 KB: slices of
    # at most 32 KB; 96 KB is 32 KB a chunk, one iteration: launch 10 + 2 * 64 = 138 us (the
    # link period is 64 us, the thread blocks' steps and credits 3 us).
    f = program_features(chain_xml(forward=False), line_instance())
    assert runtime_times(f, [96e3], cal(buff_bytes=64000))[0] == pytest.approx(10e-6 + 2 * 64e-6)
    # two iterations (192 KB): the first in rounds, the second one period behind: + 64 us
    assert runtime_times(f, [192e3], cal(buff_bytes=64000))[0] == pytest.approx(10e-6 + 3 * 64e-6)


@pytest.mark.parametrize("share, expected_us", [(1.0, 10 + 128), (0.5, 10 + 96), (0.0, 10 + 64)])
def test_a_share_of_the_rounds_past_the_pipelined_iteration_by_hand(share, expected_us):
    # The same two rounds of 64 us each (96 KB, one iteration). Pipelined, the first iteration
    # lasts max(critical path, period): the path's 4 steps and 2 credits (8 + 2 us; copies free)
    # against the 64 us period: 64 us. The rounds say 128 us; a calibration pays the share
    # `round_share` of the 64 us between them: 64 + share x 64.
    f = program_features(chain_xml(forward=False), line_instance())
    t = runtime_times(f, [96e3], cal(buff_bytes=64000, round_share=share))[0]
    assert t == pytest.approx(expected_us * 1e-6)


def test_forwarding_receive_is_one_slice_behind_by_hand():
    # rcs forwards slice by slice: a call of 32 KB moves two 16 KB slices (prims_simple.h), so
    # the second link starts one slice, half the chunk, after the first: 1.5 x 64 us = 96 us.
    f = program_features(chain_xml(forward=True), line_instance())
    assert runtime_times(f, [96e3], cal(buff_bytes=64000))[0] == pytest.approx(10e-6 + 96e-6)
    # a chunk of one slice (s <= buff / 128 = 500 B at buff 64 KB: 900 B, 300 B a chunk): the
    # forward waits for all of it; links need 2 x 0.6 us, below the path's 3 steps and 2 hops
    # (8 us): launch 10 + 8 us
    assert runtime_times(f, [900.0], cal(buff_bytes=64000))[0] == pytest.approx(10e-6 + 8e-6)


def test_another_runtime_scales_the_fixed_costs_by_hand():
    # test_one_channel_by_hand at 2 KB is launch 10 + 5 us of steps and credit; a runtime whose
    # fixed costs are half as large: 5 + 2.5 us. The link time (2 us) is below either.
    from collsynth.tens.cost_models.runtime import for_runtime
    c = cal(runtimes={"other": {"latency": 0.5, "bandwidth": 1.0}})
    f = program_features(PAIR, pair_instance())
    assert runtime_times(f, [2e3], for_runtime(c, "other"))[0] == pytest.approx(7.5e-6)
    assert runtime_times(f, [2e3], for_runtime(c, ""))[0] == pytest.approx(15e-6)


def test_fit_recovers_another_runtimes_scale_of_fixed_costs():
    # measurements made up from a known calibration: the same program on two runtimes, the
    # second with fixed costs half as large; the fit on both finds that half (the individual
    # fixed costs need not be identifiable, their ratio between runtimes is)
    from collsynth.tens.calibration import Row, fit
    from collsynth.tens.cost_models.runtime import for_runtime
    from collsynth.tens.measurements import Measurement
    truth = cal(efficiency={"link": 0.6}, hop_s={"link": 3e-6}, gpu_op_s={"link": 1e-6}, tb_rate=2e10,
                reduce_rate=2e10, step_s=2e-6, launch_s=20e-6, tb_s=0.5e-6,
                runtimes={"other": {"latency": 0.5, "bandwidth": 1.0}})
    f = program_features(PAIR, pair_instance())
    sizes = np.logspace(3, 8, 11)
    rows = []
    for runtime in ("", "other"):
        m = Measurement(f"pair{runtime}", Path("p.xml"), Path("i.toml"), Path("l.txt"), 1 << 20, "in-place", 0, False,
                        runtime)
        rows.append(Row(m, f, sizes, runtime_times(f, sizes, for_runtime(truth, runtime), 1 << 20)))
    fitted = fit(rows, "t", "s", "")
    assert fitted.runtimes["other"]["latency"] == pytest.approx(0.5, rel=0.05)
    assert fitted.fit["rms_log_error"] < 0.02


# GPU 0 sends chunks 0 and 1 to GPU 1 in one thread block; GPU 1 receives both in one.
ONE_WAY = xml(2, 2, [[(1, -1, 0, [("s", 0), ("s", 1)])], [(-1, 0, 0, [("r", 0), ("r", 1)])]])


def one_way_instance():
    # alpha 1 us, so the critical path is the one through both sends (s0, s1, r1)
    return make_instance(build("ring", {"nodes": 2}, bandwidth=1e9, alpha=1e-6), "allgather", message_bytes=1.0)


@pytest.mark.parametrize("mode, copies", [("write", [2, 0]), ("read", [0, 2])])
def test_which_thread_block_copies_across_a_connection_by_hand(mode, copies):
    # P2P write: the sender writes into the receiver's buffer; P2P read (NCCL between two
    # Ampere GPUs joined by NVLink): the sender's buffer is read over the link by the receiver.
    f = program_features(ONE_WAY, one_way_instance(), {"link": mode})
    assert f.tb_sent.tolist() == copies
    assert f.path_sent == (2 if mode == "write" else 1)  # the path s0, s1, r1


@pytest.mark.parametrize("mode, expected_us", [("write", 58.0), ("read", 58.0)])
def test_the_receiver_copies_on_a_read_transport_by_hand(mode, expected_us):
    # 40 KB: two chunks of 20 KB, one iteration, one slice a call; a copy across the link at
    # 1 GB/s is 20 us, 2 us a step, 1 us a send's credit, the link at its full 1 GB/s (40 us
    # for both chunks), launch 10 us.
    # write: GPU 0's thread block 2 steps + 2 credits + 2 x 20 = 46 us, GPU 1's 4 us; the path
    #   s0, s1, r1: 3 steps + 2 credits, and the slowest chain of copies, s0's then s1's (one
    #   thread block, in order), 40 us: 48 us; in rounds 2 x 20 = 40 us: 10 + 48 = 58 us.
    # read: GPU 0's 6 us, GPU 1's 4 + 2 x 20 = 44 us; the path's 3 steps + 2 credits, 8 us, and
    #   the slowest chain of copies, r0's then r1's (GPU 1's thread block, in order), 40 us: 48
    #   us, more than a period and the rounds (40): 10 + 48 = 58 us.
    f = program_features(ONE_WAY, one_way_instance(), {"link": mode})
    c = cal(tb_rate=1e9, efficiency={"link": 1.0})
    assert runtime_times(f, [4e4], c)[0] == pytest.approx(expected_us * 1e-6)


def test_a_calibration_file_keeps_its_transports(tmp_path, capsys):
    import json

    from collsynth.tens.cost_models.runtime import load_calibration
    path = tmp_path / "c.json"
    path.write_text(json.dumps(cal(transports={"link": "read"}).as_json()))
    assert load_calibration(path).transports == {"link": "read"}
    data = cal().as_json()
    data["transports"] = {"link": "pull"}
    path.write_text(json.dumps(data))
    with pytest.raises(InputError, match="transports.link: expected one of read, write, got 'pull'"):
        load_calibration(path)


def test_calibrate_names_a_bad_transport_in_the_manifest(tmp_path, capsys):
    from cli_errors import assert_one_error_line, run_cli
    path = tmp_path / "m.toml"
    path.write_text('system = "s"\nsource = "x"\ntransports = { nvswitch = "pull" }\n[[measurement]]\n'
                    'name = "a"\nprogram = "p.xml"\ninstance = "i.toml"\nlog = "l.txt"\n')
    code, out, err = run_cli(["calibrate", str(path)], capsys)
    assert code == 2
    assert_one_error_line(err, [f"{path}: transports.nvswitch", "'pull'"])


def test_a_calibration_file_keeps_its_round_share(tmp_path):
    import json

    from collsynth.tens.cost_models.runtime import load_calibration
    path = tmp_path / "c.json"
    path.write_text(json.dumps(cal(round_share=0.25).as_json()))
    assert load_calibration(path).round_share == 0.25
    data = cal().as_json()
    del data["parameters"]["round_share"]  # a file written before the share was fitted: every round paid
    path.write_text(json.dumps(data))
    assert load_calibration(path).round_share == 1.0
    data["parameters"]["round_share"] = 1.5
    path.write_text(json.dumps(data))
    with pytest.raises(InputError, match="parameters.round_share: expected a number in 0..1, got 1.5"):
        load_calibration(path)


def test_a_calibration_file_keeps_its_handshake_share(tmp_path):
    import json

    from collsynth.tens.cost_models.runtime import load_calibration
    path = tmp_path / "c.json"
    path.write_text(json.dumps(cal(handshake_share=0.25).as_json()))
    assert load_calibration(path).handshake_share == 0.25
    data = cal().as_json()
    del data["parameters"]["handshake_share"]  # a file written before the share was fitted: non-empty slices only
    path.write_text(json.dumps(data))
    assert load_calibration(path).handshake_share == 0.0
    data["parameters"]["handshake_share"] = -0.5
    path.write_text(json.dumps(data))
    with pytest.raises(InputError, match="parameters.handshake_share: expected a number in 0..1, got -0.5"):
        load_calibration(path)


@pytest.mark.parametrize("handshake, expected_us", [(0.0, 30.0), (0.5, 40.0), (1.0, 50.0)])
def test_an_empty_slice_pays_the_handshake_share_by_hand(handshake, expected_us):
    # PAIR at 2 KB (one slice a call: 1 KB under buff / 128 = 8 MiB): each GPU sends one chunk and
    # receives one, 2 operations; at 10 us of shared cost each, a call pays (1 + handshake) x 10
    # us per operation: 20, 30 or 40 us, above the thread block's 2 x 2 us + 1 us credit x (1 +
    # handshake) and the link's 2 us; launch 10 us.
    f = program_features(PAIR, pair_instance())
    t = runtime_times(f, [2e3], cal(gpu_op_s={"link": 10e-6}, handshake_share=handshake))[0]
    assert t == pytest.approx(expected_us * 1e-6)


@pytest.mark.parametrize("build_share, expected_us", [(None, 30.0), (0.5, 40.0), (1.0, 50.0)])
def test_a_runtime_build_pays_its_own_handshake_share_by_hand(build_share, expected_us):
    # As above at the main share 0 (30 us); a build that names its own share pays it, with its
    # fixed costs and link shares unscaled (latency 1, bandwidth 1): (1 + share) x 10 us per
    # operation, 2 operations, launch 10 us.
    from collsynth.tens.cost_models.runtime import for_runtime
    scale = {"latency": 1.0, "bandwidth": 1.0, **({} if build_share is None else {"handshake": build_share})}
    c = for_runtime(cal(gpu_op_s={"link": 10e-6}, runtimes={"other": scale}), "other")
    assert runtime_times(program_features(PAIR, pair_instance()), [2e3], c)[0] == pytest.approx(expected_us * 1e-6)


def test_a_calibration_file_keeps_a_builds_handshake_share(tmp_path):
    import json

    from collsynth.tens.cost_models.runtime import load_calibration
    path = tmp_path / "c.json"
    data = cal(runtimes={"other": {"latency": 1.5, "bandwidth": 1.0, "handshake": 0.25}}).as_json()
    path.write_text(json.dumps(data))
    assert load_calibration(path).runtimes["other"] == {"latency": 1.5, "bandwidth": 1.0, "handshake": 0.25}
    data["runtimes"]["other"]["handshake"] = 2
    path.write_text(json.dumps(data))
    with pytest.raises(InputError, match="runtimes.other.handshake: expected a number in 0..1, got 2"):
        load_calibration(path)


def _line_program(relay: bool) -> str:
    """GPU 0's chunk to GPU 2 through GPU 1: forwarded by one ``rcs`` step, or (``relay``) received
    by one thread block and sent on by another that waits for it (``depid``), as TACCL writes."""
    head = ('<algo name="t" proto="Simple" nchannels="1" nchunksperloop="3" ngpus="3" coll="allgather" inplace="1" '
            'outofplace="0" minBytes="0" maxBytes="1099511627776">')
    step = ('<step s="0" type="{}" srcbuf="o" srcoff="0" dstbuf="o" dstoff="0" cnt="1" '
            'depid="{}" deps="{}" hasdep="{}"/>')
    tb = '<tb id="{}" send="{}" recv="{}" chan="0">{}</tb>'
    middle = (tb.format(0, -1, 0, step.format("r", -1, -1, 1)) + tb.format(1, 2, -1, step.format("s", 0, 0, 0))
              if relay else tb.format(0, 2, 0, step.format("rcs", -1, -1, 0)))
    gpus = [tb.format(0, 1, -1, step.format("s", -1, -1, 0)), middle, tb.format(0, -1, 1, step.format("r", -1, -1, 0))]
    body = "".join(f'<gpu id="{g}" i_chunks="0" o_chunks="3" s_chunks="0">{t}</gpu>' for g, t in enumerate(gpus))
    return head + body + "</algo>"


@pytest.mark.parametrize("relay, expected", [(False, (1.5, 2.0)), (True, (2.0, 2.0))])
def test_a_forward_trails_by_a_slice_a_relay_by_a_step_by_hand(relay, expected):
    # P2P write: each send copies its chunk (one copy time). A forward (rcs) starts once its
    # sender posted the first slice: with half-chunk slices GPU 0's copy ends at 1 and GPU 1's
    # at 1.5 (it starts at 0.5 and can end no sooner than half a chunk after its input);
    # with one-slice calls, at 1 and 2. A relay's send waits for its receive to finish (the
    # depid flag is set after the step): GPU 1's copy runs from 1 to 2 either way.
    line = make_instance(build("ring", {"nodes": 3}, bandwidth=1e9, alpha=0.0), "allgather", message_bytes=1.0)
    f = program_features(_line_program(relay), line, {"link": "write"})
    assert f.path_copies == pytest.approx(expected)
