"""A manifest's ``[fixed]`` link shares: set from a source, kept by the fit, cited in the
calibration file, and refused in one line when out of range."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from collsynth import InputError

from collsynth.tens.calibration import Row, fit
from collsynth.tens.cost_models.runtime import runtime_times
from collsynth.tens.measurements import Measurement
from collsynth.tens.runtime_program import program_features
from test_runtime_model import PAIR, cal, pair_instance

FIXED = {"source": "a datasheet", "efficiency": {"link": 0.9}}


def made_up_rows():
    # the pair program measured under a known calibration with the link at 60 % of 1 GB/s;
    # from 1 MB up the link decides (1 MB: 0.5 MB a chunk over 0.6 GB/s = 833 us, far above the
    # 5 us of steps and credit), so the share is what the large sizes measure
    truth = cal(efficiency={"link": 0.6}, hop_s={"link": 3e-6}, step_s=2e-6, launch_s=20e-6)
    f = program_features(PAIR, pair_instance())
    sizes = np.logspace(3, 8, 11)
    m = Measurement("pair", Path("p.xml"), Path("i.toml"), Path("l.txt"), 1 << 20, "in-place", 0, False)
    return [Row(m, f, sizes, runtime_times(f, sizes, truth, 1 << 20))]


def test_the_fit_finds_the_share_unless_it_is_fixed():
    free = fit(made_up_rows(), "t", "s", "")
    assert free.efficiency["link"] == pytest.approx(0.6, rel=0.02)
    pinned = fit(made_up_rows(), "t", "s", "", fixed=FIXED)
    assert pinned.efficiency["link"] == pytest.approx(0.9, rel=1e-6)
    # 1.5 times the share the measurements show: the large sizes are predicted 1.5 times too
    # fast, so the pinned fit is worse, and says where its fixed share came from
    assert pinned.fit["rms_log_error"] > 0.1 > free.fit["rms_log_error"]
    assert pinned.fit["fixed"] == FIXED and "fixed" not in free.fit


def test_a_fixed_share_below_what_a_fitted_measurement_moved_is_refused():
    # the made-up link carried its loads at 60 % of its bandwidth (less the launch's 20 us: just
    # under 60 % at 100 MB); a share fixed at 30 % could not have carried them
    with pytest.raises(InputError, match=r"fixed.efficiency.link: 0.3 is below 0.59"):
        fit(made_up_rows(), "t", "s", "", fixed={"source": "x", "efficiency": {"link": 0.3}})


MANIFEST = '''system = "s"
source = "x"
[fixed]
source = "a datasheet"
efficiency = {{ nic = {value} }}
[[measurement]]
name = "a"
program = "p.xml"
instance = "i.toml"
log = "l.txt"
'''


@pytest.mark.parametrize("value", ["1.5", "0", '"high"'])
def test_a_fixed_share_out_of_range_is_one_line(tmp_path, capsys, value):
    from cli_errors import assert_one_error_line, run_cli
    path = tmp_path / "m.toml"
    path.write_text(MANIFEST.format(value=value))
    code, out, err = run_cli(["calibrate", str(path)], capsys)
    assert code == 2
    assert_one_error_line(err, [f"{path}: fixed.efficiency.nic", "(0, 1]"])


def test_the_shipped_mi250_manifest_fixes_the_nic_share_from_rccls_rings():
    # RCCL's rome_model_59 baseBw 161.4 GB/s for 32 rings: algbw 161.4 x 32 / 31 = 166.6 GB/s;
    # each GCD's NIC port carries 2 rings x 31 chunks of 1,024 an iteration: 62 x 166.6 / 1,024
    # = 10.09 GB/s of ForestColl's 16 GB/s, 0.6305
    from collsynth.tens.measurements import read_manifest
    here = Path(__file__).resolve().parents[1] / "instances" / "measurements" / "forestcoll-mi250x2"
    m = read_manifest(here / "manifest.toml")
    assert m.fixed["efficiency"]["nic"] == pytest.approx(62 * 161.4 * 32 / 31 / 1024 / 16, abs=1e-4)
    assert "rome_model_59" in m.fixed["source"]


def test_the_mi250_allreduce_ring_reference_is_rccls_ring_not_its_tree():
    # RCCL's allreduce in ForestColl's logs (out-of-place) is its tree: 223.8 us at 1 MiB in
    # amd_allreduce_split_k1_inst1.xmlbuff4194304.txt, 223.5 in rccl_allreduce_tree_results.txt;
    # RCCL's ring forced (NCCL_ALGO=RING, rccl_allreduce_ring_results.txt) takes 673.6 us at
    # 1 MiB and 13093 us at 1 GiB (read off the log). The ring reference must be the latter.
    from collsynth.tens.measurements import read_manifest, read_nccl_tests
    here = Path(__file__).resolve().parents[1] / "instances" / "measurements" / "forestcoll-mi250x2"
    rings = [m for m in read_manifest(here / "manifest.toml").measurements
             if m.program.name.startswith("nccl_ring_allreduce")]
    assert len(rings) == 1 and rings[0].column == "out-of-place"
    log = read_nccl_tests(rings[0].log)
    at = dict(zip(log["size"].tolist(), log["out_of_place_us"].tolist()))
    assert (at[1 << 20], at[1 << 30]) == (673.6, 13093.0)
    tree = read_nccl_tests(here / "logs" / "amd_allreduce_split_k1_inst1.xmlbuff4194304.txt")
    assert dict(zip(tree["size"].tolist(), tree["out_of_place_us"].tolist()))[1 << 20] == 223.8
