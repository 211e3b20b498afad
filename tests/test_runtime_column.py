"""The runtime column as a user meets it (issue 42, deliver 5): ``price``, ``solve``, ``bench``,
``tables`` and ``report`` given ``--calibration`` show the runtime model's time and the name of
the calibration that priced it; the report's column is read back in a headless browser.

The calibration charges 1 ms a step and nothing else; at 300 kB on three GPUs (100 kB a chunk,
loop iterations of half the 2 kB buffer) every program runs 100 iterations of at least one
step: at least 100 ms, and the three-tree reduce-scatter of test_export_layout.py exactly
102 ms (worked out there by hand)."""

from __future__ import annotations

import contextlib
import io
import json

import pandas as pd
import pytest
from selenium.webdriver.common.by import By

from cli_errors import run_cli
from test_cli_export_layout import INSTANCE, ROWS, STEPS_ONLY
import test_report

from collsynth.results import report
from collsynth.solvers.cli import main
from collsynth.tens.schedule import from_sends, write_json

browser = test_report.browser  # the headless browser fixture (skips without Debian's chromium)
ITERATIONS_S = 0.1  # 100 iterations of at least one 1 ms step


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    """An instance, the calibration file, and a store benched on it with ``--calibration``
    (the bench's JSON kept)."""
    tmp = tmp_path_factory.mktemp("runtime-column")
    inst = tmp / "c3.toml"
    inst.write_text(INSTANCE)
    cal = tmp / "cal.json"
    cal.write_text(json.dumps(STEPS_ONLY.as_json()))
    store = tmp / "store"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["bench", "--no-progress", "--jobs", "1", "--instances", str(inst), "--producers", "greedy,ring",
                     "--store", str(store), "--calibration", str(cal), "--json"])
    assert code == 0
    return tmp, inst, cal, store, json.loads(out.getvalue())


def test_price_names_the_calibration(tmp_path, capsys, stored):
    _, inst, cal, _, _ = stored
    sched = tmp_path / "s.json"
    write_json(from_sends(ROWS, "reduce_scatter", 3, 3), sched)
    code, out, _ = run_cli(["price", sched, inst, "--model", "runtime", "--calibration", cal, "--json"], capsys)
    data = json.loads(out)
    assert code == 0 and data["calibration"] == "steps-only" and data["total_s"] == pytest.approx(0.102)
    code, out, _ = run_cli(["price", sched, inst, "--model", "runtime", "--calibration", cal], capsys)
    assert code == 0 and out.startswith("runtime under calibration steps-only: 0.102 s")


def test_solve_shows_the_column_and_the_calibration(capsys, stored):
    _, inst, cal, _, _ = stored
    code, out, _ = run_cli(["solve", inst, "--producer", "greedy,ring", "--calibration", cal], capsys)
    assert code == 0
    header = next(line for line in out.splitlines() if line.startswith("producer"))
    assert header.split().index("runtime") > header.split().index("event")
    assert "runtime: the runtime model under calibration steps-only" in out
    code, out, _ = run_cli(["solve", inst, "--producer", "greedy", "--calibration", cal, "--json"], capsys)
    row = json.loads(out)["rows"][0]
    assert row["calibration"] == "steps-only" and row["time_runtime_s"] >= ITERATIONS_S


def test_bench_prices_every_stored_run_under_the_calibration(stored):
    *_, bench = stored
    assert {r["producer"] for r in bench["runtime"]} == {"greedy", "ring"}
    for r in bench["runtime"]:
        assert r["calibration"] == "steps-only" and r["time_runtime_s"] >= ITERATIONS_S


def test_tables_carry_the_column_and_the_calibration(tmp_path, capsys, stored):
    _, _, cal, store, bench = stored
    out = tmp_path / "tables"
    code, _, err = run_cli(["tables", "--store", store, "--out", out, "--plots", tmp_path / "plots",
                            "--calibration", cal], capsys)
    assert code == 0, err
    runtime = pd.read_csv(out / "runtime.csv")
    runs = pd.read_csv(out / "runs.csv")
    expected = {r["producer"]: r["time_runtime_s"] for r in bench["runtime"]}
    for frame in (runtime, runs):
        assert set(frame["calibration"]) == {"steps-only"}
        assert dict(zip(frame["producer"], frame["time_runtime_s"])) == pytest.approx(expected)
    md = (out / "runtime.md").read_text()
    assert "time_runtime_s" in md and md.count("steps-only") == len(expected)


@pytest.fixture(scope="module")
def site(stored, tmp_path_factory):
    _, _, cal, store, _ = stored
    out = tmp_path_factory.mktemp("report")
    assert main(["report", "--store", str(store), "--out", str(out), "--jobs", "1", "--no-progress",
                 "--calibration", str(cal)]) == 0
    return out


def test_the_report_names_the_calibration_and_shows_the_column(site, stored):
    *_, bench = stored
    index = (site / "index.html").read_text()
    assert "priced by calibration <code>steps-only</code>" in index
    page = (site / "instances" / f"{report.slug('complete3-reduce-scatter')}.html").read_text()
    assert ">time_runtime_s<" in page and ">calibration<" in page and page.count(">steps-only<") == len(bench["runtime"])
    assert set(pd.read_csv(site / "runs.csv")["calibration"]) == {"steps-only"}


def test_the_report_without_a_calibration_has_no_runtime_column(stored, tmp_path):
    _, _, _, store, _ = stored
    assert main(["report", "--store", str(store), "--out", str(tmp_path / "r"), "--jobs", "1", "--no-progress"]) == 0
    page = (tmp_path / "r" / "instances" / f"{report.slug('complete3-reduce-scatter')}.html").read_text()
    assert ">time_runtime_s<" not in page and "priced by calibration" not in (tmp_path / "r" / "index.html").read_text()


def test_the_runtime_column_in_a_browser(site, stored, browser):
    """The instance page's runs table, as the browser lays it out: a runtime time (>= 100 ms,
    shown with its unit) and the calibration's name in every row."""
    *_, bench = stored
    test_report._open(browser, site / "instances" / f"{report.slug('complete3-reduce-scatter')}.html")
    heads = [th.text.strip() for th in browser.find_elements(By.XPATH, '//table[@id="runs"]/thead//th')]
    rows = browser.find_elements(By.XPATH, '//table[@id="runs"]/tbody/tr')
    assert len(rows) == len(bench["runtime"])
    for tr in rows:
        cells = [td.text.strip() for td in tr.find_elements(By.TAG_NAME, "td")]
        assert cells[heads.index("calibration")] == "steps-only"
        assert cells[heads.index("time_runtime_s")].endswith("ms")
