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
from builders import instance_on

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


def test_a_send_counts_in_every_timestep_it_is_on_its_link():
    """Two nodes, one link 0->1 whose chunk takes 3 timesteps (alpha 0, 3 bytes at 1 B/s, on a
    timestep of 1 s) and one 1->0 taking 1: a chunk arriving at step 4 on the slow link loads
    it at steps 2, 3 and 4 (by hand), the fast one only at its step."""
    import numpy as np

    from dataclasses import replace

    from collsynth.instances import make_instance
    from collsynth.instances.topology import from_edges

    topo = from_edges(2, [(0, 1, {"bandwidth": 1.0 / 3.0}), (1, 0)], bandwidth=1.0, alpha=0.0)  # 0->1 the slow one
    instance = make_instance(topo, "allgather", message_bytes=2.0)  # 1-byte chunks: 3 s on 0->1, 1 s on 1->0
    sched = replace(from_sends([(0, 0, 1, 0, 1, 4), (1, 0, 1, 1, 0, 1)], "allgather", 2, 2), meta={"timestep_s": 1.0})
    loads, pairs = link_loads(sched, instance=instance)
    assert pairs == [(0, 1), (1, 0)]
    assert loads[:, 0].tolist() == [0, 1, 1, 1] and loads[:, 1].tolist() == [1, 0, 0, 0]
    assert np.array_equal(link_loads(sched)[0].sum(axis=0), [1, 1])  # without the instance: its arrival step only


def test_the_step_view_skips_empty_steps_and_has_a_colour_legend(tmp_path):
    from collsynth.results import pictures

    instance = instance_on("ring", {"nodes": 4})
    sends = [(c, 0, 1, c, (c + 1) % 4, 1) for c in range(4)] + [(c, 0, 1, (c + 1) % 4, (c + 2) % 4, 5) for c in range(4)] \
        + [(c, 0, 1, (c + 2) % 4, (c + 3) % 4, 9) for c in range(4)]
    sched = from_sends(sends, "allgather", 4, 4)
    fig_calls = []
    real = pictures._step_panel
    pictures._step_panel = lambda ax, s, i, pos, t, cmap: (fig_calls.append(t), real(ax, s, i, pos, t, cmap))
    try:
        pictures.draw_steps(sched, instance, tmp_path / "s.png")
    finally:
        pictures._step_panel = real
    assert fig_calls == [1, 5, 9]  # 3 panels for 9 steps
    legends = []
    real_legend = pictures._chunk_legend
    pictures._chunk_legend = lambda fig, chunks, cmap: (legends.append(chunks), real_legend(fig, chunks, cmap))
    try:
        pictures.draw_steps(sched, instance, tmp_path / "s2.png")
    finally:
        pictures._chunk_legend = real_legend
    assert legends == [[0, 1, 2, 3]]
