"""The ``runtime`` model does not price a schedule that sums in a switch: it runs as an MSCCL++
switch-channel plan, which the model of msccl-executor's programs does not describe and no
calibration measures; the refusal is one line, and the plain box's schedules still price."""

from __future__ import annotations

from pathlib import Path

import pytest

from collsynth import InputError
from collsynth.instances.generators import build
from collsynth.instances.instance import make_instance
from collsynth.solvers.producers import Options, get
from collsynth.tens.cost_models import price
from collsynth.tens.verify import verify

CAL = Path(__file__).resolve().parents[1] / "instances" / "calibrations" / "forestcoll-a100x2.json"


def test_an_nvls_schedule_is_refused_in_one_line_naming_the_switch_channel_plan():
    inst = make_instance(build("dgx_h100", {"nodes": 1, "nvls": True}), "allreduce", message_bytes=1e6)
    s = get("nvls").run(inst, Options(params={"pieces": 2})).schedule
    assert verify(s, inst) is None  # a valid schedule, refused for what it is, not for a defect
    with pytest.raises(InputError) as e:
        price(s, inst, "runtime", calibration=CAL)
    assert "switch-channel plan" in str(e.value) and "\n" not in str(e.value)


def test_tree_packing_on_the_same_box_without_switch_sums_is_priced():
    inst = make_instance(build("dgx_h100", {"nodes": 1}), "allreduce", message_bytes=1e6)
    s = get("tree-packing").run(inst, Options(params={"pieces": 2})).schedule
    assert verify(s, inst) is None
    assert price(s, inst, "runtime", calibration=CAL).total_s > 0
