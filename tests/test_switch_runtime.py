"""The runtime price of switch-channel plans (``tens/switch_runtime.py``): expected times derived
by hand from the port traffic of MSCCL++'s ``glres`` (every member's piece read up, the issuer's
sum back, its store, the multicast down) and of a ring; the shipped calibration against the
figures it was fitted to; bad calibration files and uncalibrated link classes in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from collsynth import InputError
from collsynth.instances.generators import build
from collsynth.instances.instance import make_instance
from collsynth.tens.cost_models import price
from collsynth.tens.switch_runtime import SwitchCalibration, fit_nvls, load_switch_calibration

from test_switch_reduction_producers import run

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "instances" / "calibrations" / "h100-nvls.json"
CAL = SwitchCalibration("t", "box", "by hand", {"nvswitch": 0.8, "link": 0.8}, {"nvswitch": 0.5, "link": 0.5}, 1e-6)
M = 1e9


def test_nvls_on_one_box_is_priced_as_its_glres_plan_moves_bytes():
    # 8 GPUs, 450 GB/s ports: each port carries M up (its piece of every group) plus M / 8 (its
    # own groups' stores) and the same down, at half the line rate; 8 groups per GPU (one chunk
    # each, one piece) at 1 us each on the issuing GPU.
    inst = make_instance(build("dgx_h100", {"nodes": 1, "nvls": True}), "allreduce", message_bytes=M)
    s = run("nvls", inst, pieces=1)
    c = price(s, inst, "runtime", calibration=CAL)
    assert c.T_B_s == pytest.approx(1.125 * M / (0.5 * 450e9))
    assert c.T_L_s == pytest.approx(1e-6)
    assert c.extra["group_ops"] == 8


def test_a_ring_without_switch_sums_is_priced_at_the_plain_share():
    # the ring moves 2 (N - 1) / N M each way over every port, at 0.8 of 450 GB/s; no group ops
    inst = make_instance(build("dgx_h100", {"nodes": 1}), "allreduce", message_bytes=M)
    c = price(run("ring", inst), inst, "runtime", calibration=CAL)
    assert c.total_s == pytest.approx(1.75 * M / (0.8 * 450e9))
    assert c.T_L_s == 0


def test_the_load_reduce_shape_is_priced_as_written():
    # NCCL's shape written as sends (the others' pieces up, the sum to the owner, its store up,
    # the multicast to the others), priced as written: per port up (N - 1) / N M (the others'
    # chunks) + M / N (its own store) = M, down M / N (its own sum) + (N - 1) / N M (the
    # others' results) = M; the export writes no glres for it, so no group ops are counted.
    inst = make_instance(build("dgx_h100", {"nodes": 1, "nvls": True}), "allreduce", message_bytes=M)
    c = price(run("nvls", inst, pieces=1, shape="load-reduce"), inst, "runtime", calibration=CAL)
    assert c.T_B_s == pytest.approx(M / (0.5 * 450e9))
    assert c.extra["group_ops"] == 0


def test_the_shipped_calibration_reproduces_its_figures_and_the_must_show_ratio():
    # NCCL's NVLS at 8 GPUs: (1 + 1/8) M per port at the fitted share gives about 274 GB/s
    # algbw (NVIDIA/nccl issue 1455: 273; nccl-tests issue 212: 275); ring 1.75 M at its share
    # gives about 211 (busbw 370). Their ratio is NCCL's 480 / 370 = 1.30 in busbw.
    data = json.loads((ROOT / "instances/measurements/nccl-nvls-h100/figures.json").read_text())
    cal = load_switch_calibration(SHIPPED)
    assert fit_nvls(data["figures"], 450e9) == {"nvls": cal.switch_share["nvswitch"], "ring": cal.share["nvswitch"]}
    assert cal.switch_share["nvswitch"] * 450 / 1.125 == pytest.approx(274, abs=1.5)
    assert cal.share["nvswitch"] * 450 / 1.75 == pytest.approx(211, abs=1.5)
    box = make_instance(build("dgx_h100", {"nodes": 1, "nvls": True}), "allreduce", message_bytes=M)
    plain = make_instance(build("dgx_h100", {"nodes": 1}), "allreduce", message_bytes=M)
    ours = price(run("nvls", box), box, "runtime", calibration=SHIPPED).total_s
    ring = price(run("ring", plain), plain, "runtime", calibration=SHIPPED).total_s
    assert ring / ours >= 1.25


def test_a_link_class_without_a_share_is_refused_in_one_line():
    inst = make_instance(build("dgx_h100", {"nodes": 2, "nvls": True}), "allreduce", message_bytes=M)
    with pytest.raises(InputError) as e:
        price(run("nvls-tree", inst, pieces=1), inst, "runtime", calibration=SHIPPED)
    assert "rail" in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("params, field", [({"share": {}, "switch_share": {"a": 0.5}, "group_op_s": 0}, "share"),
                                           ({"share": {"a": 0.5}, "switch_share": {"a": 1.5}, "group_op_s": 0},
                                            "switch_share"),
                                           ({"share": {"a": 0.5}, "switch_share": {"a": 0.5}, "group_op_s": -1},
                                            "group_op_s")])
def test_a_bad_calibration_file_is_one_line_naming_the_file_and_field(tmp_path, params, field):
    p = tmp_path / "bad.json"
    p.write_text(json.dumps({"format": "collsynth.switch-calibration/1", "parameters": params}))
    with pytest.raises(InputError) as e:
        load_switch_calibration(p)
    assert "bad.json" in str(e.value) and f"parameters.{field}" in str(e.value) and "\n" not in str(e.value)


def test_the_runtime_columns_take_a_switch_channel_calibration_file():
    """``solve --calibration`` and the stored tables load either kind of file; the rows name
    the calibration and carry the price of :func:`test_nvls_on_one_box_is_priced_as_its_glres_plan_moves_bytes`'s
    kind (1.125 M over the NVLS share of 450 GB/s)."""
    from collsynth.results.runtime_prices import runtime_fields
    from collsynth.tens.calibration import load_any_calibration

    inst = make_instance(build("dgx_h100", {"nodes": 1, "nvls": True}), "allreduce", message_bytes=M)
    cal = load_any_calibration(SHIPPED)
    row = runtime_fields(run("nvls", inst, pieces=1), inst, cal)
    assert row["calibration"] == "h100-nvls"
    assert row["time_runtime_s"] == pytest.approx(1.125 * M / (cal.switch_share["nvswitch"] * 450e9))
    assert load_any_calibration(ROOT / "instances" / "calibrations" / "forestcoll-a100x2.json").name != "h100-nvls"
