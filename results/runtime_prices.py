"""The runtime column: a row's schedule priced under the calibrated ``runtime`` cost model.

The ``runtime`` model is opt-in (it needs a calibration, ``docs/cost-models.md``), so the
result schema has no column of it; ``solve``, ``bench`` and ``tables`` given ``--calibration
FILE`` add two columns to what they show: :data:`COLUMNS`, the runtime time and the name of the
calibration that priced it (and, when the schedule cannot run as an MSCCL program, a note
saying why instead of a time; when it runs on a coarser grid than its own, a note saying so).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from .. import InputError
from ..instances.instance import Instance, load_instance
from ..tens.cost_models import get
from ..tens.cost_models.runtime import Calibration
from ..tens.calibration import load_any_calibration
from ..tens.switch_runtime import SwitchCalibration
from ..tens.schedule import Schedule, read_json
from .store import schedule_file

__all__ = ["COLUMNS", "runtime_fields", "runtime_frame"]

COLUMNS = ("time_runtime_s", "calibration", "runtime_note")


def runtime_fields(schedule: Schedule | None, instance: Instance, calibration: Calibration) -> dict:
    """:data:`COLUMNS` of one row: the schedule's runtime time under ``calibration``, or a note
    (no schedule; a schedule MSCCL cannot run, or a calibration of another system, as the model says)."""
    out = dict.fromkeys(COLUMNS)
    out["calibration"] = calibration.name
    if schedule is None:
        out["runtime_note"] = "no schedule"
        return out
    try:
        cost = get("runtime").price(schedule, instance, calibration=calibration)
        out["time_runtime_s"] = cost.total_s
        out["runtime_note"] = cost.extra.get("grid")
    except InputError as e:
        out["runtime_note"] = f"not priced: {e.where}: {e.what}"
    return out


def runtime_frame(df: pd.DataFrame, store: str | Path, calibration: str | Path | Calibration) -> pd.DataFrame:
    """:data:`COLUMNS` for every stored run of ``df`` (same index), its schedule read from the
    store and its instance from the stored ``instance_file``."""
    known = (Calibration, SwitchCalibration)
    cal = calibration if isinstance(calibration, known) else load_any_calibration(calibration)
    rows, instances = [], {}
    for _, row in df.iterrows():
        rel, inst_file = row.get("schedule_path"), row.get("instance_file")
        if not isinstance(rel, str) or not rel or not isinstance(inst_file, str):
            rows.append(runtime_fields(None, None, cal))
            continue
        if inst_file not in instances:
            instances[inst_file] = load_instance(inst_file)
        schedule = read_json(schedule_file(store, {"schedule_path": rel}))
        rows.append(runtime_fields(schedule, instances[inst_file], cal))
    out = pd.DataFrame(rows, index=df.index, columns=list(COLUMNS))
    out["time_runtime_s"] = out["time_runtime_s"].astype(float).replace({None: np.nan})
    return out
