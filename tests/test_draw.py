"""`collsynth draw`: a verified schedule drawn on its TEN or as a link-load heatmap."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from matplotlib.image import imread

from collsynth.instances import CORPUS
from collsynth.results import store
from collsynth.results.pictures import link_loads
from collsynth.solvers.cli import main
from collsynth.tens.schedule import from_sends, read_json, write_json

INSTANCE = str(CORPUS / "ring8-allgather.toml")


def _solve(tmp_path):
    out = tmp_path / "s.json"
    assert main(["solve", INSTANCE, "--producer", "ring", "--out", str(out)]) == 0
    return out


def test_draw_ten_and_heatmap_write_images(tmp_path, capsys):
    sched = _solve(tmp_path)
    for kind in ("ten", "heatmap"):
        png = tmp_path / f"{kind}.png"
        assert main(["draw", str(sched), INSTANCE, "--out", str(png), "--kind", kind]) == 0
        img = imread(png)
        assert img.shape[0] > 100 and img.shape[1] > 100 and img.std() > 0.01  # not a blank canvas


def test_link_loads_count_every_send_once(tmp_path, capsys):
    s = read_json(_solve(tmp_path))
    loads, pairs = link_loads(s, None)
    assert loads.sum() == len(s)  # whole chunks: one unit per send
    assert loads.shape == (s.num_steps, len({(a, b) for a, b in zip(s.src.tolist(), s.dst.tolist())}))


def test_draw_refuses_an_invalid_schedule(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    write_json(from_sends([(0, 0, 1, 1, 2, 1)], "allgather", 8, 8), bad)  # node 1 does not hold chunk 0
    assert main(["draw", str(bad), INSTANCE, "--out", str(tmp_path / "x.png"), "--json"]) == 1
    assert not (tmp_path / "x.png").exists()
    assert '"verified": false' in capsys.readouterr().out


QUICK_STORE = Path(__file__).resolve().parent.parent / "results" / "quick-store"


def _stored_schedule(instance: str, producer: str) -> Path:
    runs = store.load(QUICK_STORE)
    row = runs[(runs["instance"] == instance) & (runs["producer"] == producer)].iloc[0].to_dict()
    return store.schedule_file(QUICK_STORE, row)


@pytest.mark.parametrize("instance, producer, view", [
    ("torus4x4-allgather", "bfb-lp", "heatmap"),  # 320 sends in 4 steps: 80 a step, too many per panel
    ("ring8-allgather", "ring", "steps"),          # 56 sends (> 48: no TEN), 8 a step on 8 nodes
    ("ring6-reduce", "greedy", "ten"),             # 5 sends on 6 nodes
])
def test_draw_chooses_the_view_by_size(tmp_path, capsys, instance, producer, view):
    png = tmp_path / "auto.png"
    args = ["draw", str(_stored_schedule(instance, producer)), str(CORPUS / f"{instance}.toml"), "--out", str(png)]
    assert main([*args, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["kind"] == view
    assert imread(png).std() > 0.01
